"""`pullspec simulate`: run the whole-system simulator (`reference.sim.simulator`) and check its
history for the anomalies of docs/narrative/anomalies.md; with `--impl`, run it with a
candidate's parts as well and compare the two histories event by event
(`conformance.machines.simulation.compare`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from pullspec.conformance.cli.common import Progress, check_new_file, is_terminal, quiet_option
from pullspec.reference.sim.faults import FAULT_KINDS, parse_kinds, parse_schedule
from pullspec.reference.sim.history import write_history
from pullspec.reference.sim.simulator import SimConfig, SimResult, Simulator, simulate
from pullspec.spec.profiles import Profile

#: Details printed per anomaly kind in the text output.
DETAILS_SHOWN = 5


@click.command("simulate")
@click.option("--seed", type=int, default=1, show_default=True, help="Fixes every random choice.")
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Scheduler events and fault steps to run.",
)
@click.option(
    "--consumers",
    type=click.IntRange(1, 64),
    default=3,
    show_default=True,
    help="Push consumers of the group at the start (join faults add more).",
)
@click.option("--orderly", is_flag=True, help="Orderly consumers (default: concurrent).")
@click.option(
    "--faults",
    default="all",
    show_default=True,
    help=f"Fault kinds the seed's schedule draws from: all, none or a list of {', '.join(FAULT_KINDS)}.",
)
@click.option(
    "--schedule",
    default=None,
    help="Explicit fault steps kind@ms[:consumer][=value],… (a replay); replaces --faults.",
)
@click.option(
    "--profile",
    type=click.Choice(["4.7", "4.9"]),
    default="4.9",
    show_default=True,
    help="The RocketMQ version whose rules the model follows.",
)
@click.option("--no-slave", is_flag=True, help="Run the master alone.")
@click.option(
    "--impl",
    default=None,
    help="Also run with this candidate's parts (reference, fast, module:factory) and compare "
    "its history with the reference's, event by event.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--history",
    "history_file",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=check_new_file,
    default=None,
    help="Write the history as JSON Lines.",
)
@click.option(
    "--progress-every",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Steps between progress lines on stderr (when it is not a terminal).",
)
@quiet_option()
def simulate_command(
    seed: int,
    steps: int,
    consumers: int,
    orderly: bool,
    faults: str,
    schedule: str | None,
    profile: str,
    no_slave: bool,
    impl: str | None,
    as_json: bool,
    history_file: Path | None,
    progress_every: int,
    quiet: bool,
) -> None:
    """Simulate a consumer group under faults and report the anomalies its history shows:
    violations (exit 1), anomalies RocketMQ 4.x allows (counted by rule), liveness after a
    quiet tail, and the rules the run reached. With --impl, the candidate's run is checked and
    must match the reference's event by event (exit 1 otherwise)."""
    try:
        config = SimConfig(
            seed=seed,
            consumers=consumers,
            orderly=orderly,
            profile=Profile.parse(profile),
            slave=not no_slave,
            faults=parse_kinds(faults),
            schedule=parse_schedule(schedule) if schedule is not None else None,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if impl is not None:
        if history_file is not None:
            raise click.UsageError("--history cannot be combined with --impl")
        _simulate_candidate(impl, config, steps, as_json)
        return
    started = time.perf_counter()

    def progress(done: int, virtual_ms: int) -> None:
        elapsed = time.perf_counter() - started
        click.echo(
            f"simulate: {done}/{steps} steps, virtual {virtual_ms / 1000:.1f} s, "
            f"{elapsed:.1f} s elapsed",
            err=True,
        )

    bar = Progress("simulate", steps, "steps", quiet=quiet or not is_terminal(sys.stderr))

    def advance(done: int, virtual_ms: int) -> None:
        bar.update(done, f"virtual {virtual_ms / 1000:.0f} s")

    if quiet:
        shown, every = None, progress_every
    elif is_terminal(sys.stderr):
        shown, every = advance, max(1, steps // 200)
    else:  # a log or a pipe: a line every --progress-every steps
        shown, every = (progress if steps > progress_every else None), progress_every
    with bar:
        result, sim = simulate(
            config,
            steps,
            keep_history=history_file is not None,
            progress=shown,
            every=every,
        )
    if history_file is not None:
        write_history(sim.history.events, history_file)
    if as_json:
        out = result.to_json()
        out["seed"] = seed
        out["replay"] = sim.replay_command()
        click.echo(json.dumps(out))
    else:
        _print(result, sim, history_file)
    if result.check.violations:
        sys.exit(1)


def _simulate_candidate(impl: str, config: SimConfig, steps: int, as_json: bool) -> None:
    """Run the reference and `impl` side by side; print the candidate's verdict and the
    lockstep's; exit 1 on a divergence, a crash or a violation."""
    from pullspec.conformance.machines.simulation import PARTS, candidate_parts, compare
    from pullspec.conformance.resolve import resolve
    from pullspec.conformance.vectors import Verdict
    from pullspec.spec.errors import PullspecError

    try:
        candidate = resolve(impl)
    except PullspecError as exc:
        raise click.UsageError(str(exc)) from exc
    parts = candidate_parts(candidate).provided()
    if not parts:
        raise click.UsageError(f"--impl {impl}: provides none of {', '.join(PARTS)}")
    found = compare(candidate, config, steps, impl=impl)
    result = found.candidate
    lockstep = {
        "verdict": found.verdict.value,
        "events": found.events,
        "parts": list(parts),
        "divergence": found.divergence.to_json() if found.divergence else None,
        "detail": found.detail,
    }
    if as_json:
        out: dict[str, object] = result.to_json() if result is not None else {}
        out |= {"seed": config.seed, "impl": impl, "lockstep": lockstep}
        click.echo(json.dumps(out))
    else:
        click.echo(
            f"{impl} ({', '.join(parts)}) against the reference: {found.verdict.value}, "
            f"{found.events} events compared"
        )
        if found.divergence is not None:
            d = found.divergence
            click.echo(f"  first difference at event {d.index} (rules {', '.join(d.rules)})")
            click.echo(f"  reference: {json.dumps(d.expected)}")
            click.echo(f"  {impl}: {json.dumps(d.actual)}")
            click.echo(f"replay: {d.replay}")
        elif found.detail:
            click.echo(f"  {found.detail}")
        if result is not None:
            _print(result, None, None)
    failed = found.verdict is not Verdict.PASS
    if failed or (result is not None and result.check.violations):
        sys.exit(1)


def _print(result: SimResult, sim: Simulator | None, history_file: Path | None) -> None:
    stats = result.check.stats
    click.echo(
        f"{result.steps} steps, {result.virtual_ms / 1000:.1f} s virtual, "
        f"{result.elapsed_s:.1f} s elapsed"
    )
    click.echo(
        f"messages: {stats.get('produced', 0)} produced, {stats.get('consumed', 0)} consumed, "
        f"{stats.get('dlq', 0)} dead-lettered, {stats.get('pending', 0)} pending"
    )
    events = ", ".join(f"{k} {v}" for k, v in result.history.items())
    click.echo(f"history: {events}")
    if history_file is not None:
        click.echo(f"history written to {history_file}")
    click.echo(f"faults: {result.schedule or 'none'}")
    violations = result.check.violations
    click.echo(
        "violations: "
        + (", ".join(f"{k} {v}" for k, v in sorted(violations.items())) if violations else "none")
    )
    for kind, per_rule in sorted(result.check.allowed_by_kind.items()):
        rules = ", ".join(f"{r} {n}" for r, n in sorted(per_rule.items()))
        click.echo(f"allowed {kind}: {rules}")
    shown: dict[str, int] = {}
    for anomaly in result.check.details:
        if anomaly.rule is None and shown.get(anomaly.kind, 0) < DETAILS_SHOWN:
            shown[anomaly.kind] = shown.get(anomaly.kind, 0) + 1
            click.echo(f"  {anomaly.kind} at {anomaly.at} ms: {anomaly.detail}")
    _print_liveness(result)
    if violations and sim is not None:
        click.echo(f"replay: {sim.replay_command()}")


def _print_liveness(result: SimResult) -> None:
    live = result.check.liveness
    if live.get("judged"):
        state = "settled" if live.get("settled") else "NOT settled"
        click.echo(
            f"liveness: {state} after a quiet tail of {result.tail_steps} steps; "
            f"{live.get('poisonInDlq')} of {live.get('poison')} poison messages in the DLQ"
        )
    else:
        click.echo("liveness: not judged (no quiet tail)")
    for name in ("duplicates", "commits"):
        groups = live.get(name)
        if isinstance(groups, dict):
            shown = ", ".join(
                f"{g} {b['count']}/{b['budget']}" for g, b in groups.items() if b["count"]
            )
            click.echo(f"budget {name}: {shown or 'none used'}")
    cover = result.check.coverage
    targets = cover.get("targets")
    if isinstance(targets, dict):
        reached = ", ".join(f"{r} {n}" for r, n in targets.items())
        missed = cover.get("missed")
        gaps = ", ".join(str(m) for m in missed) if isinstance(missed, list) else ""
        click.echo(f"targets: {reached}" + (f" (missed: {gaps})" if gaps else ""))


COMMANDS = [simulate_command]
