"""`pullspec simulate`: run the whole-system simulator (`reference.simulator`) and check its
history for the anomalies of docs/narrative/anomalies.md."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from pullspec.conformance.cli_common import Progress, check_new_file, is_terminal, quiet_option
from pullspec.reference.sim_faults import FAULT_KINDS, parse_kinds, parse_schedule
from pullspec.reference.sim_history import write_history
from pullspec.reference.simulator import SimConfig, SimResult, Simulator, simulate
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
    as_json: bool,
    history_file: Path | None,
    progress_every: int,
    quiet: bool,
) -> None:
    """Simulate a consumer group under faults and report the anomalies its history shows:
    violations (exit 1) and anomalies RocketMQ 4.x allows, counted by rule."""
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


def _print(result: SimResult, sim: Simulator, history_file: Path | None) -> None:
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
    if violations:
        click.echo(f"replay: {sim.replay_command()}")


COMMANDS = [simulate_command]
