"""The mutation bank: every mutant is a documented one-rule change, the suite kills each, and a
mutant never leaks into the reference everyone else uses."""

from __future__ import annotations

from pathlib import Path

import pytest

import pullspec.reference.factories as reference
from pullspec.conformance import vectors
from pullspec.conformance.mutants import Mutant, bank, get
from pullspec.conformance.mutants.runner import kill, suite_cases
from pullspec.conformance.ops import CLIENT_AREAS, MACHINE_AREAS
from pullspec.conformance.resolve import resolve
from pullspec.conformance.vectors import Verdict
from pullspec.spec import rules
from pullspec.spec.profiles import Profile

BANK = bank()


def test_the_bank_holds_at_least_25_distinct_documented_mutants() -> None:
    assert 25 <= len(BANK)
    assert len(BANK) == len({m.name for m in BANK})
    known = {r.id for r in rules.catalogue()}
    for m in BANK:
        assert m.rule in known, m.name
        assert m.doc.endswith("."), m.name
        assert set(m.areas) <= set(MACHINE_AREAS)


def test_each_bug_of_issue_16_and_each_client_rule_area_has_a_mutant() -> None:
    client = {m.rule.partition("-")[0] for m in BANK if set(m.areas) & set(CLIENT_AREAS)}
    assert {"PULLQ", "FLOW", "REQ", "RESULT", "OFFSET", "CONC", "ORDER", "REBAL", "PQ"} <= client
    bugs = {"pq-span-from-count", "clean-expire-in-seconds", "lock-keeps-old-timestamp"}
    bugs |= {"pull-expired-not-recreated", "removal-persists-max-offset"}
    assert bugs <= {m.name for m in BANK}


@pytest.mark.parametrize("mutant", BANK, ids=[m.name for m in BANK])
def test_each_mutant_is_killed(mutant: Mutant) -> None:
    result = kill(mutant, Profile.V4_9, machines=False)
    assert result.killed, f"{mutant.name} survived the vectors"
    assert Verdict.DIVERGED == result.verdict


@pytest.mark.parametrize(
    "name",
    [
        *("eof-blank-without-8", "lease-inclusive", "dlq-threshold-off-by-one"),
        *("pq-span-from-count", "lock-keeps-old-timestamp", "pq18-expired-at-timeout"),
    ],
)
def test_machines_alone_kill_boundary_mutants(name: str) -> None:
    result = kill(get(name), Profile.V4_9, vectors=False, examples=200, steps=25)
    assert result.killed, f"{name} survived the machines"
    assert (result.by or "").startswith("machine ")


def test_a_mutant_resolves_as_an_impl() -> None:
    mutant = get("remove-returns-max")
    candidate = resolve(mutant.impl)
    assert hasattr(candidate, "process_queue")
    assert not hasattr(candidate, "message_store")


def test_building_every_mutant_leaves_the_reference_intact() -> None:
    for m in BANK:
        m.candidate()
    for case in suite_cases(Profile.V4_9):
        assert Verdict.PASS == vectors.run_case(reference, case, Profile.V4_9, Path(".")).verdict, (
            case["id"]
        )
