"""CONC (concurrent consumption), the client send-back and the consume-service life cycle: one
example per rule with values worked out by hand from the rulebook, and Hypothesis properties a
wrong implementation violates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.spec import consume_concurrently as cc
from pullspec.spec import retry as sb
from pullspec.spec.consume_concurrently import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeReturnType,
    PeriodicTask,
    ShutdownStep,
)
from pullspec.spec.consume_orderly import ConsumeOrderlyContext
from pullspec.spec.contracts import check_call
from pullspec.spec.errors import IndexOutOfBoundsError, InvalidTypeError
from pullspec.spec.message import MessageQueue, StoredMessage, with_namespace, without_namespace
from pullspec.spec.offset_store import OffsetUpdate
from pullspec.spec.profiles import Profile
from pullspec.spec.ruleset import Ruleset

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
MQ = MessageQueue("T", "broker-a", 0)
GROUP = "G"


def msg(
    offset: int, topic: str = "T", reconsume: int = 0, props: dict[str, str] | None = None
) -> StoredMessage:
    """A message of `topic` at queue offset `offset` (commit-log offset 1000 + offset)."""
    return StoredMessage(
        topic, 0, offset, 1000 + offset, 0, 0, b"body", tuple((props or {}).items()), reconsume
    )


def batch(n: int) -> tuple[StoredMessage, ...]:
    """`n` messages at offsets 0 … n−1."""
    return tuple(msg(i) for i in range(n))


# --- types -------------------------------------------------------------------------------------


def test_contexts_have_rocketmqs_defaults_and_validate_assignments() -> None:
    c = ConsumeConcurrentlyContext(MQ)
    assert (0, 2**31 - 1) == (c.delay_level_when_next_consume, c.ack_index)
    o = ConsumeOrderlyContext(MQ)
    assert (True, -1) == (o.auto_commit, o.suspend_current_queue_time_millis)
    with pytest.raises(InvalidTypeError):
        c.ack_index = "1"  # type: ignore[assignment]
    with pytest.raises(InvalidTypeError):
        o.auto_commit = 1  # type: ignore[assignment]


def test_namespace_wrapping_round_trips() -> None:
    assert "ns%T" == with_namespace("T", "ns")
    assert "%RETRY%ns%G" == with_namespace("%RETRY%G", "ns")
    assert "%RETRY%ns%G" == with_namespace("%RETRY%ns%G", "ns")
    assert "%DLQ%G" == without_namespace("%DLQ%ns%G", "ns")
    assert "T" == with_namespace("T", None)


# --- one example per rule ----------------------------------------------------------------------


def test_conc_1_update_core_pool_size_bounds() -> None:
    assert 10 == cc.core_pool_size_after_update(20, 10, 64)
    assert 20 == cc.core_pool_size_after_update(20, 0, 64)
    assert 20 == cc.core_pool_size_after_update(20, 64, 64)  # must be < consumeThreadMax
    assert 20 == cc.core_pool_size_after_update(20, 32_768, 40_000)


def test_conc_2_batch_split_and_rejection() -> None:
    msgs = batch(5)
    assert cc.SubmitPlan((msgs,), None) == cc.split_for_submit(msgs, 5)
    plan = cc.split_for_submit(msgs, 2)
    assert (msgs[0:2], msgs[2:4], msgs[4:5]) == plan.submitted
    assert None is plan.later
    # The second request is rejected: it takes every remaining message and the split stops.
    rejected = cc.split_for_submit(msgs, 2, rejected_at=1)
    assert cc.SubmitPlan((msgs[0:2],), msgs[2:5]) == rejected
    assert cc.SubmitPlan((), msgs) == cc.split_for_submit(msgs, 5, rejected_at=0)
    assert cc.SubmitPlan(((),), None) == cc.split_for_submit((), 1)


def test_conc_3_resubmission_delays() -> None:
    assert cc.ResubmitPlan(5000, True) == cc.resubmit_plan(cc.Resubmission.SEND_BACK_FAILED)
    assert cc.ResubmitPlan(5000, False) == cc.resubmit_plan(cc.Resubmission.REJECTED)


def test_conc_4_run_step_order() -> None:
    s = cc.RunStep
    assert (s.RETURN_DROPPED,) == cc.consume_request_steps(True, True, False)
    expected = (
        s.NEW_CONTEXT,
        s.RESET_RETRY_AND_NAMESPACE,
        s.HOOK_BEFORE,
        s.STAMP_CONSUME_START_TIME,
        s.CALL_LISTENER,
        s.CLASSIFY_STATUS,
        s.HOOK_AFTER,
        s.INC_CONSUME_RT,
        s.PROCESS_CONSUME_RESULT,
    )
    assert expected == cc.consume_request_steps(False, True, False)
    no_hook = cc.consume_request_steps(False, False, True)
    assert s.DISCARD_RESULT == no_hook[-1]
    assert s.HOOK_BEFORE not in no_hook
    stamped = cc.stamp_consume_start_time(batch(2), 1234)
    assert ["1234", "1234"] == [m.get_property("CONSUME_START_TIME") for m in stamped]


def test_conc_5_status_normalisation() -> None:
    assert (LATER, ConsumeReturnType.EXCEPTION) == cc.normalise_status(None, True, 0, 15)
    assert (LATER, ConsumeReturnType.RETURNNULL) == cc.normalise_status(None, False, 0, 15)
    # TIME_OUT with >=, and it never changes the status
    assert (OK, ConsumeReturnType.TIME_OUT) == cc.normalise_status(OK, False, 900_000, 15)
    assert (OK, ConsumeReturnType.SUCCESS) == cc.normalise_status(OK, False, 899_999, 15)
    assert (LATER, ConsumeReturnType.FAILED) == cc.normalise_status(LATER, False, 10, 15)


def test_conc_6_ack_index() -> None:
    assert None is cc.ack_result(OK, 3, 0)
    assert cc.AckResult(3, 4, 0, ()) == cc.ack_result(OK, 2**31 - 1, 4)  # clamped to size − 1
    assert cc.AckResult(1, 2, 2, (2, 3)) == cc.ack_result(OK, 1, 4)
    assert cc.AckResult(-1, 0, 4, (0, 1, 2, 3)) == cc.ack_result(OK, -1, 4)
    assert cc.AckResult(-1, 0, 4, (0, 1, 2, 3)) == cc.ack_result(LATER, 3, 4)
    with pytest.raises(IndexOutOfBoundsError):
        cc.ack_result(OK, -2, 4)


def test_conc_7_broadcasting_drops_failures() -> None:
    msgs = batch(3)
    assert cc.ConsumeResultPlan(msgs, ()) == cc.broadcasting_result(msgs, (1, 2))


def test_conc_8_clustering_send_back_and_local_retry() -> None:
    msgs = (msg(0), msg(1, reconsume=2), msg(2))
    plan = cc.clustering_result(msgs, (1, 2), (False, True))
    assert (msgs[0], msgs[2]) == plan.remove
    assert (msg(1, reconsume=3),) == plan.retry_later


def test_conc_9_commit_increase_only_unless_dropped() -> None:
    assert OffsetUpdate(7, True) == cc.offset_after_remove(7, False)
    assert None is cc.offset_after_remove(7, True)
    assert None is cc.offset_after_remove(-1, False)


def test_conc_10_service_send_back_call() -> None:
    ctx = ConsumeConcurrentlyContext(MQ)
    ctx.delay_level_when_next_consume = 5
    call = sb.service_send_back_call(msg(0), ctx, "ns")
    assert (5, "broker-a", "ns%T") == (call.delay_level, call.broker_name, call.msg.topic)


def test_conc_11_header_and_fallback_per_profile() -> None:
    m = msg(4, reconsume=2, props={"UNIQ_KEY": "U1", "TRAN_MSG": "true", "K": "v"})
    p47 = Ruleset.of(Profile.V4_7).send_back_plan(m, GROUP, 0, "broker-a", -1)
    p49 = Ruleset.of(Profile.V4_9).send_back_plan(m, GROUP, 0, "broker-a", -1)
    header = sb.SendBackHeader(GROUP, "T", 1004, 0, "U1", 16, None)
    assert header == p47.header
    assert "broker-a" == p49.header.bname
    expected = sb.ClientMessage(
        "%RETRY%G",
        b"body",
        0,
        {"UNIQ_KEY": "U1", "K": "v", "RETRY_TOPIC": "T", "RECONSUME_TIME": "3"}
        | {"MAX_RECONSUME_TIMES": "16", "DELAY": "5"},
    )
    assert expected == p47.fallback.message
    assert expected.properties == p47.fallback.original_properties
    # The quirk: ORIGIN_MESSAGE_ID survives only when the message already carried it.
    assert None is p47.fallback.message.get_property("ORIGIN_MESSAGE_ID")
    kept = sb.send_back_plan_v49(msg(0, props={"ORIGIN_MESSAGE_ID": "O"}), GROUP, -1, None, 3)
    assert ("O", 3) == (
        kept.fallback.message.get_property("ORIGIN_MESSAGE_ID"),
        kept.header.max_reconsume_times,
    )


def test_conc_12_reset_retry_and_namespace() -> None:
    retried = msg(0, topic="%RETRY%G", props={"RETRY_TOPIC": "T"})
    foreign = msg(1, topic="%RETRY%OTHER", props={"RETRY_TOPIC": "T"})
    plain = msg(2, topic="ns%T")
    out = cc.reset_retry_and_namespace((retried, foreign, plain), GROUP, "ns")
    assert ["T", "%RETRY%OTHER", "T"] == [m.topic for m in out]


def test_conc_13_cleaner_cadence_per_profile() -> None:
    assert PeriodicTask(900_000, 900_000, False) == cc.clean_expire_schedule_v47(15)
    assert PeriodicTask(60_000, 60_000, True) == cc.clean_expire_schedule_v49(1)


def test_conc_14_shutdown_order() -> None:
    expected = (ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL, ShutdownStep.CLEANER)
    assert expected == cc.concurrent_shutdown_steps()


# --- properties ----------------------------------------------------------------------------------

sizes = st.integers(min_value=0, max_value=40)
statuses = st.sampled_from([OK, LATER])


@given(statuses, st.integers(min_value=-1, max_value=2**31 - 1), sizes)
def test_failed_set_is_exactly_the_range_after_the_clamped_ack(
    status: ConsumeConcurrentlyStatus, ack: int, size: int
) -> None:
    result = check_call(cc.ack_result, status, ack, size)
    if size == 0:
        assert None is result
        return
    assert result is not None
    clamped = -1 if status is LATER else min(ack, size - 1)
    assert tuple(range(clamped + 1, size)) == result.failed
    assert set(range(size)) == set(result.failed) | set(range(clamped + 1))
    assert size == result.ok_tps + result.failed_tps


@given(st.integers(min_value=-(2**31), max_value=-2), st.integers(min_value=1, max_value=40))
def test_an_ack_below_minus_one_always_throws(ack: int, size: int) -> None:
    with pytest.raises(IndexOutOfBoundsError):
        cc.ack_result(OK, ack, size)


@given(
    st.integers(min_value=0, max_value=50),
    st.integers(min_value=1, max_value=12),
    st.none() | st.integers(min_value=0, max_value=60),
)
def test_split_keeps_every_message_once_in_order(n: int, size: int, rejected: int | None) -> None:
    msgs = batch(n)
    plan = check_call(cc.split_for_submit, msgs, size, rejected)
    flat = tuple(m for chunk in plan.submitted for m in chunk) + (plan.later or ())
    assert msgs == flat
    assert all(len(chunk) <= size for chunk in plan.submitted)


@given(
    st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=12),
    st.data(),
)
def test_clustering_retries_exactly_the_failed_send_backs(
    reconsumes: list[int], data: st.DataObject
) -> None:
    msgs = tuple(msg(i, reconsume=r) for i, r in enumerate(reconsumes))
    failed = tuple(range(data.draw(st.integers(0, len(msgs))), len(msgs)))
    oks = tuple(data.draw(st.lists(st.booleans(), min_size=len(failed), max_size=len(failed))))
    plan = check_call(cc.clustering_result, msgs, failed, oks)
    back_failed = [i for i, ok in zip(failed, oks, strict=True) if not ok]
    assert [msgs[i].queue_offset for i in back_failed] == [m.queue_offset for m in plan.retry_later]
    assert [msgs[i].reconsume_times + 1 for i in back_failed] == [
        m.reconsume_times for m in plan.retry_later
    ]
    assert [m for i, m in enumerate(msgs) if i not in back_failed] == list(plan.remove)


@given(
    st.integers(min_value=0, max_value=20),
    st.integers(min_value=-1, max_value=20),
    st.dictionaries(st.sampled_from(["K", "ORIGIN_MESSAGE_ID", "TRAN_MSG"]), st.text(max_size=3)),
)
def test_send_back_plan_contracts(reconsume: int, max_times: int, props: dict[str, str]) -> None:
    m = msg(0, reconsume=reconsume, props=props)
    for fn in (sb.send_back_plan_v47, sb.send_back_plan_v49):
        plan = check_call(fn, m, GROUP, 0, "broker-a", max_times)
        assert None is plan.fallback.message.get_property("TRAN_MSG")
        assert str(reconsume + 1) == plan.fallback.message.get_property("RECONSUME_TIME")


@given(st.booleans(), st.booleans(), st.booleans())
def test_run_steps_contracts(entry: bool, hook: bool, after: bool) -> None:
    check_call(cc.consume_request_steps, entry, hook, after)


@given(st.none() | statuses, st.booleans(), st.integers(0, 2_000_000), st.integers(1, 30))
def test_normalise_status_contracts(
    status: ConsumeConcurrentlyStatus | None, exc: bool, rt: int, timeout: int
) -> None:
    check_call(cc.normalise_status, status, exc and status is None, rt, timeout)
