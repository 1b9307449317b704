"""STORE — DefaultMessageStore.getMessage: statuses, offsets, the consume-queue window scan,
expiry and queue-offset assignment."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs

from spec.batch import (
    SEEDS_GET_MESSAGE,
    BatchLimits,
    check_in_disk_by_commit_offset,
    is_the_batch_full,
    max_filter_message_count,
)
from spec.layout import CQ_STORE_UNIT_SIZE, is_dispatched_type
from spec.profiles import Profile
from spec.rules import rule
from spec.status import BrokerRole, GetMessageStatus

#: A tags code at or below this is a consume-queue-ext address, not a code (MAX_ADDR).
CQ_EXT_MAX_ADDRESS = -2_147_483_649
SEED_003 = "003_97f7c1df5f6104bc.txt"

Q = TypeVar("Q")

CQEntry = tuple[int, int, int]
"""A consume-queue entry: (phys, size, tags_code)."""


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
    queue answers NO_MESSAGE_IN_QUEUE and NO_MATCHED_LOGIC_QUEUE is unreachable."""
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


@rule(
    "STORE-15",
    source="CommitLog.rollNextFile",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"),
)
def commit_log_roll_next_file(phys: int, file_size: int) -> int:
    """After a missing record the scan skips to the next commit-log file, p + F − p mod F.

    pre: phys >= 0 and file_size > 0
    post: __return__ > phys and __return__ % file_size == 0
    """
    return phys + file_size - phys % file_size


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


@attrs.frozen
class ScanState:
    """The running state of a window scan (STORE-11): status, skip marker and counters."""

    status: GetMessageStatus = GetMessageStatus.NO_MATCHED_MESSAGE
    next_phy_file_start_offset: int | None = None
    max_phy_offset_pulling: int = 0
    scanned: int = 0
    buffer_total: int = 0
    returned: tuple[int, ...] = ()


@rule("STORE-12", source="DefaultMessageStore.getMessage", seeds=SEEDS_GET_MESSAGE)
def scan_entry(
    state: ScanState,
    position: int,
    entry: CQEntry,
    *,
    max_msg_nums: int,
    max_offset_py: int,
    memory: int,
    limits: BatchLimits,
    commit_log_file_size: int,
    matches_consume_queue: Callable[[int | None], bool],
    record_present: Callable[[int, int], bool],
    matches_commit_log: Callable[[int], bool],
) -> tuple[ScanState, bool]:
    """Each entry is read, skipped inside a vanished commit-log file, checked against the batch
    limits (which may end the scan before it), filtered by tag code, read from the commit log,
    filtered again and returned, in that order; the flag says the scan ended before it."""
    phys, size, tags_code = entry
    state = attrs.evolve(state, max_phy_offset_pulling=phys)
    counted = attrs.evolve(state, scanned=state.scanned + 1)
    # Verify the entry is not inside a commit-log file already found missing
    if state.next_phy_file_start_offset is not None and phys < state.next_phy_file_start_offset:
        return counted, False
    is_in_disk = check_in_disk_by_commit_offset(phys, max_offset_py, memory)
    # Verify the batch has room for this entry
    if is_the_batch_full(
        size, max_msg_nums, state.buffer_total, len(state.returned), is_in_disk, limits
    ):
        return state, True
    nothing_yet = not state.returned
    code = None if tags_code <= CQ_EXT_MAX_ADDRESS else tags_code  # no ext unit: the code is null
    # Verify the tag code matches the subscription
    if not matches_consume_queue(code):
        return (
            attrs.evolve(counted, status=GetMessageStatus.NO_MATCHED_MESSAGE)
            if nothing_yet
            else counted
        ), False
    # Verify the record is still in the commit log
    if not record_present(phys, size):
        skip_to = commit_log_roll_next_file(phys, commit_log_file_size)
        status = GetMessageStatus.MESSAGE_WAS_REMOVING if nothing_yet else counted.status
        return attrs.evolve(counted, status=status, next_phy_file_start_offset=skip_to), False
    # Verify the record passes the commit-log stage of the filter
    if not matches_commit_log(phys):
        return (
            attrs.evolve(counted, status=GetMessageStatus.NO_MATCHED_MESSAGE)
            if nothing_yet
            else counted
        ), False
    return (
        attrs.evolve(
            counted,
            status=GetMessageStatus.FOUND,
            next_phy_file_start_offset=None,
            buffer_total=state.buffer_total + size,
            returned=(*state.returned, position),
        ),
        False,
    )


@rule("STORE-11", source="DefaultMessageStore.getMessage", seeds=SEEDS_GET_MESSAGE)
def scan_window(
    window: Sequence[CQEntry],
    *,
    max_msg_nums: int,
    max_offset_py: int,
    memory: int,
    limits: BatchLimits,
    commit_log_file_size: int,
    matches_consume_queue: Callable[[int | None], bool],
    record_present: Callable[[int, int], bool],
    matches_commit_log: Callable[[int], bool],
) -> ScanState:
    """The scan starts as NO_MATCHED_MESSAGE and examines window entries while within the window
    and the scan budget, stopping early only at an entry that makes the batch full."""
    budget_entries = -(-max_filter_message_count(max_msg_nums) // CQ_STORE_UNIT_SIZE)
    state = ScanState()
    for position, entry in enumerate(window):
        # Verify the scan budget is not used up
        if position >= budget_entries:
            break
        state, stop = scan_entry(
            state,
            position,
            entry,
            max_msg_nums=max_msg_nums,
            max_offset_py=max_offset_py,
            memory=memory,
            limits=limits,
            commit_log_file_size=commit_log_file_size,
            matches_consume_queue=matches_consume_queue,
            record_present=record_present,
            matches_commit_log=matches_commit_log,
        )
        if stop:
            break
    return state


@rule("STORE-13", source="DefaultMessageStore.getMessage", seeds=("000_26b83a4251c26823.txt",))
def final_scan_status(state: ScanState) -> GetMessageStatus:
    """A scan is FOUND iff it returned a message; otherwise its status is the last of
    NO_MATCHED_MESSAGE and MESSAGE_WAS_REMOVING written.

    post: __return__ is state.status
    """
    return state.status


@rule("STORE-14", source="DefaultMessageStore.getMessage", seeds=SEEDS_GET_MESSAGE)
def scan_next_begin_offset(offset: int, scanned: int) -> int:
    """After a scan nextBeginOffset = offset + entries examined, uncorrected even on a slave.

    pre: scanned >= 0
    post: __return__ == offset + scanned
    """
    return offset + scanned


@rule(
    "STORE-16",
    source="DefaultMessageStore.getMessage",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt"),
)
def suggest_pulling_from_slave(
    max_offset_py: int, max_phy_offset_pulling: int, memory: int
) -> bool:
    """A scan suggests the slave when the last examined entry lies more than the memory share
    behind the commit-log head.

    post: __return__ == (max_offset_py - max_phy_offset_pulling > memory)
    """
    return max_offset_py - max_phy_offset_pulling > memory


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
