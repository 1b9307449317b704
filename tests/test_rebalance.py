"""REBAL (rebalance and client locking, REBAL-17/18 aside): one example per rule with values
worked out by hand from the rulebook, and Hypothesis properties of the allocation strategies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.spec import allocate as al
from pullspec.spec import rebalance as rb
from pullspec.spec.consumer_config import ConsumerConfig, MessageModel
from pullspec.spec.contracts import check_call
from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.rebalance import (
    LockMarks,
    NewQueue,
    NewQueueOutcome,
    Pass1Step,
    QueueView,
    Removal,
    RemovalReason,
)
from pullspec.spec.ruleset import Ruleset

CLUSTERING = MessageModel.CLUSTERING
BROADCASTING = MessageModel.BROADCASTING


def qs(n: int, topic: str = "T", broker: str = "b") -> list[MessageQueue]:
    """Queues 0 … n−1 of `topic` on `broker`, already sorted."""
    return [MessageQueue(topic, broker, i) for i in range(n)]


def cids(c: int) -> list[str]:
    """c client ids that sort in index order."""
    return [f"c{i:02d}" for i in range(c)]


def allocation(strategy: al.AllocateStrategy, n: int, c: int) -> list[list[int]]:
    """Each consumer's queue ids under `strategy` for n queues and c consumers."""
    mqs, ids = qs(n), cids(c)
    return [[q.queue_id for q in strategy("G", cid, mqs, ids)] for cid in ids]


# --- allocation (REBAL-1 … REBAL-8, REBAL-24) ------------------------------------------------


def test_rebal_1_service_cadence() -> None:
    assert 20_000 == al.next_rebalance_at(0, None)
    assert 5_000 == al.next_rebalance_at(0, 5_000)
    assert 100 == al.next_rebalance_at(100, 50)  # a wake-up during the run: at once
    assert 20_100 == al.next_rebalance_at(100, 90_000)


def test_rebal_2_topics_and_failure_logging() -> None:
    assert ("T", "%RETRY%G") == al.rebalance_topics(False, ["T", "%RETRY%G"])
    assert () == al.rebalance_topics(True, ["T"])
    assert (True, False) == (al.warns_on_failure("T"), al.warns_on_failure("%RETRY%G"))


def test_rebal_3_truncate_unsubscribed_topics() -> None:
    table = [*qs(1, "T"), *qs(2, "OLD")]
    assert tuple(qs(2, "OLD")) == al.truncated_queues(table, {"T", "%RETRY%G"})


def test_rebal_4_broadcasting_takes_everything() -> None:
    assert frozenset(qs(3)) == al.broadcasting_allocation(qs(3))
    assert None is al.broadcasting_allocation(None)


def test_rebal_5_clustering_sorts_then_allocates() -> None:
    mq_set = {MessageQueue("T", "b", 1), MessageQueue("T", "a", 5), MessageQueue("T", "a", 0)}
    got = al.clustering_allocation(mq_set, ["z", "y"], "G", "y", al.allocate_averagely)
    # Sorted mqAll: a-0, a-5, b-1; sorted cidAll: y, z; y is index 0 and takes [a-0, a-5].
    assert frozenset({MessageQueue("T", "a", 0), MessageQueue("T", "a", 5)}) == got
    assert None is al.clustering_allocation(None, ["y"], "G", "y", al.allocate_averagely)
    assert None is al.clustering_allocation(mq_set, None, "G", "y", al.allocate_averagely)
    assert None is al.clustering_allocation(mq_set, [], "G", "y", al.allocate_averagely)


def test_rebal_5_sort_is_javas_utf16_order() -> None:
    emoji, replacement = "\U0001f600", "\ufffd"
    # Java compares the surrogate 0xD83D with 0xFFFD; Python's code points would say otherwise.
    assert [emoji, replacement] == al.sort_client_ids([replacement, emoji])
    mqs = [
        MessageQueue("T", replacement, 0),
        MessageQueue("T", emoji, 0),
        MessageQueue("S", "z", 9),
    ]
    assert [mqs[2], mqs[1], mqs[0]] == al.sort_message_queues(mqs)
    assert [MessageQueue("T", "b", 2), MessageQueue("T", "b", 10)] == al.sort_message_queues(
        [MessageQueue("T", "b", 10), MessageQueue("T", "b", 2)]
    )


def test_rebal_6_preconditions() -> None:
    for args in [("", qs(1), ["c"]), ("c", [], ["c"]), ("c", None, ["c"]), ("c", qs(1), [])]:
        with pytest.raises(InvalidArgumentError):
            al.check_allocate_args(*args)
    assert False is al.check_allocate_args("x", qs(1), ["c"])
    assert [] == al.allocate_averagely("G", "x", qs(4), ["c"])
    assert [] == al.allocate_averagely_by_circle("G", "x", qs(4), ["c"])


def test_rebal_7_averagely_examples() -> None:
    assert [[0, 1, 2], [3, 4, 5], [6, 7]] == allocation(al.allocate_averagely, 8, 3)
    assert [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]] == allocation(al.allocate_averagely, 10, 4)
    assert [[0], [1], []] == allocation(al.allocate_averagely, 2, 3)


def test_rebal_8_by_circle_examples() -> None:
    assert [[0, 3, 6], [1, 4, 7], [2, 5]] == allocation(al.allocate_averagely_by_circle, 8, 3)
    assert [[0], [1], []] == allocation(al.allocate_averagely_by_circle, 2, 3)


def test_rebal_24_client_id_per_profile() -> None:
    assert "10.0.0.1@1234" == Ruleset.of(Profile.V4_7).client_id(
        "10.0.0.1", "DEFAULT", None, CLUSTERING, 1234
    )
    assert "10.0.0.1@1234#99@u" == Ruleset.of(Profile.V4_9).client_id(
        "10.0.0.1", "DEFAULT", "u", CLUSTERING, 1234, 99
    )
    assert "10.0.0.1@DEFAULT" == al.client_id_v47("10.0.0.1", "DEFAULT", " ", BROADCASTING, 1)
    assert "h@app@STREAM" == al.client_id_v49("h", "app", None, CLUSTERING, 1, 2, True)


# --- the table update (REBAL-9 … REBAL-16) -------------------------------------------------------


def test_rebal_9_pass_1_drops_unassigned_and_pull_expired() -> None:
    a, b, c = qs(3)
    other = MessageQueue("U", "b", 0)
    table = {
        a: QueueView(),
        b: QueueView(pull_expired=True),
        c: QueueView(consume_lock_free=False),
        other: QueueView(),
    }
    plan = rb.rebalance_pass1("T", table, {a, b}, True, True, True)
    expected = (
        Pass1Step(b, RemovalReason.PULL_EXPIRED, Removal(True, 0)),
        Pass1Step(c, RemovalReason.NOT_ASSIGNED, Removal(False, None, True)),
    )
    assert expected == plan.steps
    assert (frozenset({b}), True) == (plan.removed, plan.changed)
    # The pull consumer never self-heals an idle queue.
    assert (
        ()
        == rb.rebalance_pass1("T", {b: QueueView(pull_expired=True)}, {b}, False, True, True).steps
    )


def test_rebal_10_new_queue_per_profile() -> None:
    assert NewQueue(NewQueueOutcome.LOCK_FAILED, False) == rb.new_queue_v47(True, False, 5)
    assert NewQueue(NewQueueOutcome.ADDED, True, 5) == rb.new_queue_v47(True, True, 5)
    assert NewQueue(NewQueueOutcome.ADDED, True, 0) == rb.new_queue_v49(False, False, 0)
    assert NewQueue(NewQueueOutcome.OFFSET_NEGATIVE, True) == Ruleset.of(Profile.V4_7).new_queue(
        False, True, None
    )
    assert NewQueue(NewQueueOutcome.OFFSET_FAILED, True) == Ruleset.of(Profile.V4_9).new_queue(
        False, True, None
    )
    assert NewQueue(NewQueueOutcome.ALREADY_EXISTS, True) == rb.new_queue_v49(False, True, 3, True)
    assert tuple(qs(3)[1:]) == rb.pass2_candidates({qs(1)[0]}, reversed(qs(3)))


def test_rebal_11_new_process_queue_lock_flag() -> None:
    assert (False, True) == (rb.new_process_queue_locked_v47(), rb.new_process_queue_locked_v49())


def test_rebal_12_dispatch_immediately_in_order() -> None:
    assert ("p1", "p2") == rb.dispatch_pull_requests(["p1", "p2"])


def test_rebal_13_message_queue_changed() -> None:
    config = ConsumerConfig(pull_threshold_for_topic=100)
    assert rb.QueueChangedPlan(77, (25, 100)) == rb.message_queue_changed(77, 4, config)
    assert rb.QueueChangedPlan(77, None) == rb.message_queue_changed(77, 0, config)


def test_rebal_14_and_15_removal_and_unlock_delay() -> None:
    assert Removal(True) == rb.remove_unnecessary(False, True, QueueView(consume_lock_free=False))
    assert Removal(True) == rb.remove_unnecessary(True, False, QueueView(consume_lock_free=False))
    busy = QueueView(consume_lock_free=False)
    assert Removal(False, None, True) == rb.remove_unnecessary(True, True, busy)
    cached = QueueView(has_temp_message=True)
    assert Removal(True, 20_000) == rb.remove_unnecessary(True, True, cached)
    assert (20_000, 0) == (rb.unlock_delay(True), rb.unlock_delay(False))


def test_rebal_16_remove_process_queue() -> None:
    assert ("remove", "drop", "remove_unnecessary") == rb.remove_process_queue(True)
    assert ("remove",) == rb.remove_process_queue(False)


# --- locking (REBAL-19 … REBAL-23) ---------------------------------------------------------------


def test_rebal_19_lock_one() -> None:
    a, b, c = qs(3)
    assert (True, LockMarks(frozenset({a}))) == rb.lock_one(a, {a, c}, {a, b})
    assert (False, LockMarks()) == rb.lock_one(a, None, {a})
    assert (False, LockMarks()) == rb.lock_one(a, set(), {a})


def test_rebal_20_lock_all_marks() -> None:
    a, b, c = qs(3)
    assert LockMarks(frozenset({a}), frozenset({b})) == rb.lock_all_marks({a, b, c}, {a}, {a, b})
    assert LockMarks() == rb.lock_all_marks({a, b}, None, {a, b})
    grouped = rb.group_by_broker([MessageQueue("T", "y", 1), MessageQueue("T", "x", 0), a])
    assert {
        "b": (a,),
        "x": (MessageQueue("T", "x", 0),),
        "y": (MessageQueue("T", "y", 1),),
    } == grouped


def test_rebal_21_unlock_marks() -> None:
    a, b = qs(2)
    assert LockMarks() == rb.unlock_marks(False, {a}, False)
    assert LockMarks(unlocked=frozenset({a, b})) == rb.unlock_marks(True, {a, b}, False)
    assert LockMarks() == rb.unlock_marks(True, {a, b}, True)


def test_rebal_22_lease_arithmetic() -> None:
    assert rb.LeaseTimeline(20_000, 30_001, 60_001) == rb.lease_timeline(0)


def test_rebal_23_destroy_drops_everything() -> None:
    assert frozenset(qs(2)) == rb.destroy(qs(2))


# --- properties ----------------------------------------------------------------------------------

strategies = st.sampled_from([al.allocate_averagely, al.allocate_averagely_by_circle])


@given(strategies, st.integers(1, 40), st.integers(1, 12))
def test_every_queue_goes_to_exactly_one_consumer(
    strategy: al.AllocateStrategy, n: int, c: int
) -> None:
    mqs, ids = qs(n), cids(c)
    shares = [check_call(strategy, "G", cid, mqs, ids) for cid in ids]
    flat = [q for share in shares for q in share]
    assert sorted(mqs) == sorted(flat)
    assert len(flat) == len(set(flat))
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


@given(st.integers(1, 40), st.integers(1, 12))
def test_averagely_gives_contiguous_blocks_in_consumer_order(n: int, c: int) -> None:
    mqs, ids = qs(n), cids(c)
    shares = [al.allocate_averagely("G", cid, mqs, ids) for cid in ids]
    # Concatenating the consumers' blocks in cidAll order gives mqAll back.
    assert mqs == [q for share in shares for q in share]
    # The first n mod c consumers take one more (one each and nothing for the rest if n ≤ c).
    if n <= c:
        expected = [1] * n + [0] * (c - n)
    else:
        expected = [n // c + 1] * (n % c) + [n // c] * (c - n % c)
    assert expected == [len(s) for s in shares]


@given(
    st.lists(
        st.text(alphabet="ab\U0001f600\ufffd", max_size=3), min_size=1, max_size=6, unique=True
    ),
    st.integers(1, 10),
)
def test_every_client_agrees_whatever_order_the_inputs_arrive_in(names: list[str], n: int) -> None:
    mq_set = set(qs(n))
    names = [f"c{x}" for x in names]
    shares = [
        al.clustering_allocation(mq_set, list(reversed(names)), "G", cid, al.allocate_averagely)
        for cid in names
    ]
    again = [
        al.clustering_allocation(mq_set, names, "G", cid, al.allocate_averagely) for cid in names
    ]
    assert shares == again
    assert mq_set == frozenset().union(*[s or frozenset() for s in shares])


@given(
    st.dictionaries(
        st.sampled_from(qs(4) + qs(2, "U")),
        st.builds(
            QueueView, st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans()
        ),
    ),
    st.sets(st.sampled_from(qs(4))),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_pass_1_contracts(
    table: dict[MessageQueue, QueueView],
    mq_set: set[MessageQueue],
    passive: bool,
    orderly: bool,
    clustering: bool,
) -> None:
    plan = check_call(rb.rebalance_pass1, "T", table, mq_set, passive, orderly, clustering)
    # An assigned, pulling queue is never touched.
    for step in plan.steps:
        assert step.mq not in mq_set or (passive and table[step.mq].pull_expired)
