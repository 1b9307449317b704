"""`pullspec campaign`: a conformance and fuzzing campaign on Spark (docs/using/campaigns.md).

Seeds are cut into Spark tasks; every task runs, for each of its seeds, one lockstep trace per
area and profile (conformance.campaign.run) and the rows are written as Parquet partitioned by area
and verdict. The driver prints a progress line, then the summary; it shrinks each distinct
failure to a minimal vector case that `pullspec vectors check` replays, writes the report
(summary.json/.md/.html and campaign.svg) and exits 1 if any trace diverged, crashed or timed
out, 2 if the campaign could not run, 130 if interrupted.

`--out` is replaced only when it is empty, absent or an earlier campaign's output (Parquet
partition folders, `_SUCCESS`, `_report`): a folder holding anything else is refused unless
`--overwrite`, and a file always is.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import attrs
import click

from pullspec.conformance.campaign import report as campaign_report
from pullspec.conformance.campaign import rows as campaign_rows
from pullspec.conformance.campaign import run as campaign
from pullspec.conformance.campaign import shrink as campaign_shrink
from pullspec.conformance.campaign import sim as campaign_sim
from pullspec.conformance.campaign import spark as campaign_spark
from pullspec.conformance.campaign import summary as campaign_summary
from pullspec.conformance.cli.common import (
    Progress,
    allow_unsupported_option,
    candidate_of,
    check_master,
    close_candidate,
    nothing_checked,
    quiet_option,
    timeout_option,
    usage,
)
from pullspec.conformance.ops import MACHINE_AREAS
from pullspec.spec.errors import PullspecError
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import ALL_PROFILES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Exit status when the campaign could not run at all (no Java, no pyspark, bad arguments).
EXIT_ENVIRONMENT = 2
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
#: What a campaign (Spark's Parquet writer) leaves in --out: partition folders, the job's marker
#: and checksum files, Spark's temporary folder and the report.
CAMPAIGN_ENTRY = re.compile(r"^(area=[^/]*|_SUCCESS|_temporary|_report|\..*\.crc)$")
#: Foreign entries named in the refusal.
FOREIGN_SHOWN = 3


def known_areas() -> tuple[str, ...]:
    """The areas a campaign can run: the lockstep areas, then the simulation when this build
    has the simulator."""
    return (*MACHINE_AREAS, campaign_rows.SIMULATION) if campaign_sim.available() else MACHINE_AREAS


def parse_areas(values: tuple[str, ...]) -> tuple[str, ...]:
    """`--area` values (repeated and/or comma-separated, `all`) as known areas, in order."""
    wanted = [a.strip() for v in values for a in v.split(",") if a.strip()]
    if not wanted or "all" in wanted:
        return known_areas()
    unknown = [a for a in wanted if a not in known_areas()]
    if unknown:
        raise click.BadParameter(
            f"unknown area {unknown[0]!r} (expected {', '.join(known_areas())} or all)",
            param_hint="--area",
        )
    return tuple(dict.fromkeys(wanted))


def parse_profiles(values: tuple[str, ...]) -> tuple[str, ...]:
    """`--profile` values (`all` for both) as profile names, in catalogue order."""
    if "all" in values:
        return tuple(p.value for p in ALL_PROFILES)
    return tuple(p.value for p in ALL_PROFILES if p.value in values) or ("4.9",)


def resolve_report_dir(out: str, given: str | None) -> Path:
    """Where the report goes: --report-dir, else `<out>/_report` (Spark and pyarrow skip
    `_`-folders when they read the rows), else ./pullspec-campaign-report for a remote --out."""
    if given:
        return Path(given)
    if out.startswith("file://"):
        return Path(out.removeprefix("file://")) / "_report"
    if _URI.match(out):
        return Path("pullspec-campaign-report")
    return Path(out) / "_report"


def local_path(master: str, out: str) -> Path | None:
    """`out` as a driver-local path when the driver sees every row there (a local master
    writing to a local folder), else None."""
    if not campaign_spark.is_local(master):
        return None
    if out.startswith("file://"):
        return Path(out.removeprefix("file://"))
    return None if _URI.match(out) else Path(out)


def foreign_entries(names: list[str]) -> list[str]:
    """The entries of an --out folder that no campaign writes, sorted."""
    return sorted(n for n in names if not CAMPAIGN_ENTRY.match(n))


def out_refusal(
    out: str, exists: bool, is_dir: bool, names: list[str], overwrite: bool
) -> str | None:
    """Why a campaign must not write `out` (a file; a folder holding anything a campaign does
    not write, unless `overwrite`), else None."""
    if exists and not is_dir:
        return f"error: --out {out} is a file; a campaign writes a folder of Parquet files"
    foreign = foreign_entries(names) if exists else []
    if foreign and not overwrite:
        shown = ", ".join(foreign[:FOREIGN_SHOWN]) + (" …" if len(foreign) > FOREIGN_SHOWN else "")
        return (
            f"error: --out {out} holds files no campaign wrote ({shown}); choose an empty or new "
            "folder, or pass --overwrite to replace it"
        )
    return None


def local_out(out: str) -> Path | None:
    """`out` as a path of this machine's file system (no scheme, or file://), else None."""
    if out.startswith("file://"):
        return Path(out.removeprefix("file://"))
    return None if _URI.match(out) else Path(out)


def check_local_out(out: str, overwrite: bool) -> None:
    """Refuse (exit 2) a local --out that is a file or a foreign folder."""
    path = local_out(out)
    if path is None:
        return
    names = [p.name for p in path.iterdir()] if path.is_dir() else []
    problem = out_refusal(out, path.exists() or path.is_symlink(), path.is_dir(), names, overwrite)
    if problem is not None:
        fail(problem)


def aggregate(spark: SparkSession, master: str, out: str) -> campaign_rows.Aggregates:
    """The summary's counts: read with pyarrow on the driver when the rows are local to it,
    else by a Spark query over the Parquet."""
    path = local_path(master, out)
    if path is not None:
        return campaign_rows.aggregates(path)
    return campaign_spark.aggregates(spark, out)


def fail(message: str) -> NoReturn:
    """Print `message` on stderr and exit with EXIT_ENVIRONMENT."""
    click.echo(message, err=True)
    sys.exit(EXIT_ENVIRONMENT)


def check_environment() -> None:
    """Exit with one clear message when pyspark/pyarrow or Java 17 is missing."""
    problem = campaign_spark.spark_problem() or campaign_spark.java_problem()
    if problem is not None:
        fail(problem)


#: A Python exception's last line in a worker's traceback (`ModuleNotFoundError: No module …`).
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*:")


def job_failure(exc: BaseException) -> str:
    """The line that says why a Spark job failed: the last exception line of a Python worker's
    traceback when there is one, else the error's first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if _RAISED.match(line)]
    if raised:
        return raised[-1]
    return lines[0] if lines else type(exc).__name__


def check_python(master: str | None, python: str | None) -> None:
    """A local master's executors run --python on this machine: it must be a program here."""
    if python is None or not (master is None or campaign_spark.is_local(master)):
        return
    if shutil.which(python) is None:
        raise usage(f"{python!r} is not a program on this machine", "--python")


def parse_conf(values: tuple[str, ...]) -> dict[str, str]:
    """`--conf KEY=VALUE` values as Spark settings."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise usage(f"expected KEY=VALUE, got {item!r}", "--conf")
        out[key.strip()] = value
    return out


@click.command("campaign")
@click.option("--impl", default="fast", show_default=True, help="Candidate implementation.")
@click.option(
    "--master",
    default=None,
    callback=check_master,
    help="Spark master URL [default: local[*], or spark-submit's].",
)
@click.option("--seeds", type=click.IntRange(min=1), default=100, show_default=True, help="Seeds.")
@click.option(
    "--first-seed", type=click.IntRange(min=0), default=0, show_default=True, help="First seed."
)
@click.option(
    "--steps", type=click.IntRange(min=1), default=200, show_default=True, help="Ops per trace."
)
@click.option("--area", "areas", multiple=True, help="Areas (repeat or comma-separate; all).")
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    type=click.Choice(["4.7", "4.9", "all"]),
    help="Profiles (repeatable) [default: 4.9].",
)
@click.option(
    "--sim-steps",
    type=click.IntRange(min=1),
    default=campaign_rows.DEFAULT_SIM_STEPS,
    show_default=True,
    help="Simulator steps per seed (simulation area).",
)
@click.option(
    "--out",
    default="pullspec-campaign",
    show_default=True,
    help="Parquet folder: new, empty or an earlier campaign's (else --overwrite).",
)
@click.option("--overwrite", is_flag=True, help="Replace --out even if it holds other files.")
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Default: OUT/_report.",
)
@click.option("--partitions", type=click.IntRange(min=1), default=None, help="Spark tasks.")
@click.option(
    "--shrink",
    "shrink_max",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Failures to shrink into vector cases.",
)
@click.option(
    "--scratch",
    type=click.Path(exists=True, file_okay=False, writable=True),
    default=None,
    help="Candidates' scratch folder (default /dev/shm).",
)
@timeout_option()
@click.option(
    "--python",
    "executor_python",
    default=None,
    help="The executors' Python [default: $PYSPARK_PYTHON, else this interpreter].",
)
@click.option(
    "--conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark setting (repeatable), e.g. spark.archives=env.tar.gz#env.",
)
@allow_unsupported_option()
@quiet_option()
@click.option("--progress/--no-progress", default=True, hidden=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def campaign_command(
    impl: str,
    master: str | None,
    seeds: int,
    first_seed: int,
    steps: int,
    areas: tuple[str, ...],
    profiles: tuple[str, ...],
    sim_steps: int,
    out: str,
    overwrite: bool,
    report_dir: Path | None,
    partitions: int | None,
    shrink_max: int,
    scratch: str | None,
    timeout: float,
    executor_python: str | None,
    spark_conf: tuple[str, ...],
    allow_unsupported: bool,
    quiet: bool,
    progress: bool,
    as_json: bool,
) -> None:
    """Run a conformance campaign of IMPL against the reference on Spark."""
    chosen = parse_areas(areas)
    conf = parse_conf(spark_conf)
    if not out.strip():
        raise usage("must name a folder", "--out")
    check_local_out(out, overwrite)
    check_python(master, executor_python)
    close_candidate(candidate_of(impl, timeout))  # a cmd: program that does not exist, ...
    check_environment()
    plan = campaign.Plan(
        impl,
        chosen,
        parse_profiles(profiles),
        steps,
        scratch or campaign_spark.default_scratch(),
        timeout,
        sim_steps,
    )
    try:
        unsupported = campaign.unsupported_areas(plan)
    except PullspecError as exc:
        raise click.UsageError(str(exc)) from exc
    runnable = tuple(a for a in chosen if a not in unsupported)
    if not runnable:
        nothing_checked(
            f"{impl} supports none of the areas {', '.join(chosen)}: nothing was checked",
            allow_unsupported,
        )
    plan = evolve(plan, areas=runnable)
    session = Session(master, executor_python, conf, overwrite, quiet or not progress)
    try:
        summary = _run(plan, session, first_seed, seeds, out, partitions, unsupported)
    except KeyboardInterrupt:
        click.echo("campaign: interrupted; the Spark jobs were cancelled", err=True)
        sys.exit(130)
    folder = report_dir if report_dir is not None else resolve_report_dir(out, None)
    started = time.perf_counter()
    replays = _shrink(summary.failures, plan, folder / "vectors", shrink_max)
    timings = {**summary.timings, "shrink": time.perf_counter() - started}
    summary = evolve(summary, replays=replays, report_dir=str(folder), timings=timings)
    campaign_report.write(summary, folder)
    if as_json:
        click.echo(json.dumps(summary.to_json(), default=str))
    else:
        click.echo(campaign_report.text(summary))
    if summary.failed:
        sys.exit(1)


@attrs.frozen
class Session:
    """How to start Spark and show the job: the command's Spark and display options."""

    master: str | None
    python: str | None
    conf: dict[str, str]
    overwrite: bool
    quiet: bool


def _run(
    plan: campaign.Plan,
    session: Session,
    first_seed: int,
    seeds: int,
    out: str,
    partitions: int | None,
    unsupported: dict[str, str],
) -> campaign_summary.Summary:
    """Start (or join) the Spark session, run the job, read the aggregates back."""
    clock = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal clock
        timings[name], clock = time.perf_counter() - clock, time.perf_counter()

    spark, owned = campaign_spark.start_session(
        session.master, python=session.python, conf=session.conf
    )
    lap("start")
    try:
        if local_out(out) is None:  # hdfs://, s3a://: ask the storage itself
            try:
                exists, is_dir, names = campaign_spark.list_folder(spark, out)
            except Exception as exc:  # a py4j error: no such file system, no credentials, ...
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                fail(f"error: cannot read --out {out}: {first}")
            problem = out_refusal(out, exists, is_dir, names, session.overwrite)
            if problem is not None:
                fail(problem)
        cores = int(spark.sparkContext.defaultParallelism)
        master = str(spark.sparkContext.master)
        with Progress("campaign", seeds, "seeds", quiet=session.quiet) as shown:

            def show(p: campaign_spark.Progress) -> None:
                shown.update(
                    p.seeds_done,
                    f"{p.ops:,} ops, {p.ops_per_s:,.0f} ops/s, {p.failures} divergent",
                )

            shown.start()
            try:
                job = campaign_spark.run_job(spark, plan, first_seed, seeds, out, partitions, show)
            except Exception as exc:  # py4j or a Python worker's error: its telling line
                fail(f"error: the Spark job failed: {job_failure(exc)}")
        lap("job")
        aggregated = aggregate(spark, master, out)
        lap("aggregate")
    finally:
        if owned:
            spark.stop()
    return campaign_summary.Summary(
        areas=campaign_summary.area_lines(aggregated, plan.areas),
        failures=tuple(aggregated["failures"]),
        impl=plan.impl,
        master=master,
        cores=cores,
        profiles=plan.profiles,
        steps=plan.steps,
        first_seed=first_seed,
        seeds=seeds,
        partitions=job.partitions,
        wall_s=job.wall_s,
        unsupported=unsupported,
        samples=tuple((p.elapsed_s, p.ops) for p in job.samples),
        out=out,
        timings=timings,
    )


def _shrink(
    failures: tuple[campaign_rows.RowJSON, ...], plan: campaign.Plan, folder: Path, limit: int
) -> tuple[campaign_rows.Replay, ...]:
    """Shrink up to `limit` distinct failures on the driver into replayable vector cases."""
    found = []
    for row in campaign_shrink.pick_failures(failures, limit):
        if row["area"] == campaign_rows.SIMULATION:
            found.append(campaign_sim.replay(row))
            continue
        replay = campaign_shrink.shrink(row, plan.impl, plan.steps, folder, plan.timeout)
        if replay is not None:
            found.append(replay)
    return tuple(found)


#: The commands `pullspec` registers from this module.
COMMANDS = [campaign_command]
