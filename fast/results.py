"""Pull results whose messages are decoded from the mapped commit log only when read.

A pull that only looks at counts, sizes and offsets (as the broker's transfer path and the
benchmarks do) never pays for decoding; the first access to a message decodes it once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol, cast, overload

import attrs
import numpy as np
import numpy.typing as npt

from pullspec.fast.damage import decode_checked
from pullspec.fast.gather import I64, U8
from pullspec.fast.mapped import FileLease, MappedFile
from pullspec.spec.layout import LayoutRules
from pullspec.spec.message import StoredMessage
from pullspec.spec.results import GetMessageResult, PutMessageResult
from pullspec.spec.status import GetMessageStatus, PutMessageStatus


class LazyMessages(Sequence[StoredMessage]):
    """The returned records of one pull: (file, position) pairs decoded into StoredMessage on
    first access. Compares equal to any sequence of equal messages (a tuple included)."""

    __slots__ = ("_base", "_cache", "_delay_levels", "_files", "_positions", "_rules")

    def __init__(
        self,
        files: list[FileLease] | FileLease,
        positions: list[int] | I64,
        rules: LayoutRules,
        delay_levels: tuple[int, ...] | None = None,
        base: int = 0,
    ) -> None:
        # Each lease pins its mapping, so the bytes stay readable after the file is deleted, and
        # keeps the file from being reused (fast.spares) while this lives.
        # `files` is one lease for all positions, or one per position; a record's position
        # in its view is positions[i] − base (a pull passes commit-log offsets and its file's
        # start, so nothing is subtracted for the records never read). `rules` are the profile's
        # (its LAYOUT-13 properties parser).
        self._files = files
        self._positions = positions
        self._rules = rules
        self._delay_levels = delay_levels
        self._base = base
        self._cache: list[StoredMessage | None] = [None] * len(positions)

    def __len__(self) -> int:
        return len(self._positions)

    def _decode(self, i: int) -> StoredMessage:
        m = self._cache[i]
        if m is None:
            lease = self._files if isinstance(self._files, FileLease) else self._files[i]
            m = self._cache[i] = decode_checked(
                lease.data.data,
                int(self._positions[i]) - self._base,
                self._rules,
                self._delay_levels,
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


class FileView(NamedTuple):
    """A commit-log file's start offset and a lease of its bytes (which keeps the mapping alive
    and the file from reuse) that every result decoding from it shares."""

    start: int
    lease: FileLease

    def lend(self) -> FileLease:
        """The shared lease."""
        return self.lease


def lazy_records(
    files: Sequence[Any],
    file_size: int,
    phys: I64,
    rules: LayoutRules,
    delay_levels: tuple[int, ...] | None,
) -> LazyMessages:
    """The records at commit-log offsets `phys`, decoded on access; `files` are the log's files
    in order (anything with `start` and `lend()`: MappedFile, FileView), each `file_size`
    long."""
    if not len(phys):
        return LazyMessages([], [], rules, delay_levels)
    base = files[0].start
    first = (int(phys[0]) - base) // file_size
    if first == (int(phys[-1]) - base) // file_size:
        f = files[first]
        return LazyMessages(f.lend(), phys - f.start, rules, delay_levels)
    datas: list[FileLease] = []
    positions: list[int] = []
    leases: dict[int, FileLease] = {}
    for p in phys.tolist():
        f = files[(p - base) // file_size]
        if f.start not in leases:
            leases[f.start] = f.lend()
        datas.append(leases[f.start])
        positions.append(p - f.start)
    return LazyMessages(datas, positions, rules, delay_levels)


@attrs.frozen(eq=False)
class FastGetMessageResult(GetMessageResult):
    """A GetMessageResult whose total size and queue offsets come from the consume-queue entries,
    so reading them decodes nothing. Equal to a GetMessageResult with the same fields."""

    total_size: int = attrs.field(default=0, kw_only=True)
    #: The queue offsets of the returned messages (a range when they follow each other).
    offsets: Sequence[int] = attrs.field(default=(), kw_only=True)

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


class EntryFiles(Protocol):
    """A consume queue's published files as a reader holds them (fast.consumequeue.Layout): each
    file's entries, which stay as they are while it is held (fast.retired)."""

    @property
    def views(self) -> list[npt.NDArray[np.void]]:
        """Each file's entries (CQ_DTYPE records)."""
        ...


#: The entries a compiled window scan returned: their positions (from the pull's offset) and
#: commit-log offsets as the two rows of one array, or, when every examined entry was returned
#: in order (a match-all filter), (the queue's files, the file's number, the first entry), read
#: when the records are.
Picked = I64 | tuple[EntryFiles, int, int]

#: What one compiled window scan found, as ScannedResult keeps it: (status, nextBeginOffset,
#: min offset, max offset, messages returned, their total size, the pull's offset, the picked
#: entries, the commit log's max offset and the last phys the scan examined (STORE-16), the
#: memory share, the records' decoder).
Scanned = tuple[
    GetMessageStatus,
    int,
    int,
    int,
    int,
    int,
    int,
    Picked,
    int,
    int,
    int,
    "RecordsSource",
    list[MappedFile],
    tuple[U8, ...],
]


class RecordsSource(Protocol):
    """What decodes a scan's returned records (fast.read_compiled.CompiledScanner)."""

    def records(self, files: list[MappedFile], views: tuple[U8, ...], phys: I64) -> LazyMessages:
        """The records at commit-log offsets `phys` of `files` (`views` their bytes), decoded
        on access."""
        ...


class ScannedResult(FastGetMessageResult):
    """get_message's answer straight from the compiled window scan: the scan's numbers kept as
    they came and each field worked out when read, so a caller that reads only the status,
    counts, sizes and offsets (the broker's transfer path, the bench) builds nothing else.
    Equal to any GetMessageResult with the same fields.

    >>> import numpy as np
    >>> from pullspec.spec import GetMessageStatus, Profile
    >>> from pullspec.spec.ruleset import Ruleset
    >>> picked = np.array([[0, 1], [0, 94]])
    >>> class NoRecords:
    ...     def records(self, files, views, phys):
    ...         return LazyMessages([], [], Ruleset.of(Profile.V4_9))
    >>> r = ScannedResult((GetMessageStatus.FOUND, 2, 0, 2, 2, 188, 0, picked, 188, 94, 1 << 30,
    ...                    NoRecords(), [], ()))
    >>> r.message_count, r.buffer_total_size, r.msg_offsets, r.suggest_pulling_from_slave
    (2, 188, [0, 1], False)
    """

    __slots__ = ("_messages", "_scanned")
    _scanned: Scanned
    _messages: LazyMessages

    def __init__(self, scanned: Scanned) -> None:
        object.__setattr__(self, "_scanned", scanned)  # `_messages` is set when first read

    @property
    def status(self) -> GetMessageStatus:
        """FOUND, or NO_MATCHED_MESSAGE when every examined entry was filtered out."""
        return self._scanned[0]

    @property
    def next_begin_offset(self) -> int:
        """The pull's offset plus the entries examined (STORE-14)."""
        return self._scanned[1]

    @property
    def min_offset(self) -> int:
        """The queue's min offset when the pull was planned."""
        return self._scanned[2]

    @property
    def max_offset(self) -> int:
        """The queue's max offset when the pull was planned."""
        return self._scanned[3]

    @property
    def message_count(self) -> int:
        """How many messages are returned (decoding none)."""
        return self._scanned[4]

    @property
    def total_size(self) -> int:
        """The returned records' total size."""
        return self._scanned[5]

    @property
    def buffer_total_size(self) -> int:
        """The returned records' total size (read directly: the broker reads it on every
        pull)."""
        return self._scanned[5]

    @property
    def offsets(self) -> Sequence[int]:
        """The returned entries' queue offsets: a range when they follow each other."""
        done = self._scanned
        count, offset, picked = done[4], done[6], done[7]
        if isinstance(picked, tuple):  # every examined entry, in order
            return range(offset, offset + count)
        positions = picked[0, :count]
        if count and positions[count - 1] == count - 1:
            return range(offset, offset + count)
        return tuple((positions + offset).tolist())

    @property
    def suggest_pulling_from_slave(self) -> bool:
        """STORE-16: the last examined record lies more than the memory share behind the max."""
        done = self._scanned
        return done[8] - done[9] > done[10]

    @property
    def bodies(self) -> None:
        """None: the compiled scan reads whole records only."""
        return None

    @property
    def messages(self) -> tuple[StoredMessage, ...]:
        """The returned records, decoded from the mapped commit log on access."""
        try:
            found = self._messages
        except AttributeError:
            done = self._scanned
            picked, count = done[7], done[4]
            if isinstance(picked, tuple):
                files, number, first = picked
                phys = files.views[number]["phys"][first : first + count].astype(np.int64)
            else:
                phys = picked[1, :count]
            found = done[11].records(done[12], done[13], phys)
            object.__setattr__(self, "_messages", found)
        return cast(tuple[StoredMessage, ...], found)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (and copied) as the plain result it equals.
        fields = (self.status, self.next_begin_offset, self.min_offset, self.max_offset)
        extra = (tuple(self.messages), self.suggest_pulling_from_slave)
        return (
            functools.partial(
                FastGetMessageResult, total_size=self.total_size, offsets=tuple(self.offsets)
            ),
            (*fields, *extra),
        )


#: The setter of ScannedResult's `_scanned` slot (the frozen class refuses setattr): with
#: ``object.__new__(ScannedResult)`` it makes a result without a Python-level call, as the
#: single pull does (fast.read_compiled).
set_scanned: Callable[[ScannedResult, Scanned], None] = ScannedResult._scanned.__set__  # type: ignore[attr-defined]


class PlacedResult(PutMessageResult):
    """PUT_OK from put_message's one-pass path (fast.putsmall): the queue offset, commit-log
    offset and record length kept as one tuple, each field read from it. It is made with one
    slot write (`placed`) where a PutMessageResult takes four — attrs' frozen __init__ sets
    each field through object.__setattr__, a tenth of a one-pass put. Equal to, hashed, shown
    and pickled as the PutMessageResult with the same fields.

    >>> from pullspec.spec import PutMessageResult, PutMessageStatus
    >>> r = placed(3, 402, 201)
    >>> r == PutMessageResult(PutMessageStatus.PUT_OK, 3, 402, 201), r.wrote_offset, r.ok
    (True, 402, True)
    >>> r
    PutMessageResult(status=<PutMessageStatus.PUT_OK: 'PUT_OK'>, queue_offset=3, wrote_offset=402, wrote_bytes=201)
    """

    __slots__ = ("_placed",)
    _placed: tuple[int, int, int]

    @property
    def status(self) -> PutMessageStatus:
        """PUT_OK: only a stored message is placed."""
        return PutMessageStatus.PUT_OK

    @property
    def queue_offset(self) -> int:
        """The message's offset in its consume queue (0 when not dispatched, STORE-18)."""
        return self._placed[0]

    @property
    def wrote_offset(self) -> int:
        """The record's commit-log offset."""
        return self._placed[1]

    @property
    def wrote_bytes(self) -> int:
        """The record's length."""
        return self._placed[2]

    def _plain(self) -> PutMessageResult:
        return PutMessageResult(PutMessageStatus.PUT_OK, *self._placed)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PutMessageResult):
            return NotImplemented
        return (
            other.status is PutMessageStatus.PUT_OK
            and (other.queue_offset, other.wrote_offset, other.wrote_bytes) == self._placed
        )

    def __hash__(self) -> int:
        return hash(self._plain())

    def __repr__(self) -> str:
        return repr(self._plain())

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (and copied) as the plain result it equals.
        return (PutMessageResult, (PutMessageStatus.PUT_OK, *self._placed))


_new_placed = object.__new__
#: The setter of PlacedResult's `_placed` slot: with ``object.__new__(PlacedResult)`` it makes a
#: result without a Python-level call, as put_message's one-pass path does (fast.putsmall).
set_placed: Callable[[PlacedResult, tuple[int, int, int]], None] = PlacedResult._placed.__set__  # type: ignore[attr-defined]


def placed(queue_offset: int, wrote_offset: int, wrote_bytes: int) -> PlacedResult:
    """The PlacedResult of a stored message at `queue_offset`, commit-log offset `wrote_offset`,
    `wrote_bytes` long. Example: ``placed(0, 0, 201).wrote_bytes`` is 201."""
    result: PlacedResult = _new_placed(PlacedResult)
    set_placed(result, (queue_offset, wrote_offset, wrote_bytes))
    return result


def offsets_tuple(first: int, rel: np.ndarray) -> tuple[int, ...]:
    """Queue offsets first + rel, as a tuple of Python ints."""
    return tuple((rel + first).tolist())


@attrs.frozen
class ScannedRows:
    """What the compiled batch scan found for the requests it answered (row r of each array)."""

    offset: I64
    min_offset: I64
    max_offset: I64
    found: npt.NDArray[np.bool_]
    #: Requests the compiled scan left to get_message's path.
    bail: npt.NDArray[np.bool_]
    scanned: I64
    count: I64
    total: I64
    suggest: npt.NDArray[np.bool_]
    picked_start: I64
    picked_pos: I64
    picked_phys: I64
    #: Every commit-log file when the scan ran: the views pin the mappings.
    log_files: tuple[FileView, ...]
    log_file_size: int
    #: The profile's rules (they decode the records).
    rules: LayoutRules
    delay_levels: tuple[int, ...]

    def result(self, r: int) -> FastGetMessageResult:
        """Row r as a result object, its records decoded lazily."""
        lo = int(self.picked_start[r])
        phys = self.picked_phys[lo : lo + int(self.count[r])]
        records = lazy_records(
            self.log_files, self.log_file_size, phys, self.rules, self.delay_levels
        )
        offset = int(self.offset[r])
        status = GetMessageStatus.FOUND if self.found[r] else GetMessageStatus.NO_MATCHED_MESSAGE
        return FastGetMessageResult(
            status,
            offset + int(self.scanned[r]),
            int(self.min_offset[r]),
            int(self.max_offset[r]),
            cast(tuple[StoredMessage, ...], records),
            bool(self.suggest[r]),
            total_size=int(self.total[r]),
            offsets=offsets_tuple(offset, self.picked_pos[lo : lo + int(self.count[r])]),
        )


class MultiGetResult(Sequence[GetMessageResult]):
    """The answers of get_messages, in request order: a sequence of GetMessageResult built on
    first access, and the columns a batched consumer reads without building any of them
    (`next_begin_offsets`, `message_counts`, `buffer_total_sizes`, `statuses`, …).

    >>> from pullspec.spec import GetMessageResult, GetMessageStatus
    >>> found = GetMessageResult(GetMessageStatus.FOUND, 2, 0, 2, (), False)
    >>> answers = MultiGetResult.of([found])
    >>> answers.next_begin_offsets.tolist(), answers.statuses
    ([2], [<GetMessageStatus.FOUND: 'FOUND'>])
    """

    __slots__ = (
        "_items",
        "_row",
        "_rows",
        "buffer_total_sizes",
        "message_counts",
        "next_begin_offsets",
    )

    def __init__(
        self, items: list[GetMessageResult | None], row: I64, rows: ScannedRows | None
    ) -> None:
        # items[i] is set for a request answered by get_message's path; otherwise row[i] is its
        # row in `rows`.
        self._items = items
        self._row = row
        self._rows = rows
        n = len(items)
        nexts = np.zeros(n, dtype=np.int64)
        counts = np.zeros(n, dtype=np.int64)
        sizes = np.zeros(n, dtype=np.int64)
        kernel = row >= 0
        if rows is not None and kernel.any():
            r = row[kernel]
            nexts[kernel] = rows.offset[r] + rows.scanned[r]
            counts[kernel] = rows.count[r]
            sizes[kernel] = rows.total[r]
        for i in np.flatnonzero(~kernel).tolist():
            item = items[i]
            if item is not None:
                nexts[i] = item.next_begin_offset
                counts[i] = item.message_count
                sizes[i] = item.buffer_total_size
        #: nextBeginOffset of each answer.
        self.next_begin_offsets: I64 = nexts
        #: getMessageCount() of each answer.
        self.message_counts: I64 = counts
        #: getBufferTotalSize() of each answer.
        self.buffer_total_sizes: I64 = sizes

    @classmethod
    def of(cls, results: Sequence[GetMessageResult]) -> MultiGetResult:
        """A MultiGetResult holding already built results."""
        return cls(list(results), np.full(len(results), -1, dtype=np.int64), None)

    @property
    def statuses(self) -> list[GetMessageStatus]:
        """The status of each answer."""
        found, none = GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE
        out = []
        for i, item in enumerate(self._items):
            if item is not None:
                out.append(item.status)
            else:
                assert self._rows is not None
                out.append(found if self._rows.found[int(self._row[i])] else none)
        return out

    def __len__(self) -> int:
        return len(self._items)

    def _item(self, i: int) -> GetMessageResult:
        item = self._items[i]
        if item is None:
            assert self._rows is not None
            item = self._items[i] = self._rows.result(int(self._row[i]))
        return item

    @overload
    def __getitem__(self, index: int) -> GetMessageResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[GetMessageResult]: ...

    def __getitem__(self, index: int | slice) -> GetMessageResult | list[GetMessageResult]:
        if isinstance(index, slice):
            return [self._item(i) for i in range(len(self))[index]]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._item(index)

    def __iter__(self) -> Iterator[GetMessageResult]:
        return (self._item(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"MultiGetResult({len(self)} results)"
