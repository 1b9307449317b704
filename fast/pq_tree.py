"""List-backed stand-ins for the ProcessQueue's two TreeMaps, and batch validation.

msgTreeMap and consumingMsgOrderlyTreeMap are each an `OffsetTree`; `validate_batch` accepts
exactly what spec.process_queue.require_messages accepts, and `require_longs` refuses the
offsets no Java long can hold.

A tree is two parallel Python lists kept sorted by queue offset: the offsets and the stored
message objects. Plain lists beat numpy arrays at every size a ProcessQueue has: the steady
cycle — a pull appends past the last offset, an acknowledgement or a take drops the oldest, a
rollback puts them back in front — is one C-level `extend` / `del` / slice assignment per list
(at most a memmove of the cache, which RocketMQ caps at pullThresholdForQueue, 1000 by
default), with none of numpy's per-call cost, which dominates the 1–3 message batches and
tiny caches of conformance campaigns. Any other key goes through `bisect` and `list.insert` /
`del`, so a batch costs exactly what Java's per-message TreeMap loop implies, duplicates
included.

Nothing here locks: the owning FastProcessQueue holds its lock around every call.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Sequence
from itertools import islice

from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.message import StoredMessage
from pullspec.spec.process_queue import require_messages

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1  #: Java's long range
offset_of = operator.attrgetter("queue_offset")
body_of = operator.attrgetter("body")


def validate_batch(name: str, msgs: object) -> tuple[tuple[StoredMessage, ...], list[int]]:
    """(`msgs` as a tuple, their offsets in list order) if `msgs` is a list or tuple of
    StoredMessage with int offsets and bytes bodies, else the typed error
    `spec.process_queue.require_messages` raises.

    The common case — exact types throughout — is checked inline, collecting the offsets on
    the way (several times cheaper than `map(type, …)` passes, even for a pull's 32);
    anything else (subclasses, bad input) goes through require_messages itself, so the accepted
    inputs and the errors are exactly the spec's.
    """
    if type(msgs) is list or type(msgs) is tuple:
        batch: tuple[StoredMessage, ...] = tuple(msgs)
        offsets: list[int] = []
        for msg in batch:
            if type(msg) is not StoredMessage or type(msg.body) is not bytes:
                break
            offset = msg.queue_offset
            if type(offset) is not int:
                break
            offsets.append(offset)
        else:
            return batch, offsets
    batch = require_messages(name, msgs)
    return batch, list(map(offset_of, batch))


def require_longs(offsets: Sequence[int]) -> None:
    """Raise InvalidArgumentError unless every offset fits a Java long (a tree cannot hold
    one that does not: RocketMQ could never have produced it)."""
    if offsets and (min(offsets) < LONG_MIN or max(offsets) > LONG_MAX):
        bad = next(o for o in offsets if not LONG_MIN <= o <= LONG_MAX)
        raise InvalidArgumentError("queue_offset", bad, "outside Java's long range")


def body_bytes(msgs: Sequence[StoredMessage]) -> int:
    """The sum of `msgs`' body lengths."""
    return sum(map(len, map(body_of, msgs)))


def _increasing(offsets: Sequence[int]) -> bool:
    """Whether `offsets` strictly increase (a pull's batch does)."""
    return len(offsets) < 2 or all(map(operator.lt, offsets, islice(offsets, 1, None)))


class OffsetTree:
    """A TreeMap<queueOffset, MessageExt> as two parallel lists sorted by offset (unique).

    `keys` and `msgs` are the live lists, for the owner's reads; only the methods change them.
    """

    __slots__ = ("keys", "msgs")

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.msgs: list[StoredMessage] = []

    def __len__(self) -> int:
        return len(self.keys)

    def put(self, msgs: Sequence[StoredMessage], offsets: Sequence[int]) -> Sequence[StoredMessage]:
        """TreeMap.put of each message under its offset (`offsets[i]` is `msgs[i]`'s), in order.

        A stored key gets the new object; the others are inserted. Returns the messages that
        were inserted, in list order: per offset the first occurrence inserts and any later
        one of the same batch replaces it, as Java's loop does.
        """
        keys = self.keys
        if not offsets:
            return ()
        # The usual pull appends past the last key; a rollback returns a prefix in front.
        if not keys or offsets[0] > keys[-1]:
            if _increasing(offsets):
                keys.extend(offsets)
                self.msgs.extend(msgs)
                return msgs
        elif offsets[-1] < keys[0] and _increasing(offsets):
            keys[:0] = offsets
            self.msgs[:0] = msgs
            return msgs
        stored, new = self.msgs, []
        for msg, key in zip(msgs, offsets, strict=True):
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                stored[i] = msg
            else:
                keys.insert(i, key)
                stored.insert(i, msg)
                new.append(msg)
        return new

    def remove(self, msgs: Sequence[StoredMessage], offsets: list[int]) -> Sequence[StoredMessage]:
        """TreeMap.remove of each message's offset, in order; returns the messages whose offset
        was found (the first occurrence of each cached offset), in list order."""
        keys = self.keys
        k = len(offsets)
        if keys[:k] == offsets:
            # The usual acknowledgement: the oldest k entries (distinct, as keys are).
            del keys[:k]
            del self.msgs[:k]
            return msgs
        stored, removed = self.msgs, []
        for msg, key in zip(msgs, offsets, strict=True):
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                del keys[i]
                del stored[i]
                removed.append(msg)
        return removed

    def pop_first(self, n: int) -> tuple[list[int], list[StoredMessage]]:
        """pollFirstEntry `n` times: the lowest `n` entries (or all), removed, as (keys, msgs)."""
        keys, msgs = self.keys[:n], self.msgs[:n]
        del self.keys[:n]
        del self.msgs[:n]
        return keys, msgs

    def clear(self) -> None:
        """TreeMap.clear."""
        self.keys = []
        self.msgs = []

    def head(self) -> tuple[StoredMessage, ...]:
        """The first entry's message as a 1-tuple, or () when empty (the sweep's view)."""
        return tuple(self.msgs[:1])

    def values(self) -> tuple[StoredMessage, ...]:
        """The stored message objects in offset order."""
        return tuple(self.msgs)
