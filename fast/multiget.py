"""get_messages: many pulls answered in one vectorized pass over all their consume-queue windows.

Every request goes through the same decision chain as get_message; the windows that need a scan
are concatenated, and the tag masks, segmented cumulative totals, batch-full masks and scan ends
are computed once for all of them. A request the pass cannot settle (a missing record, an unknown
filter, a window longer than its first chunk without an end) is answered by get_message's path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from fast.consumequeue import Block
from fast.gather import member_of
from fast.getpath import GetPath
from fast.scan import ScanOutcome, batch_full_mask, tag_mask
from spec.errors import InvalidTypeError, ReadOnlyStoreError, require_int, require_str
from spec.filter import ExpressionMessageFilter
from spec.protocols import MessageFilter
from spec.results import GetMessageResult
from spec.status import GetMessageStatus

if TYPE_CHECKING:
    from fast.consumequeue import ConsumeQueue


@attrs.frozen
class GetRequest:
    """One pull of a get_messages batch: the arguments of get_message."""

    group: str
    topic: str
    queue_id: int
    offset: int
    max_msg_nums: int
    message_filter: MessageFilter | None = None


def _as_request(item: Any) -> GetRequest:
    if type(item) is GetRequest:
        request = item
    elif isinstance(item, tuple | list) and len(item) in (5, 6):
        request = GetRequest(*item)
    elif isinstance(item, GetRequest):
        request = item
    else:
        raise InvalidTypeError("request", item, "GetRequest or a get_message argument tuple")
    require_str("group", request.group)
    require_str("topic", request.topic)
    require_int("queue_id", request.queue_id)
    require_int("offset", request.offset)
    require_int("max_msg_nums", request.max_msg_nums)
    f = request.message_filter
    if (
        f is not None
        and type(f) is not ExpressionMessageFilter
        and not isinstance(f, MessageFilter)
    ):
        raise InvalidTypeError("message_filter", f, "MessageFilter or None")
    return request


Pending = tuple[int, Block, int, int, int]
"""(request number, native entries of its first chunk, window entries, min, max)."""


class MultiGetPath(GetPath):
    """Mixin: the batched pull of MmapMessageStore."""

    if TYPE_CHECKING:
        _closed: bool

        def _queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...

    def get_messages(
        self, requests: Sequence[GetRequest | tuple[Any, ...]]
    ) -> list[GetMessageResult]:
        """Answer many pulls at once; result i equals get_message(*requests[i])."""
        reqs = [_as_request(r) for r in requests]
        if self._closed:
            raise ReadOnlyStoreError("get_messages on a closed store")
        max_offset_py = self.commit_log.max_offset()
        results: list[GetMessageResult | None] = [None] * len(reqs)
        pending: list[Pending] = []
        for i, r in enumerate(reqs):
            q = self._queue(r.topic, r.queue_id)
            decided = self._decided(q, r.offset, r.max_msg_nums)
            if isinstance(decided, GetMessageResult):
                results[i] = decided
                continue
            number, first, n, min_offset, max_offset = decided
            chunk = min(n, self._first_chunk(r.max_msg_nums, r.message_filter is not None))
            blk = q.native(number, first, first + chunk)
            pending.append((i, blk, n, min_offset, max_offset))
        if pending:
            self._scan_many(reqs, pending, results, max_offset_py)
        return [r for r in results if r is not None]

    def _scan_many(
        self,
        reqs: list[GetRequest],
        pending: list[Pending],
        results: list[GetMessageResult | None],
        max_offset_py: int,
    ) -> None:
        lengths = np.array([len(p[1].phys) for p in pending], dtype=np.int64)
        starts = np.zeros(len(pending), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        phys = np.concatenate([p[1].phys for p in pending])
        size = np.concatenate([p[1].size for p in pending])
        tags = np.concatenate([p[1].tags for p in pending])
        segment = np.repeat(np.arange(len(pending)), lengths)
        match = np.ones(len(phys), dtype=bool)
        usable = np.logical_and.reduceat(self._present(phys, size), starts)
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
        # Totals before each entry within its own request: exclusive, segmented cumulative sums.
        sizes = np.where(match, size, 0)
        counts = match.astype(np.int64)
        csum_size = np.cumsum(sizes)
        csum_count = np.cumsum(counts)
        base_size = (csum_size - sizes)[starts]
        base_count = (csum_count - counts)[starts]
        buffer_before = csum_size - sizes - base_size[segment]
        count_before = csum_count - counts - base_count[segment]
        max_nums = np.array([reqs[p[0]].max_msg_nums for p in pending], dtype=np.int64)
        in_disk = (max_offset_py - phys) > self._memory
        full = batch_full_mask(
            size, buffer_before, count_before, in_disk, max_nums[segment], self._limits
        )
        hits = np.flatnonzero(full)
        stop = lengths.copy()  # no entry made the batch full: the whole chunk was examined
        if len(hits):
            seg_hits = segment[hits]
            first = np.ones(len(hits), dtype=bool)
            np.not_equal(seg_hits[1:], seg_hits[:-1], out=first[1:])
            stop[seg_hits[first]] = hits[first] - starts[seg_hits[first]]
        stopped = np.zeros(len(pending), dtype=bool)
        if len(hits):
            stopped[segment[hits]] = True
        local = np.arange(len(phys)) - starts[segment]
        returned = match & (local < stop[segment])
        picked_all = np.flatnonzero(returned)
        bounds = np.searchsorted(picked_all, np.append(starts, len(phys)))
        totals = np.add.reduceat(np.where(returned, size, 0), starts)
        last = phys[starts + np.minimum(stop, lengths - 1)]
        for k, (i, blk, n, min_offset, max_offset) in enumerate(pending):
            r = reqs[i]
            length = int(lengths[k])
            if not usable[k] or (not stopped[k] and length < n):
                q = self._queue(r.topic, r.queue_id)
                results[i] = self._get(q, r.offset, r.max_msg_nums, r.message_filter)
                continue
            picked = picked_all[bounds[k] : bounds[k + 1]] - starts[k]
            done = ScanOutcome(
                GetMessageStatus.FOUND if len(picked) else GetMessageStatus.NO_MATCHED_MESSAGE,
                int(stop[k]),
                picked,
                int(totals[k]),
                int(last[k]),
            )
            results[i] = self._result(
                (done, blk.phys), r.offset, max_offset_py, min_offset, max_offset
            )
