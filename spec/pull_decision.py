"""The pre-pull decision of `DefaultMQPushConsumerImpl.pullMessage` (FLOW-1 … FLOW-13, PULLQ-9).

`decide_pull` is one pure function: it takes a snapshot of the process queue, the consumer's
state, the request's cursor and first-lock flag, the configuration, the profile's rules (FLOW-12
changed in 4.9) and the flow-control log counters, and returns what the attempt does: `Pull`, `Delay` or `Drop`,
together with the request state and counters after the attempt (types in `spec.pull_actions`).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pullspec.spec.consumer_config import (
    FLOW_CONTROL_LOG_INTERVAL,
    PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL,
    PULL_TIME_DELAY_MILLS_WHEN_SUSPEND,
    ConsumerConfig,
)
from pullspec.spec.errors import InvalidArgumentError, require_int
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_actions import (
    NO_FLOW_CONTROL,
    Delay,
    DelayReason,
    Drop,
    FirstLockCorrection,
    FlowControlCounters,
    FlowControlLog,
    Pull,
    PullDecision,
)
from pullspec.spec.rules import Rules, rule, stated

MIB = 1024 * 1024

_ALL_SEEDS = (
    "000_26b83a4251c26823.txt",
    "001_c163ec5dbc0ced81.txt",
    "002_c88c8921902728c1.txt",
    "004_60fc00b6c6a023ff.txt",
)
_SOURCE = "DefaultMQPushConsumerImpl.pullMessage"


@attrs.frozen
class ProcessQueueSnapshot:
    """What pullMessage reads of the ProcessQueue, read without its lock (FLOW-5)."""

    dropped: bool = False
    msg_count: int = attrs.field(default=0, validator=lambda _i, _a, v: require_int("msg_count", v))
    #: Cached body bytes (msgSize).
    msg_size: int = attrs.field(default=0, validator=lambda _i, _a, v: require_int("msg_size", v))
    #: getMaxSpan(): lastKey − firstKey of msgTreeMap, 0 when it is empty (PQ-6).
    max_span: int = attrs.field(default=0, validator=lambda _i, _a, v: require_int("max_span", v))
    locked: bool = False
    #: msgTreeMap is empty (an orderly consumer may have taken everything); FLOW-10.
    msg_tree_empty: bool = False


@attrs.frozen
class ConsumerState:
    """The consumer-level facts pullMessage checks; the consume mode is `ConsumerConfig`'s."""

    running: bool = True
    paused: bool = False
    #: subscriptionInner has SubscriptionData for the queue's topic (FLOW-13).
    has_subscription: bool = True


@rule("FLOW-1", source=_SOURCE, seeds=(*_ALL_SEEDS, "003_97f7c1df5f6104bc.txt"))
def check_dropped(process_queue: ProcessQueueSnapshot) -> Drop | None:
    """An attempt on a dropped process queue returns without re-enqueueing, so its PullRequest dies.

    post: (__return__ is not None) == process_queue.dropped
    """
    # The dropped flag is the very first check and ends the request for good.
    return Drop("process queue dropped") if process_queue.dropped else None


@rule("FLOW-2", source=_SOURCE, seeds=_ALL_SEEDS)
def touches_last_pull_timestamp(process_queue: ProcessQueueSnapshot) -> bool:
    """Every attempt on a non-dropped process queue sets lastPullTimestamp to now, before any
    state, pause or flow-control check.

    post: __return__ == (not process_queue.dropped)
    """
    # Paused or flow-controlled queues are touched too, so they never pull-expire.
    return not process_queue.dropped


@rule("FLOW-3", source=f"{_SOURCE}, DefaultMQPushConsumerImpl.makeSureStateOK", seeds=_ALL_SEEDS)
def check_consumer_state(running: bool, config: ConsumerConfig) -> Delay | None:
    """A consumer whose service state is not RUNNING re-enqueues the request after E.

    post: (__return__ is None) == running
    """
    # The delay is E (1000 by default), not the impl's overwritten 3000 initialiser.
    if running:
        return None
    return Delay(config.pull_time_delay_mills_when_exception, DelayReason.CONSUMER_NOT_RUNNING)


@rule("FLOW-4", source=_SOURCE, seeds=_ALL_SEEDS)
def check_paused(paused: bool) -> Delay | None:
    """A paused consumer re-enqueues the request after PULL_TIME_DELAY_MILLS_WHEN_SUSPEND (1000).

    post: (__return__ is None) == (not paused)
    """
    # The pause delay is the suspend constant, independent of E.
    return Delay(PULL_TIME_DELAY_MILLS_WHEN_SUSPEND, DelayReason.PAUSED) if paused else None


@rule("FLOW-5", source=_SOURCE, seeds=_ALL_SEEDS)
def cached_message_size_in_mib(msg_size: int) -> int:
    """The cached size in MiB is msgSize divided by 1048576 with floor division.

    pre: msg_size >= 0
    post: __return__ * 1048576 <= msg_size < (__return__ + 1) * 1048576
    """
    # Floor division: 104857599 bytes counts as 99 MiB.
    return msg_size // MIB


@rule("FLOW-6", source=_SOURCE, seeds=(*_ALL_SEEDS, "003_97f7c1df5f6104bc.txt"))
def check_cached_message_count(msg_count: int, config: ConsumerConfig) -> Delay | None:
    """A cached message count strictly greater than pullThresholdForQueue re-enqueues the
    request after 50 ms, in both consume modes.

    post: (__return__ is None) == (msg_count <= config.pull_threshold_for_queue)
    """
    # The comparison is strict: a count equal to the threshold still pulls.
    if msg_count > config.pull_threshold_for_queue:
        return Delay(PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL, DelayReason.CACHED_MESSAGE_COUNT)
    return None


@rule("FLOW-7", source=_SOURCE, seeds=_ALL_SEEDS)
def check_cached_message_size(msg_size: int, config: ConsumerConfig) -> Delay | None:
    """A cached size in MiB strictly greater than pullThresholdSizeForQueue re-enqueues the
    request after 50 ms, in both consume modes.

    pre: msg_size >= 0
    post: (__return__ is None) == (msg_size // 1048576 <= config.pull_threshold_size_for_queue)
    """
    # The size check applies to orderly consumers too (seed 000 says otherwise, S-4).
    if cached_message_size_in_mib(msg_size) > config.pull_threshold_size_for_queue:
        return Delay(PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL, DelayReason.CACHED_MESSAGE_SIZE)
    return None


@rule("FLOW-8", source=_SOURCE, seeds=(*_ALL_SEEDS, "003_97f7c1df5f6104bc.txt"))
def check_max_span(max_span: int, config: ConsumerConfig) -> Delay | None:
    """A concurrent consumer whose process-queue span is strictly greater than
    consumeConcurrentlyMaxSpan re-enqueues the request after 50 ms; orderly ones skip the check.

    post: __return__ is None or max_span > config.consume_concurrently_max_span
    post: __return__ is not None or config.orderly or max_span <= _max_span(config)
    """
    # The span is an offset distance and is never checked for an orderly consumer.
    if not config.orderly and max_span > config.consume_concurrently_max_span:
        return Delay(PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL, DelayReason.MAX_SPAN)
    return None


@rule("FLOW-9", source=_SOURCE, seeds=("000_26b83a4251c26823.txt", *_ALL_SEEDS[2:]))
def count_flow_control(counter: int) -> tuple[int, bool]:
    """Each flow-control occurrence evaluates `counter++ % 1000 == 0`, so the 1st, 1001st, …
    occurrence logs a warning showing the incremented counter.

    pre: counter >= 0
    post: __return__[0] == counter + 1
    post: __return__[1] == (counter % 1000 == 0)
    """
    # The post-increment: the test uses the old value, the log shows the new one.
    return counter + 1, counter % FLOW_CONTROL_LOG_INTERVAL == 0


@rule("FLOW-10", source=_SOURCE)
def flow_control_log_suppressed(process_queue: ProcessQueueSnapshot) -> bool:
    """A flow-control warning on an empty msgTreeMap throws from firstKey() after the 50 ms
    re-enqueue and the counter increment, so only the log line is lost.

    post: __return__ == process_queue.msg_tree_empty
    """
    # The request is not lost: the caller applies the delay and counters regardless.
    return process_queue.msg_tree_empty


@rule("FLOW-11", source=_SOURCE, seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"))
def check_locked(process_queue: ProcessQueueSnapshot, config: ConsumerConfig) -> Delay | None:
    """An orderly consumer whose process queue is not locked re-enqueues the request after E,
    testing only the locked flag and not its expiry.

    post: (__return__ is None) == (not config.orderly or process_queue.locked)
    """
    # An expired but still-locked queue passes: only consumption checks expiry.
    if config.orderly and not process_queue.locked:
        return Delay(config.pull_time_delay_mills_when_exception, DelayReason.NOT_LOCKED)
    return None


@attrs.frozen
class FirstLockStep:
    """What FLOW-12 leaves: the cursor, the first-lock flag and an optional delay."""

    next_offset: int
    previously_locked: bool
    delay: Delay | None = None
    correction: FirstLockCorrection | None = None


def _corrected(offset: int, next_offset: int) -> FirstLockStep:
    busy = offset < next_offset
    return FirstLockStep(offset, True, None, FirstLockCorrection(offset, busy))


# [4.7]
@rule(
    "FLOW-12",
    source=_SOURCE,
    seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"),
    profiles=(Profile.V4_7,),
    versions="4.9 calls computePullFromWhereWithException; a throw delays by E, flag stays false",
)
def correct_first_lock_offset(
    previously_locked: bool,
    next_offset: int,
    compute_first_lock_offset: Callable[[], int],
    config: ConsumerConfig,
) -> FirstLockStep:
    """On the first attempt of a locked orderly queue the request sets its first-lock flag and
    unconditionally replaces nextOffset with computePullFromWhere's result, which is −1 when
    the broker's max-offset query failed (REBAL-17 4.7 catches the MQClientException), so
    the request then pulls at −1 with brokerBusy whenever its cursor was at 0 or beyond.

    post: __return__.previously_locked
    post: __return__.delay is None
    post: previously_locked or __return__.correction is not None
    """
    # CrossHair cannot build a symbolic Callable[[], int]; Hypothesis checks these contracts.
    # crosshair: off
    # The offset may move backwards (re-consumption) or become -1: computePullFromWhere
    # declares no checked exception and answers -1 for a failed query; only an unchecked
    # exception would escape pullMessage.
    if previously_locked:
        return FirstLockStep(next_offset, True)
    return _corrected(compute_first_lock_offset(), next_offset)


# [Modified in 4.9]
@rule("FLOW-12", source=_SOURCE, profiles=(Profile.V4_9,))
def correct_first_lock_offset_with_exception(
    previously_locked: bool,
    next_offset: int,
    compute_first_lock_offset: Callable[[], int],
    config: ConsumerConfig,
) -> FirstLockStep:
    """On the first attempt of a locked orderly queue the request replaces nextOffset with
    computePullFromWhereWithException's result and sets its flag, unless that throws, which
    re-enqueues after E with the flag still false.

    post: __return__.previously_locked or __return__.delay is not None
    post: __return__.delay is None or __return__.next_offset == next_offset
    """
    # CrossHair cannot build a symbolic Callable[[], int]; Hypothesis checks these contracts.
    # crosshair: off
    # A failed computation leaves both the cursor and the flag untouched.
    if previously_locked:
        return FirstLockStep(next_offset, True)
    try:
        offset = compute_first_lock_offset()
    except Exception:
        delay = Delay(
            config.pull_time_delay_mills_when_exception, DelayReason.FIRST_LOCK_OFFSET_FAILED
        )
        return FirstLockStep(next_offset, False, delay)
    return _corrected(offset, next_offset)


@rule("FLOW-13", source=_SOURCE, seeds=_ALL_SEEDS)
def check_subscription(has_subscription: bool, config: ConsumerConfig) -> Delay | None:
    """A topic with no SubscriptionData in subscriptionInner re-enqueues the request after E,
    every E, until rebalance drops the process queue.

    post: (__return__ is None) == has_subscription
    """
    # The delay is E, not the 3 s the seeds state (S-1..S-3).
    if has_subscription:
        return None
    return Delay(config.pull_time_delay_mills_when_exception, DelayReason.NO_SUBSCRIPTION)


def _flow_controlled(
    delay: Delay,
    process_queue: ProcessQueueSnapshot,
    counters: FlowControlCounters,
    span: bool,
) -> tuple[FlowControlCounters, FlowControlLog | None]:
    old = counters.queue_max_span_flow_control_times if span else counters.queue_flow_control_times
    new, logs = count_flow_control(old)
    if span:
        counters = evolve(counters, queue_max_span_flow_control_times=new)
    else:
        counters = evolve(counters, queue_flow_control_times=new)
    log = FlowControlLog(delay.reason, new, flow_control_log_suppressed(process_queue))
    return counters, log if logs else None


@rule("PULLQ-9", source=_SOURCE, seeds=_ALL_SEEDS)
def decide_pull(
    process_queue: ProcessQueueSnapshot,
    consumer: ConsumerState,
    next_offset: int,
    previously_locked: bool,
    config: ConsumerConfig,
    rules: PullDecisionRules,
    counters: FlowControlCounters = NO_FLOW_CONTROL,
    compute_first_lock_offset: Callable[[], int] | None = None,
) -> PullDecision:
    """A pull attempt runs FLOW-1 … FLOW-13 in RocketMQ's order and ends at the first check that
    drops or delays the request, or else pulls at the request's (possibly corrected) nextOffset.

    post: (not process_queue.dropped) or isinstance(__return__.action, Drop)
    post: not _pulls(__return__) or (consumer.running and not consumer.paused)
    post: not _pulls(__return__) or consumer.has_subscription
    post: not _pulls(__return__) or process_queue.msg_count <= config.pull_threshold_for_queue
    post: not _pulls(__return__) or _mib(process_queue) <= config.pull_threshold_size_for_queue
    post: not _pulls(__return__) or _span_ok(process_queue, config)
    post: not _pulls(__return__) or not config.orderly or process_queue.locked
    post: not _pulls(__return__) or __return__.action.request_offset == __return__.next_offset
    """
    # CrossHair cannot build a symbolic Callable[[], int]; Hypothesis checks these contracts.
    # crosshair: off
    same = PullDecision(
        Drop(), next_offset, previously_locked, counters, touches_last_pull_timestamp(process_queue)
    )
    dropped = check_dropped(process_queue)
    if dropped is not None:
        return evolve(same, action=dropped)
    gate = check_consumer_state(consumer.running, config) or check_paused(consumer.paused)
    if gate is not None:
        return evolve(same, action=gate)
    flow = check_cached_message_count(process_queue.msg_count, config) or check_cached_message_size(
        process_queue.msg_size, config
    )
    span = None if flow is not None else check_max_span(process_queue.max_span, config)
    if flow is not None or span is not None:
        delay = flow or span
        assert delay is not None
        new_counters, log = _flow_controlled(delay, process_queue, counters, span is not None)
        return evolve(same, action=delay, counters=new_counters, flow_control_log=log)
    not_locked = check_locked(process_queue, config)
    if not_locked is not None:
        return evolve(same, action=not_locked)
    if config.orderly:
        if compute_first_lock_offset is None and not previously_locked:
            raise InvalidArgumentError(
                "compute_first_lock_offset", None, "required on a locked orderly first pull"
            )
        step = rules.correct_first_lock_offset(
            previously_locked, next_offset, compute_first_lock_offset or _unused, config
        )
        same = evolve(
            same,
            next_offset=step.next_offset,
            previously_locked=step.previously_locked,
            first_lock_correction=step.correction,
        )
        if step.delay is not None:
            return evolve(same, action=step.delay)
    no_subscription = check_subscription(consumer.has_subscription, config)
    if no_subscription is not None:
        return evolve(same, action=no_subscription)
    return evolve(same, action=Pull(same.next_offset))


def _max_span(config: ConsumerConfig) -> int:
    return config.consume_concurrently_max_span


def _pulls(decision: PullDecision) -> bool:
    return isinstance(decision.action, Pull)


def _mib(process_queue: ProcessQueueSnapshot) -> int:
    return process_queue.msg_size // MIB


def _span_ok(process_queue: ProcessQueueSnapshot, config: ConsumerConfig) -> bool:
    return config.orderly or process_queue.max_span <= config.consume_concurrently_max_span


def _unused() -> int:
    raise AssertionError("FLOW-12 computed an offset for an already-locked request")


class PullDecisionRules(Rules):
    """The changed FLOW rule (see `spec.rules.Rules`)."""

    correct_first_lock_offset = stated(
        correct_first_lock_offset, correct_first_lock_offset_with_exception
    )
