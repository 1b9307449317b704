"""The INV rules (spec.invariants) as registered rules with their contracts, and fault
schedules (reference.sim.faults): generation, text form and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.reference.sim.faults import (
    FAULT_KINDS,
    TARGETED,
    FaultStep,
    format_schedule,
    generate,
    parse_kinds,
    parse_schedule,
)
from pullspec.spec import invariants as inv
from pullspec.spec import liveness as live
from pullspec.spec import rules
from pullspec.spec.contracts import check_call


def test_every_invariant_is_a_registered_rule_with_one_sentence() -> None:
    ids = [r.id for r in rules.catalogue() if r.area == "INV"]
    assert [f"INV-{n}" for n in range(1, 9)] == ids
    live_ids = [r.id for r in rules.catalogue() if r.area == "LIVE"]
    assert [f"LIVE-{n}" for n in range(1, 4)] == live_ids
    for rule_id in ids + live_ids:
        r = rules.get(rule_id)
        assert r.statement.endswith(".") and r.source


@given(st.booleans(), st.booleans(), st.integers(-1, 9), st.integers(0, 9))
def test_inv_1_contract(consumed: bool, back: bool, committed: int, offset: int) -> None:
    check_call(inv.copy_not_lost, consumed, back, committed, offset)


@given(st.none() | st.integers(-1, 9), st.integers(-1, 9), st.booleans())
def test_inv_3_and_4_contracts(before: int | None, after: int, increase_only: bool) -> None:
    check_call(inv.client_offset_monotone, before, after, increase_only)
    check_call(inv.broker_commit_monotone, before, after)


@given(st.integers(0, 3), st.integers(1, 9), st.integers(0, 30), st.integers(1, 9))
def test_inv_2_6_7_contracts(successes: int, threshold: int, cached: int, batch: int) -> None:
    check_call(inv.consumed_at_most_once, successes)
    check_call(inv.within_flow_bound, cached, threshold, batch)
    check_call(inv.orderly_in_order, threshold, batch, successes > 1)
    check_call(inv.one_orderly_owner, frozenset(str(i) for i in range(successes)))
    check_call(inv.dlq_accounted, successes > 0, threshold > 4, batch > 4)


def test_a_schedule_round_trips_through_its_text_form() -> None:
    steps = generate(7, 600_000, 3)
    assert steps == parse_schedule(format_schedule(steps))
    assert steps == generate(7, 600_000, 3)
    assert {s.kind for s in steps} <= set(FAULT_KINDS)
    assert (FaultStep(5, "crash", "c1", 100),) == parse_schedule("crash@5:c1=100")
    assert () == parse_schedule("")


def test_bad_fault_input_is_refused() -> None:
    for text in ("crash", "boom@1", "crash@x"):
        with pytest.raises(ValueError):
            parse_schedule(text)
    with pytest.raises(ValueError, match="unknown fault kinds"):
        parse_kinds("crash,boom")
    assert ("crash", "join") == parse_kinds("crash, join")
    assert () == parse_kinds("none")


@given(st.booleans(), st.booleans(), st.booleans(), st.integers(0, 9), st.integers(0, 9))
def test_live_1_2_3_contracts(
    consumed: bool, in_dlq: bool, gone: bool, count: int, budget: int
) -> None:
    check_call(live.message_settled, consumed, in_dlq, gone)
    check_call(live.poison_dead_lettered, in_dlq, gone)
    check_call(live.within_budget, count, budget)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_generated_schedule_opens_with_the_targeted_faults_and_lets_them_play_out(
    seed: int,
) -> None:
    steps = generate(seed, 900_000, 3)
    opener = steps[: len(TARGETED)]
    assert set(TARGETED) == {s.kind for s in opener}
    on = {s.kind: s.target for s in opener}
    at = {s.kind: s.at for s in opener}
    # expire-behind comes last, its expiry (1 s before it resumes) after the consume-timeout
    # call has been swept: within two minutes of its start.
    eb = opener[-1]
    assert ("expire-behind", True) == (
        eb.kind,
        eb.at + eb.value - 1_000 >= at["consume-timeout"] + 120_000,
    )
    # The two listener kinds share a consumer; the stall and the expiry each have their own.
    assert on["listener-stuck"] == on["consume-timeout"]
    assert 3 == len({on["pull-stall"], on["expire-behind"], on["listener-stuck"]})
    # No membership change, and no fault on an occupied consumer, until they have played out.
    ends = {s.target: s.at + s.value + 40_000 for s in opener}
    for s in steps[len(TARGETED) :]:
        assert s.kind not in ("crash", "join", "leave") or s.at >= max(ends.values())
        assert s.at >= ends.get(s.target, 0)
    # A schedule without the targeted kinds draws as before: uniformly from the kinds given.
    assert {"crash"} == {s.kind for s in generate(seed, 900_000, 3, ("crash",))}
