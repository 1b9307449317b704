"""The client's send-back (CONC-10, CONC-11, ORDER-15): how a consumer hands a message it could
not consume back to the broker, as the CONSUMER_SEND_MSG_BACK RPC or as a message it builds
itself and sends to `%RETRY%<group>` through its internal producer.

RocketMQ's client-built message shares its property map with the consumed message, so building
it mutates the cached message as well; `SendBackBuild` carries both maps. Both consume services
hand messages back this way: DefaultMQPushConsumerImpl.sendMessageBack serves both, and the
orderly service builds its own DLQ message (ORDER-15).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import attrs

from pullspec.spec.consume_concurrently import (
    CLIENT_SEND_BACK_BASE_DELAY_LEVEL,
    DEFAULT_MAX_RECONSUME_TIMES_CONCURRENTLY,
    ConsumeConcurrentlyContext,
)
from pullspec.spec.errors import JAVA_INT_MAX, require_bytes, require_str
from pullspec.spec.message import (
    PROPERTY_DELAY,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    Properties,
    StoredMessage,
    retry_topic_name,
    to_properties,
    with_namespace,
    without_namespace,
)
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

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
    wrapped = attrs.evolve(msg, topic=with_namespace(msg.topic, namespace))
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


def send_back_plan(
    profile: Profile,
    msg: StoredMessage,
    group: str,
    delay_level: int,
    broker_name: str | None,
    max_reconsume_times: int,
    namespace: str | None = None,
) -> SendBackPlan:
    """CONC-11 in `profile`."""
    return SendBackRules.of(profile).send_back_plan(
        msg, group, delay_level, broker_name, max_reconsume_times, namespace
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


def orderly_dead_letter_message(
    profile: Profile, msg: StoredMessage, group: str, max_reconsume_times: int
) -> SendBackBuild:
    """ORDER-15 in `profile`."""
    rules = SendBackRules.of(profile)
    return rules.orderly_dead_letter_message(msg, group, max_reconsume_times)


class SendBackRules(Rules):
    """The changed CONC and ORDER rules of the client's send-back (see `spec.rules.Rules`)."""

    send_back_plan = stated(send_back_plan_v47, send_back_plan_v49)
    orderly_dead_letter_message = stated(
        orderly_dead_letter_message_v47, orderly_dead_letter_message_v49
    )
