"""CODE — PullMessageProcessor: checks before the store, status → response code, the broker
suggestion, and what the client makes of the code."""

from __future__ import annotations

import attrs

from pullspec.spec.config import PERM_READ
from pullspec.spec.errors import require_int, require_str
from pullspec.spec.message import (
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    Properties,
    StoredMessage,
)
from pullspec.spec.record import queue_offsets_in
from pullspec.spec.rules import rule
from pullspec.spec.status import BrokerRole, GetMessageStatus, PullStatus, ResponseCode

SEEDS_PROCESSOR = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")
MASTER_ID = 0

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL = 0x10

#: TopicValidator.RMQ_SYS_OFFSET_MOVED_EVENT: the topic CODE-15's record goes to (queue 0).
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"


def _int(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    require_int(attribute.name, value)


def _str(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    require_str(attribute.name, value)


def _optional_str(instance: object, attribute: attrs.Attribute[str | None], value: object) -> None:
    if value is not None:
        require_str(attribute.name, value)


@attrs.frozen(kw_only=True)
class PullMessageRequest:
    """A PULL_MESSAGE request as the broker receives it (PullMessageRequestHeader)."""

    consumer_group: str = attrs.field(validator=_str)
    topic: str = attrs.field(validator=_str)
    queue_id: int = attrs.field(validator=_int)
    queue_offset: int = attrs.field(validator=_int)
    max_msg_nums: int = attrs.field(validator=_int)
    sys_flag: int = attrs.field(default=FLAG_SUSPEND, validator=_int)
    commit_offset: int = attrs.field(default=0, validator=_int)
    suspend_timeout_millis: int = attrs.field(default=15_000, validator=_int)
    subscription: str | None = attrs.field(default=None, validator=_optional_str)
    sub_version: int = attrs.field(default=0, validator=_int)
    expression_type: str | None = attrs.field(default=None, validator=_optional_str)


@attrs.frozen(kw_only=True)
class PullResponse:
    """The broker's answer to a pull: code, remark and the response header, plus the records."""

    code: ResponseCode
    remark: str | None = None
    status: GetMessageStatus | None = None
    next_begin_offset: int | None = None
    min_offset: int | None = None
    max_offset: int | None = None
    suggest_which_broker_id: int = MASTER_ID
    messages: tuple[StoredMessage, ...] = ()
    #: The store result's `bodies` (given only when some read is not one whole record).
    bodies: tuple[bytes, ...] | None = attrs.field(default=None, eq=False)

    @property
    def msg_offsets(self) -> list[int]:
        """The queue offsets of the returned records (read from the body when `bodies` are
        given: spec.record.queue_offsets_in)."""
        if self.bodies is not None:
            return queue_offsets_in(b"".join(self.bodies))
        return [m.queue_offset for m in self.messages]


@rule(
    "CODE-1",
    source="PullMessageProcessor.processRequest",
    seeds=("000_26b83a4251c26823.txt", *SEEDS_PROCESSOR),
)
def broker_allow_suspend(is_rerun_of_held_request: bool) -> bool:
    """A pull runs with brokerAllowSuspend true; a held request is re-run with false.

    post: __return__ == (not is_rerun_of_held_request)
    """
    return not is_rerun_of_held_request


@attrs.frozen
class SysFlag:
    """The decoded PullSysFlag bits of a request."""

    commit_offset: bool
    suspend: bool
    subscription: bool
    class_filter: bool
    lite_pull: bool


def decode_sys_flag(sys_flag: int) -> SysFlag:
    """Decode PullSysFlag: commit 0x1, suspend 0x2, subscription 0x4, class filter 0x8, lite 0x10."""
    return SysFlag(
        bool(sys_flag & FLAG_COMMIT_OFFSET),
        bool(sys_flag & FLAG_SUSPEND),
        bool(sys_flag & FLAG_SUBSCRIPTION),
        bool(sys_flag & FLAG_CLASS_FILTER),
        bool(sys_flag & FLAG_LITE_PULL),
    )


@rule("CODE-2", source="PullMessageProcessor.processRequest; PermName", seeds=SEEDS_PROCESSOR)
def pre_store_check(
    *,
    broker_permission: int,
    group_exists: bool,
    consume_enable: bool,
    topic_exists: bool,
    topic_permission: int,
    queue_id: int,
    read_queue_nums: int,
) -> ResponseCode | None:
    """Before the store the processor checks, in order, broker readability, the group, its
    consumeEnable, the topic, its readability and the queue id, answering the first failure.

    post: __return__ is None or __return__ is not ResponseCode.SUCCESS
    """
    # Check that the broker is readable.
    if not broker_permission & PERM_READ:
        return ResponseCode.NO_PERMISSION
    # Check that the subscription group exists and may consume.
    if not group_exists:
        return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    if not consume_enable:
        return ResponseCode.NO_PERMISSION
    # Check that the topic exists and is readable.
    if not topic_exists:
        return ResponseCode.TOPIC_NOT_EXIST
    if not topic_permission & PERM_READ:
        return ResponseCode.NO_PERMISSION
    # Check that the queue id is one of the topic's read queues.
    if queue_id < 0 or queue_id >= read_queue_nums:
        return ResponseCode.SYSTEM_ERROR
    return None


@rule("CODE-3", source="PullMessageProcessor.processRequest", seeds=SEEDS_PROCESSOR)
def registry_subscription_check(
    *,
    group_registered: bool,
    broadcasting: bool,
    consume_broadcast_enable: bool,
    has_topic_subscription: bool,
    registered_sub_version: int,
    request_sub_version: int,
) -> ResponseCode | None:
    """Without a subscription in the request the broker uses the heartbeat registry and answers
    an unknown group, a refused broadcast, a missing or an outdated subscription with its code.

    post: __return__ is None or __return__ is not ResponseCode.SUCCESS
    """
    # Check that the group sent a heartbeat.
    if not group_registered:
        return ResponseCode.SUBSCRIPTION_NOT_EXIST
    # Check that broadcasting is allowed for the group.
    if broadcasting and not consume_broadcast_enable:
        return ResponseCode.NO_PERMISSION
    # Check that the group subscribes to the topic with a version at least the request's.
    if not has_topic_subscription:
        return ResponseCode.SUBSCRIPTION_NOT_EXIST
    if registered_sub_version < request_sub_version:
        return ResponseCode.SUBSCRIPTION_NOT_LATEST
    return None


@rule("CODE-4", source="PullMessageProcessor.processRequest", seeds=SEEDS_PROCESSOR)
def no_store_result_code() -> ResponseCode:
    """A missing store result (STORE-1) is answered SYSTEM_ERROR "store getMessage return null".

    post: __return__ is ResponseCode.SYSTEM_ERROR
    """
    return ResponseCode.SYSTEM_ERROR


@rule(
    "CODE-5",
    source="PullMessageProcessor.processRequest",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt", "003_97f7c1df5f6104bc.txt"),
)
def response_remark(status: GetMessageStatus) -> str:
    """Every response carries the status name as remark and the result's next, min and max
    offsets in its header.

    post: __return__ == status.value
    """
    return status.value


@rule("CODE-6", source="PullMessageProcessor.processRequest", seeds=SEEDS_PROCESSOR)
def suggest_which_broker_id(
    suggest_pulling_from_slave: bool,
    slave_read_enable: bool,
    which_broker_when_consume_slowly: int,
    group_broker_id: int,
) -> int:
    """The suggestion is the slow-consumer broker or the group's broker id when slave reading is
    enabled, and the master (0) otherwise.

    post: slave_read_enable or __return__ == 0
    """
    # Step 1 (the suggestion alone) and step 2 (a slave's RETRY code) never survive
    if slave_read_enable:
        return which_broker_when_consume_slowly if suggest_pulling_from_slave else group_broker_id
    return MASTER_ID


@rule(
    "CODE-8",
    source="PullMessageProcessor.processRequest",
    seeds=SEEDS_PROCESSOR,
)
def empty_queue_code(request_queue_offset: int) -> ResponseCode:
    """An empty queue answers a pull at offset 0 with PULL_NOT_FOUND and at any other offset,
    negative included, with PULL_OFFSET_MOVED.

    post: (__return__ is ResponseCode.PULL_NOT_FOUND) == (request_queue_offset == 0)
    """
    if request_queue_offset != 0:
        return ResponseCode.PULL_OFFSET_MOVED
    return ResponseCode.PULL_NOT_FOUND


@rule(
    "CODE-7",
    source="PullMessageProcessor.processRequest",
    seeds=(*SEEDS_PROCESSOR, "000_26b83a4251c26823.txt"),
)
def status_to_response_code(status: GetMessageStatus, request_queue_offset: int) -> ResponseCode:
    """FOUND answers SUCCESS, the two scan misses PULL_RETRY_IMMEDIATELY, OFFSET_FOUND_NULL and
    OFFSET_OVERFLOW_ONE PULL_NOT_FOUND, the two offset errors PULL_OFFSET_MOVED, and an empty
    queue depends on the requested offset.

    post: (__return__ is ResponseCode.SUCCESS) == (status is GetMessageStatus.FOUND)
    """
    match status:
        case GetMessageStatus.FOUND:
            return ResponseCode.SUCCESS
        case GetMessageStatus.MESSAGE_WAS_REMOVING | GetMessageStatus.NO_MATCHED_MESSAGE:
            return ResponseCode.PULL_RETRY_IMMEDIATELY
        case GetMessageStatus.NO_MESSAGE_IN_QUEUE | GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
            return empty_queue_code(request_queue_offset)
        case GetMessageStatus.OFFSET_FOUND_NULL | GetMessageStatus.OFFSET_OVERFLOW_ONE:
            return ResponseCode.PULL_NOT_FOUND
        case GetMessageStatus.OFFSET_OVERFLOW_BADLY | GetMessageStatus.OFFSET_TOO_SMALL:
            return ResponseCode.PULL_OFFSET_MOVED


@rule("CODE-9", source="PullMessageProcessor.processRequest", seeds=SEEDS_PROCESSOR)
def slave_code(
    broker_role: BrokerRole,
    slave_read_enable: bool,
    status: GetMessageStatus,
    request_queue_offset: int,
) -> ResponseCode:
    """A slave without slave reading still serves pulls: the status switch overwrites its
    PULL_RETRY_IMMEDIATELY, so the code depends only on the status.

    post: __return__ is status_to_response_code(status, request_queue_offset)
    """
    code = ResponseCode.SUCCESS
    if broker_role is BrokerRole.SLAVE and not slave_read_enable:
        code = ResponseCode.PULL_RETRY_IMMEDIATELY  # overwritten just below, as in RocketMQ
    code = status_to_response_code(status, request_queue_offset)
    return code


@rule(
    "CODE-10",
    source="PullMessageProcessor.processRequest, generateOffsetMovedEvent",
    seeds=SEEDS_PROCESSOR,
)
def offset_moved_outcome(
    broker_role: BrokerRole, offset_check_in_slave: bool, suggestion: int, group_broker_id: int
) -> tuple[ResponseCode, int, bool]:
    """PULL_OFFSET_MOVED stands, with an OFFSET_MOVED_EVENT written, where offsets are corrected;
    a slave without offsetCheckInSlave answers PULL_RETRY_IMMEDIATELY and suggests the group's
    broker; the answer is (code, suggestion, write event).

    post: __return__[2] == (__return__[0] is ResponseCode.PULL_OFFSET_MOVED)
    """
    # Check that this broker corrects offsets (STORE-6).
    if broker_role is not BrokerRole.SLAVE or offset_check_in_slave:
        return (ResponseCode.PULL_OFFSET_MOVED, suggestion, True)
    return (ResponseCode.PULL_RETRY_IMMEDIATELY, group_broker_id, False)


#: fastjson's escapes inside a double-quoted string (IOUtils.replaceChars for the flag-1 chars).
_FASTJSON_SHORT = {"\b": "b", "\t": "t", "\n": "n", "\f": "f", "\r": "r", '"': '"', "\\": "\\"}


def fastjson_string(text: str) -> str:
    """`text` as fastjson 1.2.69's JSON.toJSONString writes a string with its default features:
    in double quotes; `"`, `\\` and \\b \\t \\n \\f \\r escaped with a backslash; every other
    character below U+0020, U+007F–U+009F, U+2028 and U+2029 as \\uXXXX in upper-case hex;
    everything else as it is (SerializeWriter.writeStringWithDoubleQuote, IOUtils)."""
    out = ['"']
    for ch in text:
        n = ord(ch)
        if ch in _FASTJSON_SHORT:
            out.append("\\" + _FASTJSON_SHORT[ch])
        elif n < 0x20 or 0x7F <= n < 0xA0 or n in (0x2028, 0x2029):
            out.append(f"\\u{n:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@rule(
    "CODE-15",
    source="PullMessageProcessor.generateOffsetMovedEvent; OffsetMovedEvent.encode",
    seeds=(),
)
def offset_moved_event(
    group: str,
    topic: str,
    broker_name: str,
    queue_id: int,
    offset_request: int,
    offset_new: int,
) -> tuple[bytes, Properties]:
    """The OFFSET_MOVED_EVENT record's body is fastjson's compact JSON of the event, properties in
    alphabetical order with the queue as {brokerName, queueId, topic}, and its properties are
    KEYS = group, DELAY = "0" and TAGS = group, in that order; the answer is (body, properties).

    The body is UTF-8 with no space anywhere. The property order is the iteration order of the
    java.util.HashMap that messageProperties2String walks: KEYS, DELAY and TAGS hash to buckets
    7, 13 and 14 of 16 whatever their values. A slave never writes the event (CODE-10), the
    record goes to queue 0 with flag 0 and sysFlag 0, born and stored at the broker's address,
    and a failed put is ignored.

    pre: -(2**31) <= queue_id < 2**31 and -(2**63) <= offset_request < 2**63
    post: __return__[0].startswith(b'{"consumerGroup":"') and __return__[0].endswith(b"}")
    post: __return__[1] == (("KEYS", group), ("DELAY", "0"), ("TAGS", group))
    """
    body = (
        f'{{"consumerGroup":{fastjson_string(group)},'
        f'"messageQueue":{{"brokerName":{fastjson_string(broker_name)},'
        f'"queueId":{queue_id},"topic":{fastjson_string(topic)}}},'
        f'"offsetNew":{offset_new},"offsetRequest":{offset_request}}}'
    )
    # Java's String.getBytes(UTF_8) writes "?" for a lone surrogate, as "replace" does here
    return body.encode("utf-8", "replace"), (
        (PROPERTY_KEYS, group),
        (PROPERTY_DELAY, "0"),
        (PROPERTY_TAGS, group),
    )


@rule(
    "CODE-11",
    source="PullMessageProcessor.processRequest, readGetMessageResult",
    seeds=SEEDS_PROCESSOR,
)
def success_body(records: tuple[bytes, ...]) -> bytes:
    """A SUCCESS body is the concatenation, in index order, of the complete commit-log records.

    post: len(__return__) == sum(len(r) for r in records)
    """
    return b"".join(records)


@rule("CODE-12", source="PullMessageProcessor.processRequest", seeds=SEEDS_PROCESSOR)
def is_held(code: ResponseCode, allow_suspend: bool, has_suspend_flag: bool) -> bool:
    """PULL_NOT_FOUND is held for long polling when the broker allows suspending and the request
    has the suspend flag; everything else is answered at once.

    post: __return__ == (code is ResponseCode.PULL_NOT_FOUND and allow_suspend and has_suspend_flag)
    """
    return code is ResponseCode.PULL_NOT_FOUND and allow_suspend and has_suspend_flag


@rule("CODE-13", source="MQClientAPIImpl.processPullResponse", seeds=SEEDS_PROCESSOR)
def client_pull_status(code: ResponseCode) -> PullStatus | None:
    """The client maps SUCCESS to FOUND, PULL_NOT_FOUND to NO_NEW_MSG, PULL_RETRY_IMMEDIATELY to
    NO_MATCHED_MSG and PULL_OFFSET_MOVED to OFFSET_ILLEGAL; any other code is an error (None).

    post: (__return__ is None) == (code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED))
    """
    return {
        ResponseCode.SUCCESS: PullStatus.FOUND,
        ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
        ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
        ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
    }.get(code)


@rule(
    "CODE-14",
    source="DefaultMessageStore.getMessage; PullMessageProcessor.processRequest",
    seeds=SEEDS_PROCESSOR,
)
def pull_outcome_code(
    status: GetMessageStatus,
    request_queue_offset: int,
    broker_role: BrokerRole,
    offset_check_in_slave: bool,
) -> ResponseCode:
    """The response code of a store status combines the switch with PULL_OFFSET_MOVED's slave
    rewrite, so a slave without correction never answers PULL_OFFSET_MOVED.

    post: __return__ is not ResponseCode.PULL_OFFSET_MOVED or broker_role is not BrokerRole.SLAVE or offset_check_in_slave
    """
    code = status_to_response_code(status, request_queue_offset)
    if code is ResponseCode.PULL_OFFSET_MOVED:
        code = offset_moved_outcome(broker_role, offset_check_in_slave, MASTER_ID, MASTER_ID)[0]
    return code
