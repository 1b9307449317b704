"""`pullspec campaign` on local Spark: a small reference-vs-fast campaign, a mutant campaign whose
minimal vector `pullspec vectors check` reproduces, the Parquet schema read back with pyarrow,
and the clear message when Java is missing.

Every campaign here shares one local[1] session (Spark's start-up is most of the time), so the
commands run in-process and join it instead of starting their own.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pullspec.conformance.campaign import rows as campaign_rows
from pullspec.conformance.campaign import spark as campaign_spark
from pullspec.conformance.cli import main
from pullspec.conformance.cli.campaign import known_areas

SEEDS, STEPS, SIM_STEPS = 3, 20, 200
#: A mutant the process_queue machine kills at once (getMaxSpan counted inclusively).
MUTANT = "pullspec.conformance.mutants.impl:max_span_off_by_one"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local[1] session for every campaign of this module (FAILS clearly without Spark)."""
    problem = campaign_spark.spark_problem() or campaign_spark.java_problem()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    session, owned = campaign_spark.start_session("local[1]", "pullspec-tests")
    yield session
    if owned:
        session.stop()


def _campaign(out: Path, *args: str) -> tuple[int, dict[str, Any]]:
    argv = ["campaign", "--master", "local[1]", "--seeds", str(SEEDS), "--steps", str(STEPS)]
    argv += ["--sim-steps", str(SIM_STEPS)]
    result = CliRunner().invoke(main, [*argv, "--out", str(out), "--json", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture(scope="module")
def fast_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any]]:
    """The reference-vs-fast campaign over every area, run once for the tests that read it."""
    return _campaign(tmp_path_factory.mktemp("fast") / "out", "--impl", "fast")


def test_reference_vs_fast_campaign_passes_with_no_divergence(
    fast_run: tuple[int, dict[str, Any]],
) -> None:
    code, report = fast_run
    summary = report["summary"]
    ran = list(report["areas"])
    assert 0 == code
    assert (0, 0, 0, 0) == (
        summary["divergences"],
        summary["crashed"],
        summary["timeouts"],
        summary["failed"],
    )
    diffed = [a for a in ran if a != campaign_rows.SIMULATION]
    assert "store" in ran
    assert SEEDS * len(ran) == summary["traces"]
    assert SEEDS * len(diffed) * STEPS == summary["ops"]
    assert set(known_areas()) == set(ran) | set(report["unsupported"])
    assert {"PASS": SEEDS} == {k: v for k, v in report["areas"]["store"]["verdicts"].items() if v}
    assert 0 < summary["ops_per_s"]
    assert [] == report["replays"]


def test_campaign_writes_the_report_files(fast_run: tuple[int, dict[str, Any]]) -> None:
    _, report = fast_run
    folder = Path(report["report"])
    expected = {"summary.json", "summary.md", "summary.html", "campaign.svg"}
    assert expected == {p.name for p in folder.iterdir() if p.is_file()}
    assert report["summary"] == json.loads((folder / "summary.json").read_text())["summary"]
    assert (folder / "summary.html").read_text().count("<svg") == 1


def test_parquet_rows_read_back_with_pyarrow_in_the_documented_schema(
    fast_run: tuple[int, dict[str, Any]],
) -> None:
    import pyarrow.dataset as ds

    _, report = fast_run
    table = campaign_rows.read_rows(report["out"])
    assert campaign_rows.schema() == table.schema
    assert report["summary"]["traces"] == table.num_rows
    assert {"PASS"} == set(table.column("verdict").to_pylist())
    store = [r for r in table.to_pylist() if r["area"] == "store"]
    assert list(range(SEEDS)) == sorted(r["seed"] for r in store)
    assert all(STEPS == r["ops"] and "STORE-3" in r["rule_ids"] for r in store)
    # A plain pyarrow read (hive partitioning) sees every documented column.
    plain = ds.dataset(report["out"], format="parquet", partitioning="hive").to_table()
    assert set(campaign_rows.COLUMN_NAMES) == set(plain.schema.names)
    folders = {
        p.relative_to(report["out"]).parts[:2] for p in Path(report["out"]).rglob("*.parquet")
    }
    assert {(f"area={a}", "verdict=PASS") for a in report["areas"]} == folders


def test_mutant_campaign_reports_the_divergence_and_writes_a_replayable_vector(
    spark: Any, tmp_path: Path
) -> None:
    code, report = _campaign(
        tmp_path / "out", "--impl", MUTANT, "--area", "process_queue", "--shrink", "1"
    )
    summary = report["summary"]
    assert 1 == code
    assert SEEDS == summary["divergences"] == summary["failed"]
    assert {"DIVERGED"} == {f["verdict"] for f in report["failures"]}
    assert all(["PQ-6"] == f["divergence_rules"] for f in report["failures"])
    [replay] = report["replays"]
    assert 1 <= replay["steps"] <= min(f["first_divergent_step"] for f in report["failures"])
    argv = shlex.split(replay["command"])
    assert ["pullspec", "vectors", "check"] == argv[:3]
    checked = CliRunner().invoke(main, argv[1:])
    assert 1 == checked.exit_code
    assert checked.stdout.startswith("DIVERGED")
    assert "1 cases: 0 passed, 1 diverged" in checked.stdout


def _pullspec() -> str:
    return str(Path(sys.executable).with_name("pullspec"))


def test_campaign_without_java_says_so_clearly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java on it
    done = subprocess.run(
        [_pullspec(), "campaign", "--impl", "fast", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert 2 == done.returncode
    assert done.stderr.startswith("error: Java 17 is required by PySpark and was not found")
    assert "apt-get install openjdk-17-jre-headless" in done.stderr
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr
    assert "" == done.stdout


def test_a_campaign_replaces_an_earlier_campaigns_output(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ("--impl", "fast", "--area", "process_queue", "--seeds", "1")
    first, _ = _campaign(out, *args)
    again, report = _campaign(out, *args)
    assert (0, 0) == (first, again)
    assert 1 == report["summary"]["traces"]  # the rows of the second run only


def test_overwrite_replaces_a_folder_no_campaign_wrote(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "ideas.md").write_text("replace me\n")
    code, report = _campaign(out, "--impl", "fast", "--area", "process_queue", "--overwrite")
    assert 0 == code
    assert not (out / "ideas.md").exists()
    assert SEEDS == report["summary"]["traces"]
