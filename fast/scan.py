"""The window scan of getMessage (STORE-11 … STORE-16, BATCH-1 … BATCH-3) over numpy arrays.

`scan_vectorized` states, for a window whose records are all readable and a tag filter, the same
outcome `spec.store.scan_window` reaches entry by entry: tag matches as a mask, the totals before
each entry as exclusive cumulative sums, isTheBatchFull as a mask, the scan end as its first
true entry. Anything else — a missing record, an unknown filter — goes through
`spec.store.scan_window` itself.
"""

from __future__ import annotations

import attrs
import numpy as np
import numpy.typing as npt

from pullspec.fast.consumequeue import Block
from pullspec.fast.gather import I64
from pullspec.spec.batch import BatchLimits
from pullspec.spec.filter import SUB_ALL, ExpressionMessageFilter, is_tag_type
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.scan import CQ_EXT_MAX_ADDRESS
from pullspec.spec.status import GetMessageStatus

BoolArray = npt.NDArray[np.bool_]


def tag_mask(message_filter: MessageFilter | None, tags: I64) -> BoolArray | None:
    """FILTER-4 over many tags codes: which entries pass the consume-queue stage, or None when
    the filter is not an ExpressionMessageFilter (it must then be asked entry by entry).
    An ext address (≤ −2 147 483 649) has no ext unit here, so its code is null and matches."""
    if message_filter is None:
        return np.ones(len(tags), dtype=bool)
    if type(message_filter) is not ExpressionMessageFilter:
        return None
    sub = message_filter.subscription
    if (
        sub is None
        or sub.class_filter_mode
        or not is_tag_type(sub.expression_type)
        or sub.sub_string == SUB_ALL
    ):
        return np.ones(len(tags), dtype=bool)
    low = tags.astype(np.int32)  # Long.intValue(): the low 32 bits
    mask = np.zeros(len(tags), dtype=bool)
    for code in sub.code_set:
        mask |= low == code
    return mask | (tags <= CQ_EXT_MAX_ADDRESS)


def batch_full_mask(
    size: I64,
    buffer_before: I64,
    count_before: I64,
    in_disk: BoolArray,
    max_msg_nums: int | I64,
    limits: BatchLimits,
) -> BoolArray:
    """BATCH-2 (`spec.batch.is_the_batch_full`) for every entry at once."""
    disk = (buffer_before + size > limits.max_transfer_bytes_on_message_in_disk) | (
        count_before > limits.max_transfer_count_on_message_in_disk - 1
    )
    memory = (buffer_before + size > limits.max_transfer_bytes_on_message_in_memory) | (
        count_before > limits.max_transfer_count_on_message_in_memory - 1
    )
    full = (count_before >= max_msg_nums) | np.where(in_disk, disk, memory)
    result: BoolArray = (buffer_before != 0) & (count_before != 0) & full
    return result


@attrs.frozen
class ScanOutcome:
    """What a scan decided: the STORE-13 status, entries examined (STORE-14), the positions of
    the returned entries in the window, their total size and the STORE-16 pulling phys."""

    status: GetMessageStatus
    scanned: int
    returned: I64
    total_size: int
    max_phy_offset_pulling: int


def scan_chunk(
    blk: Block,
    match: BoolArray | None,
    *,
    max_msg_nums: int,
    max_offset_py: int,
    memory: int,
    limits: BatchLimits,
    count0: int = 0,
    buffer0: int = 0,
) -> tuple[int | None, I64]:
    """Scan one chunk of a window whose records are all readable: (the position of the entry
    that makes the batch full, or None; the positions of the entries returned before it).
    `match` None means every entry passes the filter; `count0` / `buffer0` are the totals
    returned by earlier chunks.

    When the chunk's records are in order and all on one side of the memory line, the end is
    found with a cumulative sum and a binary search; otherwise `batch_full_mask` is evaluated
    for every entry."""
    n = len(blk.phys)
    lag_near = max_offset_py - int(blk.phys[n - 1])
    lag_far = max_offset_py - int(blk.phys[0])
    if not blk.sane(0, n) or (lag_far > memory >= lag_near):
        return _scan_masks(blk, match, max_msg_nums, max_offset_py, memory, limits, count0, buffer0)
    if lag_near > memory:
        max_bytes = limits.max_transfer_bytes_on_message_in_disk
        max_count = limits.max_transfer_count_on_message_in_disk
    else:
        max_bytes = limits.max_transfer_bytes_on_message_in_memory
        max_count = limits.max_transfer_count_on_message_in_memory
    # Entry j is full when count_before ≥ 1 and (count_before ≥ min(maxMsgNums, count limit) or
    # bytes_before + size_j > byte limit); the records being disjoint, bytes_before + size_j is
    # at most buffer0 + the span of the chunk.
    need = max(min(max_msg_nums, max_count), 1) - count0
    span = int(blk.end[n - 1]) - int(blk.phys[0])
    no_byte_stop = buffer0 + span <= max_bytes
    if not no_byte_stop:
        # At most `need` more returned records before any entry, plus that entry.
        no_byte_stop = buffer0 + (max(need, 0) + 1) * int(blk.size.max()) <= max_bytes
    if match is None:
        stop = max(need, 0)
        if not no_byte_stop:
            cum = np.cumsum(blk.size)
            byte_stop = int(np.searchsorted(cum, max_bytes - buffer0, side="right"))
            stop = min(stop, max(byte_stop, 1 - count0, 0))
        if stop >= n:
            return None, np.arange(n, dtype=np.int64)
        return stop, np.arange(stop, dtype=np.int64)
    picked = match.nonzero()[0]
    stop = n
    if need <= 0:
        stop = 0
    elif len(picked) >= need:
        stop = int(picked[need - 1]) + 1
    if not no_byte_stop and stop > 0 and (count0 > 0 or len(picked)):
        sizes = np.where(match, blk.size, 0)
        before = np.cumsum(sizes) - sizes + buffer0
        over = before + blk.size > max_bytes
        first = 0 if count0 > 0 else int(picked[0]) + 1
        hits = over[first:stop].nonzero()[0]
        if len(hits):
            stop = first + int(hits[0])
    kept = picked[: int(np.searchsorted(picked, stop))]
    return (stop if stop < n else None), kept


def _scan_masks(
    blk: Block,
    match: BoolArray | None,
    max_msg_nums: int,
    max_offset_py: int,
    memory: int,
    limits: BatchLimits,
    count0: int,
    buffer0: int,
) -> tuple[int | None, I64]:
    """`scan_chunk` by evaluating BATCH-2 for every entry."""
    size = blk.size
    m = np.ones(len(size), dtype=bool) if match is None else match
    sizes = np.where(m, size, 0)
    counts = m.astype(np.int64)
    buffer_before: I64 = np.cumsum(sizes) - sizes + buffer0
    count_before: I64 = np.cumsum(counts) - counts + count0
    in_disk = (max_offset_py - blk.phys) > memory
    full = batch_full_mask(size, buffer_before, count_before, in_disk, max_msg_nums, limits)
    stop = int(np.argmax(full)) if full.any() else None
    picked = np.flatnonzero(m[:stop] if stop is not None else m)
    return stop, picked


def outcome(blk: Block, stop: int | None, picked: I64) -> ScanOutcome:
    """Assemble the ScanOutcome of a vectorized scan over readable records: FOUND iff something
    was returned, else NO_MATCHED_MESSAGE (every examined entry was filtered out)."""
    n = len(blk.phys)
    scanned = stop if stop is not None else n
    last = stop if stop is not None else n - 1
    return ScanOutcome(
        GetMessageStatus.FOUND if len(picked) else GetMessageStatus.NO_MATCHED_MESSAGE,
        scanned,
        picked,
        int(blk.size[picked].sum()),
        int(blk.phys[last]),
    )
