"""`pullspec bench`: the fast implementation's figures beside the reference, in one run.

The store figures are `conformance.bench.run` (the workloads of ../shared/bench/README.md: W1 and
W2 pulls with and without a tag filter, batched pulls, appends, recovery, against a numpy copy
and a raw write measured in the same run); the process-queue figures are
`conformance.pq_bench.bench_process_queue`. `--json` prints one object with a key per figure.
"""

from __future__ import annotations

import json
import sys

import click


@click.command("bench")
@click.option("--quick", is_flag=True, help="Workloads scaled down about 20×.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_command(quick: bool, quiet: bool, as_json: bool) -> None:
    """Measure fast vs reference: pulls, batched pulls, scans, appends, recovery, process queue."""
    from pullspec.conformance import bench
    from pullspec.conformance.pq_bench import bench_process_queue

    if not quiet:
        click.echo("measuring the store workloads…", err=True)
    figures: dict[str, float] = dict(bench.run(quick=quick))
    if not quiet:
        click.echo("measuring the process queue…", err=True)
    figures.update(bench_process_queue(quick))
    if as_json:
        click.echo(json.dumps(figures, sort_keys=True))
    else:
        width = max(len(k) for k in figures)
        for key in sorted(figures):
            click.echo(f"{key:<{width}}  {figures[key]:,.3f}")
    sys.stdout.flush()


COMMANDS = [bench_command]
