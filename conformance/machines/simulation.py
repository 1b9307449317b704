"""Whole-system lockstep (issue 7): the simulator run twice on the same seed, fault schedule and
number of steps, once with the reference parts and once with a candidate's parts substituted
where it provides them, the two histories compared event by event (JSON form).

A candidate provides a part by a factory named as in `PARTS` (reference.sim.parts and
reference.client_parts type each one):

- ``message_store(config, profile, clock)``: the master's store (its appends still reported);
- ``process_queue(clock, profile)``: every consumer's ProcessQueues;
- ``remote_offset_store(client, group)``: every consumer's RemoteBrokerOffsetStore;
- ``consume_concurrently_service(scheduler, *, group, config, profile, listener, offset_store,
  send_back, process_queues, consume_time)`` and ``consume_orderly_service(…, rebalance, …)``:
  the consume services;
- ``rebalance_push_impl(scheduler, *, group, client_id, config, profile, lock_client,
  offset_store, admin, route, consumer_ids, strategy, dispatch, process_queue_factory)``:
  the rebalance.

The reference's part stands in for every factory the candidate lacks, and the observing code
runs unchanged, so a reference-vs-reference run is identical event for event. The first
differing event is the divergence.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Iterable

import attrs

from pullspec.conformance.candidates import Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.vectors import Verdict
from pullspec.reference.client_parts import ConsumerParts
from pullspec.reference.sim import history as h
from pullspec.reference.sim.checker import CheckResult
from pullspec.reference.sim.config import SimConfig, SimResult
from pullspec.reference.sim.faults import format_schedule, parse_schedule
from pullspec.reference.sim.hooks import SimHooks
from pullspec.reference.sim.parts import SimParts
from pullspec.reference.sim.simulator import Simulator
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import Profile

#: Candidate factory → the SimParts / ConsumerParts field it fills.
PARTS = {
    "message_store": "message_store",
    "process_queue": "process_queue",
    "remote_offset_store": "offset_store",
    "consume_concurrently_service": "consume_concurrently",
    "consume_orderly_service": "consume_orderly",
    "rebalance_push_impl": "rebalance",
}
#: CI budget for `pullspec conform`: these seeds, this many steps each.
DEFAULT_SEEDS = (1, 2, 3)
DEFAULT_SIM_STEPS = 2_000
#: Faults every ~2 virtual seconds, so that a short run still meets several of them.
DEFAULT_FAULT_GAP_MS = 2_000
_RULE_ID = re.compile(r"\b[A-Z]+-\d+\b")


def candidate_parts(candidate: Candidate) -> SimParts:
    """The parts `candidate` provides, by factory name (`PARTS`); the rest stay None."""
    found = {PARTS[name]: f for name in PARTS if (f := getattr(candidate, name, None)) is not None}
    consumer = ConsumerParts(
        **{k: v for k, v in found.items() if k not in ("message_store", "process_queue")}
    )
    return SimParts(
        message_store=found.get("message_store"),
        process_queue=found.get("process_queue"),
        consumer=consumer,
    )


def candidate_hooks(candidate: Candidate) -> SimHooks | None:
    """SimHooks substituting the candidate's parts; None when it provides none of them."""
    parts = candidate_parts(candidate)
    return SimHooks(parts=parts) if parts.provided() else None


def run_history(
    config: SimConfig, steps: int, hooks: SimHooks | None
) -> tuple[Simulator, list[JSONObject]]:
    """Run `steps` steps (and the quiet tail) and return the simulator and its history as JSON
    objects."""
    sim = Simulator(config, hooks, keep_history=True)
    sim.run(steps, None, 10_000)
    sim.finish()
    return sim, [h.to_json(e) for e in sim.history]


def _rules_of(event: JSONObject | None) -> tuple[str, ...]:
    if event is None:
        return ()
    return tuple(sorted(set(_RULE_ID.findall(json.dumps(event)))))


@attrs.frozen
class SimDivergence:
    """The first event where the candidate's history differs from the reference's."""

    seed: int
    schedule: str
    index: int
    expected: JSONObject | None
    actual: JSONObject | None
    rules: tuple[str, ...]
    replay: str

    def to_json(self) -> JSONObject:
        """The JSON form."""
        return attrs.asdict(self)


@attrs.define
class SimulationReport:
    """The outcome of the whole-system lockstep on one candidate."""

    impl: str
    verdict: Verdict
    seeds: tuple[int, ...] = ()
    steps: int = 0
    events: int = 0
    divergence: SimDivergence | None = None
    detail: str | None = None
    seconds: float = 0.0

    def to_json(self) -> JSONObject:
        """The JSON form `pullspec conform --json` prints under "simulation"."""
        return {
            "verdict": self.verdict.value,
            "seeds": list(self.seeds),
            "steps": self.steps,
            "events": self.events,
            "divergence": self.divergence.to_json() if self.divergence else None,
            "detail": self.detail,
            "seconds": round(self.seconds, 2),
        }


def replay_command(impl: str, config: SimConfig, steps: int, schedule: str) -> str:
    """The command line that replays one lockstep run."""
    return (
        f"python -m pullspec.conformance.machines.simulation --impl {shlex.quote(impl)} "
        f"--seed {config.seed} --profile {config.profile.value} --steps {steps} "
        f"--fault-gap-ms {config.mean_fault_gap_ms} "
        f"--schedule {shlex.quote(schedule)}"
    )


@attrs.frozen
class Comparison:
    """One seed run with the reference's parts and with the candidate's: the lockstep verdict,
    the events compared, the first divergence, a crash's detail, and each run's result (the
    checker's verdict with liveness and coverage; None for a run that did not finish)."""

    verdict: Verdict
    events: int
    divergence: SimDivergence | None = None
    detail: str | None = None
    reference: SimResult | None = None
    candidate: SimResult | None = None


class _Side:
    """One of the two runs, stepped in turn with the other."""

    def __init__(self, config: SimConfig, hooks: SimHooks | None) -> None:
        self.elapsed = 0.0
        self.sim = Simulator(config, hooks, keep_history=True)
        self.check: CheckResult | None = None

    def run(self, steps: int) -> None:
        started = time.perf_counter()
        self.sim.run(steps)
        self.elapsed += time.perf_counter() - started

    def finish(self) -> None:
        started = time.perf_counter()
        self.check = self.sim.finish()
        self.elapsed += time.perf_counter() - started

    def result(self) -> SimResult | None:
        sim = self.sim
        if self.check is None:
            return None
        summary = sim.history.summary()
        return SimResult(
            self.check, sim.steps, sim.clock.now_ms(), self.elapsed, summary,
            sim.schedule_text(), sim.tail_steps,
        )  # fmt: skip


#: Steps each side takes between two comparisons of what their histories added.
_COMPARE_EVERY = 256


def compare(
    candidate: Candidate, config: SimConfig, steps: int, *, impl: str = "candidate"
) -> Comparison:
    """Run the reference and the candidate side by side for `steps` steps and their quiet
    tails, comparing the events each adds as they go (so neither history is kept whole) and
    stopping at the first difference."""
    hooks = candidate_hooks(candidate)
    if hooks is None:
        detail = f"the candidate provides none of {', '.join(PARTS)}"
        return Comparison(Verdict.UNSUPPORTED, 0, detail=detail)
    ref = _Side(config, None)
    compared = 0

    def crashed(exc: Exception) -> Comparison:
        detail = f"seed {config.seed}: {type(exc).__name__}: {exc}"
        return Comparison(Verdict.CRASHED, compared, detail=detail, reference=ref.result())

    def diverged(at_end: bool) -> SimDivergence | None:
        nonlocal compared
        a, b = ref.sim.history.events, cand.sim.history.events
        n = min(len(a), len(b))
        for i in range(n):
            if a[i] != b[i]:
                return _divergence(impl, config, steps, ref.sim, compared + i, a[i], b[i])
        compared += n
        del a[:n], b[:n]
        if at_end and (a or b):
            return _divergence(
                impl, config, steps, ref.sim, compared, a[0] if a else None, b[0] if b else None
            )
        return None

    try:
        cand = _Side(config, hooks)
    except Exception as exc:  # the candidate's parts failed to build
        return crashed(exc)
    done = 0
    while done < steps:
        chunk = min(_COMPARE_EVERY, steps - done)
        ref.run(chunk)
        try:
            cand.run(chunk)
        except Exception as exc:  # a crash of the candidate's parts
            return crashed(exc)
        done += chunk
        if (found := diverged(False)) is not None:
            return Comparison(Verdict.DIVERGED, found.index, found, reference=ref.result())
    ref.finish()
    try:
        cand.finish()
    except Exception as exc:
        return crashed(exc)
    if (found := diverged(True)) is not None:
        return Comparison(Verdict.DIVERGED, found.index, found, reference=ref.result())
    return Comparison(Verdict.PASS, compared, reference=ref.result(), candidate=cand.result())


def _divergence(
    impl: str,
    config: SimConfig,
    steps: int,
    ref: Simulator,
    index: int,
    expected: h.Event | None,
    actual: h.Event | None,
) -> SimDivergence:
    want = h.to_json(expected) if expected is not None else None
    got = h.to_json(actual) if actual is not None else None
    # The faults applied so far: later ones cannot have changed the events before this one.
    schedule = ref.schedule_text()
    return SimDivergence(
        config.seed, schedule, index, want, got, _rules_of(want) or _rules_of(got),
        replay_command(impl, config, steps, schedule),
    )  # fmt: skip


def lockstep(
    candidate: Candidate, config: SimConfig, steps: int, *, impl: str = "candidate"
) -> tuple[Verdict, int, SimDivergence | None, str | None]:
    """One seed: (verdict, events compared, divergence, crash detail) of `compare`."""
    found = compare(candidate, config, steps, impl=impl)
    return found.verdict, found.events, found.divergence, found.detail


def shrink(
    candidate: Candidate, config: SimConfig, steps: int, divergence: SimDivergence, *, impl: str
) -> tuple[int, SimDivergence]:
    """A minimal replay of a divergence: the fewest steps that still diverge (bisection: a run of
    fewer steps is a prefix of a longer one), then each fault dropped while it still diverges."""

    def diverges(cfg: SimConfig, n: int) -> SimDivergence | None:
        verdict, _events, found, _detail = lockstep(candidate, cfg, n, impl=impl)
        return found if verdict is Verdict.DIVERGED else None

    def fewest_steps(cfg: SimConfig, high: int, best: SimDivergence) -> tuple[int, SimDivergence]:
        low = 1
        while low < high:  # the smallest step count that still diverges
            mid = (low + high) // 2
            found = diverges(cfg, mid)
            if found is None:
                low = mid + 1
            else:
                best, high = found, mid
        return high, best

    cfg = evolve(config, schedule=parse_schedule(divergence.schedule))
    steps, best = fewest_steps(cfg, steps, divergence)
    kept = list(cfg.schedule or ())
    for fault in list(kept):  # greedy one-at-a-time removal (delta debugging, granularity 1)
        trial = [f for f in kept if f is not fault]
        found = diverges(evolve(cfg, schedule=tuple(trial)), steps)
        if found is not None:
            kept, best = trial, found
    final = evolve(cfg, schedule=tuple(kept))
    steps, best = fewest_steps(final, steps, best)  # fewer faults may diverge sooner
    return steps, evolve(
        best,
        schedule=format_schedule(kept),
        replay=replay_command(impl, final, steps, format_schedule(kept)),
    )


def run_simulation(
    candidate: Candidate,
    *,
    impl: str = "candidate",
    profile: Profile = Profile.V4_9,
    seeds: Iterable[int] = DEFAULT_SEEDS,
    steps: int = DEFAULT_SIM_STEPS,
) -> SimulationReport:
    """The lockstep over several seeds; stops at the first non-PASS seed."""
    start = time.perf_counter()
    report = SimulationReport(impl, Verdict.PASS, steps=steps)
    for seed in seeds:
        verdict, events, divergence, detail = lockstep(
            candidate,
            SimConfig(seed=seed, profile=profile, mean_fault_gap_ms=DEFAULT_FAULT_GAP_MS),
            steps,
            impl=impl,
        )
        report.seeds += (seed,)
        report.events += events
        if divergence is not None:
            config = SimConfig(seed=seed, profile=profile, mean_fault_gap_ms=DEFAULT_FAULT_GAP_MS)
            report.steps, divergence = shrink(candidate, config, steps, divergence, impl=impl)
        if verdict is not Verdict.PASS:
            report.verdict, report.divergence, report.detail = verdict, divergence, detail
            break
    report.seconds = time.perf_counter() - start
    return report


def main(argv: list[str] | None = None) -> int:
    """Replay one lockstep run: exit 1 and print the divergence if there is one."""
    import argparse

    from pullspec.conformance.resolve import resolve
    from pullspec.reference.sim.faults import parse_schedule

    parser = argparse.ArgumentParser(prog="python -m pullspec.conformance.machines.simulation")
    parser.add_argument("--impl", default="fast")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", default="4.9")
    parser.add_argument("--steps", type=int, default=DEFAULT_SIM_STEPS)
    parser.add_argument("--schedule", default=None)
    parser.add_argument("--fault-gap-ms", type=int, default=DEFAULT_FAULT_GAP_MS)
    args = parser.parse_args(argv)
    config = SimConfig(
        seed=args.seed, profile=Profile.parse(args.profile), mean_fault_gap_ms=args.fault_gap_ms
    )
    if args.schedule is not None:
        config = evolve(config, schedule=parse_schedule(args.schedule))
    verdict, events, divergence, detail = lockstep(
        resolve(args.impl), config, args.steps, impl=args.impl
    )
    print(json.dumps({"verdict": verdict.value, "events": events,
                      "divergence": divergence.to_json() if divergence else None,
                      "detail": detail}, indent=2))  # fmt: skip
    return 0 if verdict in (Verdict.PASS, Verdict.UNSUPPORTED) else 1


__all__ = [
    "PARTS",
    "Comparison",
    "SimDivergence",
    "SimulationReport",
    "candidate_hooks",
    "candidate_parts",
    "compare",
    "format_schedule",
    "lockstep",
    "run_simulation",
]

if __name__ == "__main__":
    raise SystemExit(main())
