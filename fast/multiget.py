"""get_messages: many pulls answered in one vectorized pass over all their consume-queue windows.

Every request goes through the same decision chain as get_message; the windows that need a scan
are concatenated, and the tag masks, segmented cumulative totals, batch-full masks and scan ends
are computed once for all of them. A request the pass cannot settle (a missing record, an unknown
filter, a window longer than its first chunk without an end) is answered by get_message's path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pullspec.fast.commitlog import LogView
from pullspec.fast.consumequeue import Block
from pullspec.fast.gather import I64, member_of
from pullspec.fast.getone import SingleGetPath
from pullspec.fast.multiget_compiled import GetRequest, as_request
from pullspec.fast.multiget_kernel import scan_kernel
from pullspec.fast.pull_through import PullThroughPath
from pullspec.fast.results import MultiGetResult
from pullspec.fast.scan import ScanOutcome, batch_full_mask, tag_mask
from pullspec.spec.errors import InvalidTypeError, ReadOnlyStoreError
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult
from pullspec.spec.status import GetMessageStatus

if TYPE_CHECKING:
    from pullspec.fast.consumequeue import ConsumeQueue

__all__ = ["GetRequest", "MultiGetPath"]


Pending = tuple[int, Block, int, int, int]
"""(request number, native entries of its first chunk, window entries, min, max)."""


class MultiGetPath(PullThroughPath, SingleGetPath):
    """Mixin: the batched pull of MmapMessageStore."""

    if TYPE_CHECKING:
        _closed: bool
        queues: dict[tuple[str, int], ConsumeQueue]

        def _queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...

    def get_messages(self, requests: Sequence[GetRequest | tuple[Any, ...]]) -> MultiGetResult:
        """Answer many pulls at once; result i equals get_message(*requests[i]). The answer is
        also columnar (MultiGetResult.next_begin_offsets, message_counts, …)."""
        if isinstance(requests, str | bytes) or not isinstance(requests, Sequence):
            raise InvalidTypeError("requests", requests, "a sequence of get_message requests")
        if self._closed:
            raise ReadOnlyStoreError("get_messages on a closed store")
        kernel = scan_kernel()
        if kernel is None:
            return MultiGetResult.of(self._get_many([as_request(r) for r in requests]))
        return self._get_compiled(kernel, requests)

    def _get_many(self, reqs: list[GetRequest]) -> list[GetMessageResult]:
        """get_messages by numpy alone (no compiled scan)."""
        log_view = self.commit_log.snapshot()
        results: list[GetMessageResult | None] = [None] * len(reqs)
        pending: list[Pending] = []
        for i, r in enumerate(reqs):
            q = self._queue(r.topic, r.queue_id)
            decided = self._decided(q, r.offset, r.max_msg_nums)
            if isinstance(decided, GetMessageResult):
                results[i] = decided
                continue
            window, n, min_offset, max_offset = decided
            chunk = min(n, self._first_chunk(r.max_msg_nums, r.message_filter is not None))
            view, start, first, written = window
            blk = q.native(view, start, first, first + chunk, written)
            pending.append((i, blk, n, min_offset, max_offset))
        if pending:
            self._scan_many(reqs, pending, results, log_view)
        return [r for r in results if r is not None]

    def _scan_many(
        self,
        reqs: list[GetRequest],
        pending: list[Pending],
        results: list[GetMessageResult | None],
        log_view: LogView,
    ) -> None:
        max_offset_py = log_view[0]
        lengths = np.array([len(p[1].phys) for p in pending], dtype=np.int64)
        starts = np.zeros(len(pending), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        phys = np.concatenate([p[1].phys for p in pending])
        size = np.concatenate([p[1].size for p in pending])
        tags = np.concatenate([p[1].tags for p in pending])
        segment = np.repeat(np.arange(len(pending)), lengths)
        match = np.ones(len(phys), dtype=bool)
        usable = np.logical_and.reduceat(self._present(phys, size, log_view), starts)
        by_filter: dict[int, tuple[MessageFilter | None, list[int]]] = {}
        for k, p in enumerate(pending):
            f = reqs[p[0]].message_filter
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
        max_nums = np.array([reqs[p[0]].max_msg_nums for p in pending], dtype=np.int64)
        ends = self._count_ends(phys, size, match, starts, lengths, max_nums, log_view)
        if ends is None:
            ends = self._mask_ends(phys, size, match, starts, lengths, max_nums, max_offset_py)
        stop, picked_all, pick_lo, pick_hi = ends
        stopped = stop < lengths
        sizes_picked = size[picked_all]
        csum = np.concatenate(([0], np.cumsum(sizes_picked)))
        totals = csum[pick_hi] - csum[pick_lo]
        last = phys[starts + np.minimum(stop, lengths - 1)]
        for k, (i, blk, n, min_offset, max_offset) in enumerate(pending):
            r = reqs[i]
            length = int(lengths[k])
            if not usable[k] or (not stopped[k] and length < n):
                q = self._queue(r.topic, r.queue_id)
                results[i] = self._get(q, r.offset, r.max_msg_nums, r.message_filter)
                continue
            picked = picked_all[pick_lo[k] : pick_hi[k]] - starts[k]
            done = ScanOutcome(
                GetMessageStatus.FOUND if len(picked) else GetMessageStatus.NO_MATCHED_MESSAGE,
                int(stop[k]),
                picked,
                int(totals[k]),
                int(last[k]),
            )
            results[i] = self._result((done, blk.phys), r.offset, log_view, min_offset, max_offset)

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
        f_size = self.commit_log.file_size
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
        limits, memory = self._limits, self._memory
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
        in_disk = (max_offset_py - phys) > self._memory
        full = batch_full_mask(
            size, buffer_before, count_before, in_disk, max_nums[segment], self._limits
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
