"""The pull path of MmapMessageStore: DefaultMessageStore.getMessage (STORE-5 … STORE-17)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, cast, overload

import numpy as np
import numpy.typing as npt

from pullspec.fast.commitlog import LogView
from pullspec.fast.consumequeue import Block, ConsumeQueue, Window
from pullspec.fast.damage import decode_checked, refuse_damaged_entry
from pullspec.fast.gather import I64
from pullspec.fast.results import FastGetMessageResult, lazy_records
from pullspec.fast.scan import ScanOutcome, outcome, scan_chunk, tag_mask
from pullspec.spec.batch import BatchLimits, check_result_capacity, max_filter_message_count
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import InvalidTypeError, require_int, require_str
from pullspec.spec.filter import ExpressionMessageFilter
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.message import StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.record import with_blank_leftovers
from pullspec.spec.results import GetMessageResult
from pullspec.spec.scan import (
    CQEntry,
    scan_next_begin_offset,
    scan_window,
    suggest_pulling_from_slave,
)
from pullspec.spec.status import BrokerRole, GetMessageStatus
from pullspec.spec.store import (
    classify_offset,
    consume_queue_roll_next_file,
    next_offset_correction,
    whole_records_read,
)

if TYPE_CHECKING:
    from pullspec.fast.commitlog import CommitLog


class EntrySequence(Sequence[CQEntry]):
    """Consume-queue entries of a window as (phys, size, tags) tuples, converted on access, so
    the entry-by-entry scan reads only what it examines."""

    def __init__(self, view: npt.NDArray[np.void]) -> None:
        self._view = view

    def __len__(self) -> int:
        return len(self._view)

    @overload
    def __getitem__(self, i: int) -> CQEntry: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[CQEntry]: ...

    def __getitem__(self, i: int | slice) -> CQEntry | Sequence[CQEntry]:
        if isinstance(i, slice):
            return EntrySequence(self._view[i])
        e = self._view[i]
        return (int(e["phys"]), int(e["size"]), int(e["tags"]))

    def __iter__(self) -> Iterator[CQEntry]:
        for lo in range(0, len(self._view), 256):
            chunk = self._view[lo : lo + 256]
            yield from zip(
                chunk["phys"].tolist(), chunk["size"].tolist(), chunk["tags"].tolist(), strict=True
            )


def check_pull_arguments(
    group: object,
    topic: object,
    queue_id: object,
    offset: object,
    max_msg_nums: object,
    message_filter: object,
) -> None:
    """Refuse a get_message argument of the wrong type, naming it (InvalidTypeError)."""
    if (
        type(group) is str
        and type(topic) is str
        and type(queue_id) is int
        and type(offset) is int
        and type(max_msg_nums) is int
        and (message_filter is None or type(message_filter) is ExpressionMessageFilter)
    ):
        return  # the usual exact types, told apart at once
    require_str("group", group)
    require_str("topic", topic)
    require_int("queue_id", queue_id)
    require_int("offset", offset)
    require_int("max_msg_nums", max_msg_nums)
    if (
        message_filter is not None
        and type(message_filter) is not ExpressionMessageFilter
        and not isinstance(message_filter, MessageFilter)
    ):
        raise InvalidTypeError("message_filter", message_filter, "MessageFilter or None")


def _always(tags_code: int | None) -> bool:
    return True


class GetPath:
    """Mixin: the get half of MmapMessageStore."""

    if TYPE_CHECKING:
        commit_log: CommitLog
        config: StoreConfig
        profile: Profile
        _role: BrokerRole
        _offset_check_in_slave: bool
        _delay_levels: tuple[int, ...]

    @cached_property
    def _limits(self) -> BatchLimits:
        return BatchLimits.of(self.config)

    @cached_property
    def _memory(self) -> int:
        return self.config.memory_residency_bytes

    def _present(self, phys: I64, size: I64, log_view: LogView) -> npt.NDArray[np.bool_]:
        """CommitLog.getMessage over many entries: are all `size` bytes at `phys` readable in
        the commit log as `log_view` (its max offset and files) shows it."""
        end, files = log_view
        if not files:
            return np.zeros(len(phys), dtype=bool)
        f_size = self.commit_log.file_size
        # Inside one file, and below the max offset (bytes past it may not be written yet).
        result: npt.NDArray[np.bool_] = (
            (size > 0)
            & (phys >= files[0].start)
            & (phys % f_size + size <= f_size)
            & (phys + size <= end)
        )
        return result

    def _decided(
        self, q: ConsumeQueue, offset: int, max_msg_nums: int
    ) -> GetMessageResult | tuple[Window, int, int, int]:
        """The result of every case but the scan (STORE-5, STORE-10, BATCH-4), or the scan's
        (window, entries to examine, min, max)."""
        min_offset, max_offset = q.min_offset(), q.max_offset()
        decided = classify_offset(
            offset, min_offset, max_offset, self._role, self._offset_check_in_slave, self.profile
        )
        if decided is not None:
            return GetMessageResult(decided[0], decided[1], min_offset, max_offset)
        window = q.window(offset)
        if window is None:
            target = consume_queue_roll_next_file(offset, q.units)
            next_offset = next_offset_correction(
                offset, target, self._role, self._offset_check_in_slave
            )
            return GetMessageResult(
                GetMessageStatus.OFFSET_FOUND_NULL, next_offset, min_offset, max_offset
            )
        check_result_capacity(max_msg_nums, self.profile)
        budget = -(-max_filter_message_count(max_msg_nums) // CQ_STORE_UNIT_SIZE)
        return window, min(window.end - window.first, budget), min_offset, max_offset

    def _get(
        self,
        q: ConsumeQueue,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None,
        vectorized: bool = True,
    ) -> GetMessageResult:
        """get_message's answer by numpy (`vectorized`) or, where that does not apply, entry by
        entry."""
        decided = self._decided(q, offset, max_msg_nums)
        if type(decided) is not tuple:
            return cast(GetMessageResult, decided)
        log_view = self.commit_log.snapshot()
        window, n, min_offset, max_offset = decided
        scanned = (
            self._scan_fast(q, window, n, max_msg_nums, log_view, message_filter)
            if vectorized
            else None
        )
        if scanned is None:
            return self._scan_slow(
                (q, window),
                n,
                offset,
                max_msg_nums,
                log_view,
                message_filter,
                min_offset,
                max_offset,
            )
        return self._result(scanned, offset, log_view, min_offset, max_offset)

    def _all_present(self, blk: Block, log_view: LogView) -> bool:
        """Whether every record a block slice names is readable (`_present` for all at once):
        for entries in order, the first starts at or after the commit-log min and the last ends
        before its max."""
        end, files = log_view
        n = len(blk.phys)
        if not files or n == 0:
            return False
        if blk.sane(0, n):
            return bool(blk.phys[0] >= files[0].start and blk.end[n - 1] <= end)
        return bool(self._present(blk.phys, blk.size, log_view).all())

    def _first_chunk(self, max_msg_nums: int, filtered: bool) -> int:
        """Entries that certainly hold the batch end of an unfiltered scan over readable records
        (count limits), or a first chunk for a filtered one."""
        limits = self._limits
        cap = min(
            max(1, max_msg_nums),
            max(
                limits.max_transfer_count_on_message_in_memory,
                limits.max_transfer_count_on_message_in_disk,
            ),
        )
        return max(64, 16 * (cap + 1)) if filtered else cap + 1

    def _scan_fast(
        self,
        q: ConsumeQueue,
        window: Window,
        n: int,
        max_msg_nums: int,
        log_view: LogView,
        message_filter: MessageFilter | None,
    ) -> tuple[ScanOutcome, I64] | None:
        """The vectorized scan, in at most two chunks; None when it does not apply."""
        view, start, first, written = window
        max_offset_py = log_view[0]
        split = min(n, self._first_chunk(max_msg_nums, message_filter is not None))
        count0 = buffer0 = 0
        parts: list[tuple[Block, I64]] = []
        stop_at: int | None = None
        for a, b in ((0, split), (split, n)):
            if a >= b:
                continue
            blk = q.native(view, start, first + a, first + b, written)
            if message_filter is None:
                match = None
            else:
                match = tag_mask(message_filter, blk.tags)
                if match is None:
                    return None
            if not self._all_present(blk, log_view):
                return None
            stop, picked = scan_chunk(
                blk,
                match,
                max_msg_nums=max_msg_nums,
                max_offset_py=max_offset_py,
                memory=self._memory,
                limits=self._limits,
                count0=count0,
                buffer0=buffer0,
            )
            parts.append((blk, picked + a))
            if stop is not None:
                stop_at = a + stop
                break
            count0 += len(picked)
            buffer0 += int(blk.size[picked].sum())
        if len(parts) == 1:
            blk, picked = parts[0]
        else:
            blk = Block(*(np.concatenate([getattr(p[0], k) for p in parts]) for k in Block._fields))
            picked = np.concatenate([p[1] for p in parts])
        return outcome(blk, stop_at, picked), blk.phys

    def _result(
        self,
        scanned: tuple[ScanOutcome, I64],
        offset: int,
        log_view: LogView,
        min_offset: int,
        max_offset: int,
    ) -> GetMessageResult:
        done, phys = scanned
        max_offset_py, files = log_view
        picked = phys[done.returned]
        size = self.commit_log.file_size
        records = lazy_records(files, size, picked, self.profile, self._delay_levels)
        return FastGetMessageResult(
            done.status,
            scan_next_begin_offset(offset, done.scanned),
            min_offset,
            max_offset,
            cast(tuple[StoredMessage, ...], records),
            suggest_pulling_from_slave(max_offset_py, done.max_phy_offset_pulling, self._memory),
            total_size=done.total_size,
            offsets=tuple((done.returned + offset).tolist()),
        )

    def _read(self, phys: int, size: int, log_view: LogView) -> StoredMessage | None:
        found = self.commit_log.record_at(phys, size, log_view)
        if found is None:
            return None
        f, pos = found
        return decode_checked(f.mm, pos, self.profile, self._delay_levels)

    def _scan_slow(
        self,
        where: tuple[ConsumeQueue, Window],
        n: int,
        offset: int,
        max_msg_nums: int,
        log_view: LogView,
        message_filter: MessageFilter | None,
        min_offset: int,
        max_offset: int,
    ) -> GetMessageResult:
        """The entry-by-entry scan of the window's first `n` entries, by spec.store.scan_window
        itself."""
        max_offset_py = log_view[0]
        window = where[1]
        view = window.view[window.first : window.first + n]
        entries = EntrySequence(view)
        decoded: dict[int, StoredMessage | None] = {}

        def record(phys: int) -> StoredMessage | None:
            if phys not in decoded:
                decoded[phys] = self._read(phys, sizes[phys], log_view)
            return decoded[phys]

        sizes: dict[int, int] = {}

        def present(phys: int, size: int) -> bool:
            sizes[phys] = size
            if self.commit_log.record_at(phys, size, log_view) is not None:
                return True
            k = int(np.flatnonzero(view["phys"] == phys)[0])  # only when one is missing
            refuse_damaged_entry(self.commit_log, log_view, *where, k)
            return False

        def matches_commit_log(phys: int) -> bool:
            return message_filter is None or message_filter.is_matched_by_commit_log(record(phys))

        state = scan_window(
            entries,
            max_msg_nums=max_msg_nums,
            max_offset_py=max_offset_py,
            memory=self._memory,
            limits=self._limits,
            commit_log_file_size=self.commit_log.file_size,
            matches_consume_queue=(
                message_filter.is_matched_by_consume_queue if message_filter else _always
            ),
            record_present=present,
            matches_commit_log=matches_commit_log,
        )
        returned = [entries[p] for p in state.returned]
        messages = tuple(cast(StoredMessage, record(phys)) for phys, _, _ in returned)
        return GetMessageResult(
            state.status,
            scan_next_begin_offset(offset, state.scanned),
            min_offset,
            max_offset,
            messages,
            suggest_pulling_from_slave(max_offset_py, state.max_phy_offset_pulling, self._memory),
            bodies=self._bodies(messages, returned, log_view),
        )

    def _bodies(
        self, messages: Sequence[StoredMessage], entries: Sequence[CQEntry], log_view: LogView
    ) -> tuple[bytes, ...] | None:
        """The bytes every returned entry read, when one of them is not the whole record the
        entry names (STORE-21: phys 0 served from another file); None otherwise."""
        if whole_records_read(messages, entries):
            return None
        out = []
        for phys, size, _ in entries:
            served = self.commit_log.record_at(phys, size, log_view)
            assert served is not None  # the scan read it in this view
            f, pos = served
            out.append(with_blank_leftovers(bytes(f.data[pos : pos + size]), self.profile))
        return tuple(out)
