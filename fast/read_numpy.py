"""The numpy scanners of a ScanPlan (fast.read_plan): the vectorized window scan, and the entry-by-
entry scan by spec.scan.scan_window itself for what the vectorized one does not model (a missing
record, a filter that is not a tag-type ExpressionMessageFilter); and get_messages' numpy pass,
which scans every request's first chunk at once. Without numba these answer every pull.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import cast, overload

import numpy as np
import numpy.typing as npt

from pullspec.fast.commitlog import CommitLog, LogView
from pullspec.fast.consumequeue import Block, Window
from pullspec.fast.damage import decode_checked, refuse_damaged_entry
from pullspec.fast.gather import I64, member_of
from pullspec.fast.read_plan import Pull, ReadPlanner, ScanPlan
from pullspec.fast.results import FastGetMessageResult, lazy_records
from pullspec.fast.scan import ScanOutcome, batch_full_mask, outcome, scan_chunk, tag_mask
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.message import StoredMessage
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult
from pullspec.spec.scan import (
    CQEntry,
    scan_next_begin_offset,
    scan_window,
    suggest_pulling_from_slave,
)
from pullspec.spec.status import GetMessageStatus
from pullspec.spec.store import whole_records_read

#: (request number, its plan, native entries of its first chunk).
Pending = tuple[int, ScanPlan, Block]


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


def _always(tags_code: int | None) -> bool:
    return True


class NumpyScanner:
    """Scans a ScanPlan with numpy, or entry by entry where numpy does not apply."""

    def __init__(
        self, commit_log: CommitLog, planner: ReadPlanner, delay_levels: tuple[int, ...]
    ) -> None:
        self._log = commit_log
        self._planner = planner
        self._delay_levels = delay_levels

    def scan(
        self, plan: ScanPlan, message_filter: MessageFilter | None, vectorized: bool = True
    ) -> GetMessageResult:
        """The answer of a scan: vectorized (`vectorized`) or, where that does not apply,
        entry by entry."""
        log_view = self._log.snapshot()
        scanned = self._scan_vectorized(plan, log_view, message_filter) if vectorized else None
        if scanned is None:
            return self.scan_entries(plan, log_view, message_filter)
        return self._result(scanned, plan, log_view)

    def _present(self, phys: I64, size: I64, log_view: LogView) -> npt.NDArray[np.bool_]:
        """CommitLog.getMessage over many entries: are all `size` bytes at `phys` readable in
        the commit log as `log_view` (its max offset and files) shows it."""
        end, files = log_view
        if not files:
            return np.zeros(len(phys), dtype=bool)
        f_size = self._log.file_size
        # Inside one file, and below the max offset (bytes past it may not be written yet).
        result: npt.NDArray[np.bool_] = (
            (size > 0)
            & (phys >= files[0].start)
            & (phys % f_size + size <= f_size)
            & (phys + size <= end)
        )
        return result

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
        limits = self._planner.limits
        cap = min(
            max(1, max_msg_nums),
            max(
                limits.max_transfer_count_on_message_in_memory,
                limits.max_transfer_count_on_message_in_disk,
            ),
        )
        return max(64, 16 * (cap + 1)) if filtered else cap + 1

    def _native(self, plan: ScanPlan, a: int, b: int) -> Block:
        """Native copies of the plan's entries [a, b)."""
        lay, number, q = plan.layout, plan.number, plan.queue
        start = lay.files[number].start
        written = q.readable(number, lay) // CQ_STORE_UNIT_SIZE
        return q.native(lay.views[number], start, plan.first + a, plan.first + b, written)

    def _scan_vectorized(
        self, plan: ScanPlan, log_view: LogView, message_filter: MessageFilter | None
    ) -> tuple[ScanOutcome, I64] | None:
        """The vectorized scan, in at most two chunks; None when it does not apply."""
        n, max_msg_nums = plan.n, plan.max_msg_nums
        max_offset_py = log_view[0]
        split = min(n, self._first_chunk(max_msg_nums, message_filter is not None))
        count0 = buffer0 = 0
        parts: list[tuple[Block, I64]] = []
        stop_at: int | None = None
        for a, b in ((0, split), (split, n)):
            if a >= b:
                continue
            blk = self._native(plan, a, b)
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
                memory=self._planner.memory,
                limits=self._planner.limits,
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
        self, scanned: tuple[ScanOutcome, I64], plan: ScanPlan, log_view: LogView
    ) -> GetMessageResult:
        done, phys = scanned
        max_offset_py, files = log_view
        picked = phys[done.returned]
        size = self._log.file_size
        records = lazy_records(files, size, picked, self._planner.rules, self._delay_levels)
        offset = plan.offset
        return FastGetMessageResult(
            done.status,
            scan_next_begin_offset(offset, done.scanned),
            plan.min_offset,
            plan.max_offset,
            cast(tuple[StoredMessage, ...], records),
            suggest_pulling_from_slave(
                max_offset_py, done.max_phy_offset_pulling, self._planner.memory
            ),
            total_size=done.total_size,
            offsets=tuple((done.returned + offset).tolist()),
        )

    def _read(self, phys: int, size: int, log_view: LogView) -> StoredMessage | None:
        found = self._log.record_at(phys, size, log_view)
        if found is None:
            return None
        f, pos = found
        return decode_checked(f.mm, pos, self._planner.rules, self._delay_levels)

    def scan_entries(
        self, plan: ScanPlan, log_view: LogView, message_filter: MessageFilter | None
    ) -> GetMessageResult:
        """The entry-by-entry scan of the plan's entries, by spec.scan.scan_window itself."""
        log, planner = self._log, self._planner
        max_offset_py = log_view[0]
        lay, number, first, n = plan.layout, plan.number, plan.first, plan.n
        window = Window(lay.views[number], lay.files[number].start, first, first + n)
        view = window.view[first : first + n]
        entries = EntrySequence(view)
        decoded: dict[int, StoredMessage | None] = {}

        def record(phys: int) -> StoredMessage | None:
            if phys not in decoded:
                decoded[phys] = self._read(phys, sizes[phys], log_view)
            return decoded[phys]

        sizes: dict[int, int] = {}

        def present(phys: int, size: int) -> bool:
            sizes[phys] = size
            if log.record_at(phys, size, log_view) is not None:
                return True
            k = int(np.flatnonzero(view["phys"] == phys)[0])  # only when one is missing
            refuse_damaged_entry(log, log_view, plan.queue, window, k)
            return False

        def matches_commit_log(phys: int) -> bool:
            return message_filter is None or message_filter.is_matched_by_commit_log(record(phys))

        state = scan_window(
            entries,
            max_msg_nums=plan.max_msg_nums,
            max_offset_py=max_offset_py,
            memory=planner.memory,
            limits=planner.limits,
            commit_log_file_size=log.file_size,
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
            scan_next_begin_offset(plan.offset, state.scanned),
            plan.min_offset,
            plan.max_offset,
            messages,
            suggest_pulling_from_slave(max_offset_py, state.max_phy_offset_pulling, planner.memory),
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
            served = self._log.record_at(phys, size, log_view)
            assert served is not None  # the scan read it in this view
            f, pos = served
            out.append(self._planner.rules.with_blank_leftovers(bytes(f.data[pos : pos + size])))
        return tuple(out)

    # -- get_messages without the compiled scan -------------------------------------------------

    def scan_many(
        self,
        reqs: Sequence[Pull],
        plans: list[GetMessageResult | ScanPlan],
        answer: Callable[[Pull], GetMessageResult],
    ) -> list[GetMessageResult]:
        """get_messages by numpy: every scanning request's first chunk scanned at once; a
        request the pass cannot settle is answered by `answer` (get_message's path)."""
        log_view = self._log.snapshot()
        results: list[GetMessageResult | None] = [None] * len(reqs)
        pending: list[Pending] = []
        for i, (r, plan) in enumerate(zip(reqs, plans, strict=True)):
            if not isinstance(plan, ScanPlan):
                results[i] = plan
                continue
            chunk = min(plan.n, self._first_chunk(r[4], r[5] is not None))
            pending.append((i, plan, self._native(plan, 0, chunk)))
        if pending:
            self._scan_pending(reqs, pending, results, log_view, answer)
        return [r for r in results if r is not None]

    def _scan_pending(
        self,
        reqs: Sequence[Pull],
        pending: list[Pending],
        results: list[GetMessageResult | None],
        log_view: LogView,
        answer: Callable[[Pull], GetMessageResult],
    ) -> None:
        max_offset_py = log_view[0]
        lengths = np.array([len(p[2].phys) for p in pending], dtype=np.int64)
        starts = np.zeros(len(pending), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        phys = np.concatenate([p[2].phys for p in pending])
        size = np.concatenate([p[2].size for p in pending])
        tags = np.concatenate([p[2].tags for p in pending])
        segment = np.repeat(np.arange(len(pending)), lengths)
        match = np.ones(len(phys), dtype=bool)
        usable = np.logical_and.reduceat(self._present(phys, size, log_view), starts)
        by_filter: dict[int, tuple[MessageFilter | None, list[int]]] = {}
        for k, p in enumerate(pending):
            f = reqs[p[0]][5]
            by_filter.setdefault(id(f), (f, []))[1].append(k)
        for f, members in by_filter.values():
            if f is None:
                continue
            chosen = member_of(segment, np.array(members, dtype=np.int64))
            mask = tag_mask(f, tags[chosen])
            if mask is None:
                usable[members] = False
            else:
                match[chosen] = mask
        max_nums = np.array([reqs[p[0]][4] for p in pending], dtype=np.int64)
        ends = self._count_ends(phys, size, match, starts, lengths, max_nums, log_view)
        if ends is None:
            ends = self._mask_ends(phys, size, match, starts, lengths, max_nums, max_offset_py)
        stop, picked_all, pick_lo, pick_hi = ends
        stopped = stop < lengths
        sizes_picked = size[picked_all]
        csum = np.concatenate(([0], np.cumsum(sizes_picked)))
        totals = csum[pick_hi] - csum[pick_lo]
        last = phys[starts + np.minimum(stop, lengths - 1)]
        for k, (i, plan, blk) in enumerate(pending):
            length = int(lengths[k])
            if not usable[k] or (not stopped[k] and length < plan.n):
                results[i] = answer(reqs[i])
                continue
            picked = picked_all[pick_lo[k] : pick_hi[k]] - starts[k]
            done = ScanOutcome(
                GetMessageStatus.FOUND if len(picked) else GetMessageStatus.NO_MATCHED_MESSAGE,
                int(stop[k]),
                picked,
                int(totals[k]),
                int(last[k]),
            )
            results[i] = self._result((done, blk.phys), plan, log_view)

    def _count_ends(
        self,
        phys: I64,
        size: I64,
        match: npt.NDArray[np.bool_],
        starts: I64,
        lengths: I64,
        max_nums: I64,
        log_view: LogView,
    ) -> tuple[I64, I64, I64, I64] | None:
        """The scan ends when only count limits can end them: every request's records in order,
        all on one side of the memory line, too few bytes to reach a byte limit. Then entry j
        ends request k's batch iff it follows k's `need`-th match. None when that does not hold.
        Returns (stop per request, returned positions, their slice bounds per request)."""
        max_offset_py, files = log_view
        if not files:
            return None
        f_size = self._log.file_size
        end = phys + size
        follows = np.ones(len(phys), dtype=bool)
        follows[1:] = phys[1:] >= end[:-1]
        follows[starts] = True
        if not (
            follows.all()
            and size.min() > 0
            and (phys % f_size + size).max() <= f_size
            and phys[starts].min() >= files[0].start
            and end[starts + lengths - 1].max() <= max_offset_py
        ):
            return None
        limits, memory = self._planner.limits, self._planner.memory
        lags = max_offset_py - phys[starts]
        near = max_offset_py - phys[starts + lengths - 1]
        if lags.max() <= memory:
            max_bytes = limits.max_transfer_bytes_on_message_in_memory
            max_count = limits.max_transfer_count_on_message_in_memory
        elif near.min() > memory:
            max_bytes = limits.max_transfer_bytes_on_message_in_disk
            max_count = limits.max_transfer_count_on_message_in_disk
        else:
            return None
        need = np.maximum(np.minimum(max_nums, max_count), 1)
        widest = np.maximum.reduceat(size, starts)
        if ((need + 1) * widest).max() > max_bytes:
            return None
        picked = np.flatnonzero(match)
        first = np.searchsorted(picked, starts)
        count = np.searchsorted(picked, starts + lengths) - first
        has = count >= need
        at = np.minimum(first + need - 1, max(len(picked) - 1, 0))
        stop = np.where(has, (picked[at] if len(picked) else 0) - starts + 1, lengths)
        return stop, picked, first, first + np.minimum(count, need)

    def _mask_ends(
        self,
        phys: I64,
        size: I64,
        match: npt.NDArray[np.bool_],
        starts: I64,
        lengths: I64,
        max_nums: I64,
        max_offset_py: int,
    ) -> tuple[I64, I64, I64, I64]:
        """`_count_ends` in general: BATCH-2 evaluated for every entry of every request."""
        segment = np.repeat(np.arange(len(starts)), lengths)
        sizes = np.where(match, size, 0)
        counts = match.astype(np.int64)
        csum_size = np.cumsum(sizes)
        csum_count = np.cumsum(counts)
        # Totals before each entry within its own request: exclusive, segmented cumulative sums.
        base_size = (csum_size - sizes)[starts]
        base_count = (csum_count - counts)[starts]
        buffer_before = csum_size - sizes - base_size[segment]
        count_before = csum_count - counts - base_count[segment]
        in_disk = (max_offset_py - phys) > self._planner.memory
        full = batch_full_mask(
            size, buffer_before, count_before, in_disk, max_nums[segment], self._planner.limits
        )
        hits = np.flatnonzero(full)
        stop = lengths.copy()
        if len(hits):
            seg_hits = segment[hits]
            first = np.ones(len(hits), dtype=bool)
            np.not_equal(seg_hits[1:], seg_hits[:-1], out=first[1:])
            stop[seg_hits[first]] = hits[first] - starts[seg_hits[first]]
        local = np.arange(len(phys)) - starts[segment]
        picked = np.flatnonzero(match & (local < stop[segment]))
        lo = np.searchsorted(picked, starts)
        return stop, picked, lo, np.searchsorted(picked, starts + lengths)
