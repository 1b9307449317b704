"""Running the suite against each mutant: cheapest evidence first.

A mutant is killed by the first vector case it fails (the exported edge cases and random traces
of its areas, then any extra vector directories), or else by a lockstep machine of one of its
areas at the given budget, run without shrinking since a kill is all that is needed. The time
to kill is wall-clock time from the start of that mutant's run.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from pathlib import Path

import attrs

from pullspec.conformance import client_vectors, export, vectors
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.machines.run import run_machine
from pullspec.conformance.mutants.base import Mutant
from pullspec.conformance.ops import CLIENT_AREAS
from pullspec.conformance.vectors import Verdict, load_cases, run_case
from pullspec.spec.profiles import Profile

#: The machines' budget per area when the vectors did not kill a mutant.
DEFAULT_EXAMPLES = 150
DEFAULT_STEPS = 30
_KILLS = (Verdict.DIVERGED, Verdict.CRASHED, Verdict.TIMEOUT)


@attrs.frozen
class KillResult:
    """What the suite did to one mutant."""

    mutant: Mutant
    killed: bool
    seconds: float
    by: str | None = None
    verdict: Verdict | None = None
    detail: str | None = None

    def to_json(self) -> JSONObject:
        """The JSON form `pullspec mutants --json` prints."""
        return {
            "name": self.mutant.name,
            "rule": self.mutant.rule,
            "areas": list(self.mutant.areas),
            "doc": self.mutant.doc,
            "impl": self.mutant.impl,
            "killed": self.killed,
            "seconds": round(self.seconds, 3),
            "by": self.by,
            "verdict": self.verdict.value if self.verdict else None,
            "detail": self.detail,
        }


@functools.cache
def suite_cases(profile: Profile, seed: int = 0) -> tuple[vectors.Case, ...]:
    """The exported vectors of `profile` and the client areas' reference-generated cases
    (generated from the reference once per process), as `pullspec conform` runs them."""
    return (*export.generate(profile, seed), *client_vectors.cases_for(CLIENT_AREAS, profile))


def kill(
    mutant: Mutant,
    profile: Profile = Profile.V4_9,
    *,
    examples: int = DEFAULT_EXAMPLES,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    vector_dirs: Iterable[Path] = (),
    vectors: bool = True,
    machines: bool = True,
) -> KillResult:
    """Run the suite against `mutant` until something kills it (`vectors=False`, or
    `machines=False`, leaves that part of the suite out)."""
    cases = suite_cases(profile, seed) if vectors else ()
    start = time.perf_counter()
    candidate = mutant.candidate()
    extra = (case for d in vector_dirs for case in load_cases(d, mutant.areas)) if vectors else ()
    for case in (*(c for c in cases if c["area"] in mutant.areas), *extra):
        result = run_case(candidate, case, profile, Path("."))
        verdict = result.verdict
        if verdict in _KILLS:
            detail = f"step {result.step} {result.op}: {result.field} expected {result.expected!r} actual {result.actual!r}"
            return KillResult(
                mutant, True, time.perf_counter() - start, f"vector {result.id}", verdict, detail
            )
    if machines:
        for area in mutant.areas:
            report = run_machine(
                area,
                candidate,
                impl=mutant.impl,
                profile=profile,
                examples=examples,
                steps=steps,
                seed=seed,
                shrink=False,
            )
            if report.verdict in _KILLS:
                why = report.describe().splitlines()[1] if report.divergence else report.detail
                seconds = time.perf_counter() - start
                return KillResult(mutant, True, seconds, f"machine {area}", report.verdict, why)
    return KillResult(mutant, False, time.perf_counter() - start)
