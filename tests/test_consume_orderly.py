"""ORDER (orderly consumption): one example per rule with values worked out by hand from the
rulebook, and Hypothesis properties a wrong implementation violates."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pullspec.spec import consume_orderly as co
from pullspec.spec import retry as sb
from pullspec.spec.consume_concurrently import ConsumeReturnType, PeriodicTask, ShutdownStep
from pullspec.spec.consume_orderly import (
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    Gate,
    LoopExit,
    LoopStep,
    OrderlyResultPlan,
    ResultAction,
)
from pullspec.spec.consumer_config import ConsumeMode, MessageModel
from pullspec.spec.contracts import check_call
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.offset_store import OffsetUpdate
from pullspec.spec.profiles import Profile
from pullspec.spec.ruleset import Ruleset

CLUSTERING = MessageModel.CLUSTERING
BROADCASTING = MessageModel.BROADCASTING
SUCCESS = ConsumeOrderlyStatus.SUCCESS
COMMIT = ConsumeOrderlyStatus.COMMIT
ROLLBACK = ConsumeOrderlyStatus.ROLLBACK
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
MQ = MessageQueue("T", "broker-a", 0)
INT_MAX = 2**31 - 1


def msg(offset: int, reconsume: int = 0, props: dict[str, str] | None = None) -> StoredMessage:
    """A message of topic T at queue offset `offset`."""
    return StoredMessage(
        "T", 0, offset, 1000 + offset, 0, 0, b"b", tuple((props or {}).items()), reconsume
    )


# --- one example per rule ----------------------------------------------------------------------


def test_order_1_periodic_lock_only_in_clustering() -> None:
    assert PeriodicTask(1000, 20_000, False) == co.lock_schedule_v47(CLUSTERING)
    assert PeriodicTask(1000, 20_000, True) == co.lock_schedule_v49(CLUSTERING)
    assert None is co.lock_schedule_v49(BROADCASTING)


def test_order_2_one_monitor_per_queue_forever() -> None:
    other = MessageQueue("T", "broker-a", 1)
    table, first = co.fetch_lock_object({}, MQ)
    table, second = co.fetch_lock_object(table, other)
    table, again = co.fetch_lock_object(table, MQ)
    assert (0, 1, 0) == (first, second, again)
    assert {MQ: 0, other: 1} == table


def test_order_3_submits_only_when_dispatching() -> None:
    assert (True, False) == (co.submits_consume_request(True), co.submits_consume_request(False))


def test_order_4_gate() -> None:
    assert Gate.RETURN_DROPPED == co.run_gate(True, BROADCASTING, True, False, True)
    assert Gate.LOOP == co.run_gate(False, BROADCASTING, False, True, False)
    assert Gate.LOOP == co.run_gate(False, CLUSTERING, True, False, False)
    assert Gate.TRY_LOCK_LATER == co.run_gate(False, CLUSTERING, True, True, False)
    assert Gate.RETURN_DROPPED == co.run_gate(False, CLUSTERING, False, False, True)


def test_order_5_each_exit_in_order() -> None:
    def step(**kw: object) -> LoopStep:
        args: dict[str, object] = {
            "dropped": False,
            "message_model": CLUSTERING,
            "locked": True,
            "lock_expired": False,
            "now": 60_000,
            "begin_time": 0,
            "cached": 5,
            "batch_size": 2,
        }
        args.update(kw)
        return co.loop_step(**args)  # type: ignore[arg-type]

    assert LoopStep(LoopExit.DROPPED) == step(dropped=True, locked=False)
    assert LoopStep(LoopExit.NOT_LOCKED, try_lock_later_ms=10) == step(locked=False)
    assert LoopStep(LoopExit.LOCK_EXPIRED, try_lock_later_ms=10) == step(lock_expired=True)
    # 60000 ms exactly is still inside the slice; 60001 is not (strict >).
    assert LoopStep(None, take=2) == step()
    assert LoopStep(LoopExit.TIME_SLICE, submit_later_ms=10) == step(now=60_001)
    assert LoopStep(LoopExit.EMPTY_TAKE) == step(cached=0)
    assert LoopStep(None, take=1) == step(message_model=BROADCASTING, locked=False, cached=1)


def test_order_6_take_size_and_no_start_time() -> None:
    assert (3, False) == co.take_size(3)


def test_order_7_listener_context_under_consume_lock() -> None:
    assert ConsumeOrderlyContext(MQ, True, -1) == co.listener_context(MQ, False)
    assert None is co.listener_context(MQ, True)


def test_order_8_status_normalisation() -> None:
    assert (SUSPEND, ConsumeReturnType.EXCEPTION) == co.normalise_orderly_status(None, True, 0, 15)
    assert (SUSPEND, ConsumeReturnType.RETURNNULL) == co.normalise_orderly_status(None, False, 0, 1)
    assert (SUSPEND, ConsumeReturnType.FAILED) == co.normalise_orderly_status(SUSPEND, False, 0, 1)
    assert (COMMIT, ConsumeReturnType.SUCCESS) == co.normalise_orderly_status(COMMIT, False, 0, 1)
    assert (ROLLBACK, ConsumeReturnType.TIME_OUT) == co.normalise_orderly_status(
        ROLLBACK, False, 60_000, 1
    )


def test_order_9_auto_commit_table() -> None:
    commit_ok = OrderlyResultPlan(ResultAction.COMMIT, True, ok_tps=2)
    for status in (SUCCESS, COMMIT, ROLLBACK):
        assert commit_ok == co.process_result_auto_commit(status, 2, -1, False)
    again = OrderlyResultPlan(ResultAction.CONSUME_AGAIN, False, 500, failed_tps=2)
    assert again == co.process_result_auto_commit(SUSPEND, 2, 500, True)
    all_dlq = OrderlyResultPlan(ResultAction.COMMIT, True, failed_tps=2)
    assert all_dlq == co.process_result_auto_commit(SUSPEND, 2, 500, False)


def test_order_10_manual_commit_table() -> None:
    f = co.process_result_manual_commit
    assert OrderlyResultPlan(ResultAction.NONE, True, ok_tps=1) == f(SUCCESS, 1, -1, False)
    assert OrderlyResultPlan(ResultAction.COMMIT, True) == f(COMMIT, 1, -1, False)
    assert OrderlyResultPlan(ResultAction.ROLLBACK, False, -1) == f(ROLLBACK, 1, -1, False)
    again = OrderlyResultPlan(ResultAction.CONSUME_AGAIN, False, 20, failed_tps=1)
    assert again == f(SUSPEND, 1, 20, True)
    assert OrderlyResultPlan(ResultAction.NONE, True, failed_tps=1) == f(SUSPEND, 1, 20, False)


def test_order_11_offset_update_not_increase_only() -> None:
    assert OffsetUpdate(4, False) == co.orderly_offset_update(4, False)
    assert None is co.orderly_offset_update(4, True)
    assert None is co.orderly_offset_update(-1, False)


def test_order_12_suspend_default_and_clamps() -> None:
    assert 1000 == co.suspend_delay(-1, 1000)
    assert 10 == co.suspend_delay(0, 1000)
    assert 10 == co.suspend_delay(-1, 3)
    assert 30_000 == co.suspend_delay(60_000, 1000)
    assert 3000 == co.suspend_delay(3000, 1000)


def test_order_13_try_lock_later_resubmit_delays() -> None:
    assert 10 == co.resubmit_after_try_lock(False, True)
    assert 3000 == co.resubmit_after_try_lock(False, False)
    assert 3000 == co.resubmit_after_try_lock(True, True)


def test_order_14_check_reconsume_times() -> None:
    assert INT_MAX == sb.max_reconsume_times_orderly(-1)
    assert 3 == sb.max_reconsume_times_orderly(3)
    msgs = (msg(0, 3), msg(1, 1), msg(2, 3))
    suspend, out = co.check_reconsume_times(msgs, 3, (True, True, False))
    assert suspend is True
    assert [3, 2, 4] == [m.reconsume_times for m in out]
    assert ["3", None, "3"] == [m.get_property("RECONSUME_TIME") for m in out]
    # Every message at the maximum and sent back: no suspension, the batch is committed.
    assert (False, (msg(0, 3, {"RECONSUME_TIME": "3"}),)) == co.check_reconsume_times(
        (msg(0, 3),), 3, (True,)
    )


def test_order_15_dead_letter_message_per_profile() -> None:
    m = msg(0, 5, {"UNIQ_KEY": "U", "TRAN_MSG": "true"})
    base = {"UNIQ_KEY": "U", "RETRY_TOPIC": "T", "RECONSUME_TIME": "5"}
    base |= {"MAX_RECONSUME_TIMES": "5", "DELAY": "8"}
    v47 = Ruleset.of(Profile.V4_7).orderly_dead_letter_message(m, "G", 5)
    v49 = Ruleset.of(Profile.V4_9).orderly_dead_letter_message(m, "G", 5)
    assert sb.ClientMessage("%RETRY%G", b"b", 0, base) == v47.message
    assert sb.ClientMessage("%RETRY%G", b"b", 0, base | {"ORIGIN_MESSAGE_ID": "U"}) == v49.message
    assert v49.message.properties == v49.original_properties
    unbounded = sb.orderly_dead_letter_message_v49(msg(0, 7), "G", -1)
    assert str(INT_MAX) == unbounded.message.get_property("MAX_RECONSUME_TIMES")


def test_order_16_only_an_empty_take_clears_consuming() -> None:
    for exit_ in LoopExit:
        assert (exit_ is not LoopExit.EMPTY_TAKE) == co.consuming_after_exit(True, exit_)
    assert False is co.consuming_after_exit(False, LoopExit.TIME_SLICE)


def test_order_17_shutdown_unlocks_in_clustering() -> None:
    head = (ShutdownStep.STOP, ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL)
    assert (*head, ShutdownStep.UNLOCK_ALL) == co.orderly_shutdown_steps(CLUSTERING)
    assert head == co.orderly_shutdown_steps(BROADCASTING)


def test_order_18_no_cleaner_in_orderly_mode() -> None:
    assert False is co.has_consume_timeout_cleaner(ConsumeMode.ORDERLY)
    assert True is co.has_consume_timeout_cleaner(ConsumeMode.CONCURRENTLY)


# --- properties ----------------------------------------------------------------------------------


@given(st.integers(min_value=-(2**40), max_value=2**40), st.integers(-100, 100_000))
def test_suspend_delay_always_in_the_clamp_range(t: int, default: int) -> None:
    delay = check_call(co.suspend_delay, t, default)
    assert 10 <= delay <= 30_000
    raw = default if t == -1 else t
    if 10 <= raw <= 30_000:
        assert raw == delay


@given(
    st.lists(st.tuples(st.integers(0, 6), st.booleans()), max_size=10),
    st.integers(min_value=0, max_value=6),
)
def test_check_reconsume_times_increments_exactly_the_non_dlq_ones(
    rows: list[tuple[int, bool]], max_times: int
) -> None:
    msgs = tuple(msg(i, r) for i, (r, _) in enumerate(rows))
    oks = tuple(ok for _, ok in rows)
    suspend, out = check_call(co.check_reconsume_times, msgs, max_times, oks)
    dead = [m.reconsume_times >= max_times and ok for m, ok in zip(msgs, oks, strict=True)]
    expected = [m.reconsume_times + (0 if d else 1) for m, d in zip(msgs, dead, strict=True)]
    assert expected == [m.reconsume_times for m in out]
    assert (not all(dead)) == suspend
    at_max = [str(m.reconsume_times) if m.reconsume_times >= max_times else None for m in msgs]
    assert at_max == [m.get_property("RECONSUME_TIME") for m in out]


@given(
    st.booleans(),
    st.sampled_from(list(MessageModel)),
    st.booleans(),
    st.booleans(),
    st.integers(0, 200_000),
    st.integers(0, 5),
    st.integers(1, 4),
)
def test_loop_step_contracts_and_lease_gate(
    dropped: bool,
    model: MessageModel,
    locked: bool,
    expired: bool,
    now: int,
    cached: int,
    size: int,
) -> None:
    step = check_call(co.loop_step, dropped, model, locked, expired, now, 0, cached, size)
    # A clustering consumer never takes without a live client lease.
    if step.exit is None and model is CLUSTERING:
        assert locked and not expired and not dropped


@given(st.sampled_from(list(ConsumeOrderlyStatus)), st.integers(0, 5), st.booleans())
def test_result_tables_contracts(status: ConsumeOrderlyStatus, size: int, suspends: bool) -> None:
    auto = check_call(co.process_result_auto_commit, status, size, -1, suspends)
    manual = check_call(co.process_result_manual_commit, status, size, -1, suspends)
    # Only SUSPEND consults checkReconsumeTimes.
    if status is not SUSPEND:
        assert auto == co.process_result_auto_commit(status, size, -1, not suspends)
        assert manual == co.process_result_manual_commit(status, size, -1, not suspends)


@given(st.integers(0, 9), st.dictionaries(st.sampled_from(["K", "ORIGIN_MESSAGE_ID"]), st.text()))
def test_dead_letter_message_contracts(reconsume: int, props: dict[str, str]) -> None:
    m = msg(0, reconsume, props)
    check_call(sb.orderly_dead_letter_message_v47, m, "G", -1)
    check_call(sb.orderly_dead_letter_message_v49, m, "G", -1)
