"""Running one lockstep machine (`run_machine`), the machines of conformance.machines.

`run_machine(area, candidate, ...)` runs the machine of `area` with a budget (examples × steps)
and a seed, and answers a `MachineReport`: PASS, or the minimal failing trace with its verdict
(DIVERGED with a kind, CRASHED, TIMEOUT, UNSUPPORTED), the rule IDs involved, expected vs actual
and — when a replay directory is given — a vector file plus the one-line command replaying it.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky, FlakyFailure
from hypothesis.stateful import run_state_machine_as_test

from pullspec.conformance.candidates import Candidate, CandidateTimeoutError
from pullspec.conformance.machines import gen
from pullspec.conformance.machines.draw import RandomDraw
from pullspec.conformance.machines.lockstep import (
    LockstepError,
    MachineReport,
    Step,
    Tracker,
    machine_class,
    sorted_rules,
    write_replay,
)
from pullspec.conformance.machines.minimize import minimize
from pullspec.conformance.observe import Session
from pullspec.conformance.ops import AREAS, MACHINE_AREAS
from pullspec.conformance.vectors import Verdict
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import Profile

__all__ = ["AREAS", "MACHINE_AREAS", "MachineReport", "Step", "run_machine"]

#: The budget `make test` and `pullspec conform` use by default.
DEFAULT_EXAMPLES = 40
DEFAULT_STEPS = 25


def _unsupported(
    reference: Candidate, candidate: Candidate, area: str, profile: Profile
) -> str | None:
    """Why `area` cannot run (no adapter, or a candidate without the interface), else None."""
    config = gen.config(area, RandomDraw(random.Random(0)))
    try:
        Session(reference, area, config, profile)
    except UnsupportedError as exc:
        return f"reference: {exc}"
    try:
        Session(candidate, area, config, profile)
    except UnsupportedError as exc:
        return str(exc)
    return None


def run_machine(
    area: str,
    candidate: Candidate,
    *,
    impl: str = "candidate",
    reference: Candidate | None = None,
    profile: Profile = Profile.V4_9,
    examples: int = DEFAULT_EXAMPLES,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    shrink: bool = True,
    replay_dir: Path | None = None,
) -> MachineReport:
    """Run the lockstep machine of `area` against `candidate` and report its verdict.

    `shrink=False` keeps the first failing example as found (the mutation bank only needs a
    kill); otherwise its trace is minimised (conformance.machines.minimize).
    """
    if reference is None:
        import pullspec.reference.factories as reference
    why = _unsupported(reference, candidate, area, profile)
    if why is not None:
        return MachineReport(area, impl, profile, Verdict.UNSUPPORTED, seed, detail=why)
    tracker = Tracker()
    machine = machine_class(area, reference, candidate, impl, profile, seed, tracker)
    # Hypothesis's shrinker would re-draw every op after a deleted one; minimize() replays the
    # recorded ops instead, which is both faster and more thorough here.
    phases = [Phase.explicit, Phase.generate]
    budget = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        derandomize=False,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )
    try:
        run_state_machine_as_test(hypothesis_seed(seed)(machine), settings=budget)
    except LockstepError as failure:
        report = tracker.fatal or failure.report
    except CandidateTimeoutError as exc:  # raised outside a guarded call: still the candidate's
        report = MachineReport(area, impl, profile, Verdict.TIMEOUT, seed, detail=str(exc))
    except (Flaky, FlakyFailure) as exc:
        # Hypothesis replays a failing example and finds it behaving otherwise: after a TIMEOUT
        # the later examples stop at once (the subprocess is not trusted again), and a candidate
        # whose answers change between two runs of the same ops is nondeterministic.
        report = tracker.fatal or MachineReport(
            area, impl, profile, Verdict.CRASHED, seed,
            detail=f"the same ops gave different answers on a replay ({type(exc).__name__}):"
            " the candidate is not deterministic",
        )  # fmt: skip
    else:
        report = MachineReport(area, impl, profile, Verdict.PASS, seed)
    if shrink:
        report = minimize(report, reference, candidate)
    report = evolve(
        report, ops=tracker.ops, examples=tracker.examples, covered=sorted_rules(tracker.covered)
    )
    if report.verdict not in (Verdict.PASS, Verdict.UNSUPPORTED) and replay_dir is not None:
        report = write_replay(report, replay_dir)
    return report
