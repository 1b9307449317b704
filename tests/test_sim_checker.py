"""The history format and the anomaly checker on small hand-written histories: each anomaly kind
is reported as a violation when nothing explains it and as allowed, with its rule, when the
history shows the RocketMQ 4.x behaviour that produces it."""

from __future__ import annotations

import io

import attrs
import pytest

from pullspec.reference.sim import history as h
from pullspec.reference.sim.budget import (
    Budget,
    Causes,
    commit_budgets,
    duplicate_budgets,
    per_handover,
)
from pullspec.reference.sim.checker import Checker, CheckResult, check
from pullspec.spec import invariants as inv

Q = "T:0"
RETRY = "%RETRY%G:0"


def setup(orderly: bool = False, retry_queue_nums: int = 1) -> h.Setup:
    return h.Setup(
        at=0,
        profile="4.9",
        group="G",
        topics=("T",),
        orderly=orderly,
        consumers=2,
        retry_queue_nums=retry_queue_nums,
    )


def produce(n: int, queue: str = Q) -> list[h.Event]:
    topic, qid = h.split_queue_name(queue)
    return [h.Produce(at=i, key=f"k{i}", topic=topic, queue_id=qid, offset=i) for i in range(n)]


def consumed(at: int, client: str, pq: int, offsets: list[int], ok: bool = True) -> h.Consumed:
    return h.Consumed(
        at=at,
        client=client,
        pq=pq,
        queue=Q,
        offsets=tuple(offsets),
        keys=tuple(f"k{o}" for o in offsets),
        status="CONSUME_SUCCESS" if ok else "RECONSUME_LATER",
        success=ok,
    )


def snapshot(at: int, committed: int, cached: tuple[int, ...] = ()) -> h.Snapshot:
    return h.Snapshot(
        at=at, committed={Q: committed}, max_offsets={Q: 10}, cached={"c0#1": {Q: cached}}
    )


def broker(at: int, client: str, offset: int, before: int | None, via: str = "persist") -> h.Event:
    return h.BrokerCommit(at=at, client=client, queue=Q, offset=offset, before=before, via=via)


def memory(
    at: int, client: str, offset: int, before: int | None, increase_only: bool = True
) -> h.Event:
    rule = "CONC-9" if increase_only else "ORDER-11"
    return h.ClientCommit(
        at=at,
        client=client,
        queue=Q,
        offset=offset,
        increase_only=increase_only,
        before=before,
        after=offset,
        rule=rule,
    )


def run(*events: h.Event | list[h.Event]) -> CheckResult:
    flat: list[h.Event] = []
    for e in events:
        flat.extend(e if isinstance(e, list) else [e])
    return check(flat)


# --- the history format --------------------------------------------------------------------------


def test_every_event_type_round_trips_through_json_lines() -> None:
    events: list[h.Event] = [
        setup(),
        *produce(2),
        h.Stored(at=3, key="k0", topic="%RETRY%G", queue_id=0, offset=0, reconsume_times=1),
        h.PullSent(at=4, client="c0#1", pq=1, queue=Q, offset=0, broker_id=0, commit_offset=-1),
        h.PullAnswered(at=5, client="c0#1", pq=1, queue=Q, status=None, next_offset=0),
        h.Delivered(
            at=6,
            client="c0#1",
            pq=1,
            queue=Q,
            offsets=(0, 1),
            keys=("k0", "k1"),
            reconsume_times=(0, 0),
            orderly=False,
            end=6,
        ),
        consumed(7, "c0#1", 1, [0, 1]),
        h.SentBack(
            at=8, client="c0#1", key="k0", queue=Q, offset=0, via="rpc", ok=True, stored=None
        ),
        memory(9, "c0#1", 2, None),
        broker(10, "c0#1", 2, None),
        h.Assigned(at=11, client="c0#1", pq=1, queue=Q, start=0),
        h.Dropped(at=12, client="c0#1", pq=1, queue=Q, reason="REBAL-9"),
        h.CursorMoved(at=13, client="c0#1", pq=1, queue=Q, before=5, after=2, rule="FLOW-12"),
        h.Cached(at=14, client="c0#1", pq=1, queue=Q, count=3, threshold=10, batch=4),
        h.ClientLock(at=15, client="c0#1", pq=1, queue=Q, locked=True),
        h.Lease(at=16, client="c0#1", queue=Q, action="grant"),
        h.Truncated(at=17, queue=Q, min_offset=1),
        h.Fault(at=18, fault="crash", target="c0#1", detail="restart in 5000 ms"),
        h.PullDelayed(at=19, client="c0#1", pq=1, queue=Q, reason="MAX_SPAN", ms=50),
        h.Quiet(at=20, until=30, started=("c1#1",)),
        snapshot(31, 2, (1,)),
    ]
    assert set(h.EVENT_TYPES) == {e.type for e in events}
    out = io.StringIO()
    assert len(events) == h.dump_lines(events, out)
    assert events == list(h.load_lines(out.getvalue().splitlines()))


def test_a_bad_history_line_names_its_number() -> None:
    with pytest.raises(ValueError, match="line 2"):
        list(h.load_lines(['{"type":"Truncated","at":1,"queue":"T:0","min_offset":0}', "{}"]))


def test_history_summary_counts_by_type() -> None:
    history = h.History()
    for e in [setup(), *produce(3)]:
        history.add(e)
    assert {"Setup": 1, "Produce": 3} == history.summary()
    assert 4 == len(history)


# --- clean histories -----------------------------------------------------------------------------


def test_a_clean_history_has_no_anomaly() -> None:
    result = run(
        setup(),
        produce(3),
        h.Assigned(at=3, client="c0#1", pq=1, queue=Q, start=0),
        consumed(4, "c0#1", 1, [0, 1, 2]),
        memory(4, "c0#1", 3, None),
        broker(5, "c0#1", 3, None),
        snapshot(6, 3),
    )
    assert ({}, {}) == (result.violations, result.allowed)
    assert {"produced": 3, "consumed": 3, "pending": 0, "dlq": 0} == {
        k: result.stats[k] for k in ("produced", "consumed", "pending", "dlq")
    }


def test_unconsumed_messages_above_the_commit_or_cached_are_pending() -> None:
    result = run(setup(), produce(4), snapshot(5, 2, cached=(1,)))
    # 0 is lost (passed, never consumed); 1 is cached; 2 and 3 are above the commit.
    assert {inv.LOST: 1} == result.violations
    assert 2 + 1 == result.stats["pending"]


# --- lost ------------------------------------------------------------------------------------------


def test_loss_is_a_violation_unless_expiry_or_an_offset_correction_explains_it() -> None:
    assert {inv.LOST: 2} == run(setup(), produce(2), snapshot(3, 2)).violations
    expired = run(setup(), produce(2), h.Truncated(at=2, queue=Q, min_offset=1), snapshot(3, 2))
    assert ({inv.LOST: 1}, {"STORE-19": 1}) == (expired.violations, expired.allowed)
    moved = h.PullAnswered(
        at=2, client="c0#1", pq=1, queue=Q, status="OFFSET_ILLEGAL", next_offset=2
    )
    assert {"RESULT-10": 2} == run(setup(), produce(2), moved, snapshot(3, 2)).allowed


def test_a_copy_handed_back_is_not_lost_and_its_retry_copy_is_pending() -> None:
    back = h.SentBack(
        at=2, client="c0#1", key="k0", queue=Q, offset=0, via="rpc", ok=True, stored="X"
    )
    retry = h.Stored(
        at=2, key="k0", topic="SCHEDULE_TOPIC_XXXX", queue_id=2, offset=0, reconsume_times=1
    )
    result = run(setup(), produce(1), back, retry, snapshot(3, 1))
    assert ({}, {}, 1) == (result.violations, result.allowed, result.stats["pending"])


# --- dlq-accounting --------------------------------------------------------------------------------


@pytest.mark.parametrize(("retry_queue_nums", "expected"), [(1, "violation"), (0, "RETRY-1")])
def test_a_send_back_that_stored_nothing_is_unaccounted(
    retry_queue_nums: int, expected: str
) -> None:
    back = h.SentBack(
        at=2, client="c0#1", key="k0", queue=Q, offset=0, via="rpc", ok=True, stored=None
    )
    result = run(setup(retry_queue_nums=retry_queue_nums), produce(1), back, snapshot(3, 1))
    if expected == "violation":
        assert {inv.DLQ_ACCOUNTING: 1} == result.violations
    else:
        assert ({}, {"RETRY-1": 1}) == (result.violations, result.allowed)


def test_a_dead_letter_is_accounted() -> None:
    dlq = h.Stored(at=2, key="k0", topic="%DLQ%G", queue_id=0, offset=0, reconsume_times=16)
    result = run(setup(), produce(1), dlq, snapshot(3, 1))
    assert ({}, 1) == (result.violations, result.stats["dlq"])


# --- duplicate -------------------------------------------------------------------------------------


def test_a_duplicate_within_one_process_queue_needs_a_re_put() -> None:
    plain = run(
        setup(),
        produce(1),
        h.Assigned(at=1, client="c0#1", pq=1, queue=Q, start=0),
        consumed(2, "c0#1", 1, [0]),
        consumed(3, "c0#1", 1, [0]),
    )
    assert {inv.DUPLICATE: 1} == plain.violations
    answer = h.PullAnswered(
        at=2, client="c0#1", pq=1, queue=Q, status="FOUND", next_offset=1, offsets=(0,)
    )
    re_put = run(
        setup(),
        produce(1),
        h.Assigned(at=1, client="c0#1", pq=1, queue=Q, start=0),
        answer,
        consumed(2, "c0#1", 1, [0]),
        answer,
        consumed(3, "c0#1", 1, [0]),
    )
    assert ({}, {"PQ-13": 1}) == (re_put.violations, re_put.allowed)


def handover(*between: h.Event) -> CheckResult:
    """c0 consumes offset 0 in pq 1; then `between`; then c1's pq 2 starts at 0 and consumes it."""
    return run(
        setup(),
        produce(2),
        h.Assigned(at=1, client="c0#1", pq=1, queue=Q, start=0),
        consumed(2, "c0#1", 1, [0]),
        *between,
        h.Assigned(at=10, client="c1#1", pq=2, queue=Q, start=0),
        consumed(11, "c1#1", 2, [0]),
    )


def test_duplicates_after_a_hand_over_name_the_rule_that_allows_them() -> None:
    crash = h.Fault(at=5, fault="crash", target="c0#1")
    assert {"OFFSET-8": 1} == handover(memory(2, "c0#1", 1, None), crash).allowed
    assert {"REBAL-9": 1} == handover(memory(2, "c0#1", 1, None)).allowed
    assert {"PQ-7": 1} == handover().allowed
    dropped = h.Dropped(at=5, client="c0#1", pq=1, queue=Q, reason="REBAL-9")
    assert {"REBAL-9": 1} == handover(dropped).allowed
    backwards = [broker(3, "c0#1", 1, None), broker(4, "c9#1", 0, 1)]
    assert {"COMMIT-1": 2} == handover(*backwards).allowed  # the decrease and the duplicate


def test_a_duplicate_of_another_copy_needs_a_send_back_that_stored_a_copy() -> None:
    retry = h.Stored(at=3, key="k0", topic="%RETRY%G", queue_id=0, offset=0, reconsume_times=1)
    again = h.Consumed(
        at=9,
        client="c0#1",
        pq=2,
        queue=RETRY,
        offsets=(0,),
        keys=("k0",),
        status="CONSUME_SUCCESS",
        success=True,
    )
    base = [setup(), *produce(1), consumed(2, "c0#1", 1, [0]), retry]
    assert {inv.DUPLICATE: 1} == run(base, again).violations

    def back(via: str, ok: bool) -> h.SentBack:
        return h.SentBack(
            at=2, client="c0#1", key="k0", queue=Q, offset=0, via=via, ok=ok, stored="%RETRY%G"
        )

    assert {"CONC-8": 1} == run(base, back("fallback", False), again).allowed
    assert {"CONC-11": 1} == run(base, back("rpc", False), back("fallback", True), again).allowed
    assert {"PQ-18": 1} == run(base, back("cleaner", True), again).allowed


def delivered(at: int, client: str, pq: int, offset: int) -> h.Delivered:
    return h.Delivered(
        at=at,
        client=client,
        pq=pq,
        queue=Q,
        offsets=(offset,),
        keys=(f"k{offset}",),
        reconsume_times=(0,),
        orderly=False,
        end=at,
    )


def test_a_handed_back_copy_delivered_again_explains_the_duplicate_of_its_retry() -> None:
    # c0 fails offset 0 and hands it back; c1's new ProcessQueue starts below it (c0's commit
    # never reached the broker) and consumes it; then the retry copy is consumed too.
    retry = h.Stored(at=3, key="k0", topic="%RETRY%G", queue_id=0, offset=0, reconsume_times=1)
    back = h.SentBack(
        at=2, client="c0#1", key="k0", queue=Q, offset=0, via="rpc", ok=True, stored="%RETRY%G"
    )
    again = h.Consumed(
        at=9,
        client="c1#1",
        pq=3,
        queue=RETRY,
        offsets=(0,),
        keys=("k0",),
        status="CONSUME_SUCCESS",
        success=True,
    )
    result = run(
        setup(),
        produce(1),
        h.Assigned(at=1, client="c0#1", pq=1, queue=Q, start=0),
        delivered(2, "c0#1", 1, 0),
        consumed(2, "c0#1", 1, [0], ok=False),
        back,
        memory(2, "c0#1", 1, None),
        retry,
        h.Assigned(at=5, client="c1#1", pq=2, queue=Q, start=0),
        delivered(6, "c1#1", 2, 0),
        consumed(6, "c1#1", 2, [0]),
        again,
    )
    assert ({}, {"REBAL-9": 1}) == (result.violations, result.allowed)


# --- nonmonotonic-commit ---------------------------------------------------------------------------


def test_an_increase_only_write_that_lowers_the_client_offset_is_a_violation() -> None:
    result = run(setup(), memory(1, "c0#1", 5, None), memory(2, "c0#1", 3, 5))
    assert {inv.NONMONOTONIC_COMMIT: 1} == result.violations
    assert {} == run(setup(), memory(1, "c0#1", 5, None), memory(2, "c0#1", 3, 5, False)).violations


def assigned(at: int, client: str, pq: int, start: int = 0) -> h.Assigned:
    return h.Assigned(at=at, client=client, pq=pq, queue=Q, start=start)


def test_a_broker_commit_going_back_is_allowed_only_with_a_cause() -> None:
    # c1 was given the queue (a handover: the cause COMMIT-1's stale writer needs, LIVE-3)
    handover = assigned(1, "c1#1", 2)
    stale = run(setup(), broker(1, "c0#1", 5, None), handover, broker(2, "c1#1", 3, 5))
    assert ({}, {"COMMIT-1": 1}) == (stale.violations, stale.allowed)
    fix = run(setup(), broker(1, "c0#1", 5, None), broker(2, "c0#1", 3, 5, "fix-up"))
    assert {"RESULT-10": 1} == fix.allowed
    orderly = run(
        setup(orderly=True),
        memory(1, "c0#1", 5, None, False),
        broker(1, "c0#1", 5, None),
        memory(2, "c0#1", 3, 5, False),
        broker(2, "c0#1", 3, 5),
    )
    assert {"ORDER-11": 1} == orderly.allowed
    # A pull carrying the writer's older offset 3 reaches the broker after its persist of 5.
    pull_3 = h.PullSent(at=1, client="c0#1", pq=1, queue=Q, offset=9, broker_id=0, commit_offset=3)
    held_3_then_5 = [memory(1, "c0#1", 3, None), pull_3, memory(2, "c0#1", 5, 3)]
    late_pull = broker(4, "c0#1", 3, 5, "pull")
    delayed = run(setup(), handover, held_3_then_5, broker(3, "c0#1", 5, None), late_pull)
    assert ({}, {"COMMIT-1": 1}) == (delayed.violations, delayed.allowed)
    # Without that pull in flight, the same decrease is unexplained.
    no_pull = run(setup(), held_3_then_5[::2], broker(3, "c0#1", 5, None), late_pull)
    assert {inv.NONMONOTONIC_COMMIT: 1} == no_pull.violations
    assert {inv.NONMONOTONIC_COMMIT: 1} == run(
        setup(), broker(1, "c0#1", 5, None), broker(2, "c0#1", 4, 5)
    ).violations


# --- orderly ---------------------------------------------------------------------------------------


def call(at: int, client: str, end: int, offsets: tuple[int, ...] = (0,)) -> h.Delivered:
    return h.Delivered(
        at=at,
        client=client,
        pq=1,
        queue=Q,
        offsets=offsets,
        keys=tuple(f"k{o}" for o in offsets),
        reconsume_times=(0,) * len(offsets),
        orderly=True,
        end=end,
    )


def test_overlapping_orderly_calls_are_allowed_only_when_the_lease_arithmetic_broke() -> None:
    o = setup(orderly=True)
    assert {inv.ORDERLY_OVERLAP: 1} == run(o, call(0, "a", 100), call(50, "b", 60)).violations
    assert {} == run(o, call(0, "a", 100), call(100, "b", 160)).violations  # touching ends
    assert {} == run(o, call(0, "a", 100), call(50, "a", 60)).violations  # one client
    long_call = run(o, call(0, "a", 40_000), call(35_000, "b", 35_001))
    assert ({}, {"REBAL-22": 1}) == (long_call.violations, long_call.allowed)
    jump = h.Fault(at=40, fault="clock-jump", target="broker", detail="61000")
    assert {"REBAL-22": 1} == run(o, call(0, "a", 100), jump, call(50, "b", 60)).allowed
    crashed = h.Fault(at=40, fault="crash", target="a")
    assert {} == run(o, call(0, "a", 100), crashed, call(50, "b", 60)).violations


def test_consuming_below_an_offset_already_consumed_in_orderly_mode() -> None:
    o = setup(orderly=True)
    base = [o, *produce(3), h.Assigned(at=1, client="c0#1", pq=1, queue=Q, start=0)]
    in_order = run(base, consumed(2, "c0#1", 1, [0]), consumed(3, "c0#1", 1, [1, 2]))
    assert ({}, {}) == (in_order.violations, in_order.allowed)
    back = run(base, consumed(2, "c0#1", 1, [0, 1]), consumed(3, "c0#1", 1, [1]))
    assert {inv.ORDERLY_REORDER: 1, inv.DUPLICATE: 1} == back.violations
    moved = h.CursorMoved(at=2, client="c0#1", pq=1, queue=Q, before=2, after=1, rule="FLOW-12")
    explained = run(base, consumed(2, "c0#1", 1, [0, 1]), moved, consumed(3, "c0#1", 1, [1]))
    assert ({}, {"FLOW-12": 2}) == (explained.violations, explained.allowed)


# --- flow-bound-exceeded ---------------------------------------------------------------------------


def test_a_cache_beyond_threshold_plus_batch_needs_two_pull_requests() -> None:
    def cached(count: int) -> h.Cached:
        return h.Cached(at=2, client="c0#1", pq=1, queue=Q, count=count, threshold=10, batch=4)

    def sent(at: int) -> h.PullSent:
        return h.PullSent(
            at=at, client="c0#1", pq=1, queue=Q, offset=0, broker_id=0, commit_offset=-1
        )

    assigned = h.Assigned(at=0, client="c0#1", pq=1, queue=Q, start=0)
    assert {} == run(setup(), assigned, cached(14)).violations
    assert {inv.FLOW_BOUND_EXCEEDED: 1} == run(setup(), assigned, cached(15)).violations
    assert {"RESULT-14": 1} == run(setup(), assigned, sent(1), sent(1), cached(15)).allowed


# --- liveness (LIVE-1, LIVE-2) --------------------------------------------------------------------


def quiet(at: int = 5) -> h.Quiet:
    return h.Quiet(at=at, until=at + 600_000)


def test_after_the_quiet_tail_a_message_neither_consumed_nor_dead_lettered_is_stuck() -> None:
    settled: list[h.Event] = [*produce(3), consumed(3, "c0#1", 1, [0, 1])]
    # Without a quiet tail k2 is only pending: nothing says the run was given time to finish.
    assert ({}, 1) == (
        (r := run(setup(), *settled, snapshot(6, 2))).violations,
        r.stats["pending"],
    )
    stuck = run(setup(), *settled, quiet(), snapshot(6, 2))
    assert {inv.STUCK: 1} == stuck.violations
    assert ["k2 at ('T:0', 2): neither consumed nor dead-lettered"] == [
        d.detail for d in stuck.details
    ]
    assert (True, False, 1) == (
        stuck.liveness["judged"],
        stuck.liveness["settled"],
        stuck.liveness["stuck"],
    )
    # Gone with its expired file (STORE-19): settled, though never consumed.
    expired = h.Truncated(at=4, queue=Q, min_offset=3)
    assert {} == run(setup(), *settled, expired, quiet(), snapshot(6, 2)).violations


def test_a_message_that_always_fails_must_reach_the_dead_letter_queue() -> None:
    poison = h.Produce(at=0, key="k0", topic="T", queue_id=0, offset=0, poison=True)
    missing = run(setup(), poison, quiet(), snapshot(6, 0))
    assert {inv.DLQ_MISSING: 1} == missing.violations
    assert (1, 0) == (missing.liveness["poison"], missing.liveness["poisonInDlq"])
    dlq = h.Stored(at=4, key="k0", topic="%DLQ%G", queue_id=0, offset=0, reconsume_times=3)
    settled = run(setup(), poison, dlq, quiet(), snapshot(6, 0))
    assert ({}, 1, 1) == (
        settled.violations,
        settled.liveness["poison"],
        settled.liveness["poisonInDlq"],
    )


def test_the_checker_lists_what_the_quiet_tail_still_waits_for() -> None:
    checker = Checker()
    for e in [setup(), *produce(4), consumed(3, "c0#1", 1, [0])]:
        checker.feed(e)
    assert ["k1", "k2", "k3"] == checker.unresolved()
    checker.feed(h.Stored(at=4, key="k1", topic="%DLQ%G", queue_id=0, offset=0, reconsume_times=3))
    checker.feed(h.Truncated(at=5, queue=Q, min_offset=3))  # k2's file expired
    assert ["k3"] == checker.unresolved()


# --- budgets (LIVE-3) -----------------------------------------------------------------------------


def test_allowed_duplicates_beyond_what_their_causes_grant_break_the_budget() -> None:
    answer = h.PullAnswered(
        at=2, client="c0#1", pq=1, queue=Q, status="FOUND", next_offset=1, offsets=(0,)
    )
    events = [setup(), *produce(1), h.Assigned(at=1, client="c0#1", pq=1, queue=Q, start=0)]
    # One re-put of offset 0 grants one duplicate (PQ-13); a third success has no budget left.
    twice = [answer, consumed(2, "c0#1", 1, [0]), answer, consumed(3, "c0#1", 1, [0])]
    within = run(*events, *twice)
    assert ({}, {"PQ-13": 1}) == (within.violations, within.allowed)
    assert {"count": 1, "budget": 1} == within.liveness["duplicates"]["re-put"]  # type: ignore[index]
    over = run(*events, *twice, consumed(4, "c0#1", 1, [0]))
    assert ({inv.DUPLICATE_BUDGET: 1}, {"PQ-13": 2}) == (over.violations, over.allowed)


def test_a_handover_grants_one_cache_and_one_persist_interval_of_its_queue() -> None:
    config = attrs.evolve(
        setup(),
        pull_threshold_for_queue=64,
        pull_batch_size=16,
        max_span=200,
        persist_interval_ms=5000,
        queues=4,
    )
    # 2400 messages in 100 s over 4 queues: 6 per second per queue, 30 per persist interval.
    assert 64 + 16 + 30 == per_handover(config, 2400, 100_000)
    # Handovers of queues that had received 0, 50 and 500 messages, two holding faults.
    causes = Causes(handovers=[0, 50, 500], holding_faults=2, swept=1)
    got = duplicate_budgets(config, causes, {"REBAL-9": 7, "PQ-18": 2}, 2400, 100_000)
    assert {
        "handover": Budget(7, 0 + 50 + 110 + 2 * 200),
        "send-back": Budget(0, 0),
        "sweep": Budget(2, 1),
        "re-put": Budget(0, 0),
    } == got
    commits = commit_budgets(Causes(handovers=[0, 9], cursor_moves=1, corrections=1), {})
    assert {"handover": Budget(0, 2 * 2 + 1), "correction": Budget(0, 1)} == commits


def test_a_copy_delayed_past_the_end_of_the_run_on_its_way_to_the_dlq_is_not_judged() -> None:
    # An orderly hand-off past maxReconsumeTimes carries DELAY 3 + reconsumeTimes (ORDER-15):
    # at 30 retries that is level 18, two hours in SCHEDULE_TOPIC_XXXX queue 17 (RETRY-8)
    # before it reaches %DLQ%G. A delayed retry, or a DLQ-bound copy due before the end, is
    # judged.
    poison = h.Produce(at=0, key="k0", topic="T", queue_id=0, offset=0, poison=True)

    def delayed(level: int, bound: str) -> CheckResult:
        copy = h.Stored(
            at=4, key="k0", topic="SCHEDULE_TOPIC_XXXX", queue_id=level - 1, offset=0,
            reconsume_times=30, real_topic=bound,
        )  # fmt: skip
        return run(setup(), poison, copy, quiet(), snapshot(600_000, 0))

    late = delayed(18, "%DLQ%G")
    assert ({}, 1, True) == (late.violations, late.liveness["delayed"], late.liveness["settled"])
    assert {inv.DLQ_MISSING: 1} == delayed(3, "%DLQ%G").violations
    assert {inv.DLQ_MISSING: 1} == delayed(18, "%RETRY%G").violations
