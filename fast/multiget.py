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
import numpy.typing as npt

from fast.getpath import GetPath
from fast.scan import ScanOutcome, batch_full_mask, tag_mask
from spec.errors import InvalidTypeError, ReadOnlyStoreError, require_int, require_str
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
    if isinstance(item, GetRequest):
        request = item
    elif isinstance(item, tuple | list) and len(item) in (5, 6):
        request = GetRequest(*item)
    else:
        raise InvalidTypeError("request", item, "GetRequest or a get_message argument tuple")
    require_str("group", request.group)
    require_str("topic", request.topic)
    require_int("queue_id", request.queue_id)
    require_int("offset", request.offset)
    require_int("max_msg_nums", request.max_msg_nums)
    f = request.message_filter
    if f is not None and not isinstance(f, MessageFilter):
        raise InvalidTypeError("message_filter", f, "MessageFilter or None")
    return request


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
        pending: list[tuple[int, npt.NDArray[np.void], int, int, int, int]] = []
        for i, r in enumerate(reqs):
            q = self._queue(r.topic, r.queue_id)
            decided = self._decided(q, r.offset, r.max_msg_nums)
            if isinstance(decided, GetMessageResult):
                results[i] = decided
                continue
            number, first, n, min_offset, max_offset = decided
            cap = min(max(1, r.max_msg_nums), self._count_cap)
            chunk = cap + 1 if r.message_filter is None else max(64, 16 * (cap + 1))
            view = q.views[number][first : first + min(n, chunk)]
            pending.append((i, view, n, min_offset, max_offset, r.offset))
        if pending:
            self._scan_many(reqs, pending, results, max_offset_py)
        return [r for r in results if r is not None]

    @property
    def _count_cap(self) -> int:
        limits = self._limits
        return max(
            limits.max_transfer_count_on_message_in_memory,
            limits.max_transfer_count_on_message_in_disk,
        )

    def _scan_many(
        self,
        reqs: list[GetRequest],
        pending: list[tuple[int, npt.NDArray[np.void], int, int, int, int]],
        results: list[GetMessageResult | None],
        max_offset_py: int,
    ) -> None:
        lengths = np.array([len(p[1]) for p in pending], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        entries = np.concatenate([p[1] for p in pending])
        phys = entries["phys"].astype(np.int64)
        size = entries["size"].astype(np.int64)
        tags = entries["tags"].astype(np.int64)
        segment = np.repeat(np.arange(len(pending)), lengths)
        match = np.zeros(len(entries), dtype=bool)
        usable = np.ones(len(pending), dtype=bool)
        by_filter: dict[int, tuple[MessageFilter | None, list[int]]] = {}
        for k, p in enumerate(pending):
            f = reqs[p[0]].message_filter
            by_filter.setdefault(id(f), (f, []))[1].append(k)
        for f, members in by_filter.values():
            chosen = np.isin(segment, members)
            mask = tag_mask(f, tags[chosen])
            if mask is None:
                usable[members] = False
            else:
                match[chosen] = mask
        present = self._present(phys, size)
        absent_segments = np.unique(segment[~present])
        usable[absent_segments] = False
        sizes = np.where(match, size, 0)
        counts = match.astype(np.int64)
        csum_size = np.cumsum(sizes)
        csum_count = np.cumsum(counts)
        base_size = np.concatenate(([0], csum_size))[starts]
        base_count = np.concatenate(([0], csum_count))[starts]
        buffer_before = csum_size - sizes - base_size[segment]
        count_before = csum_count - counts - base_count[segment]
        max_nums = np.array([reqs[p[0]].max_msg_nums for p in pending], dtype=np.int64)
        in_disk = (max_offset_py - phys) > self._memory
        full = batch_full_mask(
            size, buffer_before, count_before, in_disk, max_nums[segment], self._limits
        )
        hits = np.flatnonzero(full)
        first_full = np.full(len(pending), -1, dtype=np.int64)
        if len(hits):
            seg_hits, first = np.unique(segment[hits], return_index=True)
            first_full[seg_hits] = hits[first] - starts[seg_hits]
        for k, (i, _view, n, min_offset, max_offset, offset) in enumerate(pending):
            r = reqs[i]
            stop = int(first_full[k])
            lo, length = int(starts[k]), int(lengths[k])
            if not usable[k] or (stop < 0 and length < n):
                q = self._queue(r.topic, r.queue_id)
                results[i] = self._get(q, offset, r.max_msg_nums, r.message_filter)
                continue
            scanned = stop if stop >= 0 else length
            seg_phys = phys[lo : lo + length]
            picked = np.flatnonzero(match[lo : lo + scanned])
            last = stop if stop >= 0 else length - 1
            done = ScanOutcome(
                GetMessageStatus.FOUND if len(picked) else GetMessageStatus.NO_MATCHED_MESSAGE,
                scanned,
                picked,
                int(size[lo : lo + length][picked].sum()),
                int(seg_phys[last]),
            )
            results[i] = self._result(
                (done, seg_phys), offset, max_offset_py, min_offset, max_offset
            )
