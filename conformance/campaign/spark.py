"""Running a campaign on Spark: the environment checks, the session, shipping the packages to
executors, the job itself with its progress line, and the aggregates read back from Parquet.

The job is `sc.parallelize(seed ranges).mapPartitions(run_seeds)` turned into a DataFrame and
written as Parquet partitioned by area and verdict; it runs in a background thread while the
driver polls the accumulators the tasks add to when they finish (seeds, ops, failures) and
prints a progress line. The summary is then computed by Spark from the Parquet just written, so
that it is exact (accumulators may count a retried task twice) and never needs every row on the
driver.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

import attrs

from pullspec.conformance.campaign.rows import (
    COLUMNS,
    FAILING,
    PARTITION_COLUMNS,
    SIMULATION,
    Aggregates,
    Group,
    Row,
    RowJSON,
    as_json,
)
from pullspec.conformance.campaign.run import Plan, run_seeds

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

#: The packages a campaign task imports, zipped for executors that do not have them installed.
PACKAGES: tuple[str, ...] = (
    "pullspec.spec",
    "pullspec.reference",
    "pullspec.fast",
    "pullspec.conformance",
)
JAVA_HINT = "install it with: apt-get install openjdk-17-jre-headless"
#: The master a campaign uses unless told otherwise (or started by spark-submit).
DEFAULT_MASTER = "local[*]"
SPARK_HINT = "install the spark extra: pip install -e '.[spark]' (pyspark and pyarrow)"
#: Spark SQL DDL of a campaign row.
SPARK_DDL = ", ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
#: Seconds of work a task gets by default: long enough to hide Spark's per-task cost, short
#: enough for a live progress line (a task's counts reach the driver only when it ends).
TASK_SECONDS = 5.0
#: Tasks per core at least, so that a slow task does not leave cores idle at the end. Not more:
#: a local task costs about 0.1 s of CPU besides its traces (Python worker and JVM), a tenth of a
#: one-second task, and on a 2-core machine the JVM's share is taken from the traces' cores.
MIN_TASKS_PER_CORE = 2
#: The single-core rates `seed_seconds` assumes where its probe measured nothing (an area whose
#: probe ran no op, or a probe that failed). Measured rates differ by area up to twentyfold
#: (docs/using/campaigns.md): a process-queue op of `fast` takes about 45 µs, a client pull
#: loop's, the reference on both sides, about 700; the simulator about 650 µs a step.
LOCKSTEP_OPS_PER_S = 18000.0
SIM_STEPS_PER_S = 1500.0
#: The probe's ops per area, simulator steps and seeds. Each area's cheapest seed counts: the
#: first store trace in a fresh process took 740 ms for 100 ops, the next ones 13-18 ms.
PROBE_STEPS = 100
PROBE_SIM_STEPS = 100
PROBE_SEEDS = 3


def spark_schema() -> StructType:
    """The StructType of a campaign row, built in Python (parsing SPARK_DDL would be a JVM
    round trip that loads the SQL parser on a fresh session)."""
    from pyspark.sql import types as st

    simple = {
        "BIGINT": st.LongType(),
        "INT": st.IntegerType(),
        "STRING": st.StringType(),
        "DOUBLE": st.DoubleType(),
        "ARRAY<STRING>": st.ArrayType(st.StringType()),
    }
    return st.StructType([st.StructField(name, simple[kind]) for name, kind, _ in COLUMNS])


def java_problem() -> str | None:
    """Why PySpark cannot start a JVM here (no Java, or older than 17), else None.

    PySpark runs $JAVA_HOME/bin/java when JAVA_HOME is set, else `java` on PATH; checked
    before starting Spark so that a missing Java is one clear line, not a Java stack trace."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if java is None or not Path(java).exists():
        where = f"JAVA_HOME={home}" if home else "PATH"
        return f"error: Java 17 is required by PySpark and was not found ({where}).\n       {JAVA_HINT}"
    try:
        shown = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: could not run {java} -version: {exc}\n       {JAVA_HINT}"
    found = re.search(r'version "(\d+)(?:\.(\d+))?', shown.stderr + shown.stdout)
    if found is None:
        return f"error: {java} -version did not print a Java version.\n       {JAVA_HINT}"
    major = int(found.group(1))
    if major == 1 and found.group(2):  # "1.8.0_392" is Java 8
        major = int(found.group(2))
    if major < 17:
        return f"error: Java {major} found at {java}; PySpark needs Java 17.\n       {JAVA_HINT}"
    return None


def spark_problem() -> str | None:
    """Why the Spark extra is unusable (pyspark or pyarrow missing), else None."""
    for module in ("pyspark", "pyarrow"):
        if find_spec(module) is None:
            return f"error: pullspec campaign needs {module}; {SPARK_HINT}"
    return None


def is_local(master: str) -> bool:
    """True for `local`, `local[N]`, `local[*]`: executors share the driver's Python."""
    return master == "local" or master.startswith("local[")


def package_zip(directory: Path) -> Path:
    """A zip of the installed PACKAGES (sources only), for `SparkContext.addPyFile`.

    The zip holds `pullspec/__init__.py` besides the four packages: Python's zip importer does
    not find namespace packages, so inside the zip `pullspec` is a regular package (an executor
    then imports every module of it from the zip, the driver's exact sources)."""
    path = directory / "pullspec-packages.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pullspec/__init__.py", '"""pullspec, shipped to Spark executors."""\n')
        for name in PACKAGES:
            spec = find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                raise RuntimeError(f"package {name} is not importable")
            root = Path(next(iter(spec.submodule_search_locations)))
            for file in sorted(root.rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts and file.suffix != ".pyc":
                    archive.write(file, Path(*name.split(".")) / file.relative_to(root))
    return path


def start_session(
    master: str | None,
    app: str = "pullspec-campaign",
    *,
    python: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> tuple[SparkSession, bool]:
    """(SparkSession, owned): the active session if there is one (owned False: the caller must
    not stop it), else a new one (owned True) on `master` — or, when None, on the master
    spark-submit configured, else local[*] — with the extra Spark settings `conf`.

    Executors run `python` (default: $PYSPARK_PYTHON when set, else this interpreter), and
    executors of a non-local master get the packages as a zip (`addPyFile`); see "Running on a
    cluster" in docs/using/campaigns.md."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM first
    if master is None and not submitted:
        master = DEFAULT_MASTER
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    settings = {"spark.ui.showConsoleProgress": "false", "spark.log.level": "ERROR"}
    if master is not None and is_local(master):
        settings |= {"spark.ui.enabled": "false"}
    # PySpark starts its Python workers, local and on executors alike, with the $PYSPARK_PYTHON
    # the driver saw when the context was made (spark.pyspark.python is honoured only by
    # spark-submit); unset, it runs `python3` from the worker's PATH, which need not be this
    # environment. This interpreter is right for local masters and for workers on this machine
    # (or with this environment at the same path); elsewhere --python names the executors' one.
    if python is not None:
        os.environ["PYSPARK_PYTHON"] = python
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not is_local(str(spark.sparkContext.master)):
        shipped = Path(tempfile.mkdtemp(prefix="pullspec-ship-"))
        atexit.register(shutil.rmtree, shipped, True)
        spark.sparkContext.addPyFile(str(package_zip(shipped)))
    return spark, True


def list_folder(spark: SparkSession, path: str) -> tuple[bool, bool, list[str]]:
    """(exists, is a folder, the names in it) of `path` on the storage Spark writes to (HDFS,
    S3, ...), asked through Hadoop's FileSystem API."""
    jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()
    if jvm is None:  # only a stopped context has none
        raise RuntimeError("the Spark context is stopped")
    target = jvm.org.apache.hadoop.fs.Path(path)
    fs = target.getFileSystem(conf)
    if not fs.exists(target):
        return False, False, []
    if not fs.getFileStatus(target).isDirectory():
        return True, False, []
    return True, True, [str(s.getPath().getName()) for s in fs.listStatus(target)]


def default_scratch() -> str | None:
    """/dev/shm when it is a writable directory (the fast store's files then live in memory),
    else None (the system's temporary directory)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def seed_seconds(
    plan: Plan,
    seed: int,
    rows_of: Callable[[Plan, Iterable[int]], Iterable[Row]] = run_seeds,
) -> float:
    """Single-core seconds of one seed of `plan`, timed in this process on short traces of each
    area (PROBE_SEEDS seeds from `seed`, PROBE_STEPS ops, the first profile) and scaled to the
    plan's steps and profiles. A probe that stopped early (a divergence, a crash) is taken as
    it is: the campaign's traces of that candidate will likely stop early too. An area the
    probe measured nothing of is estimated at LOCKSTEP_OPS_PER_S (SIM_STEPS_PER_S). `rows_of`
    runs the traces (`run_seeds`).

    Example: a store op of 85 µs and 200 steps make the store's part of a seed 0.017 s."""
    # The scratch folder may exist only on the executors (a cluster's local disks).
    scratch = plan.scratch if plan.scratch is None or os.path.isdir(plan.scratch) else None
    probe = attrs.evolve(
        plan,
        profiles=plan.profiles[:1],
        steps=min(plan.steps, PROBE_STEPS),
        sim_steps=min(plan.sim_steps, PROBE_SIM_STEPS),
        scratch=scratch,
    )
    assumed = {
        area: plan.sim_steps / SIM_STEPS_PER_S
        if area == SIMULATION
        else plan.steps / LOCKSTEP_OPS_PER_S
        for area in plan.areas
    }
    measured: dict[str, float] = {}
    try:
        rows = [as_json(row) for row in rows_of(probe, range(seed, seed + PROBE_SEEDS))]
    except Exception:  # the probe only sizes the tasks: the job itself reports what fails
        rows = []
    for row in rows:
        area, ops, elapsed = row["area"], row["ops"], row["elapsed_s"]
        if area == SIMULATION:
            seconds = elapsed * plan.sim_steps / max(probe.sim_steps, 1)
        elif ops == 0:
            continue
        elif ops < probe.steps:
            seconds = elapsed
        else:
            seconds = elapsed * plan.steps / ops
        measured[area] = min(seconds, measured.get(area, seconds))
    return len(plan.profiles) * sum({**assumed, **measured}.values())


def partitions_for(seeds: int, parallelism: int, seconds_per_seed: float) -> int:
    """Tasks for `seeds`: about TASK_SECONDS of work each, at least MIN_TASKS_PER_CORE per core,
    a whole number of rounds over the cores, at most one per seed."""
    per_task = max(1, round(TASK_SECONDS / max(seconds_per_seed, 1e-6)))
    wanted = max(MIN_TASKS_PER_CORE * parallelism, math.ceil(seeds / per_task))
    # Equal tasks in whole rounds: 7 tasks on 2 cores would leave one core idle for the last.
    wanted = math.ceil(wanted / max(parallelism, 1)) * max(parallelism, 1)
    return max(1, min(seeds, wanted))


def seed_ranges(first: int, count: int, parts: int) -> list[tuple[int, int]]:
    """`count` seeds from `first` cut into `parts` contiguous, near-equal [start, stop) ranges."""
    bounds = [first + count * i // parts for i in range(parts + 1)]
    return [(a, b) for a, b in itertools.pairwise(bounds) if a < b]


@attrs.frozen
class Progress:
    """What the driver knows while the job runs (finished tasks only)."""

    seeds_done: int
    seeds: int
    ops: int
    failures: int
    elapsed_s: float

    @property
    def ops_per_s(self) -> float:
        """Diffed ops per second of wall time so far."""
        return self.ops / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def line(self) -> str:
        """The progress line printed on stderr."""
        pct = 100 * self.seeds_done // max(self.seeds, 1)
        return (
            f"campaign: {self.seeds_done}/{self.seeds} seeds ({pct}%), {self.ops:,} ops, "
            f"{self.ops_per_s:,.0f} ops/s, {self.failures} divergent, {self.elapsed_s:.0f} s"
        )


class Adder(Protocol):
    """What a task adds its counts to: a Spark accumulator (`sc.accumulator(0)`)."""

    def add(self, term: int) -> None:
        """Add `term`."""
        ...


def _task(
    plan: Plan,
    counters: tuple[Adder, Adder, Adder],
    ranges: Iterable[tuple[int, int]],
) -> Iterator[Row]:
    """One Spark task: the rows of its seed ranges; it adds seeds, diffed ops (not simulator
    steps) and failures to the accumulators (Spark sends them to the driver when the task
    ends)."""
    seeds_acc, ops_acc, fail_acc = counters
    for start, stop in ranges:
        ops = fails = 0
        for row in run_seeds(plan, range(start, stop), freeze=True):
            ops += row[4] if row[1] != SIMULATION else 0
            fails += row[5] in FAILING
            yield row
        seeds_acc.add(stop - start)
        ops_acc.add(ops)
        fail_acc.add(fails)


@attrs.frozen
class JobResult:
    """What the job did: its wall time, the tasks it ran and the progress samples it printed."""

    wall_s: float
    partitions: int
    samples: tuple[Progress, ...]


def run_job(
    spark: SparkSession,
    plan: Plan,
    first_seed: int,
    seeds: int,
    out: str,
    partitions: int | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    interval: float = 2.0,
) -> JobResult:
    """Run `seeds` seeds of `plan` and write their rows as Parquet in `out` (replacing it)."""
    sc = spark.sparkContext
    # The probe runs only when no task count is given: the bench's jobs give theirs.
    parts = partitions or partitions_for(
        seeds, sc.defaultParallelism, seed_seconds(plan, first_seed)
    )
    ranges = seed_ranges(first_seed, seeds, parts)
    counters = (sc.accumulator(0), sc.accumulator(0), sc.accumulator(0))
    rows = sc.parallelize(ranges, len(ranges)).mapPartitions(
        functools.partial(_task, plan, counters)
    )
    frame = spark.createDataFrame(rows, schema=spark_schema(), verifySchema=False)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            # Rows are small: one shuffle gathers each (area, verdict) into one file, instead of
            # a file per task and folder (which would be many tiny files on a cluster).
            rows_by_folder = frame.repartition(len(plan.areas), *PARTITION_COLUMNS)
            rows_by_folder.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(out)
        except BaseException as exc:  # re-raised on the driver's thread below
            failure.append(exc)

    samples: list[Progress] = []
    started = time.perf_counter()
    worker = threading.Thread(target=write, name="pullspec-campaign-job", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            # Bounded polling: wakes as soon as the job ends, else every `interval` seconds.
            worker.join(timeout=interval)
            seen = Progress(
                counters[0].value,
                seeds,
                counters[1].value,
                counters[2].value,
                time.perf_counter() - started,
            )
            samples.append(seen)
            if on_progress is not None and worker.is_alive():
                on_progress(seen)
    except KeyboardInterrupt:
        sc.cancelAllJobs()
        worker.join(timeout=30)
        raise
    if failure:
        raise failure[0]
    return JobResult(time.perf_counter() - started, len(ranges), tuple(samples))


def aggregates(spark: SparkSession, out: str, max_failures: int = 200) -> Aggregates:
    """Counts from the Parquet in `out`: per (area, profile, verdict) traces, ops and seconds;
    per area, traces per rule ID and per status; the failing rows (at most `max_failures`, earliest
    divergence first)."""
    from pyspark.sql import functions as sf

    rows = spark.read.parquet(out)
    groups = (
        rows.groupBy("area", "profile", "verdict")
        .agg(
            sf.count("*").alias("traces"),
            sf.sum("ops").alias("ops"),
            sf.sum("elapsed_s").alias("elapsed_s"),
            sf.sum("cpu_s").alias("cpu_s"),
        )
        .collect()
    )

    def exploded(column: str) -> dict[str, dict[str, int]]:
        counted = (
            rows.select("area", sf.explode(column).alias("k"))
            .groupBy("area", "k")
            .count()
            .collect()
        )
        out: dict[str, dict[str, int]] = {}
        for r in counted:
            out.setdefault(str(r["area"]), {})[str(r["k"])] = int(r["count"])
        return out

    failing = (
        rows.where(sf.col("verdict").isin(*sorted(FAILING)))
        .orderBy("first_divergent_step", "area", "seed")
        .limit(max_failures)
        .collect()
    )
    # Row.asDict answers dict[str, Any]: the rows have the Group and COLUMNS shapes.
    return {
        "groups": [cast(Group, r.asDict()) for r in groups],
        "rules": exploded("rule_ids"),
        "statuses": exploded("statuses_hit"),
        "failures": [cast(RowJSON, r.asDict(recursive=True)) for r in failing],
    }
