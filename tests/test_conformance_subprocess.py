"""`cmd:` candidates: the example adapter serves the reference over JSON Lines and passes the
recorded vectors and the machines; a mutant served the same way is caught; a silent process is
TIMEOUT and a dying one CRASHED."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pullspec.conformance import vectors
from pullspec.conformance.candidates import close
from pullspec.conformance.machines.run import run_machine
from pullspec.conformance.ops import AREAS
from pullspec.conformance.remote.candidate import SubprocessCandidate
from pullspec.conformance.resolve import resolve
from pullspec.conformance.vectors import Verdict
from pullspec.spec.profiles import Profile

ADAPTER = f"cmd:{sys.executable} -m pullspec.conformance.example_adapter"


@pytest.fixture(scope="module")
def served() -> Iterator[SubprocessCandidate]:
    """The reference behind the example adapter, one process for the module."""
    candidate = resolve(ADAPTER)
    assert isinstance(candidate, SubprocessCandidate)
    yield candidate
    close(candidate)


@pytest.mark.parametrize(
    ("folder", "profile"), [("rocketmq-4.9.7", Profile.V4_9), ("rocketmq-4.7.1", Profile.V4_7)]
)
def test_recorded_vectors_pass_through_the_example_adapter(
    served: SubprocessCandidate, vectors_dir: Path, folder: str, profile: Profile
) -> None:
    directory = vectors_dir / folder
    for area in AREAS:
        cases = list(itertools.islice(vectors.load_cases(directory, [area]), 8))
        assert 8 == len(cases), area
        verdicts = [vectors.run_case(served, c, profile, directory).verdict for c in cases]
        assert [Verdict.PASS] * 8 == verdicts, area


@pytest.mark.parametrize("area", AREAS)
def test_machines_pass_through_the_example_adapter(served: SubprocessCandidate, area: str) -> None:
    report = run_machine(area, served, impl=ADAPTER, examples=8, steps=15, seed=3)
    assert Verdict.PASS == report.verdict, report.describe()


def test_a_mutant_served_over_the_pipe_is_caught() -> None:
    impl = f"{ADAPTER} --impl pullspec.conformance.mutants.impl:lease_inclusive"
    candidate = resolve(impl)
    try:
        report = run_machine("lock_manager", candidate, impl=impl, examples=100, seed=0)
    finally:
        close(candidate)
    assert Verdict.DIVERGED == report.verdict
    assert "LEASE-3" in report.rules


def test_an_unsupported_area_is_unsupported_not_failed() -> None:
    impl = f"{ADAPTER} --impl fast"
    candidate = resolve(impl)
    try:
        report = run_machine("lock_manager", candidate, impl=impl, examples=3)
    finally:
        close(candidate)
    assert Verdict.UNSUPPORTED == report.verdict


def _case(vectors_dir: Path) -> vectors.Case:
    return next(vectors.load_cases(vectors_dir / "rocketmq-4.9.7", ["lock_manager"]))


def test_a_process_that_never_answers_is_a_timeout(vectors_dir: Path) -> None:
    # It reads every request and answers none; the bounded wait is the candidate's timeout.
    silent = SubprocessCandidate(
        [sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"], 0.5
    )
    try:
        result = vectors.run_case(silent, _case(vectors_dir), Profile.V4_9, vectors_dir)
    finally:
        silent.close()
    assert Verdict.TIMEOUT == result.verdict


def test_a_process_that_dies_is_crashed(vectors_dir: Path) -> None:
    dying = SubprocessCandidate(
        [sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit(3)"], 5.0
    )
    try:
        result = vectors.run_case(dying, _case(vectors_dir), Profile.V4_9, vectors_dir)
    finally:
        dying.close()
    assert Verdict.CRASHED == result.verdict
    assert "exit code 3" in (result.detail or "")


def test_a_process_that_answers_garbage_is_crashed(vectors_dir: Path) -> None:
    chatty = SubprocessCandidate(
        [sys.executable, "-c", "import sys\nfor _ in sys.stdin: print('hello', flush=True)"], 5.0
    )
    try:
        result = vectors.run_case(chatty, _case(vectors_dir), Profile.V4_9, vectors_dir)
    finally:
        chatty.close()
    assert Verdict.CRASHED == result.verdict
    assert "not JSON" in (result.detail or "")
