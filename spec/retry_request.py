"""RETRY — the CONSUMER_SEND_MSG_BACK request: its header and answers, the request versions, the
retry and DLQ topic names, the steps taken before a message is built (RETRY-1) and the answer to
the final put. The rules deciding where the message goes and what it carries are in `spec.retry`,
which re-exports these names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from pullspec.spec.config import PERM_READ, PERM_WRITE, TopicConfig
from pullspec.spec.delay import SEED_004
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, require_int, require_str
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import rule
from pullspec.spec.status import PutMessageStatus, ResponseCode

SEND_BACK = "SendMessageProcessor.asyncConsumerSendMsgBack"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
#: MQVersion.Version ordinals (identical at both tags); the header's maxReconsumeTimes is read
#: only from requests of version V3_4_9 or later.
MQ_VERSION_ORDINALS = {"V3_4_9": 121, "V4_7_1": 355, "V4_9_7": 407}
V3_4_9 = MQ_VERSION_ORDINALS["V3_4_9"]
FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def _typed(name: str, require: Callable[[str, object], object], optional: bool = False) -> Any:
    """An attrs validator applying `require` to the value (None allowed when `optional`)."""

    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is not None or not optional:
            require(name, value)

    return check


def _require_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(name, value, "bool")
    return value


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
    unit_mode: bool = attrs.field(default=False, validator=_typed("unit_mode", _require_bool))
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


def profile_request_version(profile: Profile) -> int:
    """The request version a client of `profile`'s release sends."""
    return MQ_VERSION_ORDINALS["V4_7_1" if profile is Profile.V4_7 else "V4_9_7"]


def retry_topic_name(group: str) -> str:
    """MixAll.getRetryTopic: "%RETRY%" + group."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic_name(group: str) -> str:
    """MixAll.getDLQTopic: "%DLQ%" + group."""
    return DLQ_GROUP_TOPIC_PREFIX + group


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
    # Verify the group exists and the broker accepts writes
    if not group_exists:
        return SendBackStop(2, _group_missing(group))
    if not broker_permission & PERM_WRITE:
        remark = f"the broker[{broker_ip}] sending message is forbidden"
        return SendBackStop(3, SendBackResponse(ResponseCode.NO_PERMISSION, remark))
    # Verify the group has retry queues; without any the message is dropped with SUCCESS
    if retry_queue_nums <= 0:
        return SendBackStop(4, SendBackResponse(ResponseCode.SUCCESS))
    # Verify the retry topic exists (created when absent) and is writable
    if retry_topic_perm is None:
        return SendBackStop(
            5, SendBackResponse(ResponseCode.SYSTEM_ERROR, f"topic[{topic}] not exist")
        )
    if not retry_topic_perm & PERM_WRITE:
        remark = f"the topic[{topic}] sending message is forbidden"
        return SendBackStop(5, SendBackResponse(ResponseCode.NO_PERMISSION, remark))
    # Verify the consumed record is still in the commit log
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
