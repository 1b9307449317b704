"""The send-back, both sides: the client that hands a message it could not consume back to the
broker (CONC-10, CONC-11, ORDER-15) and the broker's consumerSendMsgBack (RETRY).

RETRY — the CONSUMER_SEND_MSG_BACK request and its answers, the steps taken before a message is
built (RETRY-1), the retry queue, maxReconsumeTimes, the DLQ, the delay level, the new message
(RETRY-2 … RETRY-6), delivery of due schedule messages (RETRY-9), the retry timetable (RETRY-10)
and plain sends to a retry topic (RETRY-11). The delay levels and the schedule-topic rewrite at
put (RETRY-7/RETRY-8) are in `spec.delay`.

The client's send-back — the CONSUMER_SEND_MSG_BACK RPC, or a message the client builds itself
and sends to `%RETRY%<group>` through its internal producer. RocketMQ's client-built message
shares its property map with the consumed message, so building it mutates the cached message as
well; `SendBackBuild` carries both maps. Both consume services hand messages back this way:
DefaultMQPushConsumerImpl.sendMessageBack serves both, and the orderly service builds its own DLQ
message (ORDER-15).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from pullspec.spec.config import PERM_READ, PERM_WRITE, TopicConfig
from pullspec.spec.consume_concurrently import (
    CLIENT_SEND_BACK_BASE_DELAY_LEVEL,
    DEFAULT_MAX_RECONSUME_TIMES_CONCURRENTLY,
    ConsumeConcurrentlyContext,
)
from pullspec.spec.delay import SEED_004, delay_level_of
from pullspec.spec.errors import (
    JAVA_INT_MAX,
    InvalidArgumentError,
    NullPointerError,
    require_bool,
    require_bytes,
    require_int,
    require_str,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.layout import is_dispatched_type
from pullspec.spec.message import (
    PROPERTY_DELAY,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT_STORE_MSG_OK,
    RETRY_GROUP_TOPIC_PREFIX,
    BrokerInnerMessage,
    Properties,
    StoredMessage,
    dlq_topic_name,
    retry_topic_name,
    to_properties,
    with_namespace,
    without_namespace,
)
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated
from pullspec.spec.status import PutMessageStatus, ResponseCode

SEND_BACK = "SendMessageProcessor.asyncConsumerSendMsgBack"
#: MQVersion.Version ordinals (identical at both tags); the header's maxReconsumeTimes is read
#: only from requests of version V3_4_9 or later.
MQ_VERSION_ORDINALS = {"V3_4_9": 121, "V4_7_1": 355, "V4_9_7": 407}
V3_4_9 = MQ_VERSION_ORDINALS["V3_4_9"]
V47, V49 = (Profile.V4_7,), (Profile.V4_9,)
DLQ_NUMS_PER_GROUP = 1
#: The bound of the random number the queue choice draws from (both profiles).
RANDOM_BOUND = 99_999_999
FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def _typed(name: str, require: Callable[[str, object], object], optional: bool = False) -> Any:
    """An attrs validator applying `require` to the value (None allowed when `optional`)."""

    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is not None or not optional:
            require(name, value)

    return check


@attrs.frozen(kw_only=True)
class SendBackRequest:
    """A CONSUMER_SEND_MSG_BACK request header (ConsumerSendMsgBackRequestHeader)."""

    #: The commit-log offset of the consumed message.
    offset: int = attrs.field(validator=_typed("offset", require_int))
    group: str = attrs.field(validator=_typed("group", require_str))
    delay_level: int = attrs.field(validator=_typed("delay_level", require_int))
    origin_msg_id: str | None = attrs.field(
        default=None, validator=_typed("origin_msg_id", require_str, True)
    )
    origin_topic: str | None = attrs.field(
        default=None, validator=_typed("origin_topic", require_str, True)
    )
    unit_mode: bool = attrs.field(default=False, validator=_typed("unit_mode", require_bool))
    #: None when the header field is absent.
    max_reconsume_times: int | None = attrs.field(
        default=None, validator=_typed("max_reconsume_times", require_int, True)
    )


@attrs.frozen
class SendBackResponse:
    """The broker's answer to a send-back: response code and remark."""

    code: ResponseCode
    remark: str | None = None


@attrs.frozen
class SendBackStop:
    """Where consumerSendMsgBack stops before building a message: RETRY-1 step and answer."""

    step: int
    response: SendBackResponse


def request_version_ordinal(name: str) -> int:
    """The MQVersion.Version ordinal of a version name such as "V4_9_7"."""
    try:
        return MQ_VERSION_ORDINALS[name]
    except KeyError:
        known = ", ".join(MQ_VERSION_ORDINALS)
        raise InvalidArgumentError("request_version", name, f"expected one of {known}") from None


def _group_missing(group: str) -> SendBackResponse:
    remark = f"subscription group not exist, {group} {FAQ_SUFFIX}"
    return SendBackResponse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark)


@rule("RETRY-1", source=SEND_BACK, seeds=SEED_004, versions="see RETRY-2 … RETRY-6")
def send_back_checks(
    *,
    group: str,
    offset: int,
    group_exists: bool,
    broker_permission: int,
    retry_queue_nums: int,
    retry_topic_perm: int | None,
    record_found: bool,
    broker_ip: str = "127.0.0.1",
) -> SendBackStop | None:
    """consumerSendMsgBack answers, in order, a missing group, a broker that is not writable,
    retryQueueNums ≤ 0 (SUCCESS, nothing stored), a retry topic that could not be created
    (`retry_topic_perm` None) or is not writable and a missing record, and otherwise goes on.

    post: __return__ is None or 2 <= __return__.step <= 6
    post: __return__ is None or (__return__.response.code is ResponseCode.SUCCESS) == (__return__.step == 4)
    """
    topic = retry_topic_name(group)
    # Check that the group exists and the broker accepts writes.
    if not group_exists:
        return SendBackStop(2, _group_missing(group))
    if not broker_permission & PERM_WRITE:
        remark = f"the broker[{broker_ip}] sending message is forbidden"
        return SendBackStop(3, SendBackResponse(ResponseCode.NO_PERMISSION, remark))
    # The group has retry queues; without any the message is dropped with SUCCESS.
    if retry_queue_nums <= 0:
        return SendBackStop(4, SendBackResponse(ResponseCode.SUCCESS))
    # Check that the retry topic exists (created when absent) and is writable.
    if retry_topic_perm is None:
        return SendBackStop(
            5, SendBackResponse(ResponseCode.SYSTEM_ERROR, f"topic[{topic}] not exist")
        )
    if not retry_topic_perm & PERM_WRITE:
        remark = f"the topic[{topic}] sending message is forbidden"
        return SendBackStop(5, SendBackResponse(ResponseCode.NO_PERMISSION, remark))
    # Check that the consumed record is still in the commit log.
    if not record_found:
        remark = f"look message by offset failed, {offset}"
        return SendBackStop(6, SendBackResponse(ResponseCode.SYSTEM_ERROR, remark))
    return None


def put_response(status: PutMessageStatus | None) -> SendBackResponse:
    """RETRY-1 step 9: PUT_OK answers SUCCESS, another status SYSTEM_ERROR naming it."""
    if status is None:
        return SendBackResponse(ResponseCode.SYSTEM_ERROR, "putMessageResult is null")
    if status is PutMessageStatus.PUT_OK:
        return SendBackResponse(ResponseCode.SUCCESS)
    return SendBackResponse(ResponseCode.SYSTEM_ERROR, status.value)


def retry_topic_config(group: str, retry_queue_nums: int) -> TopicConfig:
    """The config a missing retry topic is created with: retryQueueNums queues, READ|WRITE."""
    n = retry_queue_nums
    topic = retry_topic_name(group)
    return TopicConfig(
        topic_name=topic, read_queue_nums=n, write_queue_nums=n, perm=PERM_READ | PERM_WRITE
    )


# -- where the message goes and what it carries ----------------------------------------------------


def _java_rem(a: int, b: int) -> int:
    # Java's % truncates toward zero where Python's floors.
    r = abs(a) % abs(b)
    return -r if a < 0 else r


_RETRY_2 = (
    "SendMessageProcessor.asyncConsumerSendMsgBack; "
    "TopicConfigManager.createTopicInSendMessageBackMethod; MixAll.getRetryTopic"
)
_RETRY_2_VERSIONS = "Random source changed in 4.9.2 (ISSUE #3225); same distribution."


# [4.7]
@rule("RETRY-2", source=_RETRY_2, seeds=SEED_004, profiles=V47, versions=_RETRY_2_VERSIONS)
def retry_target_v47(group: str, retry_queue_nums: int, random_int: int) -> tuple[str, int]:
    """The retry topic is "%RETRY%" + group and its queue abs(random.nextInt() % 99999999) mod
    retryQueueNums, for a Java int `random_int`.

    pre: retry_queue_nums > 0 and -(2**31) <= random_int < 2**31
    post: __return__[0] == "%RETRY%" + group
    post: 0 <= __return__[1] < retry_queue_nums
    """
    return (retry_topic_name(group), abs(_java_rem(random_int, RANDOM_BOUND)) % retry_queue_nums)


# [Modified in 4.9]
@rule("RETRY-2", source=_RETRY_2, seeds=SEED_004, profiles=V49)
def retry_target_v49(group: str, retry_queue_nums: int, random_int: int) -> tuple[str, int]:
    """The retry topic is "%RETRY%" + group and its queue ThreadLocalRandom.nextInt(99999999)
    mod retryQueueNums, for `random_int` drawn from [0, 99999999).

    pre: retry_queue_nums > 0 and 0 <= random_int < 99999999
    post: __return__[0] == "%RETRY%" + group
    post: 0 <= __return__[1] < retry_queue_nums
    """
    return (retry_topic_name(group), random_int % retry_queue_nums)


# [4.7]
@rule("RETRY-2", source=_RETRY_2, seeds=SEED_004, profiles=V47)
def retry_random_range_v47() -> tuple[int, int]:
    """The queue choice draws `random_int` from java.util.Random.nextInt(): any Java int, as the
    half-open range [−2³¹, 2³¹).

    post: __return__ == (-(2**31), 2**31)
    """
    return (-(2**31), 2**31)


# [Modified in 4.9]
@rule("RETRY-2", source=_RETRY_2, seeds=SEED_004, profiles=V49)
def retry_random_range_v49() -> tuple[int, int]:
    """The queue choice draws `random_int` from ThreadLocalRandom.nextInt(99999999), the
    half-open range [0, 99999999).

    post: __return__ == (0, RANDOM_BOUND)
    """
    return (0, RANDOM_BOUND)


_RETRY_3_VERSIONS = (
    "Changed in 4.9.1: an absent header value falls back to group.retryMaxTimes; 4.7.1 unboxes "
    "it and fails."
)


# [4.7]
@rule("RETRY-3", source=SEND_BACK, seeds=SEED_004, profiles=V47, versions=_RETRY_3_VERSIONS)
def max_reconsume_times_v47(
    header_value: int | None, group_retry_max_times: int, request_version: int
) -> int:
    """A request of version ≥ V3_4_9 takes maxReconsumeTimes from its header, unboxed even when
    absent (NullPointerException), and an older one group.retryMaxTimes.

    raises: NullPointerError
    post: __return__ == (header_value if request_version >= V3_4_9 else group_retry_max_times)
    """
    if request_version < V3_4_9:
        return group_retry_max_times
    # Check that the header carries the value Integer unboxing needs.
    if header_value is None:
        raise NullPointerError("maxReconsumeTimes is absent from the send-back header (4.7)")
    return header_value


# [Modified in 4.9]
@rule("RETRY-3", source=SEND_BACK, seeds=SEED_004, profiles=V49)
def max_reconsume_times_v49(
    header_value: int | None, group_retry_max_times: int, request_version: int
) -> int:
    """A request of version ≥ V3_4_9 takes maxReconsumeTimes from its header when present, any
    other request group.retryMaxTimes.

    post: __return__ == (header_value if request_version >= V3_4_9 and header_value is not None else group_retry_max_times)
    """
    if request_version >= V3_4_9 and header_value is not None:
        return header_value
    return group_retry_max_times


# [4.7]
@rule("RETRY-3", source="MQVersion.CURRENT_VERSION", profiles=V47)
def client_request_version_v47() -> int:
    """A 4.7.1 client sends its requests with version V4_7_1, so RETRY-3 reads their header's
    maxReconsumeTimes.

    post: __return__ >= V3_4_9
    """
    return MQ_VERSION_ORDINALS["V4_7_1"]


# [Modified in 4.9]
@rule("RETRY-3", source="MQVersion.CURRENT_VERSION", profiles=V49)
def client_request_version_v49() -> int:
    """A 4.9.7 client sends its requests with version V4_9_7, so RETRY-3 reads their header's
    maxReconsumeTimes.

    post: __return__ >= V3_4_9
    """
    return MQ_VERSION_ORDINALS["V4_9_7"]


@attrs.frozen
class DeadLetterTarget:
    """Where a DLQ-bound message goes and how its topic is created (RETRY-4)."""

    topic: str
    queue_id: int
    #: The permission of a DLQ topic created for it (an existing config is used unchanged).
    perm: int
    #: The DELAY the message gets, or None to keep the one it inherits from the record.
    delay_level: int | None

    def topic_config(self) -> TopicConfig:
        """The config a missing DLQ topic is created with: one queue, this permission."""
        n = DLQ_NUMS_PER_GROUP
        return TopicConfig(
            topic_name=self.topic, read_queue_nums=n, write_queue_nums=n, perm=self.perm
        )


_RETRY_4 = (
    "SendMessageProcessor.asyncConsumerSendMsgBack; MixAll.getDLQTopic; "
    "AbstractSendMessageProcessor.DLQ_NUMS_PER_GROUP"
)
_RETRY_4_VERSIONS = (
    "Changed in 4.9.2: the DLQ is created READ|WRITE (PR #2437) and the message gets DELAY=0 "
    "(ISSUE #2724); 4.7.1 creates it WRITE only and keeps an inherited DELAY."
)


# [4.7]
@rule("RETRY-4", source=_RETRY_4, seeds=SEED_004, profiles=V47, versions=_RETRY_4_VERSIONS)
def dead_letter_target_v47(
    group: str, stored_reconsume_times: int, max_reconsume_times: int, delay_level: int
) -> DeadLetterTarget | None:
    """A record whose stored reconsumeTimes ≥ max, or a request with delayLevel < 0, goes to
    "%DLQ%" + group queue 0, created WRITE only, keeping any DELAY inherited from the record.

    post: (__return__ is not None) == (stored_reconsume_times >= max_reconsume_times or delay_level < 0)
    post: __return__ is None or (__return__.perm == 2 and __return__.delay_level is None)
    """
    # Check that the record has used up its retries or the consumer asked for the DLQ.
    if stored_reconsume_times < max_reconsume_times and delay_level >= 0:
        return None
    return DeadLetterTarget(dlq_topic_name(group), 0, PERM_WRITE, None)


# [Modified in 4.9]
@rule("RETRY-4", source=_RETRY_4, seeds=SEED_004, profiles=V49)
def dead_letter_target_v49(
    group: str, stored_reconsume_times: int, max_reconsume_times: int, delay_level: int
) -> DeadLetterTarget | None:
    """A record whose stored reconsumeTimes ≥ max, or a request with delayLevel < 0, goes with
    DELAY=0 straight to "%DLQ%" + group queue 0, created READ|WRITE.

    post: (__return__ is not None) == (stored_reconsume_times >= max_reconsume_times or delay_level < 0)
    post: __return__ is None or (__return__.perm == 6 and __return__.delay_level == 0)
    """
    # Check that the record has used up its retries or the consumer asked for the DLQ.
    if stored_reconsume_times < max_reconsume_times and delay_level >= 0:
        return None
    return DeadLetterTarget(dlq_topic_name(group), 0, PERM_READ | PERM_WRITE, 0)


@rule("RETRY-5", source=f"{SEND_BACK}; CommitLog.asyncPutMessage", seeds=SEED_004)
def retry_delay_level(header_delay_level: int, stored_reconsume_times: int) -> int:
    """A send-back that is not for the DLQ sets DELAY to header.delayLevel, or to 3 + the stored
    reconsumeTimes when delayLevel is 0, and the store clamps it to maxDelayLevel.

    pre: header_delay_level >= 0 and stored_reconsume_times >= 0
    post: __return__ == (3 + stored_reconsume_times if header_delay_level == 0 else header_delay_level)
    post: __return__ >= 1
    """
    if header_delay_level == 0:
        return 3 + stored_reconsume_times
    return header_delay_level


def _properties(record: StoredMessage, delay_level: int | None) -> dict[str, str]:
    """The record's properties with RETRY_TOPIC (first original kept), WAIT=false and DELAY."""
    props = dict(record.properties)
    props.setdefault(PROPERTY_RETRY_TOPIC, record.topic)
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    if delay_level is not None:
        props[PROPERTY_DELAY] = str(delay_level)
    return props


def _origin_message_id(props: dict[str, str], record: StoredMessage) -> str:
    """The existing ORIGIN_MESSAGE_ID, or the record's offset message id when that is blank."""
    existing = props.get(PROPERTY_ORIGIN_MESSAGE_ID, "")
    return existing if existing.strip() else record.msg_id


def _message(
    record: StoredMessage, topic: str, queue_id: int, props: dict[str, str]
) -> BrokerInnerMessage:
    return BrokerInnerMessage(
        topic=topic,
        queue_id=queue_id,
        body=record.body,
        properties=props,
        flag=record.flag,
        sys_flag=record.sys_flag,
        reconsume_times=record.reconsume_times + 1,
        born_timestamp=record.born_timestamp,
        born_host=record.born_host,
        store_host=record.store_host,
    )


_RETRY_6_VERSIONS = (
    "Changed in 4.9.0 (fix #2869): 4.7.1 serialises the properties before adding "
    "ORIGIN_MESSAGE_ID, so it is stored only when the record had one or the store re-serialises "
    "the properties for a delay (the vectors confirm it)."
)


# [4.7]
@rule("RETRY-6", source=SEND_BACK, seeds=SEED_004, profiles=V47, versions=_RETRY_6_VERSIONS)
def send_back_message_v47(
    record: StoredMessage, topic: str, queue_id: int, delay_level: int | None
) -> BrokerInnerMessage:
    """The new message copies the record's body, flag, sysFlag, born time and hosts with
    reconsumeTimes + 1 and the record's properties plus RETRY_TOPIC, WAIT=false and DELAY, and
    keeps ORIGIN_MESSAGE_ID only if the record had one or the store rewrites it for a delay.

    post: __return__.reconsume_times == record.reconsume_times + 1
    post: __return__.get_property("WAIT") == "false"
    post: __return__.get_property("RETRY_TOPIC") is not None
    """
    props = _properties(record, delay_level)
    # The id goes only into the map, which the store serialises again only for a delay (RETRY-8).
    if delay_level_of(tuple(props.items())) > 0 and is_dispatched_type(record.sys_flag):
        props[PROPERTY_ORIGIN_MESSAGE_ID] = _origin_message_id(props, record)
    return _message(record, topic, queue_id, props)


# [Modified in 4.9]
@rule("RETRY-6", source=SEND_BACK, seeds=SEED_004, profiles=V49)
def send_back_message_v49(
    record: StoredMessage, topic: str, queue_id: int, delay_level: int | None
) -> BrokerInnerMessage:
    """The new message copies the record's body, flag, sysFlag, born time and hosts with
    reconsumeTimes + 1 and the record's properties plus RETRY_TOPIC, WAIT=false, DELAY and
    ORIGIN_MESSAGE_ID, the existing one or else the record's offset message id.

    post: __return__.reconsume_times == record.reconsume_times + 1
    post: __return__.get_property("WAIT") == "false"
    post: __return__.get_property("ORIGIN_MESSAGE_ID") is not None
    """
    props = _properties(record, delay_level)
    props[PROPERTY_ORIGIN_MESSAGE_ID] = _origin_message_id(props, record)
    return _message(record, topic, queue_id, props)


@rule(
    "RETRY-9",
    source="ScheduleMessageService.messageTimeup",
    seeds=SEED_004,
    versions="4.9.7 delivers from a thread pool, corrects delay offsets at load and may deliver "
    "asynchronously (off by default); the delivered message is the same. A record whose "
    "delivery throws is logged and dropped in 4.7.1 and retried in 4.9.7.",
)
def delivered_message(record: StoredMessage) -> BrokerInnerMessage:
    """A due schedule message is stored again in REAL_TOPIC queue REAL_QID with its body, flag,
    sysFlag, hosts, born time and reconsumeTimes, its stored properties still holding DELAY,
    REAL_TOPIC and REAL_QID because the string is built before DELAY leaves the map.

    raises: InvalidArgumentError
    post: __return__.reconsume_times == record.reconsume_times
    post: __return__.properties == record.properties
    """
    real_topic = record.get_property(PROPERTY_REAL_TOPIC)
    real_qid = record.get_property(PROPERTY_REAL_QUEUE_ID)
    # Check that the record says where it is to be delivered.
    if real_topic is None or real_qid is None or not real_qid.lstrip("-").isdigit():
        raise InvalidArgumentError("record", record.msg_id, "no usable REAL_TOPIC / REAL_QID")
    return evolve(
        _message(record, real_topic, int(real_qid), dict(record.properties)),
        reconsume_times=record.reconsume_times,
    )


# [4.7]
@rule("RETRY-9", source="ScheduleMessageService.DeliverDelayedMessageTimerTask", profiles=V47)
def retries_undeliverable_record_v47() -> bool:
    """A due record whose delivery throws (no usable REAL_TOPIC or REAL_QID) is logged and
    dropped: the catch sits inside the loop, so the schedule moves past it.

    post: __return__ is False
    """
    return False


# [Modified in 4.9]
@rule("RETRY-9", source="ScheduleMessageService.DeliverDelayedMessageTimerTask", profiles=V49)
def retries_undeliverable_record_v49() -> bool:
    """A due record whose delivery throws is tried again: the catch sits outside the loop and
    the next timer task starts at that record's offset.

    post: __return__ is True
    """
    return True


def delivery_properties(properties: Properties) -> Properties:
    """The property map a delivered message is put with (RETRY-9): DELAY removed, WAIT=false;
    the store decides on this map, not on the stored string."""
    out = {k: v for k, v in properties if k != PROPERTY_DELAY}
    out[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return tuple(out.items())


def due_timestamp(deliver_timestamp: int, now: int, level_delay_ms: int) -> int:
    """When a schedule entry is due (RETRY-9): its deliver time, or now when that lies more than
    the level's delay ahead (the clock went back; correctDeliverTimestamp)."""
    return now if deliver_timestamp > now + level_delay_ms else deliver_timestamp


@rule("RETRY-10", source="derived from RETRY-3 … RETRY-7", seeds=SEED_004)
def retry_timetable(max_reconsume_times: int, levels: tuple[int, ...]) -> tuple[int, ...]:
    """With delayLevel 0 a message stored with reconsumeTimes r < max comes back after the delay
    of level min(3 + r, maxDelayLevel) and one with r ≥ max goes to the DLQ, so item r of the
    answer is the delay of the (r + 1)-th send-back.

    pre: len(levels) > 0 and max_reconsume_times <= 64
    post: len(__return__) == max(max_reconsume_times, 0)
    post: all(d in levels for d in __return__)
    """
    return tuple(
        levels[min(retry_delay_level(0, r), len(levels)) - 1] for r in range(max_reconsume_times)
    )


# -- plain sends to a retry topic ------------------------------------------------------------------


@attrs.frozen
class SendTarget:
    """Where a plain send is stored (RETRY-11) and how a DLQ topic is created for it."""

    topic: str
    queue_id: int
    #: The permission of the DLQ topic created for a redirected message, else None.
    dlq_perm: int | None = None


_RETRY_11 = "SendMessageProcessor.handleRetryAndDLQ, asyncSendMessage"
_RETRY_11_VERSIONS = (
    "Changed in 4.9.1/4.9.2: an absent header maxReconsumeTimes falls back to retryMaxTimes and "
    "the DLQ is READ|WRITE; 4.9.7's setDelayTimeLevel(0) there has no effect."
)


def _plain_send_target(
    topic: str,
    queue_id: int,
    group_retry_max_times: int | None,
    reconsume_times: int | None,
    resolve_max: Callable[[int], int],
    dlq_perm: int,
) -> SendTarget | SendBackResponse:
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return SendTarget(topic, queue_id)
    group = topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
    # Check that the group exists (group_retry_max_times is None when it does not).
    if group_retry_max_times is None:
        return _group_missing(group)
    if (reconsume_times or 0) >= resolve_max(group_retry_max_times):
        return SendTarget(dlq_topic_name(group), 0, dlq_perm)
    return SendTarget(topic, queue_id)


# [4.7]
@rule("RETRY-11", source=_RETRY_11, seeds=(), profiles=V47, versions=_RETRY_11_VERSIONS)
def plain_send_target_v47(
    topic: str,
    queue_id: int,
    group_retry_max_times: int | None,
    header_max_reconsume_times: int | None,
    header_reconsume_times: int | None,
    request_version: int,
) -> SendTarget | SendBackResponse:
    """A send to "%RETRY%" + group needs the group's config and goes to "%DLQ%" + group queue 0,
    created WRITE only, when its header reconsumeTimes (absent = 0) ≥ max (RETRY-3, 4.7).

    raises: NullPointerError
    post: topic.startswith("%RETRY%") or __return__ == SendTarget(topic, queue_id)
    """
    return _plain_send_target(
        topic,
        queue_id,
        group_retry_max_times,
        header_reconsume_times,
        lambda g: max_reconsume_times_v47(header_max_reconsume_times, g, request_version),
        PERM_WRITE,
    )


# [Modified in 4.9]
@rule("RETRY-11", source=_RETRY_11, seeds=(), profiles=V49)
def plain_send_target_v49(
    topic: str,
    queue_id: int,
    group_retry_max_times: int | None,
    header_max_reconsume_times: int | None,
    header_reconsume_times: int | None,
    request_version: int,
) -> SendTarget | SendBackResponse:
    """A send to "%RETRY%" + group needs the group's config and goes to "%DLQ%" + group queue 0,
    created READ|WRITE, when its header reconsumeTimes (absent = 0) ≥ max (RETRY-3, 4.9), any
    DELAY it carries still applying.

    post: topic.startswith("%RETRY%") or __return__ == SendTarget(topic, queue_id)
    """
    return _plain_send_target(
        topic,
        queue_id,
        group_retry_max_times,
        header_reconsume_times,
        lambda g: max_reconsume_times_v49(header_max_reconsume_times, g, request_version),
        PERM_READ | PERM_WRITE,
    )


# -- the client's send-back (CONC-10, CONC-11, ORDER-15) -------------------------------------------

_SVC = "ConsumeMessageConcurrentlyService"
_ORDERLY = "ConsumeMessageOrderlyService"
_IMPL = "DefaultMQPushConsumerImpl"
_S24 = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")


def _check_str(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    require_str(attribute.name, value)


def _body(value: object) -> bytes:
    return require_bytes("body", value)


def _same_map(a: Properties, b: Properties) -> bool:
    return dict(a) == dict(b)


@attrs.frozen
class ClientMessage:
    """A Message the client builds and sends through its internal producer (the CONC-11
    fallback and the ORDER-15 dead-letter path); its delay level is the DELAY property."""

    topic: str = attrs.field(validator=_check_str)
    body: bytes = attrs.field(converter=_body)
    flag: int = 0
    properties: Properties = attrs.field(
        default=(), converter=to_properties, eq=attrs.cmp_using(eq=_same_map), hash=False
    )

    def get_property(self, name: str) -> str | None:
        """The value of property `name`, or None."""
        return dict(self.properties).get(name)


@attrs.frozen
class SendBackBuild:
    """A client-built retry message and the consumed message's property map after the build
    (one map shared by both in RocketMQ, so the build mutates the consumed message)."""

    message: ClientMessage
    original_properties: Properties


@runtime_checkable
class SendBackClient(Protocol):
    """The client's two ways of handing a message back: the CONSUMER_SEND_MSG_BACK RPC
    (CONC-11) and a plain send through the internal producer (the CONC-11 fallback,
    ORDER-15); both raise on any failure."""

    def send_message_back(
        self,
        msg: StoredMessage,
        delay_level: int,
        broker_name: str | None,
        max_reconsume_times: int,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK for `msg` (the group is the client's); raises on a failed RPC
        or a non-SUCCESS answer."""
        ...

    def send_retry_message(self, message: ClientMessage) -> None:
        """The internal producer's synchronous send of a client-built retry message."""
        ...


def client_msg_id(msg: StoredMessage) -> str:
    """MessageClientExt.getMsgId: the producer's UNIQ_KEY, else the offset message id."""
    return msg.get_property(PROPERTY_UNIQ_KEY) or msg.msg_id


def _retry_properties(
    props: Mapping[str, str], msg: StoredMessage, reconsume_time: int, max_times: int
) -> dict[str, str]:
    out = dict(props)
    out[PROPERTY_RETRY_TOPIC] = msg.topic
    out[PROPERTY_RECONSUME_TIME] = str(reconsume_time)
    out[PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
    out.pop(PROPERTY_TRANSACTION_PREPARED, None)
    # setDelayTimeLevel: the requested level is ignored, even −1 (S-20)
    out[PROPERTY_DELAY] = str(CLIENT_SEND_BACK_BASE_DELAY_LEVEL + msg.reconsume_times)
    return out


def _build(msg: StoredMessage, group: str, props: dict[str, str]) -> SendBackBuild:
    built = ClientMessage(retry_topic_name(group), msg.body, msg.flag, props)
    # The map is shared, so the consumed message carries every put as well
    return SendBackBuild(built, built.properties)


@attrs.frozen
class SendBackCall:
    """The impl call the service makes (CONC-10): sendMessageBack(msg, delayLevel, brokerName)."""

    msg: StoredMessage
    delay_level: int
    broker_name: str


@rule("CONC-10", source=f"{_SVC}.sendMessageBack", seeds=_S24)
def service_send_back_call(
    msg: StoredMessage, context: ConsumeConcurrentlyContext, namespace: str | None = None
) -> SendBackCall:
    """The service sends a failed message back with the context's delayLevelWhenNextConsume (0
    unless the listener set it) to the context queue's broker, topic wrapped in the namespace,
    and reports true unless that call throws.

    post: __return__.delay_level == context.delay_level_when_next_consume
    post: __return__.broker_name == context.message_queue.broker_name
    """
    # The delay level comes from the context, not from the message.
    wrapped = evolve(msg, topic=with_namespace(msg.topic, namespace))
    return SendBackCall(
        wrapped, context.delay_level_when_next_consume, context.message_queue.broker_name
    )


def max_reconsume_times_concurrently(configured: int) -> int:
    """CONC-11: the concurrent getMaxReconsumeTimes, −1 (the default) meaning 16."""
    return DEFAULT_MAX_RECONSUME_TIMES_CONCURRENTLY if configured == -1 else configured


@attrs.frozen
class SendBackHeader:
    """ConsumerSendMsgBackRequestHeader as the client fills it (CONC-11)."""

    group: str
    origin_topic: str
    #: The message's commit-log offset.
    offset: int
    delay_level: int
    origin_msg_id: str
    max_reconsume_times: int
    #: 4.9.7 only: the target broker's name.
    bname: str | None


@attrs.frozen
class SendBackPlan:
    """The RPC the impl sends and, if it throws, the fallback it builds (CONC-11)."""

    header: SendBackHeader
    fallback: SendBackBuild
    #: The topic the message keeps afterwards: the namespace stripped again (finally block).
    topic_after: str


def _fallback(msg: StoredMessage, group: str, max_times: int) -> SendBackBuild:
    # setOriginMessageId writes into the new message's own map, which setProperties then
    # replaces by the consumed message's: the id survives only if that map already had one.
    props = _retry_properties(dict(msg.properties), msg, msg.reconsume_times + 1, max_times)
    return _build(msg, group, props)


def _send_back_plan(
    msg: StoredMessage,
    group: str,
    delay_level: int,
    broker_name: str | None,
    max_reconsume_times: int,
    namespace: str | None,
    with_bname: bool,
) -> SendBackPlan:
    max_times = max_reconsume_times_concurrently(max_reconsume_times)
    header = SendBackHeader(
        group=group,
        origin_topic=msg.topic,
        offset=msg.commitlog_offset,
        delay_level=delay_level,
        origin_msg_id=client_msg_id(msg),
        max_reconsume_times=max_times,
        bname=broker_name if with_bname else None,
    )
    return SendBackPlan(
        header, _fallback(msg, group, max_times), without_namespace(msg.topic, namespace)
    )


# [4.7]
@rule("CONC-11", source=f"{_IMPL}.sendMessageBack", seeds=("004_60fc00b6c6a023ff.txt",),
      profiles=(Profile.V4_7,), versions=(
    "4.9.7 also sends bname = brokerName in the CONSUMER_SEND_MSG_BACK header"))  # fmt: skip
def send_back_plan_v47(
    msg: StoredMessage,
    group: str,
    delay_level: int,
    broker_name: str | None,
    max_reconsume_times: int,
    namespace: str | None = None,
) -> SendBackPlan:
    """The impl sends CONSUMER_SEND_MSG_BACK with maxReconsumeTimes −1 read as 16, and on any
    failure sends a new message to %RETRY%<group> with RECONSUME_TIME + 1 and delay level 3 +
    reconsumeTimes, losing ORIGIN_MESSAGE_ID unless the message already had one.

    post: __return__.header.bname is None
    post: __return__.header.max_reconsume_times == (16 if max_reconsume_times == -1 else max_reconsume_times)
    post: __return__.fallback.message.get_property("DELAY") == str(3 + msg.reconsume_times)
    post: __return__.fallback.message.get_property("ORIGIN_MESSAGE_ID") == msg.get_property("ORIGIN_MESSAGE_ID")
    """
    # The header carries no broker name in 4.7.1.
    return _send_back_plan(
        msg, group, delay_level, broker_name, max_reconsume_times, namespace, False
    )


# [Modified in 4.9]
@rule("CONC-11", source=f"{_IMPL}.sendMessageBack", profiles=(Profile.V4_9,))
def send_back_plan_v49(
    msg: StoredMessage,
    group: str,
    delay_level: int,
    broker_name: str | None,
    max_reconsume_times: int,
    namespace: str | None = None,
) -> SendBackPlan:
    """The impl sends CONSUMER_SEND_MSG_BACK with the broker name and maxReconsumeTimes −1 read
    as 16, and on any failure sends a new message to %RETRY%<group> with RECONSUME_TIME + 1 and
    delay level 3 + reconsumeTimes, losing ORIGIN_MESSAGE_ID unless the message already had one.

    post: __return__.header.bname == broker_name
    post: __return__.header.max_reconsume_times == (16 if max_reconsume_times == -1 else max_reconsume_times)
    post: __return__.fallback.message.get_property("DELAY") == str(3 + msg.reconsume_times)
    post: __return__.fallback.message.get_property("ORIGIN_MESSAGE_ID") == msg.get_property("ORIGIN_MESSAGE_ID")
    """
    # The header names the broker (the RPC signature gained brokerName).
    return _send_back_plan(
        msg, group, delay_level, broker_name, max_reconsume_times, namespace, True
    )


def max_reconsume_times_orderly(configured: int) -> int:
    """ORDER-14: the orderly getMaxReconsumeTimes, −1 (the default) meaning Integer.MAX_VALUE,
    so by default an orderly message is retried locally forever."""
    return JAVA_INT_MAX if configured == -1 else configured


def _dead_letter(
    msg: StoredMessage, group: str, max_times: int, keeps_origin: bool
) -> SendBackBuild:
    props = dict(msg.properties)
    # The order of setProperties and setOriginMessageId (the 4.7/4.9 difference).
    if keeps_origin:
        existing = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = (
            existing if existing and existing.strip() else client_msg_id(msg)
        )
    # RECONSUME_TIME is the count itself, not + 1: the broker sees it at the maximum (DLQ)
    return _build(msg, group, _retry_properties(props, msg, msg.reconsume_times, max_times))


# [4.7]
@rule("ORDER-15", source=f"{_ORDERLY}.sendMessageBack", profiles=(Profile.V4_7,), versions=(
    "4.7.1 sets ORIGIN_MESSAGE_ID before setProperties (lost unless present); 4.9.7 after"))  # fmt: skip
def orderly_dead_letter_message_v47(
    msg: StoredMessage, group: str, max_reconsume_times: int
) -> SendBackBuild:
    """The orderly send-back builds a message to %RETRY%<group> carrying the original properties,
    RETRY_TOPIC, RECONSUME_TIME = reconsumeTimes, MAX_RECONSUME_TIMES and delay level 3 +
    reconsumeTimes, and loses ORIGIN_MESSAGE_ID unless the message already had one.

    post: __return__.message.topic == "%RETRY%" + group
    post: __return__.message.get_property("RECONSUME_TIME") == str(msg.reconsume_times)
    post: __return__.message.get_property("ORIGIN_MESSAGE_ID") == msg.get_property("ORIGIN_MESSAGE_ID")
    post: __return__.original_properties == __return__.message.properties
    """
    return _dead_letter(msg, group, max_reconsume_times_orderly(max_reconsume_times), False)


# [Modified in 4.9]
@rule("ORDER-15", source=f"{_ORDERLY}.sendMessageBack", profiles=(Profile.V4_9,))
def orderly_dead_letter_message_v49(
    msg: StoredMessage, group: str, max_reconsume_times: int
) -> SendBackBuild:
    """The orderly send-back builds a message to %RETRY%<group> carrying the original properties,
    ORIGIN_MESSAGE_ID (the existing one or the msgId), RETRY_TOPIC, RECONSUME_TIME =
    reconsumeTimes, MAX_RECONSUME_TIMES and delay level 3 + reconsumeTimes.

    post: __return__.message.topic == "%RETRY%" + group
    post: __return__.message.get_property("RECONSUME_TIME") == str(msg.reconsume_times)
    post: __return__.message.get_property("ORIGIN_MESSAGE_ID") is not None
    post: __return__.original_properties == __return__.message.properties
    """
    return _dead_letter(msg, group, max_reconsume_times_orderly(max_reconsume_times), True)


class RetryRules(Rules):
    """The changed RETRY rules (see `spec.rules.Rules`)."""

    retry_target = stated(retry_target_v47, retry_target_v49)
    retry_random_range = stated(retry_random_range_v47, retry_random_range_v49)
    max_reconsume_times = stated(max_reconsume_times_v47, max_reconsume_times_v49)
    client_request_version = stated(client_request_version_v47, client_request_version_v49)
    dead_letter_target = stated(dead_letter_target_v47, dead_letter_target_v49)
    send_back_message = stated(send_back_message_v47, send_back_message_v49)
    retries_undeliverable_record = stated(
        retries_undeliverable_record_v47, retries_undeliverable_record_v49
    )
    plain_send_target = stated(plain_send_target_v47, plain_send_target_v49)
    send_back_plan = stated(send_back_plan_v47, send_back_plan_v49)
    orderly_dead_letter_message = stated(
        orderly_dead_letter_message_v47, orderly_dead_letter_message_v49
    )
