"""Pull results whose messages are decoded from the mapped commit log only when read.

A pull that only looks at counts, sizes and offsets (as the broker's transfer path and the
benchmarks do) never pays for decoding; the first access to a message decodes it once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import attrs
import numpy as np

from fast.gather import I64, U8
from spec.message import StoredMessage
from spec.profiles import Profile
from spec.record import decode_record
from spec.results import GetMessageResult


class LazyMessages(Sequence[StoredMessage]):
    """The returned records of one pull: (file, position) pairs decoded into StoredMessage on
    first access. Compares equal to any sequence of equal messages (a tuple included)."""

    __slots__ = ("_cache", "_delay_levels", "_files", "_positions", "_profile")

    def __init__(
        self,
        files: list[U8] | U8,
        positions: list[int] | I64,
        profile: Profile,
        delay_levels: tuple[int, ...] | None = None,
    ) -> None:
        # Each numpy view pins its mapping, so the bytes stay readable after the file is deleted.
        # `files` is one view for all positions, or one view per position.
        self._files = files
        self._positions = positions
        self._profile = profile
        self._delay_levels = delay_levels
        self._cache: list[StoredMessage | None] = [None] * len(positions)

    def __len__(self) -> int:
        return len(self._positions)

    def _decode(self, i: int) -> StoredMessage:
        m = self._cache[i]
        if m is None:
            data = self._files if isinstance(self._files, np.ndarray) else self._files[i]
            m = self._cache[i] = decode_record(
                data.data, int(self._positions[i]), self._profile, self._delay_levels
            )
        return m

    @overload
    def __getitem__(self, index: int) -> StoredMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[StoredMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> StoredMessage | tuple[StoredMessage, ...]:
        if isinstance(index, slice):
            return tuple(self._decode(i) for i in range(len(self))[index])
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._decode(index)

    def __iter__(self) -> Iterator[StoredMessage]:
        return (self._decode(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(m.commitlog_offset for m in self))

    def __repr__(self) -> str:
        return f"LazyMessages({len(self)} messages)"


@attrs.frozen(eq=False)
class FastGetMessageResult(GetMessageResult):
    """A GetMessageResult whose total size and queue offsets come from the consume-queue entries,
    so reading them decodes nothing. Equal to a GetMessageResult with the same fields."""

    total_size: int = attrs.field(default=0, kw_only=True)
    offsets: tuple[int, ...] = attrs.field(default=(), kw_only=True)

    @property
    def buffer_total_size(self) -> int:
        """The sum of the returned records' sizes in bytes."""
        return self.total_size

    @property
    def msg_offsets(self) -> list[int]:
        """The queue offsets of the returned messages, in order."""
        return list(self.offsets)

    def _key(self) -> tuple[Any, ...]:
        return (
            self.status,
            self.next_begin_offset,
            self.min_offset,
            self.max_offset,
            self.suggest_pulling_from_slave,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GetMessageResult):
            return NotImplemented
        theirs = (
            other.status,
            other.next_begin_offset,
            other.min_offset,
            other.max_offset,
            other.suggest_pulling_from_slave,
        )
        return self._key() == theirs and self.messages == other.messages

    def __hash__(self) -> int:
        return hash(self._key())


def offsets_tuple(first: int, rel: np.ndarray) -> tuple[int, ...]:
    """Queue offsets first + rel, as a tuple of Python ints."""
    return tuple((rel + first).tolist())
