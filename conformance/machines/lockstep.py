"""The lockstep machine: one Hypothesis rule-based state machine per area that applies every op to
the reference and to the candidate and fails at the first observation that differs.

Each example draws a config, opens one reference and one candidate session on it, then runs
steps; each step draws one op (aimed by what the reference showed so far), observes both sides
and compares. A failure carries a `MachineReport`: the trace (every op with the reference's
observation), the divergence, the rule IDs involved and the verdict. Hypothesis does not shrink
(`run_machine` turns its shrink phase off): `conformance.machines.minimize` replays the recorded
ops of the failing example and cuts them down to a minimal trace.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from pullspec.conformance.candidates import Candidate, CandidateTimeoutError
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.machines import gen
from pullspec.conformance.machines.draw import Context, HypothesisDraw
from pullspec.conformance.observe import Divergence, DivergenceKind, Session, compare
from pullspec.conformance.ops import Observation, Op, rule_sort_key, rules_for
from pullspec.conformance.vectors import Case, Verdict
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import Profile

R = TypeVar("R")


@attrs.frozen
class Step:
    """One op of a trace and what the reference observed."""

    op: Op
    expected: Observation


@attrs.frozen
class MachineReport:
    """The outcome of a machine run (PASS) or of its minimal failing example."""

    area: str
    impl: str
    profile: Profile
    verdict: Verdict
    seed: int
    config: JSONObject = attrs.field(factory=dict)
    steps: tuple[Step, ...] = ()
    divergence: Divergence | None = None
    actual: Observation | None = None
    detail: str | None = None
    rules: tuple[str, ...] = ()
    ops: int = 0
    examples: int = 0
    covered: tuple[str, ...] = ()
    replay: str | None = None

    @property
    def kind(self) -> DivergenceKind | None:
        """The divergence kind of a DIVERGED report."""
        return self.divergence.kind if self.divergence else None

    def case(self) -> Case:
        """The trace as a vector case in the shared format (the reference's answers as expects)."""
        return {
            "id": f"machine-{self.area}-{self.seed}",
            "area": self.area,
            "version": self.profile.tag.removeprefix("rocketmq-all-"),
            "seed": self.seed,
            "config": self.config,
            "steps": [
                {"op": s.op.name, "args": dict(s.op.args), "expect": s.expected.to_json()}
                for s in self.steps
            ],
        }

    def describe(self) -> str:
        """A multi-line account: verdict, failing op, field, expected vs actual, rules, trace."""
        head = f"{self.verdict.value}"
        if self.divergence:
            head += f" ({self.divergence.kind.value})"
        lines = [f"{head} in {self.area} on {self.impl} after {len(self.steps)} op(s)"]
        if self.divergence:
            d = self.divergence
            lines.append(f"  field {d.field}: expected {d.expected!r}, actual {d.actual!r}")
        if self.detail:
            lines.append(f"  detail: {self.detail}")
        if self.rules:
            lines.append(f"  rules: {', '.join(self.rules)}")
        lines.append(f"  config: {self.config}")
        lines.extend(f"  {i}. {s.op.name} {dict(s.op.args)}" for i, s in enumerate(self.steps, 1))
        if self.replay:
            lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)

    def to_json(self) -> JSONObject:
        """The JSON form `pullspec conform --json` prints."""
        out: JSONObject = {
            "area": self.area,
            "verdict": self.verdict.value,
            "ops": self.ops,
            "examples": self.examples,
            "seed": self.seed,
        }
        if self.verdict is not Verdict.PASS:
            out.update(
                kind=self.kind.value if self.kind else None,
                field=self.divergence.field if self.divergence else None,
                expected=self.divergence.expected if self.divergence else None,
                actual=self.divergence.actual if self.divergence else None,
                detail=self.detail,
                rules=list(self.rules),
                trace=[s.op.to_json() for s in self.steps],
                replay=self.replay,
            )
        return out


class LockstepError(AssertionError):
    """Raised inside the machine at the first divergence; it ends the example and carries its
    report, which `minimize` then shortens."""

    def __init__(self, report: MachineReport) -> None:
        self.report = report
        super().__init__(report.describe())


@attrs.define
class Tracker:
    """Counts kept across all examples of one run (replays included)."""

    ops: int = 0
    examples: int = 0
    covered: set[str] = attrs.Factory(set)
    #: After a TIMEOUT the subprocess is not trusted again: later examples fail at once.
    fatal: MachineReport | None = None


@attrs.define
class Pair:
    """A reference session and a candidate session on one config, stepping in lockstep."""

    area: str
    impl: str
    profile: Profile
    seed: int
    config: JSONObject
    ref: Session
    cand: Session | None = None
    steps: list[Step] = attrs.Factory(list)

    @classmethod
    def open(
        cls,
        area: str,
        reference: Candidate,
        candidate: Candidate,
        impl: str,
        profile: Profile,
        seed: int,
        config: JSONObject,
    ) -> Pair:
        """Both sessions on `config` (a candidate that cannot open one raises LockstepError)."""
        pair = cls(area, impl, profile, seed, config, Session(reference, area, config, profile))
        pair.cand = pair.guard(lambda: Session(candidate, area, config, profile), "create")
        return pair

    def fail(
        self,
        verdict: Verdict,
        *,
        detail: str | None = None,
        rules: tuple[str, ...] = (),
        divergence: Divergence | None = None,
        actual: Observation | None = None,
    ) -> LockstepError:
        """The failure to raise, with the trace so far."""
        steps = tuple(self.steps)
        args = (self.area, self.impl, self.profile, verdict, self.seed, self.config, steps)
        return LockstepError(
            MachineReport(*args, divergence=divergence, actual=actual, detail=detail, rules=rules)
        )

    def guard(self, call: Callable[[], R], op: str) -> R:
        """Run a candidate call, turning its failures into verdicts."""
        rules = rules_for(self.area, op)
        try:
            return call()
        except UnsupportedError as exc:
            raise self.fail(Verdict.UNSUPPORTED, detail=str(exc), rules=rules) from exc
        except CandidateTimeoutError as exc:
            raise self.fail(Verdict.TIMEOUT, detail=str(exc), rules=rules) from exc
        except Exception as exc:  # a candidate bug is a verdict, not a harness error
            detail = f"{type(exc).__name__}: {exc}"
            raise self.fail(Verdict.CRASHED, detail=detail, rules=rules) from exc

    def step(self, op: Op) -> Observation:
        """Apply `op` to both sides; answer the reference's observation or raise LockstepError."""
        assert self.cand is not None
        expected = self.ref.apply(op)
        self.steps.append(Step(op, expected))
        cand = self.cand
        actual = self.guard(lambda: cand.apply(op), op.name)
        diff = compare(expected, actual)
        if diff is not None:
            raise self.fail(
                Verdict.DIVERGED,
                divergence=diff,
                actual=actual,
                rules=rules_for(
                    self.area, op.name, diff.field, self.ref.state_fields, expected.fields
                ),
            )
        return expected


def machine_class(
    area: str,
    reference: Candidate,
    candidate: Candidate,
    impl: str,
    profile: Profile,
    seed: int,
    tracker: Tracker,
) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class running `candidate` against `reference` on `area`."""

    class Lockstep(RuleBasedStateMachine):
        """Lockstep differential machine (generated by conformance.machines.lockstep)."""

        def __init__(self) -> None:
            super().__init__()
            self.pair: Pair | None = None
            self.ctx = Context(area)

        @initialize(data=st.data())
        def start(self, data: st.DataObject) -> None:
            """Draw a config and open both sessions on it."""
            if tracker.fatal is not None:
                raise LockstepError(tracker.fatal)
            tracker.examples += 1
            config = gen.config(area, HypothesisDraw(data))
            self.ctx = Context.start(area, config)
            self.pair = Pair.open(area, reference, candidate, impl, profile, seed, config)
            tracker.covered.update(rules_for(area, "create"))

        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            """Apply one op to both sides and compare."""
            assert self.pair is not None
            op = gen.op(area, HypothesisDraw(data), self.ctx)
            tracker.ops += 1
            tracker.covered.update(rules_for(area, op.name))
            try:
                expected = self.pair.step(op)
            except LockstepError as failure:
                if failure.report.verdict is Verdict.TIMEOUT:
                    tracker.fatal = tracker.fatal or failure.report
                raise
            self.ctx.note(op, expected)

    Lockstep.__name__ = Lockstep.__qualname__ = f"Lockstep_{area}"
    return Lockstep


def replay_trace(
    report: MachineReport, reference: Candidate, candidate: Candidate, ops: list[Op]
) -> MachineReport | None:
    """Run `ops` on fresh sessions with the report's config: the failure, or None if it passes."""
    try:
        r = report
        pair = Pair.open(r.area, reference, candidate, r.impl, r.profile, r.seed, r.config)
        for op in ops:
            pair.step(op)
    except LockstepError as failure:
        return failure.report
    return None


def write_replay(report: MachineReport, directory: Path) -> MachineReport:
    """Save the trace as a vector file in `directory`; the report then names its replay command."""
    import json

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{report.case()['id']}.jsonl"
    path.write_text(json.dumps(report.case()) + "\n", encoding="utf-8")
    command = (
        f"pullspec vectors check {shlex.quote(str(path))} --impl {shlex.quote(report.impl)} "
        f"--profile {report.profile.value}"
    )
    return evolve(report, replay=command)


def sorted_rules(rules: set[str]) -> tuple[str, ...]:
    """Rule IDs in catalogue order."""
    return tuple(sorted(rules, key=rule_sort_key))
