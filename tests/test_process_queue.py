"""PQ (ProcessQueue): one example per rule, Hypothesis properties and both versions' vectors."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import pullspec.reference.factories
from pullspec.conformance.adapters import process_queue as adapter
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.vectors import Verdict, load_cases, run_case
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.spec import process_queue as pq
from pullspec.spec.clock import ManualClock
from pullspec.spec.contracts import check_call
from pullspec.spec.errors import (
    InvalidArgumentError,
    InvalidTypeError,
    NoSuchElementError,
    NumberFormatError,
)
from pullspec.spec.message import PROPERTY_CONSUME_START_TIME, PROPERTY_MAX_OFFSET, StoredMessage
from pullspec.spec.process_queue import ProcessQueueState
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"
VERSIONS = {"rocketmq-4.7.1": Profile.V4_7, "rocketmq-4.9.7": Profile.V4_9}
T0 = 1_000_000


def msg(
    offset: int, size: int = 1, max_offset: int | None = None, props: dict[str, str] | None = None
) -> StoredMessage:
    """A message at `offset` with a body of `size` bytes and the given properties."""
    properties = dict(props or {})
    if max_offset is not None:
        properties[PROPERTY_MAX_OFFSET] = str(max_offset)
    return StoredMessage("T", 0, offset, 0, 0, 0, bytes(size), tuple(properties.items()))


def queue(profile: Profile = Profile.V4_9) -> tuple[ReferenceProcessQueue, ManualClock]:
    """A fresh reference process queue with its clock at T0."""
    clock = ManualClock(T0)
    return ReferenceProcessQueue(clock=clock, profile=profile), clock


# --- one example per rule, expected values worked out by hand from the rulebook -------------


def test_pq_1_initial_state() -> None:
    q, _ = queue()
    expected = ProcessQueueState(
        last_lock_timestamp=T0, last_pull_timestamp=T0, last_consume_timestamp=T0
    )
    assert expected == q.snapshot()
    assert (0, 0, 0, 0, 0) == (q.msg_count, q.msg_size, q.max_span, q.queue_offset_max, 0)
    assert (False, False, False) == (q.consuming, q.dropped, q.locked)
    assert (False, False) == (q.is_lock_expired(), q.is_pull_expired())


def test_pq_2_put_replaces_but_counts_only_new() -> None:
    q, _ = queue()
    assert q.put_messages([msg(10, 3), msg(11, 4)]) is True
    assert (2, 7, [10, 11]) == (q.msg_count, q.msg_size, q.cached_offsets)
    assert q.put_messages([msg(11, 9), msg(12, 5)]) is False
    assert (3, 12, [10, 11, 12]) == (q.msg_count, q.msg_size, q.cached_offsets)
    assert bytes(9) == q.snapshot().msg_tree[1].body  # the new object replaced the old one


def test_pq_3_consuming_flag() -> None:
    q, _ = queue()
    assert q.put_messages([]) is False  # nothing cached: no dispatch
    assert q.put_messages([msg(1)]) is True
    assert q.put_messages([msg(2)]) is False
    assert [1, 2] == [m.queue_offset for m in q.take_messages(5)]
    assert q.consuming is True  # a non-empty take keeps it
    assert [] == q.take_messages(5)
    assert q.consuming is False
    assert q.put_messages([msg(3)]) is True
    # Concurrent mode never takes: removing everything does not clear the flag.
    assert q.remove_messages([msg(3)]) == 4  # emptied: queueOffsetMax (3) + 1
    assert q.put_messages([msg(4)]) is False


def test_pq_4_queue_offset_max_is_last_new() -> None:
    q, _ = queue()
    q.put_messages([msg(20)])
    q.put_messages([msg(5)])
    assert q.queue_offset_max == 5
    q.put_messages([msg(30), msg(7)])
    assert q.queue_offset_max == 7
    q.put_messages([msg(30)])  # a re-put is not new
    assert q.queue_offset_max == 7
    q.clear()
    assert q.queue_offset_max == 0


def test_pq_5_msg_acc_cnt() -> None:
    q, _ = queue()
    q.put_messages([msg(10, max_offset=11)])
    assert q.msg_acc_cnt == 1  # caught up: MAX_OFFSET is one past the last entry
    q.put_messages([msg(12, max_offset=100), msg(13)])  # only the last message counts
    assert q.msg_acc_cnt == 1
    q.put_messages([msg(14, max_offset=14)])  # 0 is not > 0
    assert q.msg_acc_cnt == 1
    q.put_messages([msg(15, max_offset=40)])
    assert q.msg_acc_cnt == 25
    q.clear()
    assert q.msg_acc_cnt == 25


def test_pq_6_max_span_ignores_consuming() -> None:
    q, _ = queue()
    q.put_messages([msg(3), msg(9), msg(4)])
    assert q.max_span == 6
    q.take_messages(1)
    assert q.max_span == 5
    assert pq.max_span(()) == 0


def test_pq_7_remove_result() -> None:
    q, clock = queue()
    clock.advance(7)
    assert q.remove_messages([msg(1)]) == -1
    assert q.last_consume_timestamp == T0 + 7
    q.put_messages([msg(5, 10), msg(6), msg(7)])
    assert q.remove_messages([msg(6)]) == 5
    assert q.remove_messages([msg(99)]) == 5  # not cached: nothing changes
    assert (2, 11) == (q.msg_count, q.msg_size)
    assert q.remove_messages([msg(5, 3)]) == 7
    assert 8 == q.msg_size  # 11 minus the argument's 3 bytes, not the cached 10
    assert q.remove_messages([msg(7)]) == 8  # emptied: queueOffsetMax (7) + 1


def test_pq_8_take_messages() -> None:
    q, clock = queue()
    q.put_messages([msg(1, 2), msg(2, 2), msg(3, 2)])
    clock.advance(5)
    assert [1, 2] == [m.queue_offset for m in q.take_messages(2)]
    assert ([3], [1, 2]) == (q.cached_offsets, q.consuming_offsets)
    assert (3, 6, 3) == (q.msg_count, q.msg_size, q.queue_offset_max)
    assert q.last_consume_timestamp == T0 + 5
    assert [] == q.take_messages(0)
    assert q.consuming is False


def test_pq_9_commit() -> None:
    q, _ = queue()
    q.put_messages([msg(1, 3), msg(2, 4), msg(3, 5)])
    q.take_messages(2)
    assert q.commit() == 3
    assert (1, 5, [3], []) == (q.msg_count, q.msg_size, q.cached_offsets, q.consuming_offsets)
    before = q.snapshot()
    with pytest.raises(NoSuchElementError):
        q.commit()
    assert before == q.snapshot()


def test_pq_10_rollback() -> None:
    q, _ = queue()
    q.put_messages([msg(1), msg(2), msg(3)])
    q.take_messages(2)
    q.rollback()
    assert ([1, 2, 3], [], 3) == (q.cached_offsets, q.consuming_offsets, q.msg_count)


def test_pq_11_make_message_to_consume_again() -> None:
    q, _ = queue()
    q.put_messages([msg(1), msg(2), msg(3)])
    q.take_messages(2)
    q.make_messages_to_consume_again([msg(2)])
    assert ([2, 3], [1]) == (q.cached_offsets, q.consuming_offsets)
    q.make_messages_to_consume_again([msg(50, 8)])  # never taken: cached, not counted
    assert ([2, 3, 50], 3, 3) == (q.cached_offsets, q.msg_count, q.msg_size)


def test_pq_12_has_temp_message_and_clear() -> None:
    q, _ = queue()
    q.put_messages([msg(1, 4)])
    q.take_messages(1)
    assert q.has_temp_message() is False  # the consuming tree does not count
    q.locked = True
    q.clear()
    assert (0, 0, [], [], True, True) == (
        q.msg_count,
        q.msg_size,
        q.cached_offsets,
        q.consuming_offsets,
        q.consuming,
        q.locked,
    )


def test_pq_13_re_put_drift() -> None:
    q, _ = queue()
    q.put_messages([msg(5, 10)])
    q.put_messages([msg(5, 4)])  # (a) re-put of a cached offset: not counted
    assert (1, 10) == (q.msg_count, q.msg_size)
    q.remove_messages([msg(5, 4)])
    assert (0, 6) == (q.msg_count, q.msg_size)  # drift of len(old) - len(new)
    # (b) a re-put while taken counts again; returning the batch leaves one too many.
    q2, _ = queue()
    q2.put_messages([msg(8, 2)])
    q2.take_messages(1)
    q2.put_messages([msg(8, 2)])
    q2.make_messages_to_consume_again([msg(8, 2)])
    assert (2, 4, [8], []) == (q2.msg_count, q2.msg_size, q2.cached_offsets, q2.consuming_offsets)


def test_pq_14_dropped() -> None:
    q, _ = queue()
    q.dropped = True
    assert q.dropped is True
    with pytest.raises(InvalidTypeError, match="dropped"):
        q.dropped = 1  # type: ignore[assignment]
    assert q.dropped is True


def test_pq_15_lock_expiry_strictly_greater() -> None:
    q, clock = queue()
    clock.advance(30_000)
    assert q.is_lock_expired() is False
    clock.advance(1)
    assert q.is_lock_expired() is True  # whatever `locked` says
    q.last_lock_timestamp = clock.now_ms()
    assert q.is_lock_expired() is False


def test_pq_16_pull_expiry_strictly_greater() -> None:
    q, clock = queue()
    clock.advance(120_000)
    assert q.is_pull_expired() is False
    clock.advance(1)
    assert q.is_pull_expired() is True
    q.last_pull_timestamp = T0 + 1
    assert q.is_pull_expired() is False


def test_pq_17_last_consume_timestamp() -> None:
    q, clock = queue()
    q.put_messages([msg(1)])
    q.take_messages(1)
    clock.advance(50)
    q.commit()
    q.rollback()
    assert q.last_consume_timestamp == T0
    q.take_messages(1)
    assert q.last_consume_timestamp == T0 + 50


def _started(offset: int, start: int | None) -> StoredMessage:
    if start is None:
        return msg(offset)
    return msg(offset, props={PROPERTY_CONSUME_START_TIME: str(start)})


def test_pq_18_clean_expired_msg() -> None:
    timeout_ms = 15 * 60_000
    q, clock = queue()
    q.put_messages([_started(1, T0), _started(2, T0), _started(3, T0 + 10), _started(4, None)])
    sent: list[tuple[int, int]] = []
    clock.advance(timeout_ms)
    q.clean_expired_msg(lambda m, level: sent.append((m.queue_offset, level)))
    assert [] == sent  # exactly the timeout is not expired
    clock.advance(1)
    q.clean_expired_msg(lambda m, level: sent.append((m.queue_offset, level)))
    assert ([(1, 3), (2, 3)], [3, 4]) == (sent, q.cached_offsets)
    clock.advance(10)
    q.clean_expired_msg(lambda m, level: sent.append((m.queue_offset, level)))
    assert [4] == q.cached_offsets  # 4.9: a head without a start time stops the sweep
    q.clean_expired_msg(lambda m, level: sent.append((m.queue_offset, level)), consume_orderly=True)
    q47, _ = queue(Profile.V4_7)
    q47.put_messages([msg(4)])
    with pytest.raises(NumberFormatError):
        q47.clean_expired_msg(lambda m, level: None)


def test_pq_18_send_back_failure_retries_head() -> None:
    q, clock = queue()
    q.put_messages([_started(1, T0), _started(2, T0 + 1)])
    clock.advance(16 * 60_000)
    calls: list[int] = []

    def flaky(m: StoredMessage, level: int) -> None:
        calls.append(m.queue_offset)
        if len(calls) == 1:
            raise RuntimeError("broker down")

    q.clean_expired_msg(flaky)
    assert ([1, 1], [2]) == (calls, q.cached_offsets)  # loop = 2 rounds, both on head 1


def test_pq_19_interruption_fallbacks() -> None:
    assert (False, -1, (), -1, 0, True, None) == tuple(
        pq.interrupted_result(m)
        for m in (
            "putMessage",
            "removeMessage",
            "takeMessages",
            "commit",
            "getMaxSpan",
            "hasTempMessage",
            "rollback",
        )
    )


def test_pq_20_try_unlock_times() -> None:
    q, _ = queue()
    q.inc_try_unlock_times()
    q.inc_try_unlock_times()
    assert q.try_unlock_times == 2


def test_every_pq_rule_is_registered_with_one_sentence() -> None:
    fns = [f for f in vars(pq).values() if callable(f) and hasattr(f, "rule_id")]
    assert {f"PQ-{n}" for n in range(1, 21)} == {f.rule_id for f in fns}
    for f in fns:
        statement = (f.__doc__ or "").strip().split("\n\n")[0]
        assert statement.endswith("."), f.__name__
        assert not re.search(r"\.\s+[A-Z]", statement), f.__name__


def test_reference_satisfies_protocol() -> None:
    q, _ = queue()
    assert isinstance(q, ProcessQueue)


# --- bad input: typed error naming the value, state unchanged --------------------------------


BAD_MAX_OFFSET = msg(10, props={PROPERTY_MAX_OFFSET: "x"})


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda q: q.put_messages("x"), InvalidTypeError, "msgs"),
        (lambda q: q.put_messages([msg(9), 3]), InvalidTypeError, r"msgs\[1\]"),
        (lambda q: q.put_messages([msg(9), BAD_MAX_OFFSET]), NumberFormatError, "MAX_OFFSET"),
        (lambda q: q.remove_messages(None), InvalidTypeError, "msgs"),
        (lambda q: q.make_messages_to_consume_again({1: msg(1)}), InvalidTypeError, "msgs"),
        (lambda q: q.take_messages(-1), InvalidArgumentError, "batch_size"),
        (lambda q: q.take_messages(1.0), InvalidTypeError, "batch_size"),
        (lambda q: q.take_messages(True), InvalidTypeError, "batch_size"),
        (lambda q: setattr(q, "last_pull_timestamp", "0"), InvalidTypeError, "last_pull"),
    ],
)
def test_bad_input_is_rejected_without_change(
    call: Callable[[Any], object], error: type[Exception], name: str
) -> None:
    q, _ = queue()
    q.put_messages([msg(1, 2)])
    q.take_messages(1)
    q.put_messages([msg(2, 3)])
    before = q.snapshot()
    with pytest.raises(error, match=name):
        call(q)
    assert before == q.snapshot()


# --- Hypothesis: contracts of the pure rules --------------------------------------------------

offsets = st.integers(min_value=0, max_value=40)
messages = st.builds(
    msg,
    offsets,
    st.integers(min_value=0, max_value=20),
    st.one_of(st.none(), st.integers(min_value=0, max_value=60)),
)
batches = st.lists(messages, max_size=6)
Op = tuple[str, Any]
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), batches),
        st.tuples(st.just("remove"), batches),
        st.tuples(st.just("take"), st.integers(min_value=0, max_value=5)),
        st.tuples(st.just("again"), batches),
        st.tuples(st.sampled_from(["commit", "rollback"]), st.none()),
    ),
    max_size=12,
)


def replay(ops: list[Op], now: int = T0) -> ProcessQueueState:
    """The state a fresh queue reaches through `ops` (commit on empty skipped)."""
    state = pq.initial_state(now)
    for name, arg in ops:
        if name == "put":
            state, _ = pq.put_message(state, arg)
        elif name == "remove":
            state, _ = pq.remove_message(state, arg, now)
        elif name == "take":
            state, _ = pq.take_messages(state, arg, now)
        elif name == "again":
            state = pq.make_message_to_consume_again(state, arg)
        elif name == "commit" and state.consuming_tree:
            state, _ = pq.commit(state)
        elif name == "rollback":
            state = pq.rollback(state)
    return state


@settings(max_examples=200, deadline=None)
@given(ops=operations, batch=batches, n=st.integers(0, 6), now=st.integers(0, 2 * T0))
def test_rule_contracts_hold(ops: list[Op], batch: list[StoredMessage], n: int, now: int) -> None:
    state = replay(ops)
    check_call(pq.put_message, state, batch)
    check_call(pq.remove_message, state, batch, now)
    check_call(pq.take_messages, state, n, now)
    check_call(pq.make_message_to_consume_again, state, batch)
    check_call(pq.rollback, state)
    check_call(pq.clear, state)
    check_call(pq.max_span, state.cached_offsets)
    check_call(pq.is_lock_expired, now, state.last_lock_timestamp)
    check_call(pq.is_pull_expired, now, state.last_pull_timestamp)
    check_call(pq.inc_try_unlock_times, state)
    if state.consuming_tree:
        check_call(pq.commit, state)
    if batch:
        last = batch[-1]
        check_call(pq.msg_acc_cnt_after, state.msg_acc_cnt, last.queue_offset,
                   pq.max_offset_property(last))  # fmt: skip


# --- Hypothesis: the reference queue as a state machine ----------------------------------------


class ProcessQueueMachine(RuleBasedStateMachine):
    """Random call sequences on ReferenceProcessQueue, checked against the PQ invariants."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.clock = queue()
        # msgCount == |cached| + |consuming| until an offset sits in both trees or a never-taken
        # message is made consumable again (PQ-13); msgSize also needs the same body lengths.
        self.count_exact = True
        self.size_exact = True

    def _body_len(self, offset: int) -> int | None:
        s = self.q.snapshot()
        return next((len(m.body) for m in (*s.msg_tree, *s.consuming_tree)
                     if m.queue_offset == offset), None)  # fmt: skip

    @rule(batch=batches)
    def put(self, batch: list[StoredMessage]) -> None:
        was_consuming, consuming = self.q.consuming, set(self.q.consuming_offsets)
        s = self.q.snapshot()
        cached = {m.queue_offset: len(m.body) for m in s.msg_tree}
        for m in batch:
            if m.queue_offset in consuming:
                self.count_exact = self.size_exact = False
            elif cached.get(m.queue_offset, len(m.body)) != len(m.body):
                self.size_exact = False
            cached[m.queue_offset] = len(m.body)
        dispatch = self.q.put_messages(batch)
        assert dispatch == (not was_consuming and bool(self.q.cached_offsets))

    @rule(batch=batches)
    def remove(self, batch: list[StoredMessage]) -> None:
        cached_before = list(self.q.cached_offsets)
        if any(self._body_len(m.queue_offset) not in (None, len(m.body)) for m in batch):
            self.size_exact = False
        result = self.q.remove_messages(batch)
        if not cached_before:
            assert result == -1
        else:
            # No loss: the offset to commit never passes a message that is still cached.
            assert all(o >= result for o in self.q.cached_offsets)
            if not self.q.cached_offsets:
                assert result == self.q.queue_offset_max + 1

    @rule(n=st.integers(min_value=0, max_value=5))
    def take(self, n: int) -> None:
        cached, was_consuming = list(self.q.cached_offsets), self.q.consuming
        taken = [m.queue_offset for m in self.q.take_messages(n)]
        assert cached[:n] == taken
        assert self.q.consuming == (was_consuming and bool(taken))

    @rule(batch=batches)
    def again(self, batch: list[StoredMessage]) -> None:
        consuming = set(self.q.consuming_offsets)
        for m in batch:
            if m.queue_offset not in consuming or self._body_len(m.queue_offset) != len(m.body):
                self.count_exact = self.size_exact = False
            consuming.discard(m.queue_offset)
        self.q.make_messages_to_consume_again(batch)

    @precondition(lambda self: not self.q.consuming_offsets)
    @rule()
    def commit_on_empty(self) -> None:
        before = self.q.snapshot()
        with pytest.raises(NoSuchElementError):
            self.q.commit()
        assert before == self.q.snapshot()

    @precondition(lambda self: bool(self.q.consuming_offsets))
    @rule()
    def commit(self) -> None:
        count, consuming = self.q.msg_count, self.q.consuming_offsets
        assert self.q.commit() == consuming[-1] + 1
        assert self.q.msg_count == count - len(consuming)

    @rule()
    def rollback(self) -> None:
        self.q.rollback()
        assert [] == self.q.consuming_offsets

    @rule(ms=st.integers(min_value=0, max_value=150_000))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @invariant()
    def trees_sorted_and_counters_balanced(self) -> None:
        cached, consuming = self.q.cached_offsets, self.q.consuming_offsets
        assert cached == sorted(set(cached)) and consuming == sorted(set(consuming))
        assert self.q.max_span == (cached[-1] - cached[0] if cached else 0)
        if self.count_exact:
            assert self.q.msg_count == len(cached) + len(consuming)
        if self.size_exact and self.count_exact:
            s = self.q.snapshot()
            assert self.q.msg_size == sum(len(m.body) for m in (*s.msg_tree, *s.consuming_tree))

    @invariant()
    def expiry_is_strict(self) -> None:
        now = self.clock.now_ms()
        assert self.q.is_lock_expired() == (now - self.q.last_lock_timestamp > 30_000)
        assert self.q.is_pull_expired() == (now - self.q.last_pull_timestamp > 120_000)


ProcessQueueMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=25, deadline=None
)
TestProcessQueueMachine = ProcessQueueMachine.TestCase


# --- the recorded vectors of both versions -----------------------------------------------------


@pytest.mark.parametrize("folder", sorted(VERSIONS))
def test_vectors_pass(folder: str) -> None:
    directory = VECTORS / folder
    assert directory.is_dir(), f"vector folder {directory} is missing"
    cases = list(load_cases(directory, ["process_queue"]))
    assert len(cases) == 200, f"expected 200 process_queue cases in {directory}"
    results = [
        run_case(pullspec.reference.factories, c, VERSIONS[folder], directory) for c in cases
    ]
    failed = [r.to_json() for r in results if r.verdict is not Verdict.PASS]
    assert [] == failed


def test_adapter_reports_error_with_state() -> None:
    config: JSONObject = {"clockStart": 5, "stateFields": ["msgCount", "consumingOffsets"]}
    inst = adapter.create(pullspec.reference.factories, config, Profile.V4_9, VECTORS)
    assert {"error": "NoSuchElementException", "state": [0, []]} == adapter.apply(
        inst, "commit", {}
    )
    assert {"now": 12, "state": [0, []]} == adapter.apply(inst, "advance_clock", {"ms": 7})
    assert {"result": True, "state": [1, []]} == adapter.apply(
        inst, "put_messages", {"msgs": [[3, 2, 9]]}
    )
    assert 6 == inst.queue.msg_acc_cnt
