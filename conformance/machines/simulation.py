"""Whole-system lockstep (issue 7): the simulator run twice on the same seed, fault schedule and
number of steps, once with the reference parts and once with a candidate's parts substituted
where it provides them, the two histories compared event by event (JSON form).

- the broker's master store becomes a `RecordingStore` whose storage is delegated to
  `candidate.message_store(config, profile, clock)` (appends are still reported);
- each consumer's process queues become `ObservedProcessQueue`s whose state lives in
  `candidate.process_queue(clock, profile)` (puts are still reported).

Delegation sits *below* the reporting subclasses in the MRO (`RecordingStore` → delegate →
`ReferenceMessageStore`), so the reporting code runs unchanged and a reference-vs-reference run
is identical event for event. The first differing event is the divergence.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs

from pullspec.conformance.vectors import Verdict
from pullspec.reference import sim_history as h
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.sim_cluster import RecordingStore
from pullspec.reference.sim_config import SimConfig, SimHooks
from pullspec.reference.sim_faults import format_schedule, parse_schedule
from pullspec.reference.sim_observe import ObservedProcessQueue
from pullspec.reference.simulator import Simulator
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.clock import Clock
from pullspec.spec.profiles import Profile

if TYPE_CHECKING:
    from pullspec.reference.sim_watch import ClientWatch

#: Candidate factories the simulation can substitute.
PARTS = ("message_store", "process_queue")
#: CI budget for `pullspec conform`: these seeds, this many steps each.
DEFAULT_SEEDS = (1, 2, 3)
DEFAULT_SIM_STEPS = 2_000
#: Faults every ~2 virtual seconds, so that a short run still meets several of them.
DEFAULT_FAULT_GAP_MS = 2_000
_RULE_ID = re.compile(r"\b[A-Z]+-\d+\b")

_STORE_METHODS = (
    "put_message",
    "get_min_offset_in_queue",
    "get_max_offset_in_queue",
    "get_min_phy_offset",
    "get_max_phy_offset",
    "look_message_by_offset",
    "check_in_disk_by_consume_offset",
    "get_message",
    "set_last_modified",
    "delete_expired_files",
    "set_role",
)
_STORE_PROPERTIES = ("broker_role", "offset_check_in_slave")
_PQ_METHODS = (
    "snapshot",
    "put_messages",
    "remove_messages",
    "take_messages",
    "commit",
    "rollback",
    "make_messages_to_consume_again",
    "clear",
    "inc_try_unlock_times",
    "clean_expired_msg",
    "is_lock_expired",
    "is_pull_expired",
    "has_temp_message",
)
_PQ_PROPERTIES = (
    "profile",
    "max_span",
    "msg_count",
    "msg_size",
    "queue_offset_max",
    "msg_acc_cnt",
    "consuming",
    "cached_offsets",
    "consuming_offsets",
    "last_consume_timestamp",
    "try_unlock_times",
    "dropped",
    "locked",
    "last_lock_timestamp",
    "last_pull_timestamp",
)


def _delegate(cls: type, base: type, methods: Iterable[str], properties: Iterable[str]) -> None:
    """Give `cls` methods and properties that forward to `self.candidate_part`."""

    def method(name: str) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(self.candidate_part, name)(*args, **kwargs)

        call.__name__ = name
        return call

    def prop(name: str) -> property:
        original = getattr(base, name)
        setter = None
        if isinstance(original, property) and original.fset is not None:

            def setter(self: Any, value: Any) -> None:
                setattr(self.candidate_part, name, value)

        return property(lambda self: getattr(self.candidate_part, name), setter)

    for name in methods:
        setattr(cls, name, method(name))
    for name in properties:
        setattr(cls, name, prop(name))


class _StoreDelegate(ReferenceMessageStore):
    """ReferenceMessageStore's interface, forwarded to the candidate's store (`put_messages`
    stays the reference's loop over `put_message`, so every append is still reported)."""

    candidate_part: Any


class _ProcessQueueDelegate(ReferenceProcessQueue):
    """ReferenceProcessQueue's interface, forwarded to the candidate's process queue."""

    candidate_part: Any


_delegate(_StoreDelegate, ReferenceMessageStore, _STORE_METHODS, _STORE_PROPERTIES)
_delegate(_ProcessQueueDelegate, ReferenceProcessQueue, _PQ_METHODS, _PQ_PROPERTIES)


class CandidateRecordingStore(RecordingStore, _StoreDelegate):
    """The master's RecordingStore with its storage in `factory(config, profile, clock)`."""

    factory: Callable[..., Any]

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.candidate_part = type(self).factory(self.config, self.profile, self.clock)


class CandidateProcessQueue(ObservedProcessQueue, _ProcessQueueDelegate):
    """An ObservedProcessQueue whose state lives in `factory(clock, profile)`."""

    factory: Callable[..., Any]

    def __init__(self, clock: Clock, profile: Profile, owner: ClientWatch, pq_id: int) -> None:
        self.candidate_part = type(self).factory(clock, profile)
        super().__init__(clock, profile, owner, pq_id)


def candidate_hooks(candidate: Any) -> SimHooks | None:
    """SimHooks substituting the candidate's parts; None when it provides none of them."""
    store = getattr(candidate, "message_store", None)
    pq = getattr(candidate, "process_queue", None)
    if store is None and pq is None:
        return None
    hooks = SimHooks()
    if store is not None:
        hooks.master_store = type(
            "CandidateStore", (CandidateRecordingStore,), {"factory": staticmethod(store)}
        )
    if pq is not None:
        hooks.process_queue = type(
            "CandidatePQ", (CandidateProcessQueue,), {"factory": staticmethod(pq)}
        )
    return hooks


def run_history(
    config: SimConfig, steps: int, hooks: SimHooks | None
) -> tuple[Simulator, list[dict[str, Any]]]:
    """Run `steps` steps and return the simulator and its history as JSON objects."""
    sim = Simulator(config, hooks, keep_history=True)
    sim.run(steps, None, 10_000)
    sim.finish()
    return sim, [h.to_json(e) for e in sim.history]


def _rules_of(event: dict[str, Any] | None) -> tuple[str, ...]:
    if event is None:
        return ()
    return tuple(sorted(set(_RULE_ID.findall(json.dumps(event)))))


@attrs.frozen
class SimDivergence:
    """The first event where the candidate's history differs from the reference's."""

    seed: int
    schedule: str
    index: int
    expected: dict[str, Any] | None
    actual: dict[str, Any] | None
    rules: tuple[str, ...]
    replay: str

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
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


def lockstep(
    candidate: Any, config: SimConfig, steps: int, *, impl: str = "candidate"
) -> tuple[Verdict, int, SimDivergence | None, str | None]:
    """One seed: (verdict, events compared, divergence, crash detail)."""
    hooks = candidate_hooks(candidate)
    if hooks is None:
        return Verdict.UNSUPPORTED, 0, None, "the candidate provides neither part"
    ref_sim, expected = run_history(config, steps, None)
    schedule = ref_sim.schedule_text()
    # The same config, so the same seed-generated fault schedule (or the given one).
    try:
        _, actual = run_history(config, steps, hooks)
    except Exception as exc:  # a crash of the candidate's parts
        return Verdict.CRASHED, 0, None, f"seed {config.seed}: {type(exc).__name__}: {exc}"
    for index in range(max(len(expected), len(actual))):
        want = expected[index] if index < len(expected) else None
        got = actual[index] if index < len(actual) else None
        if want != got:
            divergence = SimDivergence(
                config.seed, schedule, index, want, got, _rules_of(want) or _rules_of(got),
                replay_command(impl, config, steps, schedule),
            )  # fmt: skip
            return Verdict.DIVERGED, index, divergence, None
    return Verdict.PASS, len(expected), None, None


def shrink(
    candidate: Any, config: SimConfig, steps: int, divergence: SimDivergence, *, impl: str
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

    cfg = attrs.evolve(config, schedule=parse_schedule(divergence.schedule))
    steps, best = fewest_steps(cfg, steps, divergence)
    kept = list(cfg.schedule or ())
    for fault in list(kept):  # greedy one-at-a-time removal (delta debugging, granularity 1)
        trial = [f for f in kept if f is not fault]
        found = diverges(attrs.evolve(cfg, schedule=tuple(trial)), steps)
        if found is not None:
            kept, best = trial, found
    final = attrs.evolve(cfg, schedule=tuple(kept))
    steps, best = fewest_steps(final, steps, best)  # fewer faults may diverge sooner
    return steps, attrs.evolve(
        best,
        schedule=format_schedule(kept),
        replay=replay_command(impl, final, steps, format_schedule(kept)),
    )


def run_simulation(
    candidate: Any,
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
    from pullspec.reference.sim_faults import parse_schedule

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
        config = attrs.evolve(config, schedule=parse_schedule(args.schedule))
    verdict, events, divergence, detail = lockstep(
        resolve(args.impl), config, args.steps, impl=args.impl
    )
    print(json.dumps({"verdict": verdict.value, "events": events,
                      "divergence": divergence.to_json() if divergence else None,
                      "detail": detail}, indent=2))  # fmt: skip
    return 0 if verdict in (Verdict.PASS, Verdict.UNSUPPORTED) else 1


__all__ = [
    "CandidateProcessQueue",
    "CandidateRecordingStore",
    "SimDivergence",
    "SimulationReport",
    "candidate_hooks",
    "format_schedule",
    "lockstep",
    "run_simulation",
]

if __name__ == "__main__":
    raise SystemExit(main())
