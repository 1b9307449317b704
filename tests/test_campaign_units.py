"""The campaign's parts that need no Spark: traces and their rows, seed ranges, option parsing,
the Java check, the shipped zip, the report renderers and the documented schema."""

from __future__ import annotations

import gc
import os
import re
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from pullspec.conformance.campaign import report as campaign_report
from pullspec.conformance.campaign import rows as campaign_rows
from pullspec.conformance.campaign import run as campaign
from pullspec.conformance.campaign import shrink as campaign_shrink
from pullspec.conformance.campaign import spark as campaign_spark
from pullspec.conformance.campaign import summary as campaign_summary
from pullspec.conformance.campaign import svg as campaign_svg
from pullspec.conformance.campaign.rows import RowJSON
from pullspec.conformance.cli.campaign import (
    known_areas,
    local_path,
    parse_areas,
    parse_profiles,
    resolve_report_dir,
)
from pullspec.conformance.ops import MACHINE_AREAS, rule_sort_key
from pullspec.spec.profiles import Profile

MUTANT = "pullspec.conformance.mutants.impl:max_span_off_by_one"
DOC = Path(__file__).resolve().parents[1] / "docs" / "using" / "campaigns.md"


def _row(impl: str, area: str, seed: int, steps: int = 30) -> dict[str, Any]:
    reference, candidate = campaign.candidates_for(impl, 10.0)
    row = campaign.run_trace(reference, candidate, impl, area, seed, Profile.V4_9, steps)
    return dict(zip(campaign_rows.COLUMN_NAMES, row, strict=True))


def test_a_trace_is_the_same_every_time_but_for_its_elapsed_time() -> None:
    first, second = _row("fast", "store", 11), _row("fast", "store", 11)
    timeless = {"elapsed_s": 0, "cpu_s": 0}
    assert first | timeless == second | timeless
    assert ("PASS", 30, None) == (first["verdict"], first["ops"], first["first_divergent_step"])


def test_reference_against_itself_passes_every_area() -> None:
    rows = [_row("reference", area, 3) for area in MACHINE_AREAS]
    assert [("PASS", 30)] * len(rows) == [(r["verdict"], r["ops"]) for r in rows]
    assert all(r["rule_ids"] for r in rows)


def test_statuses_hit_name_store_statuses_codes_and_error_kinds() -> None:
    statuses = {
        s for seed in range(4) for s in _row("reference", "pull_code", seed)["statuses_hit"]
    }
    assert {"PUT_OK", "FOUND", "PULL_NOT_FOUND"} <= statuses
    errors = {
        s for seed in range(6) for s in _row("reference", "process_queue", seed)["statuses_hit"]
    }
    assert "error:NO_SUCH_ELEMENT" in errors


def test_the_campaign_row_agrees_with_the_lockstep_machine_on_a_mutant() -> None:
    row = _row(MUTANT, "process_queue", 5)
    reference, candidate = campaign.candidates_for(MUTANT, 10.0)
    report = campaign_shrink.trace_report(
        reference, candidate, MUTANT, "process_queue", 5, Profile.V4_9, 30
    )
    assert ("DIVERGED", "STATE", ["PQ-6"]) == (
        row["verdict"],
        row["divergence_kind"],
        row["divergence_rules"],
    )
    assert (report.verdict.value, len(report.steps)) == (
        row["verdict"],
        row["first_divergent_step"],
    )
    assert report.divergence is not None and report.divergence.field == row["divergent_field"]
    assert row["ops"] == row["first_divergent_step"]


def test_same_tells_true_from_one() -> None:
    assert campaign._same({"a": [1, {"b": "x"}]}, {"a": [1, {"b": "x"}]})
    assert not campaign._same({"a": True}, {"a": 1})
    assert not campaign._same({"a": 1}, {"a": 2})


def test_run_seeds_uses_and_removes_its_scratch_folder(tmp_path: Path) -> None:
    before = tempfile.tempdir
    plan = campaign.Plan("fast", ("store",), steps=5, scratch=str(tmp_path))
    rows = list(campaign.run_seeds(plan, [1, 2]))
    assert [1, 2] == [r[0] for r in rows]
    assert (before, []) == (tempfile.tempdir, list(tmp_path.iterdir()))


def test_pick_failures_takes_distinct_failures_first() -> None:
    def row(seed: int, verdict: str, step: int | None, field: str | None) -> RowJSON:
        kind, op = ("RESULT", "get_message") if step is not None else (None, None)
        failed = (kind, step, op, field)
        return campaign_rows.as_json(
            (seed, "store", "4.9", "fast", 9, verdict, *failed, [], [], [], None, 0.0, 0.0)
        )

    rows = [
        *(row(1, "DIVERGED", 5, "a"), row(2, "DIVERGED", 3, "a"), row(3, "DIVERGED", 9, "b")),
        row(4, "PASS", None, None),
    ]
    assert [2, 3] == [r["seed"] for r in campaign_shrink.pick_failures(rows, 2)]
    assert [2, 3, 1] == [r["seed"] for r in campaign_shrink.pick_failures(rows, 5)]


def test_seed_ranges_cover_every_seed_once() -> None:
    ranges = campaign_spark.seed_ranges(10, 103, 8)
    assert list(range(10, 113)) == [s for a, b in ranges for s in range(a, b)]
    assert 8 == len(ranges) and {12, 13} == {b - a for a, b in ranges}
    assert [(0, 1), (1, 2)] == campaign_spark.seed_ranges(0, 2, 5)


def test_partitions_per_core_and_per_seed() -> None:
    cases = ((1, 4, 0.1), (8, 2, 0.1), (100, 2, 0.1), (1024, 2, 0.1), (100, 2, 1.0), (9, 1, 9.0))
    assert (1, 4, 4, 22, 20, 9) == tuple(campaign_spark.partitions_for(*c) for c in cases)
    # Whole rounds over the cores: 10 tasks' worth on 4 cores is cut into 12.
    assert 12 == campaign_spark.partitions_for(1000, 4, 0.05)


def _probe_row(seed: int, area: str, ops: int, took: float) -> campaign_rows.Row:
    """A row of a probe trace that ran `ops` ops in `took` seconds (3 ops: it diverged)."""
    verdict = "DIVERGED" if ops == 3 else "PASS"
    return (seed, area, "4.7", "fast", ops, verdict, *(None,) * 4, [], [], [], None, took, took)


def test_seed_seconds_scales_each_areas_cheapest_probe_trace() -> None:
    plan = campaign.Plan(
        "fast",
        ("store", "process_queue", "pull_loop", campaign_rows.SIMULATION),
        ("4.7", "4.9"),
        steps=200,
        sim_steps=2000,
    )
    # (area, ops, elapsed seconds) of the probe's three seeds, 5 to 7.
    probed = {
        5: (("store", 100, 0.7), ("process_queue", 0, 0.001), ("pull_loop", 3, 0.05)),
        6: (("store", 100, 0.01), ("process_queue", 0, 0.001), ("pull_loop", 100, 0.4)),
        7: (("store", 100, 0.02), ("process_queue", 0, 0.001), ("pull_loop", 100, 0.5)),
    }
    sims = {5: 0.1, 6: 0.3, 7: 0.2}
    asked: list[tuple[campaign.Plan, list[int]]] = []

    def rows_of(probe: campaign.Plan, seeds: Any) -> list[campaign_rows.Row]:
        asked.append((probe, list(seeds)))
        return [
            _probe_row(seed, area, ops, took)
            for seed in asked[-1][1]
            for area, ops, took in (*probed[seed], (campaign_rows.SIMULATION, 7, sims[seed]))
        ]

    # Per area, the cheapest seed: the store at 200/100 of 0.01 s; the process queue ran no op
    # (18,000 ops/s assumed); the pull loop stopped at op 3 (taken as it is, 0.05 s); the
    # simulation at 2000/100 of 0.1 s. Both profiles.
    expected = 2 * (0.02 + 200 / 18000 + 0.05 + 2.0)
    assert expected == pytest.approx(campaign_spark.seed_seconds(plan, 5, rows_of))
    ((probe, seeds),) = asked
    assert (("4.7",), 100, 100, [5, 6, 7]) == (probe.profiles, probe.steps, probe.sim_steps, seeds)
    assert plan.areas == probe.areas


def test_seed_seconds_falls_back_to_fixed_rates_when_the_probe_fails() -> None:
    plan = campaign.Plan(
        "fast",
        ("store", campaign_rows.SIMULATION),
        ("4.9",),
        steps=300,
        scratch="/no/such/folder",
        sim_steps=3000,
    )
    asked: list[campaign.Plan] = []

    def failing(probe: campaign.Plan, seeds: Any) -> list[campaign_rows.Row]:
        asked.append(probe)
        raise OSError("the candidate's program is not on this machine")

    # 300 steps at 18,000 ops/s and 3,000 simulator steps at 1,500 a second.
    assert 300 / 18000 + 2.0 == pytest.approx(campaign_spark.seed_seconds(plan, 0, failing))
    # A scratch folder only the executors have is not used by the driver's probe.
    assert [None] == [probe.scratch for probe in asked]


def test_seed_seconds_times_real_traces() -> None:
    plan = campaign.Plan("reference", ("process_queue",), ("4.9",), steps=80)
    ran: list[campaign_rows.Row] = []

    def traced(probe: campaign.Plan, seeds: Any) -> list[campaign_rows.Row]:
        ran.extend(campaign.run_seeds(probe, seeds))
        return ran

    estimate = campaign_spark.seed_seconds(plan, 0, traced)
    # Three whole traces of the reference against itself, the plan's 80 steps each: the
    # estimate is the quickest one's time, measured, not the fixed rate.
    assert [(s, 80, "PASS") for s in (0, 1, 2)] == [(r[0], r[4], r[5]) for r in ran]
    assert min(r[14] for r in ran) == pytest.approx(estimate)


def test_areas_profiles_and_report_folders() -> None:
    assert known_areas() == parse_areas(()) == parse_areas(("all",))
    assert ("store", "send_back") == parse_areas(("store,send_back", "store"))
    assert ("4.7", "4.9") == parse_profiles(("all",)) == parse_profiles(("4.9", "4.7"))
    assert ("4.9",) == parse_profiles(())
    assert Path("o/_report") == resolve_report_dir("o", None)
    assert Path("r") == resolve_report_dir("hdfs:///x", "r")
    assert Path("pullspec-campaign-report") == resolve_report_dir("s3a://b/x", None)
    assert (Path("/d"), None, None) == (
        local_path("local[2]", "file:///d"),
        local_path("spark://h:7077", "/d"),
        local_path("local[*]", "hdfs:///d"),
    )


def _fake_java(folder: Path, version: str) -> None:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2024-01-16' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize(
    ("version", "expected"),
    [("17.0.15", None), ("21", None), ("11.0.2", "Java 11"), ("1.8.0_392", "Java 8")],
)
def test_java_check_reads_the_version(
    version: str, expected: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_java(tmp_path, version)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    problem = campaign_spark.java_problem()
    found = re.search(r"Java \d+", problem or "")
    assert expected == (found.group(0) if found else None)


def test_java_check_names_a_missing_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert (
        "error: Java 17 is required by PySpark and was not found (PATH).\n"
        "       install it with: apt-get install openjdk-17-jre-headless"
    ) == campaign_spark.java_problem()


def test_the_shipped_zip_holds_the_four_packages(tmp_path: Path) -> None:
    with zipfile.ZipFile(campaign_spark.package_zip(tmp_path)) as archive:
        names = archive.namelist()
    # pullspec/__init__.py: zipimport finds no namespace package, so the zip makes it regular.
    assert {"spec", "reference", "fast", "conformance", "__init__.py"} == {
        n.split("/")[1] for n in names
    }
    assert {"pullspec"} == {n.split("/")[0] for n in names}
    assert "pullspec/conformance/campaign/run.py" in names
    assert [] == [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def _summary(**fields: Any) -> campaign_summary.Summary:
    line = campaign_summary.AreaLine(
        "store", 4, 800, 0.6, 0.5, {"PASS": 3, "DIVERGED": 1}, {"STORE-3": 4}, {"FOUND": 2}
    )
    base: dict[str, Any] = {
        "impl": "fast",
        "master": "local[2]",
        "cores": 2,
        "profiles": ("4.9",),
        "steps": 200,
        "first_seed": 0,
        "seeds": 4,
        "partitions": 2,
        "wall_s": 2.0,
        "areas": (line,),
        "unsupported": {"lock_manager": "candidate: no lock_manager"},
        "samples": ((1.0, 300), (2.0, 800)),
    }
    return campaign_summary.Summary(**(base | fields))


def test_summary_figures_and_json() -> None:
    s = _summary()
    summary = s.to_json()["summary"]
    assert (800, 400.0, 24000, 1, 1, 1600.0) == (
        summary["ops"],
        summary["ops_per_s"],
        summary["ops_per_min"],
        summary["divergences"],
        summary["failed"],
        summary["ops_per_core_s"],
    )
    assert ["STORE-3"] == s.to_json()["areas"]["store"]["rules_hit"]


def test_text_widens_the_area_column_for_a_long_area_name() -> None:
    unsupported = {"lock_manager": "no factory", "consume_concurrently": "no driver"}
    lines = campaign_report.text(_summary(unsupported=unsupported)).splitlines()
    # 21 columns for the area (20 letters and a blank), then traces in 8 and ops in 11.
    expected = [
        "store" + " " * 16 + " " * 7 + "4" + " " * 8 + "800",
        "lock_manager         UNSUPPORTED: no factory",
        "consume_concurrently UNSUPPORTED: no driver",
    ]
    assert expected == [
        line[:40] if line.startswith("store") else line
        for line in lines
        if line.startswith(("store", "lock_manager", "consume_concurrently"))
    ]


def test_text_markdown_html_and_svg_render(tmp_path: Path) -> None:
    s = _summary()
    text = campaign_report.text(s)
    assert "800 diffed ops in 2.0 s: 400 ops/s (0.02 M ops/min); 1 failing trace" in text
    assert "lock_manager  UNSUPPORTED: candidate: no lock_manager" in text
    table = [line for line in campaign_report.markdown(s).splitlines() if line.startswith("|")]
    assert [10] * len(table) == [line.count("|") - 1 for line in table]
    written = campaign_report.write(s, tmp_path)
    svg = ElementTree.parse(written["svg"]).getroot()
    assert "{http://www.w3.org/2000/svg}svg" == svg.tag
    assert 1 == Path(written["html"]).read_text().count("<svg")
    assert 1 / 4 == campaign_svg.coverage(s)["STORE-3"] / 4


def test_the_report_counts_the_seeds_that_reached_each_targeted_rule() -> None:
    sim = campaign_summary.AreaLine(
        campaign_rows.SIMULATION, 4, 9000, 8.0, 7.0, {"PASS": 4}, {"FLOW-8": 3, "PQ-18": 1}, {}
    )
    s = _summary(areas=(sim,))
    reached = "simulation targets reached: FLOW-8 3/4, PQ-18 1/4, PQ-16 0/4, RESULT-10 0/4"
    assert reached in campaign_report.text(s)
    assert reached in campaign_report.markdown(s)
    area = s.to_json()["areas"]["simulation"]
    assert {"FLOW-8": 3, "PQ-18": 1, "PQ-16": 0, "RESULT-10": 0} == area["targets"]
    assert (["FLOW-8", "PQ-18"], 41) == (area["rules_hit"], area["rules_in_scope"])


def test_progress_line() -> None:
    p = campaign_spark.Progress(5, 20, 12_000, 1, 4.0)
    assert "campaign: 5/20 seeds (25%), 12,000 ops, 3,000 ops/s, 1 divergent, 4 s" == p.line()


class _Counter:
    """A stand-in for a Spark accumulator."""

    def __init__(self) -> None:
        self.value = 0

    def add(self, n: int) -> None:
        self.value += n


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The calls a task makes to gc.collect and gc.freeze, in order; the test process itself
    is never frozen."""
    calls: list[str] = []

    def collect() -> int:
        calls.append("collect")
        return 0

    monkeypatch.setattr(gc, "collect", collect)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    campaign._freeze_once.cache_clear()
    return calls


def test_task_counts_seeds_ops_and_failures(frozen: list[str]) -> None:
    counters = (_Counter(), _Counter(), _Counter())
    plan = campaign.Plan(MUTANT, ("process_queue",), steps=10)
    rows = list(campaign_spark._task(plan, counters, [(0, 2), (2, 3)]))
    failed = sum(r[5] in campaign_rows.FAILING for r in rows)
    assert (3, sum(r[4] for r in rows), failed) == tuple(c.value for c in counters)
    assert 0 < failed


def test_a_task_freezes_its_warm_worker_once(frozen: list[str]) -> None:
    plan = campaign.Plan("fast", ("process_queue",), steps=3)
    counters = (_Counter(), _Counter(), _Counter())
    assert 2 == len(list(campaign_spark._task(plan, counters, [(0, 1), (1, 2)])))
    # Once in the process, though the task ran two ranges; the warm-up's garbage goes first.
    assert ["collect", "freeze"] == frozen
    list(campaign_spark._task(plan, counters, [(2, 3)]))
    assert ["collect", "freeze"] == frozen
    campaign._freeze_once.cache_clear()
    list(campaign.run_seeds(plan, [3]))  # outside a task the process is the caller's
    assert ["collect", "freeze"] == frozen


def test_the_documented_schema_is_the_campaign_schema() -> None:
    table = re.findall(r"^\| `(\w+)` \| `([A-Z<>]+)` \|", DOC.read_text(encoding="utf-8"), re.M)
    assert [(name, kind) for name, kind, _ in campaign_rows.COLUMNS] == table
    # A row read back by name (campaign_rows.as_json) has the columns as its typed keys.
    assert list(campaign_rows.COLUMN_NAMES) == list(RowJSON.__annotations__)


def test_default_scratch_is_shared_memory_when_writable() -> None:
    shm = Path("/dev/shm")
    writable = shm.is_dir() and os.access(shm, os.W_OK)
    assert (str(shm) if writable else None) == campaign_spark.default_scratch()


def test_simulation_rows_diff_the_candidates_parts_in_the_simulator() -> None:
    from pullspec.conformance.campaign import sim as campaign_sim

    plan = campaign.Plan("fast", (campaign_rows.SIMULATION,), sim_steps=300)
    [row] = [campaign_rows.as_json(r) for r in campaign.run_seeds(plan, [2])]
    assert (2, "simulation", "fast", "PASS", None) == (
        row["seed"],
        row["area"],
        row["impl"],
        row["verdict"],
        row["detail"],
    )
    assert 300 < row["ops"]  # events compared: more than one per step
    # The rules its history reached (reference.sim.coverage), in catalogue order.
    assert {"PULLQ-9", "RESULT-5", "REBAL-10"} <= set(row["rule_ids"])
    assert sorted(row["rule_ids"], key=rule_sort_key) == row["rule_ids"]
    assert campaign_sim.available() and campaign_rows.SIMULATION in known_areas()
    assert {} == campaign.unsupported_areas(plan)
    lock_only = campaign.Plan(
        "pullspec.conformance.mutants.impl:lease_inclusive", (campaign_rows.SIMULATION,)
    )
    assert {"simulation"} == set(campaign.unsupported_areas(lock_only))


def test_a_simulation_divergence_names_the_event_and_its_replay_command() -> None:
    from pullspec.conformance.campaign import sim as campaign_sim

    mutant = "pullspec.conformance.mutants.impl:remove_emptied_returns_offset_max"
    plan = campaign.Plan(mutant, (campaign_rows.SIMULATION,), sim_steps=500)
    [row] = [campaign_rows.as_json(r) for r in campaign.run_seeds(plan, [1])]
    assert ("DIVERGED", row["ops"], f"history[{row['ops'] - 1}]") == (
        row["verdict"],
        row["first_divergent_step"],
        row["divergent_field"],
    )
    assert (row["detail"] or "").startswith(
        "python -m pullspec.conformance.machines.simulation --impl "
    )
    replay = campaign_sim.replay(row)
    assert (row["detail"], tuple(row["divergence_rules"])) == (replay.command, replay.rules)


def test_every_profile_gets_its_own_trace() -> None:
    plan = campaign.Plan("reference", ("lock_manager",), ("4.7", "4.9"), steps=10)
    rows = [(r[0], r[2], r[5]) for r in campaign.run_seeds(plan, [1, 2])]
    assert [(1, "4.7", "PASS"), (1, "4.9", "PASS"), (2, "4.7", "PASS"), (2, "4.9", "PASS")] == rows
    keys = {campaign_rows.trace_key("lock_manager", 1, p) for p in (Profile.V4_7, Profile.V4_9)}
    assert 2 == len(keys)
