"""CONC — concurrent consumption (ConsumeMessageConcurrentlyService, rulebook-client §6).

Each rule is a pure decision: the side effects RocketMQ performs (the pool submit, the listener
call, the send-back RPC) happen in the caller, which hands their outcomes in and applies the
plan that comes back. Messages are frozen here, so where Java mutates a cached MessageExt
(reconsumeTimes, topic, properties) a rule returns the changed copy. The vocabulary both
services share (the consume return type, periodic tasks, shutdown steps) is defined here; the
pool, the cleaner and shutdown (CONC-1, CONC-13, CONC-14) close the module; the send-back
(CONC-10, CONC-11) is in `spec.retry`.

A listener's context is mutable on purpose: the listener reports through it (setAckIndex,
setDelayLevelWhenNextConsume), exactly as a Java listener does; the rule functions only read it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

import attrs

from pullspec.spec.errors import (
    JAVA_INT_MAX,
    IndexOutOfBoundsError,
    check_int,
    require_int,
    set_int,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.message import (
    PROPERTY_CONSUME_START_TIME,
    PROPERTY_RETRY_TOPIC,
    MessageQueue,
    StoredMessage,
    put_property,
    retry_topic_name,
    without_namespace,
)
from pullspec.spec.offset_store import OffsetUpdate
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

_SVC = "ConsumeMessageConcurrentlyService"
_S2 = ("002_c88c8921902728c1.txt",)
_S24 = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")
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


class ConsumeConcurrentlyStatus(enum.Enum):
    """What a MessageListenerConcurrently returns."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeReturnType(enum.Enum):
    """The hook's CONSUME_CONTEXT_TYPE (CONC-5, ORDER-8); it never changes the status."""

    SUCCESS = "SUCCESS"
    TIME_OUT = "TIME_OUT"
    EXCEPTION = "EXCEPTION"
    RETURNNULL = "RETURNNULL"
    FAILED = "FAILED"


@attrs.define
class ConsumeConcurrentlyContext:
    """ConsumeConcurrentlyContext: built per ConsumeRequest (CONC-4); the listener may set
    `ack_index` (CONC-6) and `delay_level_when_next_consume` (CONC-10)."""

    message_queue: MessageQueue
    #: 0: the broker picks 3 + reconsumeTimes; < 0: straight to the DLQ (broker send-back only).
    delay_level_when_next_consume: int = attrs.field(
        default=0, validator=check_int, on_setattr=set_int
    )
    #: Integer.MAX_VALUE: "all acknowledged" unless the listener says otherwise.
    ack_index: int = attrs.field(default=JAVA_INT_MAX, validator=check_int, on_setattr=set_int)


#: A scripted MessageListenerConcurrently: it may return None or raise (CONC-5).
ConcurrentListener = Callable[
    [Sequence[StoredMessage], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus | None
]


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


Batch = tuple[StoredMessage, ...]


@attrs.frozen
class SubmitPlan:
    """What submitConsumeRequest does with a pulled list (CONC-2)."""

    #: The ConsumeRequests the pool accepted, in submission order.
    submitted: tuple[Batch, ...]
    #: The rejected request with every remaining message appended, resubmitted after 5 s
    #: (CONC-3 b); None when the pool accepted everything.
    later: Batch | None


@rule("CONC-2", source=f"{_SVC}.submitConsumeRequest", seeds=_S24)
def split_for_submit(
    msgs: Sequence[StoredMessage], batch_max_size: int, rejected_at: int | None = None
) -> SubmitPlan:
    """A pulled list becomes one ConsumeRequest when it fits consumeMessageBatchMaxSize and
    otherwise consecutive chunks of that size, and the first chunk the pool rejects takes every
    remaining message and is resubmitted later, ending the split.

    `rejected_at` is the index of the first request the pool rejects (it only rejects after
    shutdown); dispatchToConsume is ignored, so every FOUND list reaches this rule.

    pre: batch_max_size >= 1
    pre: rejected_at is None or rejected_at >= 0
    post: tuple(m for c in __return__.submitted for m in c) + (__return__.later or ()) == tuple(msgs)
    post: all(0 < len(c) <= batch_max_size for c in __return__.submitted) or len(msgs) == 0
    post: (__return__.later is None) == (rejected_at is None or rejected_at >= max(1, -(-len(msgs) // batch_max_size)))
    """
    batch = tuple(msgs)
    # The list fits one request (an empty list too: Java submits it as it is).
    if len(batch) <= batch_max_size:
        chunks: list[Batch] = [batch]
    else:
        chunks = [batch[i : i + batch_max_size] for i in range(0, len(batch), batch_max_size)]
    # Whether the pool rejects a request; the rejected one swallows the rest.
    if rejected_at is None or rejected_at >= len(chunks):
        return SubmitPlan(tuple(chunks), None)
    rest = tuple(m for c in chunks[rejected_at:] for m in c)
    return SubmitPlan(tuple(chunks[:rejected_at]), rest)


class Resubmission(enum.Enum):
    """The two delayed resubmissions of CONC-3."""

    #: (a) messages whose send-back failed: submitConsumeRequest again, split again.
    SEND_BACK_FAILED = "SEND_BACK_FAILED"
    #: (b) a request the pool rejected: submit the same request object again.
    REJECTED = "REJECTED"


@attrs.frozen
class ResubmitPlan:
    """When and how a resubmission runs."""

    delay_ms: int
    #: True when the messages go through CONC-2 again (chunks may change).
    resplit: bool


@rule("CONC-3", source=f"{_SVC}.submitConsumeRequestLater", seeds=_S24)
def resubmit_plan(kind: Resubmission) -> ResubmitPlan:
    """Messages whose send-back failed are resubmitted through submitConsumeRequest after 5000
    ms and a rejected request is resubmitted as it is after 5000 ms, a second rejection being
    lost in the scheduler.

    post: __return__.delay_ms == 5000
    post: __return__.resplit == (kind is Resubmission.SEND_BACK_FAILED)
    """
    # Which overload: only the message-list one splits again.
    return ResubmitPlan(RESUBMIT_DELAY_MILLIS, kind is Resubmission.SEND_BACK_FAILED)


class RunStep(enum.Enum):
    """The steps of ConsumeRequest.run (CONC-4), named after what they do."""

    RETURN_DROPPED = "RETURN_DROPPED"
    NEW_CONTEXT = "NEW_CONTEXT"
    RESET_RETRY_AND_NAMESPACE = "RESET_RETRY_AND_NAMESPACE"
    HOOK_BEFORE = "HOOK_BEFORE"
    STAMP_CONSUME_START_TIME = "STAMP_CONSUME_START_TIME"
    CALL_LISTENER = "CALL_LISTENER"
    CLASSIFY_STATUS = "CLASSIFY_STATUS"
    HOOK_AFTER = "HOOK_AFTER"
    INC_CONSUME_RT = "INC_CONSUME_RT"
    PROCESS_CONSUME_RESULT = "PROCESS_CONSUME_RESULT"
    DISCARD_RESULT = "DISCARD_RESULT"


@rule("CONC-4", source=f"{_SVC}.ConsumeRequest.run", seeds=_S24)
def consume_request_steps(
    dropped_on_entry: bool, has_hook: bool, dropped_after_listener: bool
) -> tuple[RunStep, ...]:
    """A ConsumeRequest on a dropped queue returns at once, and otherwise builds its context,
    restores retry topics, runs the before-hook, stamps CONSUME_START_TIME, calls the listener,
    classifies the status, runs the after-hook, records the consume time and processes the
    result only if the queue is still not dropped.

    post: dropped_on_entry == (__return__ == (RunStep.RETURN_DROPPED,))
    post: dropped_on_entry or __return__[-1] is (RunStep.DISCARD_RESULT if dropped_after_listener else RunStep.PROCESS_CONSUME_RESULT)
    post: (RunStep.HOOK_BEFORE in __return__) == (has_hook and not dropped_on_entry)
    """
    # The queue is alive: a dropped one keeps its messages and commits nothing.
    if dropped_on_entry:
        return (RunStep.RETURN_DROPPED,)
    hook_before = (RunStep.HOOK_BEFORE,) if has_hook else ()
    hook_after = (RunStep.HOOK_AFTER,) if has_hook else ()
    # The queue survived the listener call: a result for a dropped queue is discarded.
    last = RunStep.DISCARD_RESULT if dropped_after_listener else RunStep.PROCESS_CONSUME_RESULT
    return (
        RunStep.NEW_CONTEXT,
        RunStep.RESET_RETRY_AND_NAMESPACE,
        *hook_before,
        RunStep.STAMP_CONSUME_START_TIME,
        RunStep.CALL_LISTENER,
        RunStep.CLASSIFY_STATUS,
        *hook_after,
        RunStep.INC_CONSUME_RT,
        last,
    )


def stamp_consume_start_time(msgs: Sequence[StoredMessage], now: int) -> Batch:
    """CONC-4 step 5: every message gets CONSUME_START_TIME = now as a decimal string (PQ-18
    reads it)."""
    text = str(require_int("now", now))
    return tuple(put_property(m, PROPERTY_CONSUME_START_TIME, text) for m in msgs)


@rule("CONC-5", source=f"{_SVC}.ConsumeRequest.run", seeds=_S24)
def normalise_status(
    status: ConsumeConcurrentlyStatus | None,
    has_exception: bool,
    consume_rt_ms: int,
    consume_timeout_min: int,
) -> tuple[ConsumeConcurrentlyStatus, ConsumeReturnType]:
    """A listener that returns null or throws counts as RECONSUME_LATER, and the hook's return
    type is EXCEPTION, RETURNNULL, TIME_OUT (consumeRT ≥ consumeTimeout minutes), FAILED or
    SUCCESS, tried in that order, without the timeout ever changing the status.

    pre: not has_exception or status is None
    post: __return__[0] is (ConsumeConcurrentlyStatus.RECONSUME_LATER if status is None else status)
    post: status is None or (__return__[1] is ConsumeReturnType.TIME_OUT) == (consume_rt_ms >= consume_timeout_min * 60000)
    """
    # A status came back; a thrown Throwable leaves it null.
    if status is None:
        kind = ConsumeReturnType.EXCEPTION if has_exception else ConsumeReturnType.RETURNNULL
        return ConsumeConcurrentlyStatus.RECONSUME_LATER, kind
    # The time-out compares with >=; it only labels the hook context.
    if consume_rt_ms >= consume_timeout_min * 60_000:
        return status, ConsumeReturnType.TIME_OUT
    if status is ConsumeConcurrentlyStatus.RECONSUME_LATER:
        return status, ConsumeReturnType.FAILED
    return status, ConsumeReturnType.SUCCESS


@attrs.frozen
class AckResult:
    """processConsumeResult's reading of the status and ackIndex (CONC-6)."""

    #: The ackIndex after clamping (CONSUME_SUCCESS) or forcing to −1 (RECONSUME_LATER).
    ack_index: int
    ok_tps: int
    failed_tps: int
    #: The indices of the failed messages: ack_index + 1 … size − 1.
    failed: tuple[int, ...]


@rule("CONC-6", source=f"{_SVC}.processConsumeResult", seeds=_S24)
def ack_result(status: ConsumeConcurrentlyStatus, ack_index: int, size: int) -> AckResult | None:
    """processConsumeResult does nothing for an empty request, clamps a CONSUME_SUCCESS ackIndex
    to size − 1, forces RECONSUME_LATER to −1, and treats the messages at ackIndex + 1 … size − 1
    as failed.

    A user ackIndex below −1 is not validated: the first failed index is then negative and
    Java's List.get throws IndexOutOfBoundsException in the consume thread, so nothing is
    removed or committed and the messages stay cached.

    pre: size >= 0
    post: (__return__ is None) == (size == 0)
    post: __return__ is None or __return__.failed == tuple(range(__return__.ack_index + 1, size))
    post: __return__ is None or status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS or __return__.failed == tuple(range(size))
    post: __return__ is None or __return__.ok_tps + __return__.failed_tps == size
    raises: IndexOutOfBoundsError
    """
    # Check that the request holds messages (CONC-8 may have emptied a resubmitted list).
    if size == 0:
        return None
    if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
        # The clamp: Integer.MAX_VALUE (the default) means "all consumed".
        ack = size - 1 if ack_index >= size else ack_index
        ok, failed = ack + 1, size - (ack + 1)
    else:
        ack, ok, failed = -1, 0, size
    # The failed range starts inside the list; Java's get(i) throws otherwise.
    if ack + 1 < 0:
        raise IndexOutOfBoundsError("ack_index", ack_index, "below -1: List.get(negative)")
    return AckResult(ack, ok, failed, tuple(range(ack + 1, size)))


@attrs.frozen
class ConsumeResultPlan:
    """What processConsumeResult does after reading the ack (CONC-7/8)."""

    #: Handed to pq.removeMessage (CONC-9).
    remove: Batch
    #: Resubmitted locally after 5 s (CONC-3 a), reconsumeTimes already incremented.
    retry_later: Batch


@rule("CONC-7", source=f"{_SVC}.processConsumeResult", seeds=_S24)
def broadcasting_result(msgs: Sequence[StoredMessage], failed: Sequence[int]) -> ConsumeResultPlan:
    """In BROADCASTING every failed message is only logged ("drop it") and every message of the
    request is removed, so nothing is ever retried.

    post: __return__.remove == tuple(msgs) and __return__.retry_later == ()
    """
    # There is no retry path at all: the failures are logged and forgotten.
    return ConsumeResultPlan(tuple(msgs), ())


@rule("CONC-8", source=f"{_SVC}.processConsumeResult", seeds=_S24)
def clustering_result(
    msgs: Sequence[StoredMessage], failed: Sequence[int], send_back_ok: Sequence[bool]
) -> ConsumeResultPlan:
    """In CLUSTERING each failed message, in index order, is sent back, and the ones whose
    send-back failed get reconsumeTimes + 1, leave the request and are resubmitted locally
    after 5 s while the rest of the request is removed.

    `send_back_ok[k]` is the CONC-10 answer for message `failed[k]`.

    pre: len(failed) == len(send_back_ok)
    pre: all(0 <= i < len(msgs) for i in failed)
    post: len(__return__.remove) + len(__return__.retry_later) == len(msgs)
    post: len(__return__.retry_later) == sum(1 for ok in send_back_ok if not ok)
    """
    back_failed = {i for i, ok in zip(failed, send_back_ok, strict=True) if not ok}
    # Which send-backs failed: only those stay cached, with the counter bumped in memory.
    retry = tuple(
        evolve(msgs[i], reconsume_times=msgs[i].reconsume_times + 1) for i in sorted(back_failed)
    )
    # Java removes them by identity (MessageExt has no equals), i.e. by position here
    remove = tuple(m for i, m in enumerate(msgs) if i not in back_failed)
    return ConsumeResultPlan(remove, retry)


@rule("CONC-9", source=f"{_SVC}.processConsumeResult", seeds=_S24)
def offset_after_remove(offset: int, dropped: bool) -> OffsetUpdate | None:
    """The offset removeMessage returns is committed increase-only when it is ≥ 0 and the queue
    is not dropped, so a RECONSUME_LATER whose send-back succeeded still advances progress.

    post: (__return__ is None) == (offset < 0 or dropped)
    post: __return__ is None or __return__ == OffsetUpdate(offset, True)
    """
    # Check that there is something to commit and the queue is still ours.
    if offset < 0 or dropped:
        return None
    return OffsetUpdate(offset, True)


@rule("CONC-12", source="DefaultMQPushConsumerImpl.resetRetryAndNamespace", seeds=_S24)
def reset_retry_and_namespace(
    msgs: Sequence[StoredMessage], group: str, namespace: str | None = None
) -> Batch:
    """A message whose topic equals %RETRY%<group> and that carries RETRY_TOPIC gets that
    original topic back, and then the namespace is stripped from every topic.

    post: len(__return__) == len(msgs)
    post: bool(namespace) or all(r.topic == (m.get_property("RETRY_TOPIC") if m.topic == "%RETRY%" + group and m.get_property("RETRY_TOPIC") is not None else m.topic) for r, m in zip(__return__, msgs))
    """
    group_topic = retry_topic_name(group)
    out: list[StoredMessage] = []
    for msg in msgs:
        original = msg.get_property(PROPERTY_RETRY_TOPIC)
        # Both conditions: a RETRY_TOPIC on a message of another topic is left alone.
        topic = original if original is not None and msg.topic == group_topic else msg.topic
        out.append(evolve(msg, topic=without_namespace(topic, namespace)))
    return tuple(out)


@rule("CONC-1", source=f"{_SVC}.<init>, {_SVC}.updateCorePoolSize", seeds=_S2, versions=(
    "consume thread names gain the group in 4.9.7; no behavioural change"))  # fmt: skip
def core_pool_size_after_update(core_pool_size: int, n: int, consume_thread_max: int) -> int:
    """The consume pool runs exactly its core size of threads (consumeThreadMin, because its
    unbounded queue never lets it grow), and updateCorePoolSize(n) changes that size only when
    0 < n ≤ 32767 and n < consumeThreadMax.

    post: __return__ == (n if 0 < n <= 32767 and n < consume_thread_max else core_pool_size)
    """
    # The bounds; incCorePoolSize and decCorePoolSize are empty and never change it.
    if 0 < n <= MAX_CORE_POOL_SIZE and n < consume_thread_max:
        return n
    return core_pool_size


# [4.7]
@rule("CONC-13", source=f"{_SVC}.start, {_SVC}.cleanExpireMsg", seeds=_S2,
      profiles=(Profile.V4_7,), versions=(
    "4.9.7 catches an exception of a run; in 4.7.1 it cancels the schedule"))  # fmt: skip
def clean_expire_schedule_v47(consume_timeout_min: int) -> PeriodicTask:
    """The consume-timeout cleaner runs PQ-18 over every ProcessQueue of the table at a fixed
    rate whose initial delay and period are both consumeTimeout minutes, and an exception
    escaping one run cancels it for good.

    post: __return__ == PeriodicTask(consume_timeout_min * 60000, consume_timeout_min * 60000, False)
    """
    # The unit: consumeTimeout is in minutes.
    period = consume_timeout_min * 60_000
    return PeriodicTask(period, period, False)


# [Modified in 4.9]
@rule("CONC-13", source=f"{_SVC}.start, {_SVC}.cleanExpireMsg", profiles=(Profile.V4_9,))
def clean_expire_schedule_v49(consume_timeout_min: int) -> PeriodicTask:
    """The consume-timeout cleaner runs PQ-18 over every ProcessQueue of the table at a fixed
    rate whose initial delay and period are both consumeTimeout minutes, and an exception of
    one run is logged and the schedule goes on.

    post: __return__ == PeriodicTask(consume_timeout_min * 60000, consume_timeout_min * 60000, True)
    """
    # 4.9.7 wraps a try/catch around each run.
    period = consume_timeout_min * 60_000
    return PeriodicTask(period, period, True)


@rule("CONC-14", source=f"{_SVC}.shutdown", seeds=_S2)
def concurrent_shutdown_steps() -> tuple[ShutdownStep, ...]:
    """Shutdown stops the resubmit scheduler, then the consume pool (gracefully), then the
    cleaner, and results of consumption still in flight are discarded because their queues are
    dropped by then.

    post: __return__ == (ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL, ShutdownStep.CLEANER)
    """
    # There is no unlock: only the orderly service unlocks (ORDER-17).
    return (ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL, ShutdownStep.CLEANER)


class ConsumeConcurrentlyRules(Rules):
    """The changed CONC rule of the cleaner's schedule (see `spec.rules.Rules`)."""

    clean_expire_schedule = stated(clean_expire_schedule_v47, clean_expire_schedule_v49)
