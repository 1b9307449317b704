"""The consumption vocabulary shared by CONC, ORDER and REBAL: listener statuses, consume
contexts, the client-side constants of rulebook §11 (consumption and rebalance rows), the
namespace helpers and the broker queue locks as a client sees them (`BrokerLockClient`). The
client's send-back (CONC-10/11, ORDER-15) is in `spec.client_send_back`.

Contexts are mutable on purpose: a listener reports through them (setAckIndex,
setDelayLevelWhenNextConsume, setAutoCommit, setSuspendCurrentQueueTimeMillis), exactly as a
Java listener does; the rule functions only read them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from pullspec.spec.errors import (
    ErrorKind,
    InvalidArgumentError,
    InvalidTypeError,
    PullspecError,
    require_int,
    require_str,
)
from pullspec.spec.message import (
    MessageQueue,
    StoredMessage,
)

# --- constants (rulebook-client §11) -----------------------------------------------------------

#: Integer.MAX_VALUE: the initial ackIndex (CONC-4) and the orderly unbounded retry (ORDER-14).
JAVA_INT_MAX = 2**31 - 1
#: CONC-1: the consume pool's keep-alive (no effect: the pool never grows past its core).
CONSUME_POOL_KEEP_ALIVE_MILLIS = 60_000
#: CONC-1: updateCorePoolSize accepts 0 < n ≤ Short.MAX_VALUE.
MAX_CORE_POOL_SIZE = 32_767
#: CONC-3: both concurrent resubmissions (failed send-back batch, rejected request) wait 5 s.
RESUBMIT_DELAY_MILLIS = 5_000
#: CONC-11: the CONSUMER_SEND_MSG_BACK RPC timeout.
SEND_BACK_RPC_TIMEOUT_MILLIS = 5_000
#: CONC-11: the concurrent consumer's maxReconsumeTimes when it is −1 (the default).
DEFAULT_MAX_RECONSUME_TIMES_CONCURRENTLY = 16
#: CONC-11, ORDER-15: the client-built retry message's delay level is this + reconsumeTimes.
CLIENT_SEND_BACK_BASE_DELAY_LEVEL = 3
#: ORDER-1: rocketmq.client.maxTimeConsumeContinuously, one ConsumeRequest's time slice.
MAX_TIME_CONSUME_CONTINUOUSLY_MILLIS = 60_000
#: ORDER-12: the suspend time is clamped into [10, 30000].
MIN_SUSPEND_MILLIS = 10
MAX_SUSPEND_MILLIS = 30_000
#: ORDER-12: the context's "use the consumer's default suspend time" value.
SUSPEND_USE_DEFAULT = -1
#: ORDER-5/ORDER-13: the resubmit delays after a time slice or a re-acquired lock, and after a
#: failed one; tryLockLaterAndReconsume waits 100 at the gate and 10 inside the loop.
RESUBMIT_AFTER_SLICE_MILLIS = 10
RESUBMIT_AFTER_LOCK_FAILED_MILLIS = 3_000
TRY_LOCK_LATER_AT_GATE_MILLIS = 100
TRY_LOCK_LATER_IN_LOOP_MILLIS = 10
#: ORDER-1, REBAL-20: rocketmq.client.rebalance.lockInterval and the first run's delay.
REBALANCE_LOCK_INTERVAL_MILLIS = 20_000
REBALANCE_LOCK_INITIAL_DELAY_MILLIS = 1_000
#: REBAL-22, PQ-15: rocketmq.client.rebalance.lockMaxLiveTime, the client-side lease.
CLIENT_LOCK_MAX_LIVE_TIME_MILLIS = 30_000
#: REBAL-22, LEASE-1: the broker-side lease (context only).
BROKER_LOCK_MAX_LIVE_TIME_MILLIS = 60_000
#: REBAL-19..21: LOCK_BATCH_MQ / UNLOCK_BATCH_MQ RPC timeout.
LOCK_RPC_TIMEOUT_MILLIS = 1_000
#: REBAL-14: how long removeUnnecessaryMessageQueue waits for the consume lock.
CONSUME_LOCK_TRY_MILLIS = 1_000
#: REBAL-15: rocketmq.client.unlockDelayTimeMills.
UNLOCK_DELAY_TIME_MILLS = 20_000
#: REBAL-1: rocketmq.client.rebalance.waitInterval.
REBALANCE_WAIT_INTERVAL_MILLIS = 20_000
#: REBAL-5: GET_CONSUMER_LIST_BY_GROUP timeout (4.9: mqClientApiTimeout, same default).
CONSUMER_LIST_RPC_TIMEOUT_MILLIS = 3_000
#: REBAL-9, PQ-16: rocketmq.client.pull.pullMaxIdleTime.
PULL_MAX_IDLE_TIME_MILLIS = 120_000
#: MixAll.RETRY_GROUP_TOPIC_PREFIX and MixAll.DLQ_GROUP_TOPIC_PREFIX.
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
#: NamespaceUtil.NAMESPACE_SEPARATOR.
NAMESPACE_SEPARATOR = "%"
#: MessageConst.PROPERTY_TRANSACTION_PREPARED, cleared on every client-built retry message.
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"


def retry_topic(group: str) -> str:
    """MixAll.getRetryTopic: `%RETRY%<group>`."""
    return RETRY_GROUP_TOPIC_PREFIX + require_str("group", group)


# --- statuses ------------------------------------------------------------------------------------


class ConsumeConcurrentlyStatus(enum.Enum):
    """What a MessageListenerConcurrently returns."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """What a MessageListenerOrderly returns; COMMIT and ROLLBACK are deprecated in RocketMQ and
    only meaningful with autoCommit false (ORDER-9/10)."""

    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class ConsumeReturnType(enum.Enum):
    """The hook's CONSUME_CONTEXT_TYPE (CONC-5, ORDER-8); it never changes the status."""

    SUCCESS = "SUCCESS"
    TIME_OUT = "TIME_OUT"
    EXCEPTION = "EXCEPTION"
    RETURNNULL = "RETURNNULL"
    FAILED = "FAILED"


# --- contexts ------------------------------------------------------------------------------------


def _int_setter(_instance: object, attribute: attrs.Attribute[int], value: int) -> int:
    return require_int(attribute.name, value)


def _bool_setter(_instance: object, attribute: attrs.Attribute[bool], value: bool) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(attribute.name, value, "bool")
    return value


def _check_int(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    _int_setter(instance, attribute, value)


def _check_bool(instance: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    _bool_setter(instance, attribute, value)


@attrs.define
class ConsumeConcurrentlyContext:
    """ConsumeConcurrentlyContext: built per ConsumeRequest (CONC-4); the listener may set
    `ack_index` (CONC-6) and `delay_level_when_next_consume` (CONC-10)."""

    message_queue: MessageQueue
    #: 0: the broker picks 3 + reconsumeTimes; < 0: straight to the DLQ (broker send-back only).
    delay_level_when_next_consume: int = attrs.field(
        default=0, validator=_check_int, on_setattr=_int_setter
    )
    #: Integer.MAX_VALUE: "all acknowledged" unless the listener says otherwise.
    ack_index: int = attrs.field(default=JAVA_INT_MAX, validator=_check_int, on_setattr=_int_setter)


@attrs.define
class ConsumeOrderlyContext:
    """ConsumeOrderlyContext: built per listener call (ORDER-7); the listener may switch
    `auto_commit` off (ORDER-10) or set its own suspend time (ORDER-12)."""

    message_queue: MessageQueue
    auto_commit: bool = attrs.field(default=True, validator=_check_bool, on_setattr=_bool_setter)
    #: −1: use the consumer's suspendCurrentQueueTimeMillis (ORDER-12).
    suspend_current_queue_time_millis: int = attrs.field(
        default=SUSPEND_USE_DEFAULT, validator=_check_int, on_setattr=_int_setter
    )


#: A scripted MessageListenerConcurrently: it may return None or raise (CONC-5).
ConcurrentListener = Callable[
    [Sequence[StoredMessage], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus | None
]
#: A scripted MessageListenerOrderly: it may return None or raise (ORDER-8).
OrderlyListener = Callable[
    [Sequence[StoredMessage], ConsumeOrderlyContext], ConsumeOrderlyStatus | None
]


# --- message helpers ---------------------------------------------------------------------------


def put_property(msg: StoredMessage, name: str, value: str) -> StoredMessage:
    """A copy of `msg` with property `name` set to `value` (Java mutates the cached object)."""
    return attrs.evolve(msg, properties={**dict(msg.properties), name: value})


# --- periodic tasks and shutdown -----------------------------------------------------------------


@attrs.frozen
class PeriodicTask:
    """A scheduleAtFixedRate task: first run after `initial_delay_ms`, then every `period_ms`;
    `survives_exception` is false where an escaping exception cancels it for good."""

    initial_delay_ms: int
    period_ms: int
    survives_exception: bool


class ShutdownStep(enum.Enum):
    """One step of a consume service's shutdown (CONC-14, ORDER-17)."""

    STOP = "STOP"
    SCHEDULER = "SCHEDULER"
    CONSUME_POOL = "CONSUME_POOL"
    CLEANER = "CLEANER"
    UNLOCK_ALL = "UNLOCK_ALL"


# --- namespaces (NamespaceUtil) ------------------------------------------------------------------


def _prefix_of(resource: str) -> str:
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix
    return ""


def without_namespace(resource: str, namespace: str | None) -> str:
    """NamespaceUtil.withoutNamespace for plain, %RETRY% and %DLQ% resources: strip
    `<namespace>%` after the prefix; anything else is returned unchanged.

    System resources (RocketMQ's own topics) are out of scope: consumers here never use them.
    """
    if not namespace or not resource:
        return resource
    prefix = _prefix_of(resource)
    rest = resource[len(prefix) :]
    marker = namespace + NAMESPACE_SEPARATOR
    return prefix + rest[len(marker) :] if rest.startswith(marker) else resource


def with_namespace(resource: str, namespace: str | None) -> str:
    """NamespaceUtil.wrapNamespace for plain, %RETRY% and %DLQ% resources: insert
    `<namespace>%` after the prefix unless it is already there."""
    if not namespace or not resource:
        return resource
    prefix = _prefix_of(resource)
    rest = resource[len(prefix) :]
    marker = namespace + NAMESPACE_SEPARATOR
    return resource if rest.startswith(marker) else prefix + marker + rest


# --- errors --------------------------------------------------------------------------------------


class IndexOutOfBoundsError(InvalidArgumentError):
    """Java's IndexOutOfBoundsException: a listener's ackIndex below −1 (CONC-6)."""

    java_exception = "IndexOutOfBoundsException"


class RejectedExecutionError(PullspecError):
    """Java's RejectedExecutionException: a consume service that was shut down refuses a
    ConsumeRequest (CONC-2/3, ORDER-3) and the caller (the pull callback) sees it."""

    kind = ErrorKind.REJECTED_EXECUTION
    java_exception = "RejectedExecutionException"

    def __init__(self, what: str) -> None:
        super().__init__(what)


# --- the interfaces a consume service and a rebalance talk to --------------------------------


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
