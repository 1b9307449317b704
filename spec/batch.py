"""BATCH — how much one pull scans and returns (DefaultMessageStore.isTheBatchFull and friends)."""

from __future__ import annotations

import attrs

from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import IllegalCapacityError
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

SEEDS_GET_MESSAGE = (
    "000_26b83a4251c26823.txt",
    "002_c88c8921902728c1.txt",
    "004_60fc00b6c6a023ff.txt",
)
MIN_FILTER_BYTES = 16_000


def java_int(value: int) -> int:
    """Wrap an integer to Java's signed 32-bit int."""
    v = value & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


@attrs.frozen
class BatchLimits:
    """The four transfer limits isTheBatchFull compares against (MessageStoreConfig)."""

    max_transfer_bytes_on_message_in_memory: int = 262_144
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 65_536
    max_transfer_count_on_message_in_disk: int = 8

    @classmethod
    def of(cls, config: StoreConfig) -> BatchLimits:
        """The limits of a store configuration."""
        return cls(
            config.max_transfer_bytes_on_message_in_memory,
            config.max_transfer_count_on_message_in_memory,
            config.max_transfer_bytes_on_message_in_disk,
            config.max_transfer_count_on_message_in_disk,
        )


@rule(
    "BATCH-1",
    source="DefaultMessageStore.getMessage",
    seeds=("000_26b83a4251c26823.txt", "004_60fc00b6c6a023ff.txt"),
)
def max_filter_message_count(max_msg_nums: int) -> int:
    """A pull examines at most max(16000, maxMsgNums × 20) bytes of consume-queue window, filtered
    and skipped entries included.

    pre: -(2**31) <= max_msg_nums < 2**31
    post: __return__ >= 16000
    """
    return max(MIN_FILTER_BYTES, java_int(max_msg_nums * 20))


@rule("BATCH-2", source="DefaultMessageStore.isTheBatchFull", seeds=("000_26b83a4251c26823.txt",))
def is_the_batch_full(
    size_py: int,
    max_msg_nums: int,
    buffer_total: int,
    message_total: int,
    is_in_disk: bool,
    limits: BatchLimits,
) -> bool:
    """An entry ends the batch, before it is filtered, when something was returned and either
    maxMsgNums messages are returned or the entry's in-disk or in-memory byte or count limit is
    reached.

    pre: size_py >= 0 and buffer_total >= 0 and message_total >= 0
    post: not __return__ if buffer_total == 0 or message_total == 0 else True
    """
    # Something was returned: the first message always fits.
    if buffer_total == 0 or message_total == 0:
        return False
    # Check that maxMsgNums is not reached.
    if max_msg_nums <= message_total:
        return True
    if is_in_disk:
        # The on-disk byte and count limits.
        if buffer_total + size_py > limits.max_transfer_bytes_on_message_in_disk:
            return True
        return message_total > limits.max_transfer_count_on_message_in_disk - 1
    # The in-memory byte and count limits.
    if buffer_total + size_py > limits.max_transfer_bytes_on_message_in_memory:
        return True
    return message_total > limits.max_transfer_count_on_message_in_memory - 1


@rule(
    "BATCH-3",
    source="DefaultMessageStore.checkInDiskByCommitOffset; StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE",
    seeds=SEEDS_GET_MESSAGE,
)
def check_in_disk_by_commit_offset(offset_py: int, max_offset_py: int, memory: int) -> bool:
    """An entry counts as on disk when it lies more than accessMessageInMemoryMaxRatio % of the
    physical memory behind the commit-log head.

    post: __return__ == (max_offset_py - offset_py > memory)
    """
    return max_offset_py - offset_py > memory


# [4.7]
@rule(
    "BATCH-4",
    source="DefaultMessageStore.getMessage; GetMessageResult(int)",
    seeds=("000_26b83a4251c26823.txt",),
    profiles=(Profile.V4_7,),
    versions="4.9.7 pre-sizes the result list with maxMsgNums, so a negative maxMsgNums throws "
    "(IllegalArgumentException: Illegal Capacity) once a window exists; 4.7.1 behaves like 0.",
)
def check_result_capacity_v47(max_msg_nums: int) -> int:
    """A pull returns its first message whatever maxMsgNums is, so maxMsgNums 0 or negative
    returns at most one message.

    post: __return__ >= 1
    """
    return max(1, max_msg_nums)


# [Modified in 4.9]
@rule(
    "BATCH-4",
    source="DefaultMessageStore.getMessage; GetMessageResult(int)",
    seeds=("000_26b83a4251c26823.txt",),
    profiles=(Profile.V4_9,),
)
def check_result_capacity_v49(max_msg_nums: int) -> int:
    """A pull returns its first message whatever maxMsgNums is, except that a negative maxMsgNums
    fails with Illegal Capacity once a window exists.

    raises: IllegalCapacityError
    post: __return__ >= 1
    """
    # The result list can be pre-sized with maxMsgNums.
    if max_msg_nums < 0:
        raise IllegalCapacityError(max_msg_nums)
    return max(1, max_msg_nums)


class BatchRules(Rules):
    """The BATCH rules of one profile (see `spec.rules.Rules`)."""

    max_filter_message_count = stated(max_filter_message_count)
    is_the_batch_full = stated(is_the_batch_full)
    check_in_disk_by_commit_offset = stated(check_in_disk_by_commit_offset)
    check_result_capacity = stated(check_result_capacity_v47, check_result_capacity_v49)
