"""`pullspec campaign` against a Spark standalone cluster that the test starts on 127.0.0.1: a
master and one worker from the installed pyspark (`spark-class`), on free ports, torn down after.

The executors are separate processes started by the worker, not by the driver: they must find
this environment's interpreter (PYSPARK_PYTHON, which the driver sends them) and the packages
(the zip the driver ships), with a stripped PATH and from another working folder.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pullspec.conformance.campaign import spark as campaign_spark

#: What a stranger's shell has: no virtual environment, nothing of ours on PATH.
STRIPPED = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
#: Seconds the master and the worker may take to come up (a JVM start on a busy machine).
START_TIMEOUT = 120.0


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _wait_for(proc: subprocess.Popen[bytes], needle: str, what: str) -> None:
    """Read `proc`'s output until a line holds `needle` (no sleeping: blocks on the pipe)."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(deadline - time.monotonic()):
                break
            line = proc.stdout.readline().decode("utf-8", errors="replace")
            if not line:
                break
            seen.append(line)
            if needle in line:
                return
    pytest.fail(f"the {what} did not start: {''.join(seen[-20:])}", pytrace=False)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture
def standalone_master(tmp_path: Path) -> Iterator[str]:
    """The URL of a one-worker standalone cluster (2 cores) running on 127.0.0.1."""
    problem = campaign_spark.spark_problem() or campaign_spark.java_problem()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    import pyspark

    home = Path(pyspark.__file__).parent
    spark_class = str(home / "bin" / "spark-class")
    master_port, master_ui, worker_port, worker_ui = _free_ports(4)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))},
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
    }
    url = f"spark://127.0.0.1:{master_port}"
    daemons: list[subprocess.Popen[bytes]] = []

    def start(*argv: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [spark_class, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        daemons.append(proc)
        return proc

    try:
        master = start(
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(master_port), "--webui-port", str(master_ui),
        )  # fmt: skip
        _wait_for(master, "Starting Spark master at", "master")
        worker = start(
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--port", str(worker_port), "--webui-port", str(worker_ui), "--cores", "2",
            "--memory", "1g", "--work-dir", str(tmp_path / "work"), url,
        )  # fmt: skip
        _wait_for(worker, "Successfully registered with master", "worker")
        yield url
    finally:
        for proc in reversed(daemons):
            _stop(proc)


@pytest.mark.slow
def test_a_campaign_runs_on_a_standalone_cluster(standalone_master: str, tmp_path: Path) -> None:
    pullspec = Path(sys.executable).with_name("pullspec")
    argv = [str(pullspec), "campaign", "--master", standalone_master, "--seeds", "2"]
    argv += ["--steps", "10", "--area", "store,process_queue", "--out", str(tmp_path / "out")]
    argv += ["--conf", "spark.ui.enabled=false", "--json"]
    run = subprocess.run(
        argv, cwd=tmp_path, env=STRIPPED, capture_output=True, text=True, timeout=300, check=False
    )
    assert 0 == run.returncode, run.stderr[-3000:]
    report = json.loads(run.stdout)
    summary = report["summary"]
    assert standalone_master == summary["master"]
    assert (0, 0, 0) == (summary["divergences"], summary["crashed"], summary["failed"])
    assert 2 * 2 * 10 == summary["ops"]  # 2 seeds × 2 areas × 10 steps, all diffed
    assert {"PASS": 2} == {k: v for k, v in report["areas"]["store"]["verdicts"].items() if v}
