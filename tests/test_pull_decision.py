"""FLOW, PULLQ and consumer-config rules: one example per rule (expected values worked out from the
rulebook) and Hypothesis properties of the composite pre-pull decision."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.spec.consumer_config import (
    ConsumeFromWhere,
    ConsumeMode,
    ConsumerConfig,
    MessageModel,
    default_consume_timestamp,
    in_checked_range,
    parse_consume_timestamp,
    rewrite_queue_thresholds,
)
from pullspec.spec.contracts import check_call
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_actions import (
    Delay,
    DelayReason,
    Drop,
    FirstLockCorrection,
    FlowControlCounters,
    FlowControlLog,
    Immediately,
    Pull,
    dispatches_to_consumer,
    keeps_circulating,
    schedules_later,
)
from pullspec.spec.pull_decision import (
    ConsumerState,
    ProcessQueueSnapshot,
    cached_message_size_in_mib,
    check_cached_message_count,
    check_cached_message_size,
    check_consumer_state,
    check_dropped,
    check_locked,
    check_max_span,
    check_paused,
    check_subscription,
    correct_first_lock_offset,
    correct_first_lock_offset_with_exception,
    count_flow_control,
    decide_pull,
    flow_control_log_suppressed,
    touches_last_pull_timestamp,
)
from pullspec.spec.ruleset import Ruleset

MIB = 1 << 20
DEFAULT = ConsumerConfig()
ORDERLY = ConsumerConfig(consume_mode=ConsumeMode.ORDERLY)
RUNNING = ConsumerState()


def _boom() -> int:
    raise RuntimeError("broker query failed")


# --- consumer config (FLOW-15, REBAL-18) ------------------------------------------------------


def test_defaults_are_rocketmqs() -> None:
    c = ConsumerConfig()
    assert (c.pull_threshold_for_queue, c.pull_threshold_size_for_queue) == (1000, 100)
    assert (c.pull_threshold_for_topic, c.pull_threshold_size_for_topic) == (-1, -1)
    assert (c.consume_concurrently_max_span, c.pull_batch_size, c.pull_interval) == (2000, 32, 0)
    assert (c.consume_thread_min, c.consume_thread_max, c.consume_message_batch_max_size) == (
        20,
        20,
        1,
    )
    assert (c.consume_timeout, c.max_reconsume_times, c.suspend_current_queue_time_millis) == (
        15,
        -1,
        1000,
    )
    assert c.pull_time_delay_mills_when_exception == 1000
    assert c.persist_consumer_offset_interval == 5000
    assert c.post_subscription_when_pull is False
    assert c.message_model is MessageModel.CLUSTERING
    assert c.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert [w for w in ConsumeFromWhere if w.deprecated] == [
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
        ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET,
    ]


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("pull_threshold_for_queue", 0),
        ("pull_threshold_for_queue", 65536),
        ("pull_threshold_size_for_queue", 1025),
        ("pull_threshold_for_topic", 0),
        ("pull_threshold_size_for_topic", 102401),
        ("consume_concurrently_max_span", 0),
        ("pull_interval", -1),
        ("pull_batch_size", 1025),
        ("consume_message_batch_max_size", 0),
        ("consume_thread_max", 1001),
    ],
)
def test_flow_15_rejects_out_of_range(field: str, bad: int) -> None:
    kwargs: dict[str, Any] = {field: bad}
    with pytest.raises(InvalidArgumentError) as info:
        ConsumerConfig(**kwargs)
    assert (info.value.name, info.value.value) == (field, bad)


def test_flow_15_accepts_bounds_and_minus_one() -> None:
    assert in_checked_range("pull_threshold_for_topic", -1)
    assert in_checked_range("pull_threshold_for_topic", 6553500)
    assert not in_checked_range("pull_threshold_for_queue", -1)
    assert in_checked_range("pull_interval", 0)
    with pytest.raises(InvalidArgumentError) as info:
        ConsumerConfig(consume_thread_min=21)
    assert info.value.name == "consume_thread_min"
    with pytest.raises(InvalidTypeError):
        ConsumerConfig(pull_batch_size="32")  # type: ignore[arg-type]


def test_rebal_18_consume_timestamp() -> None:
    # 2024-01-01 00:00:00 UTC minus 30 minutes.
    assert default_consume_timestamp(1_704_067_200_000) == "20231231233000"
    assert parse_consume_timestamp("20231231233000") == 1_704_065_400_000
    plus8 = datetime.timezone(datetime.timedelta(hours=8))
    assert parse_consume_timestamp("20240101080000", plus8) == 1_704_067_200_000
    for bad in ("2023123123300", "20231301000000", "2023-12-31 23:30"):
        with pytest.raises(InvalidArgumentError):
            ConsumerConfig(consume_timestamp=bad)


def test_flow_14_rewrites_per_queue_thresholds() -> None:
    c = ConsumerConfig(pull_threshold_for_topic=100_000, pull_threshold_size_for_topic=10)
    assert rewrite_queue_thresholds(c, 3) == (33_333, 3)
    assert rewrite_queue_thresholds(c, 20) == (5000, 1)  # 10 // 20 = 0, raised to 1
    assert rewrite_queue_thresholds(c, 0) == (1000, 100)
    assert rewrite_queue_thresholds(DEFAULT, 4) == (1000, 100)
    # A rewritten value may lie outside FLOW-15's start-up range: it is not re-validated.
    big = c.with_queue_thresholds(*rewrite_queue_thresholds(c, 1))
    assert (big.pull_threshold_for_queue, big.pull_threshold_size_for_queue) == (100_000, 10)


# --- the individual checks ----------------------------------------------------------------------


def test_flow_1_and_2_dropped() -> None:
    assert check_dropped(ProcessQueueSnapshot(dropped=True)) == Drop("process queue dropped")
    assert check_dropped(ProcessQueueSnapshot()) is None
    assert touches_last_pull_timestamp(ProcessQueueSnapshot()) is True
    assert touches_last_pull_timestamp(ProcessQueueSnapshot(dropped=True)) is False


def test_flow_3_and_4_state_and_pause() -> None:
    assert check_consumer_state(False, DEFAULT) == Delay(1000, DelayReason.CONSUMER_NOT_RUNNING)
    e = ConsumerConfig(pull_time_delay_mills_when_exception=3000)
    assert check_consumer_state(False, e) == Delay(3000, DelayReason.CONSUMER_NOT_RUNNING)
    assert check_consumer_state(True, DEFAULT) is None
    assert check_paused(True) == Delay(1000, DelayReason.PAUSED)
    assert check_paused(False) is None


def test_flow_5_to_8_thresholds() -> None:
    assert cached_message_size_in_mib(104_857_599) == 99
    assert check_cached_message_count(1000, DEFAULT) is None
    assert check_cached_message_count(1001, DEFAULT) == Delay(50, DelayReason.CACHED_MESSAGE_COUNT)
    assert check_cached_message_size(101 * MIB - 1, DEFAULT) is None
    assert check_cached_message_size(101 * MIB, DEFAULT) == Delay(
        50, DelayReason.CACHED_MESSAGE_SIZE
    )
    assert check_max_span(2000, DEFAULT) is None
    assert check_max_span(2001, DEFAULT) == Delay(50, DelayReason.MAX_SPAN)
    assert check_max_span(10**6, ORDERLY) is None


def test_flow_9_and_10_log_cadence() -> None:
    assert count_flow_control(0) == (1, True)
    assert count_flow_control(1) == (2, False)
    assert count_flow_control(999) == (1000, False)
    assert count_flow_control(1000) == (1001, True)
    assert flow_control_log_suppressed(ProcessQueueSnapshot(msg_tree_empty=True)) is True
    assert flow_control_log_suppressed(ProcessQueueSnapshot()) is False


def test_flow_11_and_13_lock_and_subscription() -> None:
    assert check_locked(ProcessQueueSnapshot(locked=False), ORDERLY) == Delay(
        1000, DelayReason.NOT_LOCKED
    )
    assert check_locked(ProcessQueueSnapshot(locked=True), ORDERLY) is None
    assert check_locked(ProcessQueueSnapshot(locked=False), DEFAULT) is None
    assert check_subscription(False, DEFAULT) == Delay(1000, DelayReason.NO_SUBSCRIPTION)
    assert check_subscription(True, DEFAULT) is None


def test_flow_12_first_lock_both_profiles() -> None:
    step = correct_first_lock_offset(False, 100, lambda: 80, ORDERLY)
    assert (step.next_offset, step.previously_locked, step.delay) == (80, True, None)
    assert step.correction == FirstLockCorrection(80, broker_busy=True)
    assert correct_first_lock_offset(True, 100, _boom, ORDERLY).next_offset == 100
    with pytest.raises(RuntimeError):
        correct_first_lock_offset(False, 100, _boom, ORDERLY)
    failed = correct_first_lock_offset_with_exception(False, 100, _boom, ORDERLY)
    assert (failed.next_offset, failed.previously_locked) == (100, False)
    assert failed.delay == Delay(1000, DelayReason.FIRST_LOCK_OFFSET_FAILED)
    minus = correct_first_lock_offset_with_exception(False, 100, lambda: -1, ORDERLY)
    assert (minus.next_offset, minus.previously_locked) == (-1, True)


# --- the composite, in RocketMQ's order -----------------------------------------------------------


def test_pullq_9_order_of_checks() -> None:
    over = ProcessQueueSnapshot(msg_count=5000, msg_size=500 * MIB, max_span=9000)
    stopped_paused = ConsumerState(running=False, paused=True)
    d = decide_pull(over, stopped_paused, 7, False, DEFAULT, Ruleset.of(Profile.V4_9))
    assert d.action == Delay(1000, DelayReason.CONSUMER_NOT_RUNNING)
    assert d.touch_last_pull_timestamp and d.counters == FlowControlCounters()
    d = decide_pull(over, ConsumerState(paused=True), 7, False, DEFAULT, Ruleset.of(Profile.V4_9))
    assert d.action == Delay(1000, DelayReason.PAUSED)
    d = decide_pull(over, RUNNING, 7, False, DEFAULT, Ruleset.of(Profile.V4_9))
    assert d.action == Delay(50, DelayReason.CACHED_MESSAGE_COUNT)
    assert d.counters == FlowControlCounters(1, 0)
    assert d.flow_control_log == FlowControlLog(DelayReason.CACHED_MESSAGE_COUNT, 1, False)
    size_only = ProcessQueueSnapshot(msg_size=500 * MIB, max_span=9000)
    d = decide_pull(size_only, RUNNING, 7, False, DEFAULT, Ruleset.of(Profile.V4_9), d.counters)
    assert d.action == Delay(50, DelayReason.CACHED_MESSAGE_SIZE)
    assert d.counters == FlowControlCounters(2, 0) and d.flow_control_log is None
    span_only = ProcessQueueSnapshot(max_span=9000)
    d = decide_pull(
        span_only, RUNNING, 7, False, DEFAULT, Ruleset.of(Profile.V4_9), FlowControlCounters(2, 0)
    )
    assert d.action == Delay(50, DelayReason.MAX_SPAN)
    assert d.counters == FlowControlCounters(2, 1)
    d = decide_pull(ProcessQueueSnapshot(), RUNNING, 7, False, DEFAULT, Ruleset.of(Profile.V4_7))
    assert d.action == Pull(7) and d.next_offset == 7


def test_pullq_9_dropped_and_orderly() -> None:
    d = decide_pull(
        ProcessQueueSnapshot(dropped=True), RUNNING, 7, False, DEFAULT, Ruleset.of(Profile.V4_9)
    )
    assert isinstance(d.action, Drop) and not d.touch_last_pull_timestamp
    locked = ProcessQueueSnapshot(locked=True, max_span=9000)
    # FLOW-12 moves the cursor and sets the flag even though FLOW-13 then delays.
    no_sub = ConsumerState(has_subscription=False)
    d = decide_pull(
        locked,
        no_sub,
        100,
        False,
        ORDERLY,
        Ruleset.of(Profile.V4_7),
        compute_first_lock_offset=lambda: 40,
    )
    assert d.action == Delay(1000, DelayReason.NO_SUBSCRIPTION)
    assert (d.next_offset, d.previously_locked) == (40, True)
    d = decide_pull(locked, RUNNING, 40, True, ORDERLY, Ruleset.of(Profile.V4_9))
    assert d.action == Pull(40)
    d = decide_pull(
        locked,
        RUNNING,
        100,
        False,
        ORDERLY,
        Ruleset.of(Profile.V4_9),
        compute_first_lock_offset=_boom,
    )
    assert d.action == Delay(1000, DelayReason.FIRST_LOCK_OFFSET_FAILED)
    assert (d.next_offset, d.previously_locked) == (100, False)
    with pytest.raises(InvalidArgumentError):
        decide_pull(locked, RUNNING, 100, False, ORDERLY, Ruleset.of(Profile.V4_9))


def test_pullq_4_6_8_circulation() -> None:
    assert schedules_later(False) and not schedules_later(True)
    assert dispatches_to_consumer(True) and not dispatches_to_consumer(False)
    assert keeps_circulating(Pull(1), stopped=True)
    assert keeps_circulating(Immediately(), stopped=False)
    assert keeps_circulating(Delay(50, DelayReason.MAX_SPAN), stopped=False)
    assert not keeps_circulating(Delay(50, DelayReason.MAX_SPAN), stopped=True)
    assert not keeps_circulating(Drop(), stopped=False)
    assert not keeps_circulating(None, stopped=False)


# --- properties ----------------------------------------------------------------------------------

configs = st.builds(
    ConsumerConfig,
    consume_mode=st.sampled_from(ConsumeMode),
    pull_threshold_for_queue=st.integers(1, 50),
    pull_threshold_size_for_queue=st.integers(1, 4),
    consume_concurrently_max_span=st.integers(1, 50),
    pull_time_delay_mills_when_exception=st.integers(0, 5000),
)
snapshots = st.builds(
    ProcessQueueSnapshot,
    dropped=st.booleans(),
    msg_count=st.integers(0, 80),
    msg_size=st.integers(0, 6 * MIB),
    max_span=st.integers(0, 80),
    locked=st.booleans(),
    msg_tree_empty=st.booleans(),
)
states = st.builds(
    ConsumerState, running=st.booleans(), paused=st.booleans(), has_subscription=st.booleans()
)
counters = st.builds(FlowControlCounters, st.integers(0, 3000), st.integers(0, 3000))


def _gates_open(pq: ProcessQueueSnapshot, cs: ConsumerState, c: ConsumerConfig) -> bool:
    return (
        not pq.dropped
        and cs.running
        and not cs.paused
        and cs.has_subscription
        and pq.msg_count <= c.pull_threshold_for_queue
        and pq.msg_size // MIB <= c.pull_threshold_size_for_queue
        and (c.orderly or pq.max_span <= c.consume_concurrently_max_span)
        and (not c.orderly or pq.locked)
    )


@settings(max_examples=4 * settings().max_examples)
@given(
    snapshots,
    states,
    st.integers(-1, 10**6),
    st.booleans(),
    configs,
    st.sampled_from(Profile),
    counters,
    st.integers(-2, 10**6) | st.none(),
)
def test_pull_exactly_when_every_gate_is_open(
    pq: ProcessQueueSnapshot,
    cs: ConsumerState,
    next_offset: int,
    previously_locked: bool,
    c: ConsumerConfig,
    profile: Profile,
    ctr: FlowControlCounters,
    first_lock: int | None,
) -> None:
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        if first_lock is None:
            raise RuntimeError("query failed")
        return first_lock

    args = (pq, cs, next_offset, previously_locked, c, Ruleset.of(profile), ctr, compute)
    try:
        d = check_call(decide_pull, *args)
    except RuntimeError:
        # Only 4.7 lets a failing first-lock computation escape pullMessage.
        assert profile is Profile.V4_7 and first_lock is None
        return
    failed_first_lock = c.orderly and not previously_locked and first_lock is None
    expected_pull = _gates_open(pq, cs, c) and not failed_first_lock
    assert isinstance(d.action, Pull) == expected_pull
    if pq.dropped:
        assert isinstance(d.action, Drop) and d.counters == ctr
    assert len(calls) <= 1
    if calls:
        assert c.orderly and pq.locked and not previously_locked
    # At most one counter moves, by exactly one.
    moved = (
        d.counters.queue_flow_control_times - ctr.queue_flow_control_times,
        d.counters.queue_max_span_flow_control_times - ctr.queue_max_span_flow_control_times,
    )
    assert moved in ((0, 0), (1, 0), (0, 1))
    assert d.previously_locked >= previously_locked


@given(st.integers(0, 10**7), configs)
def test_flow_rule_contracts(value: int, c: ConsumerConfig) -> None:
    check_call(check_cached_message_count, value, c)
    check_call(check_cached_message_size, value, c)
    check_call(check_max_span, value, c)
    check_call(cached_message_size_in_mib, value)
    check_call(count_flow_control, value)
    check_call(rewrite_queue_thresholds, c, value % 50)
