"""Building and sending the pull request (REQ-1 … REQ-12): the piggy-backed commit offset, the
expression, the kernel call, the request header and the response-code mapping; the sys flag and
the broker choice are in `spec.pull_route`."""

from __future__ import annotations

import attrs

from pullspec.spec.client_errors import MQBrokerError
from pullspec.spec.consumer_config import (
    BROKER_SUSPEND_MAX_TIME_MILLIS,
    CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND,
    ConsumerConfig,
    MessageModel,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_actions import Delay, DelayReason
from pullspec.spec.pull_route import (  # PullSysFlag and has_flag are used by the contracts
    FindBrokerResult,
    PullSysFlag,  # noqa: F401
    build_sys_flag,
    has_flag,  # noqa: F401
    sys_flag_for_broker,
)
from pullspec.spec.rules import Rules, rule, stated
from pullspec.spec.status import PullStatus, ResponseCode

_SEEDS = (
    "000_26b83a4251c26823.txt",
    "001_c163ec5dbc0ced81.txt",
    "002_c88c8921902728c1.txt",
    "004_60fc00b6c6a023ff.txt",
)
_SEEDS_2_4 = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")
_SOURCE = "DefaultMQPushConsumerImpl.pullMessage"

#: RequestCode.PULL_MESSAGE.
PULL_MESSAGE = 11


@attrs.frozen
class PullCallbackContext:
    """What the pull callback captures besides the PullRequest and its process queue (REQ-1)."""

    begin_timestamp: int
    subscription_data: SubscriptionData


@rule("REQ-1", source=_SOURCE, seeds=_SEEDS_2_4)
def capture_pull_callback(now_ms: int, subscription_data: SubscriptionData) -> PullCallbackContext:
    """After FLOW-13 the attempt records beginTimestamp = now and a callback capturing the
    PullRequest, the process queue read at FLOW-1 and FLOW-13's SubscriptionData.

    post: __return__.subscription_data is subscription_data
    """
    # The callback filters with FLOW-13's object, not REQ-3's second lookup.
    return PullCallbackContext(now_ms, subscription_data)


@attrs.frozen
class CommitOffset:
    """The piggy-backed commit: whether the COMMIT_OFFSET bit is set and the value sent."""

    enable: bool
    value: int


@rule("REQ-2", source=_SOURCE, seeds=_SEEDS)
def commit_offset_for_pull(message_model: MessageModel, memory_offset: int) -> CommitOffset:
    """Only a CLUSTERING consumer sends readOffset(mq, READ_FROM_MEMORY) with its pull, and asks
    the broker to commit it only when it is strictly positive.

    post: __return__.enable == (message_model is MessageModel.CLUSTERING and memory_offset > 0)
    post: message_model is MessageModel.CLUSTERING or __return__.value == 0
    """
    # 0 and -1 (nothing in memory) are sent but never committed.
    if message_model is not MessageModel.CLUSTERING:
        return CommitOffset(False, 0)
    return CommitOffset(memory_offset > 0, memory_offset)


@rule("REQ-3", source=_SOURCE, seeds=_SEEDS)
def subscription_expression(
    subscription_data: SubscriptionData | None, post_subscription_when_pull: bool
) -> tuple[str | None, bool]:
    """The pull sends the subscription string only with postSubscriptionWhenPull outside
    class-filter mode, and flags class filtering whenever the (second) lookup found it on.

    post: __return__[0] is None or post_subscription_when_pull
    post: subscription_data is not None or __return__ == (None, False)
    """
    # The default sends no expression: the broker uses the heartbeat's subscription.
    if subscription_data is None:
        return None, False
    expression = None
    if post_subscription_when_pull and not subscription_data.class_filter_mode:
        expression = subscription_data.sub_string
    return expression, subscription_data.class_filter_mode


@attrs.frozen
class PullKernelCall:
    """The arguments of pullKernelImpl, in RocketMQ's order (REQ-5)."""

    mq: MessageQueue
    sub_expression: str | None
    expression_type: str
    sub_version: int
    offset: int
    max_nums: int
    sys_flag: int
    commit_offset: int
    broker_suspend_max_time_millis: int = BROKER_SUSPEND_MAX_TIME_MILLIS
    timeout_millis: int = CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND


@rule("REQ-5", source=_SOURCE, seeds=_SEEDS)
def pull_kernel_call(
    mq: MessageQueue,
    next_offset: int,
    subscription_data: SubscriptionData,
    subscription_lookup: SubscriptionData | None,
    commit_offset: CommitOffset,
    config: ConsumerConfig,
) -> PullKernelCall:
    """The push consumer calls pullKernelImpl with REQ-3's expression, FLOW-13's expression type
    and subVersion, nextOffset, pullBatchSize, REQ-4's flag, REQ-2's value, 15000 and 30000.

    post: __return__.offset == next_offset and __return__.max_nums == config.pull_batch_size
    post: __return__.broker_suspend_max_time_millis == 15000 and __return__.timeout_millis == 30000
    post: has_flag(__return__.sys_flag, PullSysFlag.SUSPEND)
    """
    # The subVersion field is the subscription's version timestamp, not a client version (S-15).
    expression, class_filter = subscription_expression(
        subscription_lookup, config.post_subscription_when_pull
    )
    flag = build_sys_flag(commit_offset.enable, True, expression is not None, class_filter)
    return PullKernelCall(
        mq=mq,
        sub_expression=expression,
        expression_type=subscription_data.expression_type,
        sub_version=subscription_data.sub_version,
        offset=next_offset,
        max_nums=config.pull_batch_size,
        sys_flag=flag,
        commit_offset=commit_offset.value,
    )


@attrs.frozen(kw_only=True)
class PullMessageRequestHeader:
    """PullMessageRequestHeader of a PULL_MESSAGE command (REQ-9); `bname` only in 4.9."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    subscription: str | None
    sub_version: int
    expression_type: str
    bname: str | None = None


def _header(consumer_group: str, call: PullKernelCall, sys_flag: int) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group=consumer_group,
        topic=call.mq.topic,
        queue_id=call.mq.queue_id,
        queue_offset=call.offset,
        max_msg_nums=call.max_nums,
        sys_flag=sys_flag,
        commit_offset=call.commit_offset,
        suspend_timeout_millis=call.broker_suspend_max_time_millis,
        subscription=call.sub_expression,
        sub_version=call.sub_version,
        expression_type=call.expression_type,
    )


# [4.7]
@rule(
    "REQ-9",
    source="PullAPIWrapper.pullKernelImpl",
    seeds=_SEEDS_2_4,
    profiles=(Profile.V4_7,),
    versions="4.9 also sets bname = mq.brokerName",
)
def pull_message_request_header_v47(
    consumer_group: str, call: PullKernelCall, broker: FindBrokerResult
) -> PullMessageRequestHeader:
    """The PULL_MESSAGE header carries the group, the queue, queueOffset = nextOffset, the batch
    size, REQ-8's flag, the commit offset, 15000, the expression, subVersion and its type.

    post: __return__.queue_offset == call.offset and __return__.bname is None
    post: not broker.slave or not __return__.sys_flag & 0x1
    """
    # The header's flag is the one REQ-8 computed for the chosen broker.
    return _header(consumer_group, call, sys_flag_for_broker(call.sys_flag, broker.slave))


# [Modified in 4.9]
@rule("REQ-9", source="PullAPIWrapper.pullKernelImpl", profiles=(Profile.V4_9,))
def pull_message_request_header_v49(
    consumer_group: str, call: PullKernelCall, broker: FindBrokerResult
) -> PullMessageRequestHeader:
    """The PULL_MESSAGE header carries the 4.7 fields plus bname = the queue's broker name.

    post: __return__.queue_offset == call.offset and __return__.bname == call.mq.broker_name
    post: not broker.slave or not __return__.sys_flag & 0x1
    """
    # The bname field names the queue's broker even when the request goes to a slave.
    header = pull_message_request_header_v47(consumer_group, call, broker)
    return evolve(header, bname=call.mq.broker_name)


@rule("REQ-11", source=_SOURCE, seeds=("000_26b83a4251c26823.txt", *_SEEDS_2_4))
def on_pull_kernel_exception(config: ConsumerConfig) -> Delay:
    """Any exception thrown synchronously by pullKernelImpl is logged and re-enqueues the
    request after E.

    post: __return__.ms == config.pull_time_delay_mills_when_exception
    """
    # A missing broker, an old broker, a missing filter server and a synchronous remoting
    # failure all take this one path.
    return Delay(config.pull_time_delay_mills_when_exception, DelayReason.PULL_KERNEL_EXCEPTION)


_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def _pull_status(code: int, remark: str | None, addr: str | None) -> PullStatus:
    # Broker errors (SUBSCRIPTION_NOT_LATEST, NO_PERMISSION, FLOW_CONTROL …) never become a
    # PullStatus.
    for known, status in _STATUS_BY_CODE.items():
        if code == known:
            return status
    raise MQBrokerError(code, remark, addr)


# [4.7]
@rule(
    "REQ-12",
    source="MQClientAPIImpl.processPullResponse",
    seeds=("001_c163ec5dbc0ced81.txt", *_SEEDS_2_4),
    profiles=(Profile.V4_7,),
    versions="4.9.7 passes the broker address into processPullResponse and into the thrown "
    "MQBrokerException(code, remark, addr); the mapping is the same.",
)
def pull_status_for_response_code_v47(code: int, remark: str | None, addr: str) -> PullStatus:
    """A pull response maps SUCCESS to FOUND, PULL_NOT_FOUND to NO_NEW_MSG,
    PULL_RETRY_IMMEDIATELY to NO_MATCHED_MSG and PULL_OFFSET_MOVED to OFFSET_ILLEGAL; any other
    code throws MQBrokerException(code, remark), which reaches the callback's onException
    without naming the broker (`addr` is not passed in).

    raises: MQBrokerError
    post: code in (0, 19, 20, 21)
    """
    return _pull_status(code, remark, None)


# [Modified in 4.9]
@rule(
    "REQ-12",
    source="MQClientAPIImpl.processPullResponse",
    seeds=("001_c163ec5dbc0ced81.txt", *_SEEDS_2_4),
    profiles=(Profile.V4_9,),
)
def pull_status_for_response_code_v49(code: int, remark: str | None, addr: str) -> PullStatus:
    """A pull response maps the codes as in 4.7, and the MQBrokerException thrown for any other
    code names the broker address the request went to.

    raises: MQBrokerError
    post: code in (0, 19, 20, 21)
    """
    return _pull_status(code, remark, addr)


class PullRequestRules(Rules):
    """The changed REQ rules of the request (see `spec.rules.Rules`)."""

    pull_message_request_header = stated(
        pull_message_request_header_v47, pull_message_request_header_v49
    )
    pull_status_for_response_code = stated(
        pull_status_for_response_code_v47, pull_status_for_response_code_v49
    )
