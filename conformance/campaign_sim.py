"""The campaign's `simulation` area: one whole-system simulator run per seed (issue 5).

Unlike the lockstep areas there is no candidate: `reference.simulator.simulate` runs a consumer
group of the reference model under the seed's fault schedule and its checker reports the
anomalies of the history. A run with a violation is DIVERGED (from what RocketMQ 4.x allows),
with the violation kind as `divergent_field` and the `pullspec simulate` command that replays it
as `detail`; anomalies the rules allow are counted as hit rule IDs. `ops` is the simulator's
steps, not diffed ops, so the summary keeps them apart.
"""

from __future__ import annotations

import time
from importlib.util import find_spec
from typing import Any

from conformance.campaign import SIMULATION, Row
from conformance.campaign_shrink import Replay
from conformance.observe import rule_sort_key
from spec.profiles import Profile


def available() -> bool:
    """True when this build has the simulator."""
    return find_spec("reference.simulator") is not None


def run_simulation(seed: int, profile: Profile, steps: int) -> Row:
    """Simulate `steps` steps of the seed's world and answer the row (conformance.campaign)."""
    from reference.simulator import SimConfig, simulate

    started, cpu = time.perf_counter(), time.process_time()
    try:
        result, sim = simulate(SimConfig(seed=seed, profile=profile), steps)
    except Exception as exc:  # a simulator bug is a verdict too
        detail = f"{type(exc).__name__}: {exc}"
        return _row(seed, profile, 0, "CRASHED", None, [], [], detail, started, cpu)
    check = result.check
    statuses = [f"allowed:{k}" for k in check.allowed_by_kind]
    statuses += [f"violation:{k}" for k in check.violations]
    rules = sorted(check.allowed, key=rule_sort_key)
    if check.ok:
        return _row(seed, profile, result.steps, "PASS", None, rules, statuses, None, started, cpu)
    first = min((a for a in check.details if a.rule is None), key=lambda a: a.at, default=None)
    kind = first.kind if first is not None else sorted(check.violations)[0]
    replay = sim.replay_command()
    return _row(
        seed, profile, result.steps, "DIVERGED", kind, rules, statuses, replay, started, cpu
    )


def _row(
    seed: int,
    profile: Profile,
    steps: int,
    verdict: str,
    kind: str | None,
    rules: list[str],
    statuses: list[str],
    detail: str | None,
    started: float,
    cpu: float,
) -> Row:
    return (
        seed,
        SIMULATION,
        profile.value,
        "reference",
        steps,
        verdict,
        None,
        None,
        None,
        kind,
        [],
        rules,
        sorted(statuses),
        detail,
        time.perf_counter() - started,
        time.process_time() - cpu,
    )


def replay(row: dict[str, Any]) -> Replay:
    """A failing simulation's replay: the `pullspec simulate` command its row holds (the
    simulator replays a seed exactly, so there is nothing to shrink into a vector)."""
    return Replay(
        SIMULATION,
        row["profile"],
        int(row["seed"]),
        row["verdict"],
        int(row["ops"]),
        "",
        str(row["detail"] or ""),
        row["divergent_field"],
        (),
    )
