"""Pull-result handling (RESULT-1 … RESULT-15): `PullAPIWrapper.processPullResult` and the
`PullCallback` of `DefaultMQPushConsumerImpl.pullMessage`, as pure functions of the result."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pullspec.spec.client_errors import MQBrokerError
from pullspec.spec.consumer_config import (
    OFFSET_ILLEGAL_FIX_UP_DELAY_MILLIS,
    PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL,
    ConsumerConfig,
    MessageModel,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import (
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    RETRY_GROUP_TOPIC_PREFIX,
    StoredMessage,
)
from pullspec.spec.offset_store import OffsetUpdate
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_actions import Delay, DelayReason, Immediately
from pullspec.spec.rules import Rules, rule, stated
from pullspec.spec.status import PullStatus, ResponseCode

JAVA_LONG_MAX = (1 << 63) - 1

_S2 = ("002_c88c8921902728c1.txt",)
_S024 = ("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")
_S0234 = (*_S024[:2], "003_97f7c1df5f6104bc.txt", _S024[2])
_CALLBACK = "DefaultMQPushConsumerImpl.pullMessage (PullCallback.onSuccess)"
_PROCESS = "PullAPIWrapper.processPullResult"


def _message_tuple(value: Iterable[StoredMessage] | None) -> tuple[StoredMessage, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class PullResult:
    """PullResultExt as the callback sees it; `msg_found_list` is the decoded body (None when the
    status is not FOUND)."""

    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msg_found_list: tuple[StoredMessage, ...] | None = attrs.field(
        default=None, converter=_message_tuple
    )
    suggest_which_broker_id: int = 0


@attrs.frozen
class OffsetIllegalFixUp:
    """RESULT-10's task: after `delay_ms`, updateOffset(mq, offset, increaseOnly=false), persist(mq),
    removeProcessQueue(mq), in this order."""

    offset: int
    delay_ms: int = OFFSET_ILLEGAL_FIX_UP_DELAY_MILLIS
    increase_only: bool = False
    persist: bool = True
    remove_process_queue: bool = True


@attrs.frozen(kw_only=True)
class PullResultHandling:
    """What onSuccess does with one result."""

    #: pr.nextOffset afterwards.
    next_offset: int
    #: The list to putMessage into the process queue and submit for consumption (RESULT-5).
    messages: tuple[StoredMessage, ...] = ()
    #: correctTagsOffset(pr) runs (RESULT-8) and, when the queue caches nothing, writes this.
    correct_tags_offset: bool = False
    offset_update: OffsetUpdate | None = None
    reenqueue: Immediately | Delay | None = None
    #: pq.dropped = true at once (RESULT-10).
    drop_process_queue: bool = False
    fix_up: OffsetIllegalFixUp | None = None
    #: The "[BUG] pull message result maybe data wrong" warning fires (RESULT-7).
    bug_warning: bool = False
    #: updatePullFromWhichNode(mq, suggestWhichBrokerId) (RESULT-2); None when nothing arrived.
    pull_from_which_node: int | None = None


@rule("RESULT-2", source=f"{_PROCESS}, PullAPIWrapper.updatePullFromWhichNode", seeds=_S2)
def pull_from_which_node(pull_result: PullResult) -> int:
    """Every result that reaches processPullResult, whatever its status, makes the broker's
    suggestWhichBrokerId the node of the queue's next pull.

    post: __return__ == pull_result.suggest_which_broker_id
    """
    # OFFSET_ILLEGAL and NO_NEW_MSG update the table too; only exceptions leave it alone.
    return pull_result.suggest_which_broker_id


@rule("RESULT-3", source=f"{_PROCESS}, FilterAPI.buildSubscriptionData", seeds=_S024)
def filter_by_tags(
    messages: tuple[StoredMessage, ...], subscription_data: SubscriptionData
) -> tuple[StoredMessage, ...]:
    """With a non-empty tagsSet outside class-filter mode the client keeps, in broker order,
    exactly the messages whose TAGS property is in tagsSet (case-sensitive); otherwise all.

    post: all(m in messages for m in __return__)
    post: not subscription_data.tags_set or subscription_data.class_filter_mode or all(m.tags in subscription_data.tags_set for m in __return__)
    """
    # An untagged message is dropped whenever specific tags are subscribed, since the
    # broker compared only hash codes.
    if not subscription_data.tags_set or subscription_data.class_filter_mode:
        return messages
    return tuple(m for m in messages if m.tags is not None and m.tags in subscription_data.tags_set)


def _put_properties(message: StoredMessage, *pairs: tuple[str, str]) -> StoredMessage:
    """MessageAccessor.putProperty of each pair (their names distinct) in turn: a name already
    present moves to the end with its new value. One evolve for all of them: a StoredMessage
    validates every property again when made."""
    names = {name for name, _ in pairs}
    props = [(k, v) for k, v in message.properties if k not in names]
    return evolve(message, properties=(*props, *pairs))


@rule("RESULT-4", source=_PROCESS, seeds=_S2)
def stamp_offsets(
    messages: tuple[StoredMessage, ...], min_offset: int, max_offset: int
) -> tuple[StoredMessage, ...]:
    """Each kept message gets properties MIN_OFFSET and MAX_OFFSET, the decimal strings of the
    result's consume-queue min and max offsets.

    post: len(__return__) == len(messages)
    post: all(m.get_property("MAX_OFFSET") == str(max_offset) for m in __return__)
    """
    # These are consume-queue (logical) offsets, not commit-log offsets (S-17).
    stamps = ((PROPERTY_MIN_OFFSET, str(min_offset)), (PROPERTY_MAX_OFFSET, str(max_offset)))
    return tuple(_put_properties(m, *stamps) for m in messages)


def transaction_id(message: StoredMessage) -> str | None:
    """RESULT-4's transactionId: UNIQ_KEY when property TRAN_MSG parses as true, else None."""
    flag = message.get_property(PROPERTY_TRANSACTION_PREPARED)
    if flag is not None and flag.lower() == "true":
        return message.get_property(PROPERTY_UNIQ_KEY)
    return None


def process_pull_result(pull_result: PullResult, subscription_data: SubscriptionData) -> PullResult:
    """processPullResult (RESULT-3, RESULT-4): for FOUND, filter by tag then stamp the offsets;
    the status stays FOUND even when the filter empties the list."""
    if pull_result.pull_status is not PullStatus.FOUND:
        return pull_result
    kept = filter_by_tags(pull_result.msg_found_list or (), subscription_data)
    stamped = stamp_offsets(kept, pull_result.min_offset, pull_result.max_offset)
    return evolve(pull_result, msg_found_list=stamped)


@rule("RESULT-7", source=_CALLBACK, seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"))
def bug_warning(next_begin_offset: int, first_msg_offset: int, prev_request_offset: int) -> bool:
    """After a FOUND result the client only logs "[BUG] pull message result maybe data wrong"
    when nextBeginOffset or the first message's offset lies below the requested offset.

    post: __return__ == (next_begin_offset < prev_request_offset or first_msg_offset < prev_request_offset)
    """
    # An empty list passes Long.MAX_VALUE as first_msg_offset, so only the first test fires.
    return next_begin_offset < prev_request_offset or first_msg_offset < prev_request_offset


@rule("RESULT-5", source=_CALLBACK, seeds=_S0234)
def found_with_messages(
    pull_result: PullResult, prev_request_offset: int, config: ConsumerConfig
) -> PullResultHandling:
    """A FOUND result with messages moves nextOffset to nextBeginOffset, puts and submits the
    list, and re-enqueues after pullInterval when it is positive, else immediately.

    pre: bool(pull_result.msg_found_list)
    post: __return__.next_offset == pull_result.next_begin_offset
    post: isinstance(__return__.reenqueue, Delay) == (config.pull_interval > 0)
    """
    # The default pullInterval 0 re-enqueues immediately (S-11: never "less than 0").
    messages = pull_result.msg_found_list or ()
    reenqueue: Immediately | Delay = Immediately()
    if config.pull_interval > 0:
        reenqueue = Delay(config.pull_interval, DelayReason.PULL_INTERVAL)
    first = messages[0].queue_offset
    return PullResultHandling(
        next_offset=pull_result.next_begin_offset,
        messages=messages,
        reenqueue=reenqueue,
        bug_warning=bug_warning(pull_result.next_begin_offset, first, prev_request_offset),
    )


@rule("RESULT-6", source=_CALLBACK, seeds=_S0234)
def found_empty(pull_result: PullResult, prev_request_offset: int) -> PullResultHandling:
    """A FOUND result whose list is empty after the client filter still moves nextOffset to
    nextBeginOffset and re-enqueues immediately, with no put, no submit and no correctTagsOffset.

    post: __return__.next_offset == pull_result.next_begin_offset
    post: __return__.messages == () and not __return__.correct_tags_offset
    """
    # The committed offset does not advance here, unlike NO_MATCHED_MSG.
    return PullResultHandling(
        next_offset=pull_result.next_begin_offset,
        reenqueue=Immediately(),
        bug_warning=bug_warning(pull_result.next_begin_offset, JAVA_LONG_MAX, prev_request_offset),
    )


@rule("RESULT-9", source="DefaultMQPushConsumerImpl.correctTagsOffset", seeds=_S024)
def correct_tags_offset(msg_count: int, next_offset: int) -> OffsetUpdate | None:
    """correctTagsOffset writes nextOffset to the offset store, increase-only, when the process
    queue caches no message, and does nothing otherwise.

    post: (__return__ is None) == (msg_count != 0)
    post: __return__ is None or __return__.increase_only
    """
    # Orderly taken-but-uncommitted messages count as cached (PQ-13).
    return OffsetUpdate(next_offset, increase_only=True) if msg_count == 0 else None


@rule("RESULT-8", source=_CALLBACK, seeds=_S0234)
def no_new_or_no_matched(pull_result: PullResult, msg_count: int) -> PullResultHandling:
    """NO_NEW_MSG and NO_MATCHED_MSG move nextOffset to nextBeginOffset, run correctTagsOffset
    and re-enqueue immediately, leaving the waiting to the broker's long polling.

    post: __return__.next_offset == pull_result.next_begin_offset
    post: __return__.correct_tags_offset and isinstance(__return__.reenqueue, Immediately)
    """
    # There is no client-side delay for an empty queue.
    return PullResultHandling(
        next_offset=pull_result.next_begin_offset,
        correct_tags_offset=True,
        offset_update=correct_tags_offset(msg_count, pull_result.next_begin_offset),
        reenqueue=Immediately(),
    )


@rule("RESULT-10", source=_CALLBACK, seeds=_S024)
def offset_illegal(pull_result: PullResult) -> PullResultHandling:
    """OFFSET_ILLEGAL moves nextOffset to nextBeginOffset, drops the process queue at once, does
    not re-enqueue, and schedules a fix-up 10 s later that updates (not increase-only), persists
    and removes the process queue.

    post: __return__.reenqueue is None and __return__.drop_process_queue
    post: __return__.fix_up is not None and __return__.fix_up.delay_ms == 10000
    """
    # The delay is 10 s (S-9 says 1 s) and the drop comes first (S-10).
    return PullResultHandling(
        next_offset=pull_result.next_begin_offset,
        drop_process_queue=True,
        fix_up=OffsetIllegalFixUp(pull_result.next_begin_offset),
    )


@rule("RESULT-11", source="RemoteBrokerOffsetStore.persist, LocalFileOffsetStore.persist")
def fix_up_reaches_storage(message_model: MessageModel) -> bool:
    """The fix-up's corrected offset reaches durable storage only in CLUSTERING; in BROADCASTING
    persist is a no-op and the removed queue is left out of persistAll, so the stale file value
    wins at the next rebalance.

    post: __return__ == (message_model is MessageModel.CLUSTERING)
    """
    # The broadcasting correction can be lost and the OFFSET_ILLEGAL cycle repeat.
    return message_model is MessageModel.CLUSTERING


@rule("RESULT-1", source=_CALLBACK, seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"))
def on_success(
    pull_result: PullResult | None,
    prev_request_offset: int,
    subscription_data: SubscriptionData,
    msg_count: int,
    config: ConsumerConfig,
) -> PullResultHandling:
    """onSuccess ignores a null result, otherwise runs processPullResult with FLOW-13's
    subscription and then the branch of the status, never checking whether the process queue
    was dropped.

    post: pull_result is not None or __return__.reenqueue is None
    post: pull_result is None or __return__.next_offset == pull_result.next_begin_offset
    post: pull_result is None or __return__.pull_from_which_node == pull_result.suggest_which_broker_id
    """
    # Null (RESULT-12) changes nothing and lets the request die.
    if pull_result is None:
        return null_result(prev_request_offset)
    processed = process_pull_result(pull_result, subscription_data)
    status = processed.pull_status
    if status is PullStatus.FOUND:
        if processed.msg_found_list:
            handling = found_with_messages(processed, prev_request_offset, config)
        else:
            handling = found_empty(processed, prev_request_offset)
    elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
        handling = no_new_or_no_matched(processed, msg_count)
    else:
        handling = offset_illegal(processed)
    return evolve(handling, pull_from_which_node=pull_from_which_node(processed))


@rule("RESULT-12", source=_CALLBACK)
def null_result(prev_request_offset: int) -> PullResultHandling:
    """onSuccess(null) and an unknown status do nothing, so the request dies.

    post: __return__.reenqueue is None and __return__.next_offset == prev_request_offset
    """
    # Nothing is re-enqueued: only rebalance can revive the queue.
    return PullResultHandling(next_offset=prev_request_offset)


@attrs.frozen
class PullExceptionHandling:
    """What onException does: the re-enqueue delay and whether it logs a warning."""

    delay: Delay
    log_warning: bool


def _logs(topic: str) -> bool:
    return not topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def _e(config: ConsumerConfig) -> Delay:
    return Delay(config.pull_time_delay_mills_when_exception, DelayReason.PULL_EXCEPTION)


# [4.7]
@rule(
    "RESULT-13",
    source=f"{_CALLBACK[:36]} (PullCallback.onException)",
    seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"),
    profiles=(Profile.V4_7,),
    versions="4.9 re-enqueues after 20 ms when the error is MQBrokerException FLOW_CONTROL (215)",
)
def on_exception_v47(
    error: BaseException, topic: str, config: ConsumerConfig
) -> PullExceptionHandling:
    """onException warns unless the topic is a %RETRY% topic and re-enqueues after E whatever
    the error.

    post: __return__.delay.ms == config.pull_time_delay_mills_when_exception
    post: __return__.log_warning == (not topic.startswith("%RETRY%"))
    """
    # Broker error codes such as SUBSCRIPTION_NOT_LATEST end up here.
    return PullExceptionHandling(_e(config), _logs(topic))


# [Modified in 4.9]
@rule("RESULT-13", source=f"{_CALLBACK[:36]} (PullCallback.onException)", profiles=(Profile.V4_9,))
def on_exception_v49(
    error: BaseException, topic: str, config: ConsumerConfig
) -> PullExceptionHandling:
    """onException warns unless the topic is a %RETRY% topic and re-enqueues after 20 ms for a
    broker FLOW_CONTROL (215) answer, else after E.

    post: __return__.log_warning == (not topic.startswith("%RETRY%"))
    post: __return__.delay.ms in (20, config.pull_time_delay_mills_when_exception)
    """
    # Only MQBrokerException with code 215 takes the short back-off.
    if isinstance(error, MQBrokerError) and error.code == ResponseCode.FLOW_CONTROL:
        delay = Delay(
            PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL, DelayReason.BROKER_FLOW_CONTROL
        )
        return PullExceptionHandling(delay, _logs(topic))
    return PullExceptionHandling(_e(config), _logs(topic))


@rule("RESULT-14", source="MQClientAPIImpl.pullMessageAsync")
def copies_after_on_success_exception(reenqueued_before_throw: bool) -> int:
    """An exception thrown inside onSuccess goes to onException, which re-enqueues once more, so
    two copies of the PullRequest circulate if onSuccess had already re-enqueued it.

    post: __return__ == (2 if reenqueued_before_throw else 1)
    """
    # A throw before the re-enqueue (decode, orderly submit) still leaves one copy.
    return 2 if reenqueued_before_throw else 1


@rule("RESULT-15", source=_CALLBACK)
def stores_despite_drop(dropped: bool) -> bool:
    """The callback does not check pq.dropped, so a FOUND result for a queue dropped in flight is
    still put, submitted and re-enqueued, and the request dies only at the next FLOW-1.

    post: __return__
    """
    # The consume services, not the callback, discard work for dropped queues.
    return True


class PullResultRules(Rules):
    """The changed RESULT rule (see `spec.rules.Rules`)."""

    on_exception = stated(on_exception_v47, on_exception_v49)
