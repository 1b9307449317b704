"""Array-backed stand-ins for the ProcessQueue's two TreeMaps, with batch operations.

msgTreeMap and consumingMsgOrderlyTreeMap are each an `OffsetTree`; a batch of messages is a
`Batch`; `validate_batch` accepts exactly what spec.process_queue.require_messages accepts.

A tree is three parallel arrays kept sorted by queue offset: the offsets (int64), the stored
message objects (an object array, so fancy indexing, `np.insert` and slicing move them with the
offsets) and their body lengths (int64, so commit can sum them without touching the objects).
Membership of a whole batch is one `np.searchsorted`. The steady cycle — a pull appends past
the last offset, an acknowledgement drops the oldest — touches only the batch's slots; any other
insert or delete is one `np.insert` / boolean mask, a few memcpy-sized passes over at most a
cache's worth of entries (RocketMQ caps a queue at pullThresholdForQueue = 1000 by default).

Nothing here locks: the owning FastProcessQueue holds its lock around every call.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from spec.errors import InvalidArgumentError
from spec.message import StoredMessage
from spec.process_queue import require_messages

I64 = npt.NDArray[np.int64]  #: offsets, body lengths, positions
Objects = npt.NDArray[np.object_]  #: StoredMessage objects
Mask = npt.NDArray[np.bool_]  #: which keys of a batch were found / inserted

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_offset_of = operator.attrgetter("queue_offset")
_body_of = operator.attrgetter("body")
_MESSAGE_TYPE: frozenset[type] = frozenset({StoredMessage})
_INT_TYPE: frozenset[type] = frozenset({int})
_BYTES_TYPE: frozenset[type] = frozenset({bytes})
_MIN_CAPACITY = 64


def _empty_objects() -> Objects:
    return np.empty(0, dtype=object)


def validate_batch(name: str, msgs: object) -> tuple[StoredMessage, ...]:
    """`msgs` as a tuple if it is a list or tuple of StoredMessage with int offsets and bytes
    bodies, else the typed error `spec.process_queue.require_messages` raises.

    The common case — exact types throughout — is checked with C-level `map(type, …)` passes;
    anything else (subclasses, bad input) goes through require_messages itself, so the accepted
    inputs and the errors are exactly the spec's.
    """
    if isinstance(msgs, list | tuple) and type(msgs) in (list, tuple):
        batch: tuple[StoredMessage, ...] = tuple(msgs)
        if (
            set(map(type, batch)) <= _MESSAGE_TYPE
            and set(map(type, map(_offset_of, batch))) <= _INT_TYPE
            and set(map(type, map(_body_of, batch))) <= _BYTES_TYPE
        ):
            return batch
    return require_messages(name, msgs)


class Batch:
    """A validated batch as arrays, in list order: offsets, body lengths, the message objects
    (only when asked for, else empty) and whether the offsets strictly increase (a pull's
    batch does)."""

    __slots__ = ("increasing", "objects", "offsets", "sizes")

    def __init__(
        self, batch: Sequence[StoredMessage], objects: bool, drop_out_of_range: bool = False
    ) -> None:
        offsets = list(map(_offset_of, batch))
        try:
            self.offsets: I64 = np.array(offsets, dtype=np.int64)
        except OverflowError:
            if not drop_out_of_range:
                bad = next(o for o in offsets if not _LONG_MIN <= o <= _LONG_MAX)
                raise InvalidArgumentError(
                    "queue_offset", bad, "outside Java's long range"
                ) from None
            batch = [m for m in batch if _LONG_MIN <= m.queue_offset <= _LONG_MAX]
            offsets = list(map(_offset_of, batch))
            self.offsets = np.array(offsets, dtype=np.int64)
        self.increasing = all(map(operator.lt, offsets, itertools.islice(offsets, 1, None)))
        self.sizes: I64 = np.fromiter(map(len, map(_body_of, batch)), dtype=np.int64)
        # Empty unless asked for: removeMessage needs only the offsets and body lengths.
        self.objects: Objects = (
            np.fromiter(batch, dtype=object, count=len(batch)) if objects else _empty_objects()
        )

    def unique(self) -> tuple[I64, I64 | None, I64 | None]:
        """(distinct offsets ascending, index of each one's first occurrence, of its last).

        The indexes are None when the batch strictly increases: each is then its own.
        """
        if self.increasing:
            return self.offsets, None, None
        keys, first = np.unique(self.offsets, return_index=True)
        _, rev = np.unique(self.offsets[::-1], return_index=True)
        return keys, first.astype(np.int64), (len(self.offsets) - 1 - rev).astype(np.int64)


class OffsetTree:
    """A TreeMap<queueOffset, MessageExt> as sorted parallel arrays (offsets unique).

    The arrays live in buffers with slack at both ends of the live window [lo, hi): appending
    keys past the last one writes into the slack and dropping a prefix moves `lo`, so the
    steady pull/acknowledge cycle costs O(batch), not O(cache). Everything else rebuilds the
    window (np.insert / a boolean mask) into a fresh buffer. Views of the window never leave
    this class: what it hands out is copied.
    """

    __slots__ = ("_hi", "_lo", "_msg", "_off", "_size")

    def __init__(self) -> None:
        self._set(np.empty(0, dtype=np.int64), _empty_objects(), np.empty(0, dtype=np.int64))

    def _set(self, offsets: I64, msgs: Objects, sizes: I64, room: int = 0) -> None:
        """Make (offsets, msgs, sizes) the contents, in new buffers with spare capacity."""
        n = len(offsets)
        cap = max(_MIN_CAPACITY, 2 * (n + room))
        self._off = np.empty(cap, dtype=np.int64)
        self._msg = np.full(cap, None, dtype=object)
        self._size = np.empty(cap, dtype=np.int64)
        self._off[:n], self._msg[:n], self._size[:n] = offsets, msgs, sizes
        self._lo, self._hi = 0, n

    @property
    def offsets(self) -> I64:
        """The stored offsets, ascending (a view: read it, do not keep it)."""
        return self._off[self._lo : self._hi]

    @property
    def msgs(self) -> Objects:
        """The stored message objects in offset order (a view)."""
        return self._msg[self._lo : self._hi]

    @property
    def sizes(self) -> I64:
        """The stored objects' body lengths in offset order (a view)."""
        return self._size[self._lo : self._hi]

    def __len__(self) -> int:
        return self._hi - self._lo

    def _find(self, keys: I64) -> tuple[I64, Mask]:
        """Insertion points of the sorted `keys` and which of them are already stored."""
        offsets = self.offsets
        idx = np.searchsorted(offsets, keys).astype(np.int64)
        found = idx < len(offsets)
        found[found] = offsets[idx[found]] == keys[found]
        return idx, found

    def put(self, keys: I64, msgs: Objects, sizes: I64) -> Mask | None:
        """TreeMap.put of every (key, msg) at once; `keys` must be sorted and unique.

        A stored key gets the new object (and its body length); the others are inserted.
        Returns the mask of `keys` that were newly inserted, or None when all of them were.
        """
        k = len(keys)
        if not k:
            return np.zeros(0, dtype=np.bool_)
        if self._hi == self._lo or keys[0] > self._off[self._hi - 1]:
            # The usual pull: every key lies past the last stored one; write into the slack.
            if self._hi + k > len(self._off):
                self._set(self.offsets, self.msgs, self.sizes, room=k)
            hi = self._hi
            self._off[hi : hi + k], self._msg[hi : hi + k], self._size[hi : hi + k] = (
                keys,
                msgs,
                sizes,
            )
            self._hi = hi + k
            return None
        idx, found = self._find(keys)
        if found.any():
            at = idx[found]
            self.msgs[at] = msgs[found]
            self.sizes[at] = sizes[found]
        new = ~found
        if new.any():
            # Keys sharing an insertion point go in in the given (ascending) order.
            where = idx[new]
            self._set(
                np.insert(self.offsets, where, keys[new]),
                np.insert(self.msgs, where, msgs[new]),
                np.insert(self.sizes, where, sizes[new]),
            )
        return new

    def put_tree(self, other: OffsetTree) -> None:
        """TreeMap.putAll(other): `other`'s objects replace stored ones at the same key."""
        self.put(other.offsets, other.msgs, other.sizes)

    def remove(self, keys: I64) -> Mask | None:
        """TreeMap.remove of every key (sorted, unique); returns the mask of the keys found,
        or None when all of them were."""
        k, n = len(keys), len(self)
        if not n or not k:
            return np.zeros(k, dtype=np.bool_)
        lo = self._lo
        if (
            k <= n
            and self._off[lo] == keys[0]
            and self._off[lo + k - 1] == keys[-1]
            and np.array_equal(self._off[lo : lo + k], keys)
        ):
            # The usual acknowledgement: the oldest k entries. Drop them by moving `lo`, and
            # let go of the objects so the buffer does not keep them alive.
            self._msg[lo : lo + k] = None
            self._lo = lo + k
            return None
        idx, found = self._find(keys)
        if found.any():
            keep = np.ones(n, dtype=np.bool_)
            keep[idx[found]] = False
            self._set(self.offsets[keep], self.msgs[keep], self.sizes[keep])
        return found

    def pop_first(self, n: int) -> OffsetTree:
        """pollFirstEntry `n` times: the lowest `n` entries (or all), moved to a new tree."""
        n = min(n, len(self))
        head = OffsetTree()
        head._set(self.offsets[:n], self.msgs[:n], self.sizes[:n])
        self._msg[self._lo : self._lo + n] = None
        self._lo += n
        return head

    def clear(self) -> None:
        """TreeMap.clear."""
        self._set(np.empty(0, dtype=np.int64), _empty_objects(), np.empty(0, dtype=np.int64))

    def head(self) -> tuple[StoredMessage, ...]:
        """The first entry's message as a 1-tuple, or () when empty (the sweep's view)."""
        out: list[Any] = self.msgs[:1].tolist()
        return tuple(out)

    def first_key(self) -> int:
        """firstKey (the tree must not be empty)."""
        return int(self._off[self._lo])

    def last_key(self) -> int:
        """lastKey (the tree must not be empty)."""
        return int(self._off[self._hi - 1])

    def body_bytes(self) -> int:
        """The sum of the stored objects' body lengths."""
        return int(self.sizes.sum())

    def keys(self) -> list[int]:
        """The offsets, ascending, as Python ints."""
        out: list[int] = self.offsets.tolist()
        return out

    def values(self) -> tuple[StoredMessage, ...]:
        """The stored message objects in offset order."""
        out: list[Any] = self.msgs.tolist()
        return tuple(out)
