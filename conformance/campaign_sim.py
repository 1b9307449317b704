"""The campaign's `simulation` area: the whole-system lockstep, one seed per row.

Each seed runs the simulator (reference.simulator: a consumer group under the seed's fault
schedule) twice — with the reference parts, then with the candidate's message store and process
queue substituted where it has them — and compares the two histories event by event
(conformance.machines.simulation.lockstep, as `pullspec conform` does for a few seeds). A row's
`ops` are the events compared, which the summary keeps apart from the lockstep areas' diffed
ops; a divergence names the differing event, the rule IDs it mentions and, as `detail`, the
command that replays the seed.
"""

from __future__ import annotations

import time
from importlib.util import find_spec
from typing import Any

from pullspec.conformance.campaign import SIMULATION, Row
from pullspec.conformance.campaign_shrink import Replay
from pullspec.conformance.vectors import Verdict
from pullspec.spec.profiles import Profile


def available() -> bool:
    """True when this build has the whole-system lockstep (and so the simulator)."""
    return find_spec("pullspec.conformance.machines.simulation") is not None


def unsupported(candidate: Any) -> str | None:
    """Why `candidate` cannot run in the simulation (it substitutes no part), else None."""
    from pullspec.conformance.machines.simulation import PARTS, candidate_hooks

    if candidate_hooks(candidate) is None:
        return f"candidate: provides none of {', '.join(PARTS)}"
    return None


def _event_name(event: dict[str, Any] | None) -> str | None:
    """The type of a history event (its JSON form's `type`, `kind` or `event`)."""
    if event is None:
        return "<end of history>"
    for key in ("type", "kind", "event"):
        if isinstance(event.get(key), str):
            return str(event[key])
    return None


def run_simulation(candidate: Any, impl: str, seed: int, profile: Profile, steps: int) -> Row:
    """The whole-system lockstep of `seed` and its row (conformance.campaign.COLUMNS)."""
    from pullspec.conformance.machines.simulation import DEFAULT_FAULT_GAP_MS, lockstep
    from pullspec.reference.sim_config import SimConfig

    started, cpu = time.perf_counter(), time.process_time()
    config = SimConfig(seed=seed, profile=profile, mean_fault_gap_ms=DEFAULT_FAULT_GAP_MS)
    try:
        verdict, events, divergence, detail = lockstep(candidate, config, steps, impl=impl)
    except Exception as exc:  # the reference run failing is a crash of the simulation itself
        verdict, events, divergence, detail = (
            Verdict.CRASHED,
            0,
            None,
            f"{type(exc).__name__}: {exc}",
        )
    step = op = field = None
    rules: list[str] = []
    if divergence is not None:
        events = divergence.index + 1
        step, op = events, _event_name(divergence.expected) or _event_name(divergence.actual)
        field, rules, detail = (
            f"history[{divergence.index}]",
            list(divergence.rules),
            divergence.replay,
        )
    return (
        seed,
        SIMULATION,
        profile.value,
        impl,
        events,
        verdict.value,
        None,
        step,
        op,
        field,
        rules,
        [],
        [],
        detail,
        time.perf_counter() - started,
        time.process_time() - cpu,
    )


def replay(row: dict[str, Any]) -> Replay:
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
