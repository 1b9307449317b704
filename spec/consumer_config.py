"""The push consumer's configuration (DefaultMQPushConsumer + ClientConfig) with RocketMQ's
defaults, the enums it uses and the client-side constants of the pull path (rulebook §11)."""

from __future__ import annotations

import datetime
import enum
import re
from typing import Any

import attrs

from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, check_bool, require_int
from pullspec.spec.evolve import evolve
from pullspec.spec.rules import rule

# --- constants (rulebook §11) -----------------------------------------------------------------

#: FLOW-4: re-enqueue delay of a paused consumer.
PULL_TIME_DELAY_MILLS_WHEN_SUSPEND = 1000
#: FLOW-6..8: re-enqueue delay under cache flow control (renamed …CACHE_FLOW_CONTROL in 4.9).
PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL = PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
#: RESULT-13: re-enqueue delay after a broker FLOW_CONTROL (215) answer; profile 4.9 only.
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
#: The impl field initialiser of E; the constructor overwrites it with ClientConfig's 1000 (FLOW-3).
PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION_IMPL_INITIALISER = 3000
#: REQ-5: the longest the broker may hold a pull (suspendTimeoutMillis).
BROKER_SUSPEND_MAX_TIME_MILLIS = 15000
#: REQ-5: the client's RPC timeout of an asynchronous pull.
CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND = 30000
#: RESULT-10: delay of the OFFSET_ILLEGAL fix-up task.
OFFSET_ILLEGAL_FIX_UP_DELAY_MILLIS = 10000
#: FLOW-9: the flow-control warnings fire on the 1st, 1001st, … occurrence.
FLOW_CONTROL_LOG_INTERVAL = 1000
#: OFFSET-8: persistAllConsumerOffset first runs this long after start.
PERSIST_CONSUMER_OFFSET_INITIAL_DELAY_MILLIS = 10000
#: OFFSET-5/6: offset query and update RPC timeout.
OFFSET_RPC_TIMEOUT_MILLIS = 5000
#: PULLQ-10: how long shutdown waits for the pull scheduler.
PULL_SCHEDULER_SHUTDOWN_WAIT_MILLIS = 1000
#: MixAll.MASTER_ID.
MASTER_ID = 0
#: REBAL-18: the default consumeTimestamp lies this far before construction.
CONSUME_TIMESTAMP_DEFAULT_LAG_MILLIS = 30 * 60 * 1000

_TIMESTAMP = re.compile(r"[0-9]{14}")


class ConsumeMode(enum.Enum):
    """Which listener the consumer has: MessageListenerConcurrently or MessageListenerOrderly."""

    CONCURRENTLY = "CONCURRENTLY"
    ORDERLY = "ORDERLY"


class MessageModel(enum.Enum):
    """MessageModel: offsets on the broker (CLUSTERING) or in a local file (BROADCASTING)."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    """ConsumeFromWhere, in RocketMQ's declaration order; three values are deprecated aliases of
    CONSUME_FROM_LAST_OFFSET (REBAL-17)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = (
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    )
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"

    @property
    def deprecated(self) -> bool:
        """True for the three values RocketMQ marks @Deprecated."""
        return self in _DEPRECATED


_DEPRECATED = frozenset(
    {
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
        ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET,
    }
)


class ReadOffsetType(enum.Enum):
    """ReadOffsetType: where OffsetStore.readOffset looks (OFFSET-4)."""

    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


# --- FLOW-15 ------------------------------------------------------------------------------------

#: FLOW-15: the inclusive ranges checkConfig enforces at start().
CHECKED_RANGES: dict[str, tuple[int, int]] = {
    "pull_threshold_for_queue": (1, 65535),
    "pull_threshold_size_for_queue": (1, 1024),
    "pull_threshold_for_topic": (1, 6553500),
    "pull_threshold_size_for_topic": (1, 102400),
    "consume_concurrently_max_span": (1, 65535),
    "pull_interval": (0, 65535),
    "pull_batch_size": (1, 1024),
    "consume_message_batch_max_size": (1, 1024),
    "consume_thread_min": (1, 1000),
    "consume_thread_max": (1, 1000),
}
#: FLOW-15: settings where −1 means "off" and is accepted besides the range.
OFF_WHEN_MINUS_ONE = frozenset({"pull_threshold_for_topic", "pull_threshold_size_for_topic"})


@rule("FLOW-15", source="DefaultMQPushConsumerImpl.checkConfig")
def in_checked_range(setting: str, value: int) -> bool:
    """checkConfig accepts a numeric setting only inside its inclusive range, the per-topic
    thresholds also accepting −1 (off).

    pre: setting in CHECKED_RANGES
    post: not __return__ or value == -1 or CHECKED_RANGES[setting][0] <= value
    post: not __return__ or value == -1 or value <= CHECKED_RANGES[setting][1]
    post: __return__ or value != -1 or setting not in OFF_WHEN_MINUS_ONE
    """
    # -1 switches the per-topic thresholds off rather than failing the range check.
    if value == -1 and setting in OFF_WHEN_MINUS_ONE:
        return True
    low, high = CHECKED_RANGES[setting]
    return low <= value <= high


def _checked(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    require_int(attribute.name, value)
    if not in_checked_range(attribute.name, value):
        low, high = CHECKED_RANGES[attribute.name]
        off = " or -1" if attribute.name in OFF_WHEN_MINUS_ONE else ""
        raise InvalidArgumentError(attribute.name, value, f"out of range [{low}, {high}]{off}")


def _int(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    require_int(attribute.name, value)


def _non_negative(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if require_int(attribute.name, value) < 0:
        raise InvalidArgumentError(attribute.name, value, "must be >= 0")


def _positive(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if require_int(attribute.name, value) <= 0:
        raise InvalidArgumentError(attribute.name, value, "must be > 0")


def _enum(kind: type[enum.Enum]) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, kind):
            raise InvalidTypeError(attribute.name, value, kind.__name__)

    return check


def _timestamp(instance: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None:
        parse_consume_timestamp(value)


# --- REBAL-18 -----------------------------------------------------------------------------------


def parse_consume_timestamp(text: object, tz: datetime.tzinfo = datetime.UTC) -> int:
    """Parse a `yyyyMMddHHmmss` consumeTimestamp in zone `tz` (the JVM's local zone; the spec
    fixes it by parameter) into epoch milliseconds, or raise InvalidArgumentError naming it.

    Java's lenient SimpleDateFormat also accepts some malformed strings (e.g. month 13 rolls
    over); the spec accepts only exactly 14 digits that form a real date and time.
    """
    if not isinstance(text, str):
        raise InvalidTypeError("consume_timestamp", text, "str")
    if not _TIMESTAMP.fullmatch(text):
        raise InvalidArgumentError("consume_timestamp", text, "must be yyyyMMddHHmmss")
    try:
        parsed = datetime.datetime.strptime(text, "%Y%m%d%H%M%S").replace(tzinfo=tz)
    except ValueError:
        raise InvalidArgumentError("consume_timestamp", text, "not a valid date") from None
    return int(parsed.timestamp()) * 1000


@rule(
    "REBAL-18",
    source="DefaultMQPushConsumer.<init> (UtilAll.timeMillisToHumanString3)",
    seeds=("002_c88c8921902728c1.txt",),
)
def default_consume_timestamp(construction_ms: int, tz: datetime.tzinfo = datetime.UTC) -> str:
    """The default consumeTimestamp is the consumer's construction time minus 30 minutes, written
    as `yyyyMMddHHmmss` in the local zone with second precision and fixed at construction.

    pre: 0 <= construction_ms < 253_402_300_799_000
    pre: tz is datetime.UTC
    post: len(__return__) == 14 and __return__.isdigit()
    """
    moment = (construction_ms - CONSUME_TIMESTAMP_DEFAULT_LAG_MILLIS) // 1000
    return datetime.datetime.fromtimestamp(moment, tz).strftime("%Y%m%d%H%M%S")


# --- the configuration -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ConsumerConfig:
    """DefaultMQPushConsumer's settings (plus the ClientConfig ones the pull path reads) with
    RocketMQ's defaults; construction is checkConfig (FLOW-15)."""

    consume_mode: ConsumeMode = attrs.field(
        default=ConsumeMode.CONCURRENTLY, validator=_enum(ConsumeMode)
    )
    message_model: MessageModel = attrs.field(
        default=MessageModel.CLUSTERING, validator=_enum(MessageModel)
    )
    consume_from_where: ConsumeFromWhere = attrs.field(
        default=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, validator=_enum(ConsumeFromWhere)
    )
    #: `yyyyMMddHHmmss`; None stands for RocketMQ's default, construction time − 30 min, which
    #: the owner of the clock resolves with `default_consume_timestamp` (REBAL-18).
    consume_timestamp: str | None = attrs.field(default=None, validator=_timestamp)
    consume_thread_min: int = attrs.field(default=20, validator=_checked)
    consume_thread_max: int = attrs.field(default=20, validator=_checked)
    adjust_thread_pool_nums_threshold: int = attrs.field(default=100_000, validator=_int)
    consume_concurrently_max_span: int = attrs.field(default=2000, validator=_checked)
    pull_threshold_for_queue: int = attrs.field(default=1000, validator=_checked)
    #: MiB, compared with floor(msgSize / 1048576) (FLOW-5, FLOW-7).
    pull_threshold_size_for_queue: int = attrs.field(default=100, validator=_checked)
    pull_threshold_for_topic: int = attrs.field(default=-1, validator=_checked)
    pull_threshold_size_for_topic: int = attrs.field(default=-1, validator=_checked)
    pull_interval: int = attrs.field(default=0, validator=_checked)
    consume_message_batch_max_size: int = attrs.field(default=1, validator=_checked)
    pull_batch_size: int = attrs.field(default=32, validator=_checked)
    post_subscription_when_pull: bool = attrs.field(default=False, validator=check_bool)
    unit_mode: bool = attrs.field(default=False, validator=check_bool)
    max_reconsume_times: int = attrs.field(default=-1, validator=_int)
    suspend_current_queue_time_millis: int = attrs.field(default=1000, validator=_int)
    #: Minutes, not milliseconds.
    consume_timeout: int = attrs.field(default=15, validator=_int)
    await_termination_millis_when_shutdown: int = attrs.field(default=0, validator=_int)
    persist_consumer_offset_interval: int = attrs.field(default=5000, validator=_positive)
    #: E (FLOW-3): the value the impl copied from ClientConfig at construction.
    pull_time_delay_mills_when_exception: int = attrs.field(default=1000, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        if self.consume_thread_min > self.consume_thread_max:
            raise InvalidArgumentError(
                "consume_thread_min",
                self.consume_thread_min,
                f"is larger than consume_thread_max ({self.consume_thread_max})",
            )

    @property
    def orderly(self) -> bool:
        """True for an orderly consumer (consumeOrderly)."""
        return self.consume_mode is ConsumeMode.ORDERLY

    def with_queue_thresholds(
        self, pull_threshold_for_queue: int, pull_threshold_size_for_queue: int
    ) -> ConsumerConfig:
        """A copy with the per-queue thresholds replaced by FLOW-14's rewrite, not re-validated."""
        copy = evolve(self)
        # FLOW-15: the setters RocketMQ calls here bypass checkConfig, so a rewritten value may
        # lie outside the start-up range (e.g. a topic threshold of 100000 over one queue).
        count = require_int("pull_threshold_for_queue", pull_threshold_for_queue)
        size = require_int("pull_threshold_size_for_queue", pull_threshold_size_for_queue)
        object.__setattr__(copy, "pull_threshold_for_queue", count)
        object.__setattr__(copy, "pull_threshold_size_for_queue", size)
        return copy


@rule("FLOW-14", source="RebalancePushImpl.messageQueueChanged")
def rewrite_queue_thresholds(config: ConsumerConfig, process_queue_count: int) -> tuple[int, int]:
    """On a rebalance change with a non-empty table, each per-topic threshold that is not −1
    rewrites its per-queue threshold to max(1, topic value // number of process queues).

    pre: process_queue_count >= 0
    post: process_queue_count == 0 or config.pull_threshold_for_topic == -1 or __return__[0] >= 1
    post: config.pull_threshold_for_topic != -1 or __return__[0] == config.pull_threshold_for_queue
    """
    # The divisor counts every topic's process queues, the retry topic's included.
    if process_queue_count == 0:
        return config.pull_threshold_for_queue, config.pull_threshold_size_for_queue
    count = config.pull_threshold_for_queue
    size = config.pull_threshold_size_for_queue
    if config.pull_threshold_for_topic != -1:
        count = max(1, config.pull_threshold_for_topic // process_queue_count)
    if config.pull_threshold_size_for_topic != -1:
        size = max(1, config.pull_threshold_size_for_topic // process_queue_count)
    return count, size
