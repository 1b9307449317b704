"""The interfaces every implementation (reference, fast, foreign) provides."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from pullspec.spec.errors import InvalidTypeError, conforms, require_int, require_str
from pullspec.spec.filter import ExpressionMessageFilter
from pullspec.spec.message import BrokerInnerMessage, MessageQueue, StoredMessage
from pullspec.spec.process_queue import ProcessQueueState
from pullspec.spec.results import GetMessageResult, PutMessageResult
from pullspec.spec.status import BrokerRole


@runtime_checkable
class MessageFilter(Protocol):
    """The broker's two-stage message filter (MessageFilter)."""

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """Decide from the consume-queue entry's tags code (None = unknown, matches TAG filters)."""
        ...

    def is_matched_by_commit_log(self, message: StoredMessage | None) -> bool:
        """Decide from the commit-log record."""
        ...


@runtime_checkable
class MessageStore(Protocol):
    """The broker's message store (DefaultMessageStore) as the pull path sees it."""

    @property
    def broker_role(self) -> BrokerRole:
        """The live broker role."""
        ...

    @property
    def offset_check_in_slave(self) -> bool:
        """The live offsetCheckInSlave switch."""
        ...

    def set_role(self, broker_role: BrokerRole, offset_check_in_slave: bool) -> None:
        """Switch the broker role and offsetCheckInSlave at run time."""
        ...

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """Append one message to the commit log and dispatch it to its consume queue."""
        ...

    def put_messages(self, msgs: Sequence[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Append several messages in order; the same results as put_message one by one."""
        ...

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Answer a pull: DefaultMessageStore.getMessage."""
        ...

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's min offset (an index)."""
        ...

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's max offset: one past the last dispatched entry."""
        ...

    def get_min_phy_offset(self) -> int:
        """The commit log's min offset, or -1 when it has no file."""
        ...

    def get_max_phy_offset(self) -> int:
        """The commit log's max offset."""
        ...

    def look_message_by_offset(self, commitlog_offset: int) -> StoredMessage | None:
        """The record at a commit-log offset, or None when it is not (or no longer) stored."""
        ...

    def check_in_disk_by_consume_offset(
        self, topic: str, queue_id: int, consume_offset: int
    ) -> bool:
        """Whether the consume-queue entry at `consume_offset` lies on disk (False when absent)."""
        ...

    def delete_expired_files(self) -> int:
        """Run one forced clean round: from the oldest, delete every commit-log file last written
        more than fileReservedTime hours ago (stopping at the first that is not, never the
        newest, at most deleteFilesBatchMax), then drop the consume-queue entries below the new
        commit-log minimum; answer how many files went."""
        ...


def check_get_message_arguments(
    group: object,
    topic: object,
    queue_id: object,
    offset: object,
    max_msg_nums: object,
    message_filter: object,
) -> None:
    """Refuse a `MessageStore.get_message` argument of the wrong type, naming it
    (InvalidTypeError), before the store looks at anything.

    Example: ``check_get_message_arguments("G", "T", 0, "5", 32, None)`` raises
    InvalidTypeError naming ``offset``.
    """
    if (
        type(group) is str
        and type(topic) is str
        and type(queue_id) is int
        and type(offset) is int
        and type(max_msg_nums) is int
        and (message_filter is None or type(message_filter) is ExpressionMessageFilter)
    ):
        return  # the usual exact types, told apart at once
    require_str("group", group)
    require_str("topic", topic)
    require_int("queue_id", queue_id)
    require_int("offset", offset)
    require_int("max_msg_nums", max_msg_nums)
    # The broker's own filter type first: a runtime Protocol isinstance costs microseconds.
    if (
        message_filter is not None
        and type(message_filter) is not ExpressionMessageFilter
        and not conforms(message_filter, MessageFilter)
    ):
        raise InvalidTypeError("message_filter", message_filter, "MessageFilter or None")


@runtime_checkable
class ProcessQueue(Protocol):
    """A consumer-side ProcessQueue in RocketMQ's vocabulary (PQ-1 … PQ-20), timed by a Clock."""

    def put_messages(self, msgs: Sequence[StoredMessage]) -> bool:
        """putMessage (PQ-2): cache `msgs`; True when the caller must dispatch consumption."""

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        """removeMessage (PQ-7): uncache `msgs`; the offset safe to commit, or −1."""

    def take_messages(self, batch_size: int) -> list[StoredMessage]:
        """takeMessages (PQ-8): move up to `batch_size` cached messages to the consuming tree."""

    def commit(self) -> int:
        """commit (PQ-9): release the consuming tree; its last offset + 1."""

    def rollback(self) -> None:
        """rollback (PQ-10): return the consuming tree to the cache."""

    def make_messages_to_consume_again(self, msgs: Sequence[StoredMessage]) -> None:
        """makeMessageToConsumeAgain (PQ-11)."""

    def is_lock_expired(self) -> bool:
        """isLockExpired (PQ-15) at the clock's now."""

    def is_pull_expired(self) -> bool:
        """isPullExpired (PQ-16) at the clock's now."""

    def has_temp_message(self) -> bool:
        """hasTempMessage (PQ-12)."""

    def clear(self) -> None:
        """clear (PQ-12)."""

    def inc_try_unlock_times(self) -> None:
        """incTryUnlockTimes (PQ-20)."""

    def snapshot(self) -> ProcessQueueState:
        """The whole state, frozen."""

    @property
    def msg_count(self) -> int:
        """msgCount (PQ-13)."""

    @property
    def msg_size(self) -> int:
        """msgSize: body bytes (PQ-13)."""

    @property
    def max_span(self) -> int:
        """getMaxSpan (PQ-6)."""

    @property
    def queue_offset_max(self) -> int:
        """queueOffsetMax (PQ-4)."""

    @property
    def msg_acc_cnt(self) -> int:
        """msgAccCnt (PQ-5)."""

    @property
    def consuming(self) -> bool:
        """The dispatch flag (PQ-3)."""

    @property
    def cached_offsets(self) -> list[int]:
        """The keys of msgTreeMap, ascending."""

    @property
    def consuming_offsets(self) -> list[int]:
        """The keys of consumingMsgOrderlyTreeMap, ascending."""

    @property
    def last_consume_timestamp(self) -> int:
        """lastConsumeTimestamp (PQ-17)."""

    @property
    def try_unlock_times(self) -> int:
        """tryUnlockTimes (PQ-20)."""

    @property
    def dropped(self) -> bool:
        """dropped (PQ-14)."""

    @dropped.setter
    def dropped(self, value: bool) -> None: ...

    @property
    def locked(self) -> bool:
        """locked (PQ-15)."""

    @locked.setter
    def locked(self, value: bool) -> None: ...

    @property
    def last_lock_timestamp(self) -> int:
        """lastLockTimestamp (PQ-15)."""

    @last_lock_timestamp.setter
    def last_lock_timestamp(self, value: int) -> None: ...

    @property
    def last_pull_timestamp(self) -> int:
        """lastPullTimestamp (PQ-16)."""

    @last_pull_timestamp.setter
    def last_pull_timestamp(self, value: int) -> None: ...


@runtime_checkable
class ConsumeMessageService(Protocol):
    """Where the pull callback hands found messages (ConsumeMessageService)."""

    def submit_consume_request(
        self,
        msgs: Sequence[StoredMessage],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        """Consume `msgs` of `message_queue` (CONC-2 / ORDER-3)."""
        ...


@runtime_checkable
class BrokerLockClient(Protocol):
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ as a client sends them to the master of one broker
    (REBAL-19..21); a broker without a master raises, as a failed RPC does."""

    def has_master(self, broker_name: str) -> bool:
        """findBrokerAddressInSubscribe(brokerName, MASTER_ID, true) found an address."""
        ...

    def lock_batch(
        self, broker_name: str, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the queues the broker granted (LEASE-6); raises on RPC failure."""
        ...

    def unlock_batch(
        self,
        broker_name: str,
        group: str,
        client_id: str,
        mqs: Iterable[MessageQueue],
        oneway: bool,
    ) -> None:
        """UNLOCK_BATCH_MQ (LEASE-7); raises when the broker cannot be reached, even one-way."""
        ...
