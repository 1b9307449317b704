"""LEASE (RebalanceLockManager): one example per rule, Hypothesis properties and the vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import pullspec.reference.factories
from pullspec.conformance.adapters import lock_manager as adapter
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.vectors import Verdict, load_cases, run_case
from pullspec.reference.lock_manager import ReferenceLockManager
from pullspec.spec import lease
from pullspec.spec.clock import ManualClock
from pullspec.spec.contracts import check_call
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, UnsupportedError
from pullspec.spec.lease import LockEntry, LockTable
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"
VERSIONS = {"rocketmq-4.7.1": Profile.V4_7, "rocketmq-4.9.7": Profile.V4_9}
LIVE = lease.REBALANCE_LOCK_MAX_LIVE_TIME_MS
T0 = 1_000_000


def q(i: int) -> MessageQueue:
    """Queue `i` of topic T on broker b, as the vectors name them."""
    return MessageQueue("T", "b", i)


def manager(start: int = T0) -> tuple[ReferenceLockManager, ManualClock]:
    """A fresh reference lock manager with its clock at `start`."""
    clock = ManualClock(start)
    return ReferenceLockManager(clock=clock), clock


# --- one example per rule, expected values worked out by hand from the rulebook -------------


def test_lease_1_default_and_property() -> None:
    assert lease.lock_max_live_time(None) == 60_000
    assert lease.lock_max_live_time("120000") == 120_000
    assert lease.lock_max_live_time("+5") == 5
    with pytest.raises(InvalidArgumentError):
        lease.lock_max_live_time(" 5")  # Long.parseLong does not trim


def test_lease_2_new_entry_stamped_at_creation() -> None:
    assert lease.new_lock_entry("c1", 1234) == LockEntry("c1", 1234)
    m, _ = manager()
    m.try_lock_batch("G1", [q(0)], "c1")
    assert m.table() == {"G1": {q(0): ("c1", T0)}}


def test_lease_3_expiry_is_strict() -> None:
    entry = LockEntry("c1", 1000)
    assert lease.is_expired(61_000, entry, LIVE) is False
    assert lease.is_expired(61_001, entry, LIVE) is True
    assert lease.holds(61_000, entry, "c1", LIVE) is True
    assert lease.holds(61_000, entry, "c2", LIVE) is False


def test_lease_4_is_locked_refreshes_only_when_true() -> None:
    entry = LockEntry("c1", 1000)
    assert lease.is_locked(2000, entry, "c1", LIVE) == (True, LockEntry("c1", 2000))
    assert lease.is_locked(2000, entry, "c2", LIVE) == (False, entry)
    assert lease.is_locked(61_001, entry, "c1", LIVE) == (False, entry)
    assert lease.is_locked(2000, None, "c1", LIVE) == (False, None)
    m, clock = manager()
    assert m.is_locked("G1", q(0), "c1") is False
    assert m.table() == {}  # an unknown group is not created
    m.try_lock_batch("G1", [q(0)], "c1")
    clock.advance(500)
    assert m.is_locked("G1", q(0), "c1") is True
    assert m.table() == {"G1": {q(0): ("c1", T0 + 500)}}


def test_lease_5_try_lock_cases() -> None:
    own, other = LockEntry("c1", 1000), LockEntry("c2", 1000)
    assert lease.try_lock(5000, None, "c1", LIVE) == (True, LockEntry("c1", 5000))
    assert lease.try_lock(5000, own, "c1", LIVE) == (True, LockEntry("c1", 5000))
    assert lease.try_lock(5000, other, "c1", LIVE) == (False, other)
    assert lease.try_lock(61_001, own, "c1", LIVE) == (True, LockEntry("c1", 61_001))
    assert lease.try_lock(61_001, other, "c1", LIVE) == (True, LockEntry("c1", 61_001))
    m, clock = manager()
    assert m.try_lock("G1", q(0), "c1") is True
    assert m.try_lock("G1", q(0), "c2") is False
    clock.advance(LIVE + 1)
    assert m.try_lock("G1", q(0), "c2") is True
    assert m.table() == {"G1": {q(0): ("c2", T0 + LIVE + 1)}}


def test_lease_6_batch_oracle() -> None:
    m, clock = manager()
    assert m.try_lock_batch("G1", [q(0), q(1)], "c1") == {q(0), q(1)}
    clock.advance(10)
    assert m.try_lock_batch("G1", [q(1), q(2)], "c2") == {q(2)}
    assert m.table() == {"G1": {q(0): ("c1", T0), q(1): ("c1", T0), q(2): ("c2", T0 + 10)}}
    assert m.try_lock_batch("G2", [], "c1") == set()
    assert "G2" not in m.table()  # an empty batch does not create the group


def test_lease_7_unlock_batch() -> None:
    m, clock = manager()
    m.try_lock_batch("G1", [q(0), q(1)], "c1")
    m.try_lock_batch("G1", [q(2)], "c2")
    clock.advance(LIVE + 1)
    m.unlock_batch("G1", [q(0), q(2), q(3)], "c1")  # q0 expired but owned: removed
    assert m.table() == {"G1": {q(1): ("c1", T0), q(2): ("c2", T0)}}
    m.unlock_batch("G9", [q(0)], "c1")
    assert "G9" not in m.table()
    m.unlock_batch("G1", [q(1)], "c1")
    m.unlock_batch("G1", [q(2)], "c2")
    assert m.table() == {"G1": {}}  # an emptied group stays


def test_lease_8_always_success() -> None:
    assert lease.lease_response_code(lease.LOCK_BATCH_MQ, broker_is_slave=True) == 0
    assert lease.lease_response_code(lease.UNLOCK_BATCH_MQ, broker_is_slave=False) == 0
    with pytest.raises(InvalidArgumentError):
        lease.lease_response_code(11, broker_is_slave=False)


def test_lease_9_no_sweep() -> None:
    table = LockTable({"G1": {q(0): LockEntry("c1", 0)}})
    assert lease.on_client_gone(table, "c1") is table
    m, clock = manager()
    m.try_lock_batch("G1", [q(0)], "c1")
    clock.advance(10 * LIVE)
    assert m.table() == {"G1": {q(0): ("c1", T0)}}  # expired, still there


def test_every_rule_is_registered_with_one_sentence() -> None:
    fns = [
        lease.lock_max_live_time,
        lease.new_lock_entry,
        lease.is_expired,
        lease.is_locked,
        lease.try_lock,
        lease.try_lock_batch,
        lease.unlock_batch,
        lease.lease_response_code,
        lease.on_client_gone,
    ]
    assert [getattr(f, "rule_id", None) for f in fns] == [f"LEASE-{n}" for n in range(1, 10)]
    for f in fns:
        statement = " ".join((f.__doc__ or "").strip().split("\n\n")[0].split())
        assert statement.endswith(".") and ". " not in statement, f.__name__


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name", "bad"),
    [
        (lambda m: m.try_lock_batch(7, [q(0)], "c1"), "group", 7),
        (lambda m: m.try_lock_batch("G1", [q(1)], None), "client_id", None),
        (lambda m: m.try_lock_batch("G1", [q(1), "q2"], "c1"), "mqs[1]", "q2"),
        (lambda m: m.try_lock_batch("G1", "q1", "c1"), "mqs", "q1"),
        (lambda m: m.unlock_batch("G1", [q(0), 3], "c1"), "mqs[1]", 3),
        (lambda m: m.is_locked("G1", 0, "c1"), "mq", 0),
        (lambda m: m.is_locked(b"G1", q(0), "c1"), "group", b"G1"),
    ],
)
def test_bad_input_is_typed_and_changes_nothing(call: Any, name: str, bad: object) -> None:
    m, _ = manager()
    m.try_lock_batch("G1", [q(0)], "c1")
    before = m.table()
    with pytest.raises(InvalidTypeError) as info:
        call(m)
    assert (info.value.name, info.value.value) == (name, bad)
    assert m.table() == before


def test_bad_live_time_and_clock() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        ReferenceLockManager(clock=ManualClock(0), lock_max_live_time_ms=-1)
    assert info.value.value == -1
    with pytest.raises(InvalidTypeError):
        ReferenceLockManager(clock=ManualClock(0), lock_max_live_time_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        ReferenceLockManager(clock=object())  # type: ignore[arg-type]


def test_adapter_without_factory_or_with_unknown_op() -> None:
    config: JSONObject = {
        "clockStart": 0,
        "lockMaxLiveTimeMs": LIVE,
        "topic": "T",
        "brokerName": "b",
    }
    with pytest.raises(UnsupportedError):
        adapter.create(object(), config, Profile.V4_9, VECTORS)
    h = adapter.create(pullspec.reference.factories, config, Profile.V4_9, VECTORS)
    with pytest.raises(UnsupportedError):
        adapter.apply(h, "try_lock", {"group": "G1", "clientId": "c1", "mq": 0})


# --- Hypothesis properties ----------------------------------------------------------------

CLIENTS = ("c1", "c2", "c3")
GROUPS = ("G1", "G2")
times = st.integers(0, 3 * LIVE)
lives = st.integers(0, 2 * LIVE)
entries = st.builds(LockEntry, st.sampled_from(CLIENTS), times)
queue_tuples = st.lists(st.integers(0, 4).map(q), unique=True, max_size=5).map(tuple)
tables = st.dictionaries(
    st.sampled_from(GROUPS), st.dictionaries(st.integers(0, 4).map(q), entries, max_size=5)
).map(LockTable)


@given(entries, times, lives, st.sampled_from(CLIENTS), st.one_of(st.none(), entries))
def test_entry_rule_contracts(e: LockEntry, now: int, live: int, c: str, opt: Any) -> None:
    check_call(lease.is_expired, now, e, live)
    check_call(lease.is_locked, now, opt, c, live)
    check_call(lease.try_lock, now, opt, c, live)
    check_call(lease.new_lock_entry, c, now)


@given(tables, st.sampled_from(GROUPS), queue_tuples, st.sampled_from(CLIENTS), times, lives)
def test_table_rule_contracts(
    t: LockTable, g: str, mqs: tuple[MessageQueue, ...], c: str, now: int, live: int
) -> None:
    check_call(lease.try_lock_batch, t, g, mqs, c, now, live)
    check_call(lease.unlock_batch, t, g, mqs, c)
    check_call(lease.on_client_gone, t, c)
    check_call(lease.lease_response_code, 41, broker_is_slave=False)


@given(st.sampled_from(["", "+", "-"]), st.integers(0, 10**18), st.booleans())
def test_live_time_contract(sign: str, value: int, unset: bool) -> None:
    check_call(lease.lock_max_live_time, None if unset else f"{sign}{value}")


@given(st.integers(0, 10**12), lives)
def test_expiry_boundary(ts: int, live: int) -> None:
    entry = LockEntry("c1", ts)
    assert not lease.is_expired(ts + live, entry, live)
    assert lease.is_expired(ts + live + 1, entry, live)


@given(
    st.integers(0, 10**9), st.sampled_from([LIVE - 1, LIVE, LIVE + 1]) | st.integers(0, 2 * LIVE)
)
def test_takeover_only_after_60000_ms(start: int, wait: int) -> None:
    m, clock = manager(start)
    m.try_lock_batch("G1", [q(0)], "c1")
    clock.advance(wait)
    assert (m.try_lock_batch("G1", [q(0)], "c2") == {q(0)}) == (wait > 60_000)


@given(tables, st.sampled_from(GROUPS), queue_tuples, st.sampled_from(CLIENTS))
def test_unlock_by_non_owner_changes_nothing(
    t: LockTable, g: str, mqs: tuple[MessageQueue, ...], c: str
) -> None:
    foreign = tuple(mq for mq in mqs if (e := t.entry(g, mq)) is None or e.client_id != c)
    assert lease.unlock_batch(t, g, foreign, c) == t


class LeaseMachine(RuleBasedStateMachine):
    """Drives the reference manager; the ghost knows only what the API answered."""

    def __init__(self) -> None:
        super().__init__()
        self.m, self.clock = manager()
        # (group, queue) -> client -> time of its last grant or refresh, from answers only
        self.grants: dict[tuple[str, MessageQueue], dict[str, int]] = {}

    def _record(self, group: str, mq: MessageQueue, client: str) -> None:
        self.grants.setdefault((group, mq), {})[client] = self.clock.now

    @rule(g=st.sampled_from(GROUPS), c=st.sampled_from(CLIENTS), mqs=queue_tuples)
    def try_lock_batch(self, g: str, c: str, mqs: tuple[MessageQueue, ...]) -> None:
        before, now = self.m.table().get(g, {}), self.clock.now
        expected = {
            mq for mq in mqs if mq not in before or before[mq][0] == c or now - before[mq][1] > LIVE
        }
        granted = self.m.try_lock_batch(g, mqs, c)
        assert granted == expected
        for mq in granted:
            self._record(g, mq, c)

    @rule(g=st.sampled_from(GROUPS), c=st.sampled_from(CLIENTS), mqs=queue_tuples)
    def unlock_batch(self, g: str, c: str, mqs: tuple[MessageQueue, ...]) -> None:
        before = self.m.table()
        self.m.unlock_batch(g, mqs, c)
        after = self.m.table()
        mine = {mq for mq, (owner, _) in before.get(g, {}).items() if owner == c and mq in mqs}
        expected = dict(before)
        if g in before:
            expected[g] = {mq: v for mq, v in before[g].items() if mq not in mine}
        assert after == expected
        for mq in mine:
            self.grants.get((g, mq), {}).pop(c, None)

    @rule(g=st.sampled_from(GROUPS), c=st.sampled_from(CLIENTS), i=st.integers(0, 4))
    def is_locked(self, g: str, c: str, i: int) -> None:
        entry = self.m.table().get(g, {}).get(q(i))
        live = entry is not None and entry[0] == c and self.clock.now - entry[1] <= LIVE
        assert self.m.is_locked(g, q(i), c) is live
        if live:
            self._record(g, q(i), c)

    @rule(ms=st.sampled_from([1, LIVE - 1, LIVE, LIVE + 1]) | st.integers(0, 2 * LIVE))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @invariant()
    def at_most_one_live_holder(self) -> None:
        for key, holders in self.grants.items():
            live = [c for c, ts in holders.items() if self.clock.now - ts <= LIVE]
            assert len(live) <= 1, (key, holders, self.clock.now)


LeaseMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
test_lease_machine = LeaseMachine.TestCase


# --- recorded RocketMQ vectors ------------------------------------------------------------


def _vector_file(version: str) -> Path:
    path = VECTORS / version / "lock_manager.jsonl"
    if not path.is_file():
        pytest.fail(
            f"lock_manager vectors missing: {path} (expected ../shared/vectors beside repo)"
        )
    return path


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_vectors_pass(version: str) -> None:
    path = _vector_file(version)
    results = [
        run_case(pullspec.reference.factories, case, VERSIONS[version], path.parent)
        for case in load_cases(path, ["lock_manager"])
    ]
    failed = [r.to_json() for r in results if r.verdict is not Verdict.PASS]
    assert not failed, json.dumps(failed[:3], indent=1)
    assert len(results) == 100


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_vectors_match_exactly(version: str) -> None:
    # run_case ignores keys the expectation lacks; a stray group or queue must still fail here
    for case in load_cases(_vector_file(version), ["lock_manager"]):
        h = adapter.create(pullspec.reference.factories, case["config"], VERSIONS[version], VECTORS)
        for step in case["steps"]:
            assert adapter.apply(h, step["op"], step["args"]) == step["expect"], case["id"]
