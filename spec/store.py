"""STORE — DefaultMessageStore.getMessage: statuses, offsets, the consume-queue window scan,
expiry and queue-offset assignment."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from pullspec.spec.batch import SEEDS_GET_MESSAGE
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE, is_dispatched_type
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import rule
from pullspec.spec.scan import (  # re-exported: the scan is part of getMessage
    CQ_EXT_MAX_ADDRESS,
    CQEntry,
    ScanState,
    commit_log_roll_next_file,
    final_scan_status,
    scan_entry,
    scan_next_begin_offset,
    scan_window,
    suggest_pulling_from_slave,
)
from pullspec.spec.status import BrokerRole, GetMessageStatus

SEED_003 = "003_97f7c1df5f6104bc.txt"

Q = TypeVar("Q")


@rule("STORE-1", source="DefaultMessageStore.getMessage", seeds=SEEDS_GET_MESSAGE[1:])
def store_can_serve(shut_down: bool, running_flags_readable: bool) -> bool:
    """getMessage gives no result when the store is shut down or its running flags are not
    readable, and validates none of its arguments.

    post: __return__ == (not shut_down and running_flags_readable)
    """
    return not shut_down and running_flags_readable


@rule("STORE-2", source="DefaultMessageStore.getMessage", seeds=SEEDS_GET_MESSAGE)
def initial_get_message_values(offset: int) -> tuple[GetMessageStatus, int, int, int, bool]:
    """A getMessage call starts with NO_MESSAGE_IN_QUEUE, nextBeginOffset = offset, min = max = 0
    and no slave suggestion.

    post: __return__[1] == offset
    """
    return (GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, 0, 0, False)


@rule(
    "STORE-3",
    source="DefaultMessageStore.findConsumeQueue",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt", SEED_003),
)
def find_consume_queue(existing: Q | None, create: Callable[[], Q]) -> Q:
    """The consume-queue lookup never fails: a missing queue is created empty, so a never-written
    queue answers NO_MESSAGE_IN_QUEUE and NO_MATCHED_LOGIC_QUEUE is unreachable.

    post: __return__ is not None
    post: existing is None or __return__ is existing
    """
    # crosshair: off  (CrossHair cannot build a symbolic Callable; Hypothesis checks the contract)
    return existing if existing is not None else create()


@rule(
    "STORE-4",
    source="ConsumeQueue.getMinOffsetInQueue, getMaxOffsetInQueue; MappedFileQueue.getMaxOffset",
    seeds=SEEDS_GET_MESSAGE,
)
def queue_min_max_offsets(
    min_logic_offset: int, last_file_start: int | None, last_file_written: int
) -> tuple[int, int]:
    """min and max are consume-queue indices: min = minLogicOffset / 20 and max = (start of the last
    consume-queue file + its written bytes) / 20, or 0 without a file.

    pre: min_logic_offset >= 0 and last_file_written >= 0
    pre: last_file_start is None or last_file_start >= 0
    post: __return__[1] == 0 if last_file_start is None else __return__[1] >= 0
    """
    max_offset = 0 if last_file_start is None else (last_file_start + last_file_written) // 20
    return (min_logic_offset // CQ_STORE_UNIT_SIZE, max_offset)


@rule(
    "STORE-6",
    source="DefaultMessageStore.nextOffsetCorrection",
    seeds=(SEED_003, "004_60fc00b6c6a023ff.txt"),
)
def next_offset_correction(
    old_offset: int, new_offset: int, broker_role: BrokerRole, offset_check_in_slave: bool
) -> int:
    """An error status corrects nextBeginOffset to the new value unless the broker is a slave
    without offsetCheckInSlave, which keeps the requested offset.

    post: __return__ in (old_offset, new_offset)
    post: broker_role is BrokerRole.SLAVE or __return__ == new_offset
    """
    # Verify this broker may correct offsets
    if broker_role is not BrokerRole.SLAVE or offset_check_in_slave:
        return new_offset
    return old_offset


@rule(
    "STORE-10",
    source="ConsumeQueue.rollNextFile",
    seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"),
)
def consume_queue_roll_next_file(index: int, units_per_file: int) -> int:
    """OFFSET_FOUND_NULL moves to the first index of the next consume-queue file,
    i + U − i mod U.

    pre: index >= 0 and units_per_file > 0
    post: __return__ > index and __return__ % units_per_file == 0
    """
    return index + units_per_file - index % units_per_file


# [4.7]
@rule(
    "STORE-8",
    source="DefaultMessageStore.getMessage",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt", SEED_003),
    profiles=(Profile.V4_7,),
    versions="Changed in 4.9.4 (ISSUE #4215): the minOffset == 0 branch was removed, so 4.9.7 "
    "always targets maxOffset.",
)
def overflow_badly_target_v47(min_offset: int, max_offset: int) -> int:
    """An offset past maxOffset restarts from 0 when minOffset is 0, else from maxOffset.

    post: __return__ == (0 if min_offset == 0 else max_offset)
    """
    return 0 if min_offset == 0 else max_offset


# [Modified in 4.9]
@rule(
    "STORE-8",
    source="DefaultMessageStore.getMessage",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt", SEED_003),
    profiles=(Profile.V4_9,),
)
def overflow_badly_target_v49(min_offset: int, max_offset: int) -> int:
    """An offset past maxOffset is corrected to maxOffset.

    post: __return__ == max_offset
    """
    return max_offset


@rule(
    "STORE-7",
    source="DefaultMessageStore.getMessage; ConsumeQueue.putMessagePositionInfo",
    seeds=("000_26b83a4251c26823.txt", SEED_003),
)
def overflow_one_next_offset(offset: int) -> int:
    """offset == maxOffset is the caught-up state: nextBeginOffset stays offset, the index the next
    dispatched message will get.

    post: __return__ == offset
    """
    return offset


@rule("STORE-5", source="DefaultMessageStore.getMessage", seeds=(*SEEDS_GET_MESSAGE, SEED_003))
def classify_offset(
    offset: int,
    min_offset: int,
    max_offset: int,
    broker_role: BrokerRole,
    offset_check_in_slave: bool,
    profile: Profile,
) -> tuple[GetMessageStatus, int] | None:
    """The first matching case decides: an empty queue, an offset below min, equal to max, past
    max, or else (min ≤ offset < max) a window lookup, signalled by None.

    post: __return__ is None or __return__[0] is not GetMessageStatus.FOUND
    post: (__return__ is None) == (max_offset != 0 and min_offset <= offset < max_offset)
    """

    def corr(new_offset: int) -> int:
        return next_offset_correction(offset, new_offset, broker_role, offset_check_in_slave)

    # Verify the queue holds anything
    if max_offset == 0:
        return (GetMessageStatus.NO_MESSAGE_IN_QUEUE, corr(0))
    # Verify the offset is not below min
    if offset < min_offset:
        return (GetMessageStatus.OFFSET_TOO_SMALL, corr(min_offset))
    # Verify the offset is not the caught-up max
    if offset == max_offset:
        return (GetMessageStatus.OFFSET_OVERFLOW_ONE, corr(overflow_one_next_offset(offset)))
    # Verify the offset is not past max
    if offset > max_offset:
        target = (
            overflow_badly_target_v47(min_offset, max_offset)
            if profile is Profile.V4_7
            else overflow_badly_target_v49(min_offset, max_offset)
        )
        return (GetMessageStatus.OFFSET_OVERFLOW_BADLY, corr(target))
    return None


@rule(
    "STORE-9",
    source="ConsumeQueue.getIndexBuffer; MappedFileQueue.findMappedFileByOffset",
    seeds=("000_26b83a4251c26823.txt",),
)
def index_window(
    offset: int,
    min_logic_offset: int,
    files: Sequence[tuple[int, int]],
    file_size: int,
) -> tuple[int, int, int] | None:
    """The index window holds the entries from offset to the written end of the one consume-queue
    file covering it (never crossing a file), or does not exist.

    `files` are (start byte, written bytes) of the queue's files in order; the answer is
    (file number, first byte, end byte) within that file.

    pre: offset >= 0 and file_size > 0
    post: __return__ is None or __return__[1] < __return__[2]
    """
    pos = offset * CQ_STORE_UNIT_SIZE
    # Verify the position is not below the queue's min
    if pos < min_logic_offset:
        return None
    for number, (start, written) in enumerate(files):
        # Verify this is the file covering the position, and the entry was written
        if start <= pos < start + file_size:
            rel = pos % file_size
            return (number, rel, written) if rel < written else None
    return None


@rule(
    "STORE-17",
    source="DefaultMessageStore.getMessage; GetMessageResult",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt"),
)
def buffer_total_size(sizes: Sequence[int]) -> int:
    """A result carries its status, offsets, the returned records in index order, their total
    size and count, and the slave suggestion.

    post: __return__ == sum(sizes)
    """
    return sum(sizes)


@rule(
    "STORE-18",
    source="CommitLog.DefaultAppendMessageCallback.doAppend; ReputMessageService",
    seeds=(),
)
def assign_queue_offset(counter: int, sys_flag: int) -> tuple[int, int]:
    """A non-transactional or committed message takes the queue's counter as its queue offset and
    increments it; a prepared or rolled-back one gets 0 and is never dispatched.

    pre: counter >= 0
    post: __return__ == ((counter, counter + 1) if is_dispatched_type(sys_flag) else (0, counter))
    """
    if is_dispatched_type(sys_flag):
        return (counter, counter + 1)
    return (0, counter)


@rule(
    "STORE-19",
    source="CommitLog.getMinOffset; ConsumeQueue.deleteExpiredFile, correctMinOffset",
    seeds=(),
)
def corrected_min_logic_offset(
    first_file_start: int, first_file_entries: Sequence[CQEntry], commit_log_min: int, current: int
) -> int:
    """After expiry a queue's min moves to the first entry of its first remaining file still backed
    by the commit log, or stays where it was when there is none.

    pre: first_file_start >= 0
    post: __return__ == current or __return__ >= first_file_start
    """
    for i, (phys, _size, _tags) in enumerate(first_file_entries):
        # Verify the entry still points into the commit log
        if phys >= commit_log_min:
            return first_file_start + i * CQ_STORE_UNIT_SIZE
    return current


def expired_consume_queue_files(last_entry_phys: Sequence[int], commit_log_min: int) -> int:
    """How many leading consume-queue files expiry deletes: while the last entry of a file (never
    the last file) points below the commit-log min (STORE-19)."""
    count = 0
    for phys in last_entry_phys[:-1]:
        if phys >= commit_log_min:
            break
        count += 1
    return count


@rule(
    "STORE-20",
    source="CommitLog.getMaxOffset; MappedFileQueue.getMaxOffset",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt"),
)
def max_phy_offset(last_file_start: int | None, last_file_written: int) -> int:
    """The commit log's max offset is the start of its last file plus that file's written bytes,
    or 0 without a file.

    pre: last_file_written >= 0
    post: __return__ >= 0 if last_file_start is None or last_file_start >= 0 else True
    """
    return 0 if last_file_start is None else last_file_start + last_file_written


__all__ = [
    "CQ_EXT_MAX_ADDRESS",
    "SEED_003",
    "CQEntry",
    "ScanState",
    "assign_queue_offset",
    "buffer_total_size",
    "classify_offset",
    "commit_log_roll_next_file",
    "consume_queue_roll_next_file",
    "corrected_min_logic_offset",
    "expired_consume_queue_files",
    "final_scan_status",
    "find_consume_queue",
    "index_window",
    "initial_get_message_values",
    "max_phy_offset",
    "next_offset_correction",
    "overflow_one_next_offset",
    "queue_min_max_offsets",
    "scan_entry",
    "scan_next_begin_offset",
    "scan_window",
    "store_can_serve",
    "suggest_pulling_from_slave",
]
