"""The driver's side of a campaign's failures: replay a failing trace through the lockstep
machine (`trace_report`), pick the distinct failures worth shrinking (`pick_failures`), shrink
one to a minimal trace and save it as a vector case that `pullspec vectors check` replays
(`shrink`).
"""

from __future__ import annotations

import json
import random
import shlex
from collections.abc import Iterable
from pathlib import Path

from pullspec.conformance.campaign.rows import FAILING, Replay, RowJSON, trace_key
from pullspec.conformance.campaign.run import candidates_for
from pullspec.conformance.candidates import Candidate
from pullspec.conformance.machines import gen
from pullspec.conformance.machines.draw import Context, RandomDraw
from pullspec.conformance.machines.lockstep import LockstepError, MachineReport, Pair
from pullspec.conformance.machines.minimize import minimize
from pullspec.conformance.vectors import Verdict
from pullspec.spec.profiles import Profile


def trace_report(
    reference: Candidate,
    candidate: Candidate,
    impl: str,
    area: str,
    seed: int,
    profile: Profile,
    steps: int,
) -> MachineReport:
    """The trace of (`area`, `seed`, `profile`) replayed through the lockstep machine's Pair: its
    MachineReport (PASS, or the failure with the trace up to it), ready for minimize()."""
    draw = RandomDraw(random.Random(trace_key(area, seed, profile)))
    config = gen.config(area, draw)
    ctx = Context.start(area, config)
    try:
        pair = Pair.open(area, reference, candidate, impl, profile, seed, config)
        for _ in range(steps):
            op = gen.op(area, draw, ctx)
            ctx.note(op, pair.step(op))
    except LockstepError as failure:
        return failure.report
    return MachineReport(area, impl, profile, Verdict.PASS, seed, config)


def pick_failures(rows: Iterable[RowJSON], limit: int) -> list[RowJSON]:
    """At most `limit` failing rows to shrink: one per distinct failure (area, profile, verdict,
    kind, op, field) first, earliest divergence first, then the others in the same order."""
    ordered = sorted(
        (r for r in rows if r["verdict"] in FAILING),
        key=lambda r: (r["first_divergent_step"] or 0, r["area"], r["seed"]),
    )
    seen: set[tuple[str | None, ...]] = set()
    first: list[RowJSON] = []
    rest: list[RowJSON] = []
    for r in ordered:
        key = (
            *(r["area"], r["profile"], r["verdict"]),
            *(r["divergence_kind"], r["divergent_op"], r["divergent_field"]),
        )
        (rest if key in seen else first).append(r)
        seen.add(key)
    return (first + rest)[: max(limit, 0)]


def shrink(
    row: RowJSON, impl: str, steps: int, directory: Path, timeout: float = 10.0
) -> Replay | None:
    """Replay the failing trace of `row` on this process, shrink it (minimize) and write it as a
    vector case under `directory/<profile>/`; None when the replay does not fail the same way
    (a candidate that is not deterministic)."""
    reference, candidate = candidates_for(impl, timeout)
    profile = Profile.parse(row["profile"])
    area, seed = row["area"], int(row["seed"])
    report = trace_report(reference, candidate, impl, area, seed, profile, steps)
    if report.verdict.value != row["verdict"]:
        return None
    report = minimize(report, reference, candidate)
    case = report.case()
    case["id"] = f"campaign-{area}-{profile.value}-{seed}"
    folder = directory / profile.value
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case['id']}.jsonl"
    path.write_text(json.dumps(case) + "\n", encoding="utf-8")
    command = (
        f"pullspec vectors check {shlex.quote(str(path))} --impl {shlex.quote(impl)} "
        f"--profile {profile.value}"
    )
    field = report.divergence.field if report.divergence else None
    return Replay(
        area,
        profile.value,
        seed,
        report.verdict.value,
        len(report.steps),
        str(path),
        command,
        field,
        report.rules,
    )
