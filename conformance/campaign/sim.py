"""The campaign's `simulation` area: `pullspec simulate --impl`, one seed per row.

Each seed runs the simulator (reference.sim.simulator: a consumer group under the seed's fault
schedule, then a quiet tail) with the reference's parts and with the candidate's substituted
where it has them, side by side, comparing the two histories event by event
(conformance.machines.simulation.compare, as `pullspec conform` does for a few seeds). A row's
`ops` are the events compared, which the summary keeps apart from the lockstep areas' diffed
ops; its `rule_ids` are the rules the history reached (reference.sim.coverage), so the report
shows which seeds reached the targeted rules. A divergence names the differing event, the rule
IDs it mentions and, as `detail`, the command that replays the seed; a candidate run whose own
history breaks an invariant (a violation, liveness or a budget) is DIVERGED too, of kind
INVARIANT, with the INV rules it broke.
"""

from __future__ import annotations

import time
from importlib.util import find_spec

from pullspec.conformance.campaign.rows import SIMULATION, Replay, Row, RowJSON
from pullspec.conformance.candidates import Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.ops import rule_sort_key
from pullspec.conformance.vectors import Verdict
from pullspec.spec.profiles import Profile


def available() -> bool:
    """True when this build has the whole-system lockstep (and so the simulator)."""
    return find_spec("pullspec.conformance.machines.simulation") is not None


def unsupported(candidate: Candidate) -> str | None:
    """Why `candidate` cannot run in the simulation (it substitutes no part), else None."""
    from pullspec.conformance.machines.simulation import PARTS, candidate_hooks

    if candidate_hooks(candidate) is None:
        return f"candidate: provides none of {', '.join(PARTS)}"
    return None


def _event_name(event: JSONObject | None) -> str | None:
    """The type of a history event (its JSON form's `type`, `kind` or `event`)."""
    if event is None:
        return "<end of history>"
    for key in ("type", "kind", "event"):
        if isinstance(event.get(key), str):
            return str(event[key])
    return None


def run_simulation(candidate: Candidate, impl: str, seed: int, profile: Profile, steps: int) -> Row:
    """The whole-system lockstep of `seed` and its row (conformance.campaign.run.COLUMNS)."""
    from pullspec.conformance.machines.simulation import DEFAULT_FAULT_GAP_MS, compare
    from pullspec.reference.sim.config import SimConfig
    from pullspec.reference.sim.simulator import Simulator
    from pullspec.spec.invariants import ANOMALY_RULES

    started, cpu = time.perf_counter(), time.process_time()
    config = SimConfig(seed=seed, profile=profile, mean_fault_gap_ms=DEFAULT_FAULT_GAP_MS)
    kind = step = op = field = None
    rules: list[str] = []
    covered: list[str] = []
    try:
        found = compare(candidate, config, steps, impl=impl)
        verdict, events, detail = found.verdict, found.events, found.detail
    except Exception as exc:  # the reference run failing is a crash of the simulation itself
        found, verdict, events, detail = None, Verdict.CRASHED, 0, f"{type(exc).__name__}: {exc}"
    if found is not None and found.reference is not None:
        reached = found.reference.check.coverage.get("rules")
        covered = sorted(reached, key=rule_sort_key) if isinstance(reached, dict) else []
    if found is not None and found.divergence is not None:
        d = found.divergence
        events = d.index + 1
        step, op = events, _event_name(d.expected) or _event_name(d.actual)
        field, rules, detail = f"history[{d.index}]", list(d.rules), d.replay
    elif found is not None and found.candidate is not None and found.candidate.check.violations:
        # Identical histories, but the run itself breaks an invariant.
        broken = sorted(found.candidate.check.violations)
        verdict, kind, step, op, field = Verdict.DIVERGED, "INVARIANT", events, broken[0], "check"
        rules = sorted({ANOMALY_RULES[k] for k in broken if k in ANOMALY_RULES}, key=rule_sort_key)
        detail = Simulator.replay_of(config, steps, found.candidate.schedule, impl)
    return (
        seed,
        SIMULATION,
        profile.value,
        impl,
        events,
        verdict.value,
        kind,
        step,
        op,
        field,
        rules,
        covered,
        [],
        detail,
        time.perf_counter() - started,
        time.process_time() - cpu,
    )


def replay(row: RowJSON) -> Replay:
    """A failing simulation's replay: the command its row holds (the simulator replays a seed
    exactly; there is no vector case to shrink into)."""
    return Replay(
        SIMULATION,
        row["profile"],
        int(row["seed"]),
        row["verdict"],
        int(row["ops"]),
        "",
        str(row["detail"] or ""),
        row["divergent_field"],
        tuple(row["divergence_rules"] or ()),
    )
