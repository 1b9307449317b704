"""The lockstep machines: reference against itself passes every interface at a CI-sized budget;
a wrong candidate fails with a minimal trace, its rules, expected vs actual and a replay file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pullspec.reference.factories as reference
from pullspec.conformance import vectors
from pullspec.conformance.jsontypes import as_array
from pullspec.conformance.machines.run import run_machine
from pullspec.conformance.mutants import get
from pullspec.conformance.observe import DivergenceKind
from pullspec.conformance.ops import AREAS
from pullspec.conformance.vectors import Verdict
from pullspec.spec.profiles import Profile

CI_EXAMPLES = 25
CI_STEPS = 20


@pytest.mark.parametrize("profile", [Profile.V4_9, Profile.V4_7])
@pytest.mark.parametrize("area", AREAS)
def test_reference_against_itself_passes(area: str, profile: Profile) -> None:
    report = run_machine(
        area, reference, impl="reference", profile=profile, examples=CI_EXAMPLES, steps=CI_STEPS
    )
    assert Verdict.PASS == report.verdict, report.describe()
    assert CI_EXAMPLES <= report.examples
    assert 0 < report.ops
    assert set() != set(report.covered)


def test_a_divergence_is_shrunk_and_replayable(tmp_path: Path) -> None:
    mutant = get("max-span-off-by-one")
    report = run_machine(
        "process_queue", mutant.candidate(), impl=mutant.impl, seed=1, replay_dir=tmp_path
    )
    assert Verdict.DIVERGED == report.verdict
    assert DivergenceKind.STATE == report.kind
    assert ("PQ-6",) == report.rules
    assert ["put_messages"] == [s.op.name for s in report.steps]
    assert 1 == len(as_array(report.steps[0].op.args["msgs"]))  # one cached message is enough
    assert report.divergence is not None and (0, 1) == (
        report.divergence.expected,
        report.divergence.actual,
    )
    assert report.replay is not None and mutant.impl in report.replay
    path = Path(report.replay.split()[3])
    case = json.loads(path.read_text(encoding="utf-8"))
    for candidate, verdict in ((reference, Verdict.PASS), (mutant.candidate(), Verdict.DIVERGED)):
        result = vectors.run_case(candidate, case, Profile.V4_9, tmp_path)
        assert verdict == result.verdict


def test_a_store_divergence_names_its_status_rule() -> None:
    mutant = get("overflow-badly-other-profile")
    report = run_machine("store", mutant.candidate(), impl=mutant.impl, seed=0)
    assert Verdict.DIVERGED == report.verdict
    assert "STORE-8" in report.rules
    assert "nextBeginOffset" == (report.divergence.field if report.divergence else None)
    assert 2 == len(report.steps)  # one put, one read past max


class _CrashingQueue:
    def __init__(self, clock: Any, profile: Profile) -> None:
        self.inner = reference.process_queue(clock, profile)

    def __getattr__(self, name: str) -> Any:
        if name == "take_messages":
            raise RuntimeError("boom")
        return getattr(self.inner, name)


class _Crashing:
    def process_queue(self, clock: Any, profile: Profile) -> Any:
        return _CrashingQueue(clock, profile)


def test_a_candidate_raising_a_non_spec_error_is_crashed() -> None:
    report = run_machine("process_queue", _Crashing(), impl="crashing", seed=0)
    assert Verdict.CRASHED == report.verdict
    assert "RuntimeError: boom" == report.detail
    assert "take_messages" == report.steps[-1].op.name
    assert 1 == len(report.steps)


def test_a_candidate_without_the_interface_is_unsupported() -> None:
    report = run_machine("lock_manager", _Crashing(), impl="crashing")
    assert Verdict.UNSUPPORTED == report.verdict
    assert 0 == report.ops


def test_the_same_seed_explores_the_same_ops() -> None:
    first = run_machine("lock_manager", reference, examples=5, steps=10, seed=7)
    second = run_machine("lock_manager", reference, examples=5, steps=10, seed=7)
    assert first.ops == second.ops
    assert first.covered == second.covered
