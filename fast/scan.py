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

from fast.gather import I64
from spec.batch import BatchLimits
from spec.filter import SUB_ALL, ExpressionMessageFilter, is_tag_type
from spec.protocols import MessageFilter
from spec.status import GetMessageStatus
from spec.store import CQ_EXT_MAX_ADDRESS

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
    max_msg_nums: int,
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


def scan_vectorized(
    phys: I64,
    size: I64,
    match: BoolArray,
    *,
    max_msg_nums: int,
    max_offset_py: int,
    memory: int,
    limits: BatchLimits,
    count0: int = 0,
    buffer0: int = 0,
) -> tuple[int | None, BoolArray]:
    """Scan one chunk of a window whose records are all readable: (the position of the entry
    that makes the batch full or None, the mask of returned entries before it). `count0` and
    `buffer0` are the totals returned by earlier chunks."""
    sizes = np.where(match, size, 0)
    counts = match.astype(np.int64)
    buffer_before: I64 = np.cumsum(sizes) - sizes + buffer0
    count_before: I64 = np.cumsum(counts) - counts + count0
    in_disk = (max_offset_py - phys) > memory
    full = batch_full_mask(size, buffer_before, count_before, in_disk, max_msg_nums, limits)
    if full.any():
        stop = int(np.argmax(full))
        returned = match.copy()
        returned[stop:] = False
        return stop, returned
    return None, match


def outcome(
    phys: I64, size: I64, returned: BoolArray, stop: int | None, scanned_if_no_stop: int
) -> ScanOutcome:
    """Assemble the ScanOutcome of a vectorized scan over readable records: FOUND iff something
    was returned, else NO_MATCHED_MESSAGE (every examined entry was filtered out)."""
    scanned = stop if stop is not None else scanned_if_no_stop
    picked = np.flatnonzero(returned[:scanned])
    last = stop if stop is not None else scanned - 1
    return ScanOutcome(
        GetMessageStatus.FOUND if len(picked) else GetMessageStatus.NO_MATCHED_MESSAGE,
        scanned,
        picked,
        int(size[picked].sum()),
        int(phys[last]),
    )
