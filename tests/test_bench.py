"""`pullspec bench --json` keeps its figures' names: the ones issue 19 asks for are there (their
values are timings of a tiny run and are not checked)."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from unittest import mock

import attrs
import pytest
from click.testing import CliRunner

from pullspec.conformance import bench, bench_memory
from pullspec.conformance.cli import main
from pullspec.conformance.cpu_affinity import allowed_cpus

TINY = bench.Sizes(
    w1=2_000,
    w2_queues=64,
    w2_per_queue=20,
    reference=640,
    passes=1,
    file_size=1 << 20,
    sim_steps=100,
)

#: Names scripts and docs read, stable from one run to the next.
NAMES = {
    "w1_put_single_msgs_per_s",
    "w1_put_single_us_per_msg",
    "w1_put_msgs_per_s",
    "w1_put_batch_msgs_per_s",
    "w1_all_us_per_call",
    "w1_tag3_us_per_call",
    "w2_all_batched_msgs_per_s",
    "append_fraction_of_raw_write",
    "w1_reopen_clean_s",
    "w1_reopen_abort_s",
    "w1_reopen_cq_rebuild_s",
    "w1_pulled_peak_rss_mb",
    "w1_pulled_peak_anon_mb",
    "w1_pulled_anon_growth_mb",
    "sim_peak_rss_mb",
    "sim_peak_anon_mb",
    "sim_anon_growth_mb",
    "sim_steps",
    "sim_seconds",
    "peer_java_w1_put_msgs_per_s",
    "w1_put_single_vs_java",
    "w1_all_per_call_vs_java",
    "w1_tag3_per_call_vs_java",
    "w1_tag3_entries_vs_java",
    "w2_all_batched_msgs_vs_java",
    "w2_tag3_batched_msgs_vs_java",
    "w2_tag3_per_call_vs_java",
    "w1_reopen_clean_vs_java",
    "w1_reopen_abort_vs_java",
    "cq_rebuild_vs_java",
}


@pytest.mark.slow
def test_bench_json_has_the_issue_figures() -> None:
    with mock.patch.object(bench, "Sizes", mock.Mock(return_value=TINY, quick=lambda: TINY)):
        result = CliRunner().invoke(main, ["bench", "--json", "--quick", "-q"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert NAMES - figures.keys() == set()
    assert figures["w1_pulled_messages"] == 2_000  # the child pulled the whole W1 store
    assert figures["sim_steps"] == 100
    assert "not measured in this run" in figures["peer_java_source"]
    assert figures["python"].startswith(
        f"{platform.python_implementation()} {platform.python_version()}"
    )
    assert {k for k in figures if k.endswith("_vs_java")} == {r[0] for r in bench.VS_JAVA}


def test_vs_java_divides_rates_by_the_peer_and_the_peer_by_times() -> None:
    # 550 k puts/s is twice Java's 275 k; 2 µs per call is twice as fast as Java's 4.0.
    ratios = bench.vs_java({"w1_put_single_msgs_per_s": 550e3, "w1_all_us_per_call": 2.0})
    assert ratios == {"w1_put_single_vs_java": 2.0, "w1_all_per_call_vs_java": 2.0}


class _FakeQueues:
    """A store of queues 0, 1, 2 holding 70, 5 and 0 messages of 10 bytes each, recording every
    pull's (queue id, offset): a pull answers up to 32 messages from its offset."""

    maxima = (70, 5, 0)

    def __init__(self) -> None:
        self.pulls: list[tuple[int, int]] = []

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.maxima[queue_id]

    def get_message(
        self, group: str, topic: str, queue_id: int, offset: int, nums: int, filt: object
    ) -> object:
        self.pulls.append((queue_id, offset))
        count = min(nums, self.maxima[queue_id] - offset)
        return _FakeResult(count, 10 * count, offset + count)


@attrs.frozen
class _FakeResult:
    message_count: int
    buffer_total_size: int
    next_begin_offset: int


def test_pull_loop_pulls_the_queues_round_robin_to_their_max_offsets() -> None:
    store = _FakeQueues()
    # Queue 2 is empty: never pulled. Round 1 pulls queues 0 and 1 at 0; queue 1 is then at
    # its max (5), so rounds 2 and 3 pull queue 0 alone, at 32 and 64.
    expected = [4, 75, 750, 75]
    actual = bench.pull_loop(store, [0, 1, 2], None)  # type: ignore[arg-type]
    assert expected == actual
    assert [(0, 0), (1, 0), (0, 32), (0, 64)] == store.pulls


def test_the_memory_child_reads_its_status_in_kib(tmp_path: Path) -> None:
    text = "Name:\tpython\nVmHWM:\t  65536 kB\nRssAnon:\t   1024 kB\nThreads:\t1\n"
    assert bench_memory.status_kib(text) == {"VmHWM": 65536, "RssAnon": 1024}
    report = bench_memory.measure("simulate", "50")
    assert report["steps"] == 50
    assert report["peak_anon_mb"] >= report["baseline_anon_mb"] > 0
    assert report["peak_rss_mb"] >= report["peak_anon_mb"]


def test_tree_cpu_counts_a_child_that_ended() -> None:
    import subprocess
    import sys

    from pullspec.conformance import cpu_times

    # "java -x" holds a space; utime 150 + stime 50 + cutime 7 + cstime 3 ticks.
    line = "42 (java -x) S 1 42 42 0 -1 4194560 9 0 0 0 150 50 7 3 20 0 30 0 5 1 2"
    assert cpu_times.parse_stat(line) == (42, 1, 210)
    before = cpu_times.tree_cpu_s()
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    subprocess.run([sys.executable, "-c", spin], check=True)
    # The child's 0.3 CPU s are counted once it has been reaped (in this process's cutime).
    assert cpu_times.tree_cpu_s() - before >= 0.25


@pytest.mark.slow
def test_bench_campaign_json_reports_cpu_per_core(tmp_path: Path) -> None:
    from pullspec.conformance.campaign import spark as campaign_spark

    problem = campaign_spark.spark_problem() or campaign_spark.java_problem()
    if problem:
        pytest.skip(problem)
    argv = ["bench-campaign", "--json", "-q", "--seeds", "2", "--steps", "3", "--area", "store"]
    argv += ["--cores", "1,2", "--repeat", "1", "--scratch", str(tmp_path)]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    for cores in ("1", "2"):
        run = report["runs"][cores]
        assert run["ops"] == 6  # 2 seeds × 3 steps of one area
        assert {"cpu_per_core", "runs_cpu_per_core", "ops_per_s", "job_fixed_s"} <= run.keys()
        assert run["cpu_per_core"] > 0 and len(run["runs_cpu_per_core"]) == 1
        # The session's processes were held to its cores (where the platform allows).
        held = int(cores) if hasattr(os, "sched_setaffinity") else len(allowed_cpus())
        assert min(held, len(allowed_cpus())) == run["cpus"]
    # One round: its speed-up, the 1-core run's wall time over the 2-core run's, is the median.
    (speedup,) = report["speedup_1_to_2_rounds"]
    walls = report["runs"]["1"]["wall_s"] / report["runs"]["2"]["wall_s"]
    assert speedup == pytest.approx(walls, rel=0.01)
    assert speedup == report["speedup_1_to_2_median"]


def _fake_sessions(walls: dict[int, list[float]], order: list[int]) -> object:
    """A stand-in for bench's measure_session answering each core count's wall times in turn
    (`order` records the core counts in the order they ran)."""
    from pullspec.conformance.cli import bench as cli_bench

    def measure(
        plan: object, cores: int, seeds: int, partitions: int, out: Path, progress: object
    ) -> cli_bench.SessionRun:
        order.append(cores)
        wall = walls[cores][sum(1 for c in order if c == cores) - 1]
        return cli_bench.SessionRun(cores, wall, 1.0, 0.5, out)

    return measure


def test_bench_campaign_alternates_the_core_counts_and_judges_the_rounds_median() -> None:
    from pullspec.conformance.campaign import rows as campaign_rows
    from pullspec.conformance.cli import bench as cli_bench

    # Round 1: 10 s on one core, 5 s on two (2.0×); round 2: 12 s and 8 s (1.5×). The fastest
    # runs (10 s and 5 s) alone would say 2.0×; the rounds' median is 1.75×, under 1.8.
    order: list[int] = []
    groups = {"groups": [{"ops": 600, "cpu_s": 6.0, "traces": 3, "verdict": "PASS"}]}
    argv = ["bench-campaign", "--json", "-q", "--repeat", "2", "--partitions", "2"]
    with (
        mock.patch.object(
            cli_bench, "measure_session", _fake_sessions({1: [10, 12], 2: [5, 8]}, order)
        ),
        mock.patch.object(cli_bench, "check_environment", lambda: None),
        mock.patch.object(campaign_rows, "aggregates", lambda path: groups),
    ):
        result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [1, 2, 1, 2] == order
    assert [2.0, 1.5] == report["speedup_1_to_2_rounds"]
    assert 1.75 == report["speedup_1_to_2_median"]
    assert 2.0 == report["speedup_1_to_2"]
    assert report["targets"]["met_speedup"] is False
    assert [60.0, 50.0] == report["runs"]["1"]["runs_ops_per_s"]
    assert 120.0 == report["runs"]["2"]["ops_per_s"]  # 600 ops in the fastest 5 s
    assert 100.0 == report["runs"]["1"]["ops_per_core_s"]
    assert sys.executable in report["python"]


def test_the_interpreter_is_named_by_how_it_links_libpython() -> None:
    from pullspec.conformance import interpreter

    # A /proc/<pid>/maps line: address range, permissions, offset, device, inode, path.
    shared = "7f3c00000000-7f3c00200000 r-xp 00000000 08:01 1234 /usr/lib/libpython3.11.so.1.0"
    static = "55d000000000-55d000100000 r-xp 00000000 08:01 99 /usr/bin/python3.11"
    assert "shared" == interpreter.libpython_linking(f"{static}\n{shared}\n")
    assert "linked in" == interpreter.libpython_linking(f"{static}\n")
    assert "unknown" == interpreter.libpython_linking(None)
    described = interpreter.describe()
    assert described.startswith(f"{platform.python_implementation()} {platform.python_version()}")
    assert sys.executable in described


def test_round_speedups_pairs_each_round_and_refuses_unequal_rounds() -> None:
    from pullspec.conformance.cli.bench import SessionRun, round_speedups

    def runs(cores: int, walls: list[float]) -> list[SessionRun]:
        return [SessionRun(cores, w, 1.0, 0.5, Path("x")) for w in walls]

    assert [1.8, 2.5, 1.0] == round_speedups(runs(1, [9.0, 10.0, 4.0]), runs(2, [5.0, 4.0, 4.0]))
    with pytest.raises(ValueError):
        round_speedups(runs(1, [9.0, 10.0]), runs(2, [5.0]))
