"""`pullspec bench`: the fast implementation's figures beside the reference, in one run.

The store figures are `conformance.bench.run` (the workloads of ../shared/bench/README.md: W1 and
W2 pulls with and without a tag filter, batched pulls, appends, recovery, against a numpy copy
and a raw write measured in the same run); the process-queue figures are
`conformance.pq_bench.bench_process_queue`. `--json` prints one object with a key per figure; the
`*_vs_java` ratios are against the Java figures of ../shared/bench/README.md (run A, a machine of
the same kind, not this run), which `peer_java_source` names; `python` names the interpreter
(conformance.interpreter: a campaign's op took an eighth longer under a shared libpython).
`--sim-steps` sets the simulation whose peak memory is measured (10^5 by default; 10^6 steps
need about 1 GB and took 93 s to 32 minutes on the development machine; 0 skips it).
"""

from __future__ import annotations

import json
import sys

import click

from pullspec.spec.evolve import evolve

#: What the `*_vs_java` ratios are measured against.
PEER_JAVA_SOURCE = (
    "../shared/bench/README.md run A: the Java 4.9.7 store on a machine of the same kind, "
    "not measured in this run"
)


@click.command("bench")
@click.option("--quick", is_flag=True, help="Workloads scaled down about 20×.")
@click.option(
    "--sim-steps",
    type=click.IntRange(min=0),
    default=None,
    help="Steps of the simulation whose peak memory is measured [default: 10^5, or 10^4 with "
    "--quick; 0 skips it]. 10^6 steps need about 1 GB and take minutes.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_command(quick: bool, sim_steps: int | None, quiet: bool, as_json: bool) -> None:
    """Measure fast vs reference: pulls, batched pulls, scans, appends, recovery, process queue,
    peak memory; and the ratios to the Java store's published figures."""
    from pullspec.conformance import bench, interpreter
    from pullspec.conformance.candidates import factory
    from pullspec.conformance.pq_bench import bench_process_queue
    from pullspec.conformance.resolve import resolve

    if not quiet:
        click.echo("measuring the store workloads…", err=True)
    sizes = bench.Sizes.quick() if quick else bench.Sizes()
    if sim_steps is not None:
        sizes = evolve(sizes, sim_steps=sim_steps)
    figures: dict[str, float] = dict(bench.run(sizes=sizes))
    if not quiet:
        click.echo("measuring the process queue…", err=True)
    figures.update(bench_process_queue(quick, factory(resolve("reference"), "process_queue")))
    if as_json:
        labels = {"peer_java_source": PEER_JAVA_SOURCE, "python": interpreter.describe()}
        click.echo(json.dumps({**figures, **labels}, sort_keys=True))
    else:
        ratios = {k for k in figures if k.endswith("_vs_java")}
        width = max(len(k) for k in figures)
        for key in sorted(figures.keys() - ratios):
            click.echo(f"{key:<{width}}  {figures[key]:,.3f}")
        click.echo(f"ratios to the Java peer (> 1: fast is better), against {PEER_JAVA_SOURCE}:")
        for key in sorted(ratios):
            click.echo(f"{key:<{width}}  {figures[key]:,.3f}")
        click.echo(f"measured on {interpreter.describe()}")
    sys.stdout.flush()


COMMANDS = [bench_command]
