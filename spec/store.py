"""STORE — DefaultMessageStore.getMessage: statuses, offsets, the consume-queue window scan,
expiry and queue-offset assignment."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from pullspec.spec.batch import SEEDS_GET_MESSAGE
from pullspec.spec.errors import InvalidTypeError, require_bool
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE, is_dispatched_type
from pullspec.spec.message import StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated
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
    # Check that this broker may correct offsets.
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
    rules: StoreRules,
) -> tuple[GetMessageStatus, int] | None:
    """The first matching case decides: an empty queue, an offset below min, equal to max, past
    max, or else (min ≤ offset < max) a window lookup, signalled by None.

    `rules` are a profile's rules (a ruleset: a swapped STORE-8 applies here).

    post: __return__ is None or __return__[0] is not GetMessageStatus.FOUND
    post: (__return__ is None) == (max_offset != 0 and min_offset <= offset < max_offset)
    """

    def corr(new_offset: int) -> int:
        return next_offset_correction(offset, new_offset, broker_role, offset_check_in_slave)

    # Check that the queue holds anything.
    if max_offset == 0:
        return (GetMessageStatus.NO_MESSAGE_IN_QUEUE, corr(0))
    # Check that the offset is not below min.
    if offset < min_offset:
        return (GetMessageStatus.OFFSET_TOO_SMALL, corr(min_offset))
    # Check that the offset is not the caught-up max.
    if offset == max_offset:
        return (GetMessageStatus.OFFSET_OVERFLOW_ONE, corr(overflow_one_next_offset(offset)))
    # Check that the offset is not past max.
    if offset > max_offset:
        target = rules.overflow_badly_target(min_offset, max_offset)
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
    # Check that the position is not below the queue's min.
    if pos < min_logic_offset:
        return None
    for number, (start, written) in enumerate(files):
        # Check that this is the file covering the position, and the entry was written.
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
        # Check that the entry still points into the commit log.
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


@rule("STORE-21", source="CommitLog.getMessage; MappedFileQueue.findMappedFileByOffset", seeds=())
def commit_log_read_position(
    phys: int,
    size: int,
    file_size: int,
    first_file_start: int | None,
    last_file_start: int | None,
    last_file_read_position: int,
) -> int | None:
    """A commit-log read of `size` bytes at `phys` is served at phys mod F of the file holding
    phys, or — for phys 0 alone, once that file is deleted — at the start of the first remaining
    file, and only when those bytes lie within the file's read position; the answer is the
    commit-log offset read from, or None when nothing is read.

    This is RocketMQ's behaviour, not a design: CommitLog.getMessage asks
    findMappedFileByOffset(offset, offset == 0), which answers the first file when no file holds
    the offset. An implementer meets it when the first commit-log file has been deleted while a
    consume queue still holds an entry for commit-log offset 0 at or above its min offset
    (STORE-19 moves a queue's min only onto an entry the commit log still backs, so a queue whose
    entries all lie in deleted files keeps min 0): the pull then answers FOUND with the `size`
    bytes at the start of the oldest remaining file — another queue's record, cut or run on when
    the sizes differ — instead of skipping a removed record (MESSAGE_WAS_REMOVING, STORE-12).
    A file before the last is full (its end-of-file blank included): its read position is F;
    a read that runs into that blank returns what each release left there
    (RecordRules.with_blank_leftovers, spec.record).

    pre: phys >= 0 and 0 < size < 2**31 and file_size > 0 and last_file_read_position >= 0
    pre: (first_file_start is None) == (last_file_start is None)
    post: __return__ is None or __return__ == phys or (phys == 0 and __return__ == first_file_start)
    """
    if first_file_start is None or last_file_start is None:
        return None
    # A remaining file holds phys; at offset 0 the first remaining file serves instead.
    if first_file_start <= phys < last_file_start + file_size:
        file_start = phys - phys % file_size
    elif phys == 0:
        file_start = first_file_start
    else:
        return None
    position = phys % file_size
    readable = last_file_read_position if file_start == last_file_start else file_size
    # Check that all `size` bytes are written (MappedFile.selectMappedBuffer).
    if position + size > readable:
        return None
    return file_start + position


def whole_records_read(messages: Sequence[StoredMessage], entries: Sequence[CQEntry]) -> bool:
    """Whether every returned message is the whole record its consume-queue entry names, so the
    messages are exactly the bytes read; False when a read was served elsewhere or cut
    (STORE-21), and the bytes read must be observed instead (GetMessageResult.bodies)."""
    return all(
        m.commitlog_offset == phys and m.size == size
        for m, (phys, size, _) in zip(messages, entries, strict=True)
    )


@rule("STORE-22", source="DefaultMessageStore.lookMessageByOffset", seeds=())
def looked_up_record(read_position: int | None, record_start: bool) -> int | None:
    """A lookup by commit-log offset finds the record that starts where STORE-21 serves the read
    of its four-byte size, and nothing where no record starts (inside a record, in the end-of-file
    blank, past the written bytes) — so a send-back of such an offset answers SYSTEM_ERROR
    (RETRY-1 step 6); the answer is the record's offset or None.

    lookMessageByOffset reads the four bytes there as a record size and then reads and decodes
    that many bytes. Inside a record RocketMQ finds nothing when that size runs past the file's
    written bytes (remark "look message by offset failed, <offset>") and throws when it is
    negative (Buffer.limit; the remark is the exception's text). When a positive garbage size
    fits, MessageDecoder.decode, which checks no magic code, may turn the bytes that follow into a
    message — the one intentional difference of the spec (docs: differences from RocketMQ): the
    outcome depends on bytes the spec does not fix (timestamps, hosts, bodies), so the spec finds
    nothing there.

    post: __return__ is None or (record_start and __return__ == read_position)
    """
    # Check that the bytes read begin a record.
    if read_position is None or not record_start:
        return None
    return read_position


__all__ = [
    "CQ_EXT_MAX_ADDRESS",
    "SEED_003",
    "CQEntry",
    "ScanState",
    "assign_queue_offset",
    "buffer_total_size",
    "classify_offset",
    "commit_log_read_position",
    "commit_log_roll_next_file",
    "consume_queue_roll_next_file",
    "corrected_min_logic_offset",
    "expired_consume_queue_files",
    "final_scan_status",
    "find_consume_queue",
    "index_window",
    "initial_get_message_values",
    "looked_up_record",
    "max_phy_offset",
    "next_offset_correction",
    "overflow_one_next_offset",
    "queue_min_max_offsets",
    "scan_entry",
    "scan_next_begin_offset",
    "scan_window",
    "store_can_serve",
    "suggest_pulling_from_slave",
    "whole_records_read",
]


class StoreRules(Rules):
    """The changed STORE rule of the offset check (see `spec.rules.Rules`)."""

    overflow_badly_target = stated(overflow_badly_target_v47, overflow_badly_target_v49)


class RoleHolder:
    """The live broker role and offsetCheckInSlave switch of a store (STORE-6 reads both),
    switchable at run time; a store sets `_role` and `_offset_check_in_slave` when built.

    Example: after ``store.set_role(BrokerRole.SLAVE, False)`` a store's ``broker_role`` is
    SLAVE and an out-of-range offset is no longer corrected (STORE-6).
    """

    _role: BrokerRole
    _offset_check_in_slave: bool

    @property
    def broker_role(self) -> BrokerRole:
        """The live broker role."""
        return self._role

    @property
    def offset_check_in_slave(self) -> bool:
        """The live offsetCheckInSlave switch."""
        return self._offset_check_in_slave

    def set_role(self, broker_role: BrokerRole, offset_check_in_slave: bool) -> None:
        """Switch the broker role and offsetCheckInSlave at run time (bad input: a typed error
        and no change)."""
        if not isinstance(broker_role, BrokerRole):
            raise InvalidTypeError("broker_role", broker_role, "BrokerRole")
        require_bool("offset_check_in_slave", offset_check_in_slave)
        self._role = broker_role
        self._offset_check_in_slave = offset_check_in_slave
