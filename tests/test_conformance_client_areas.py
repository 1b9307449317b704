"""The client areas as conformance interfaces: what the issue's five bugs make observable, the
reference's drivers driving the reference's classes, the measured rule table, and the adapter
authors' frictions removed (profile of lock managers, UNSUPPORTED send-backs, TIMEOUT reports,
store creates without defaults, the simulation of a cmd: candidate)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

import pullspec.reference.factories as reference
from pullspec.conformance import client_vectors, vectors
from pullspec.conformance.adapters import lock_manager
from pullspec.conformance.candidates import close
from pullspec.conformance.cli import main
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.machines.run import run_machine
from pullspec.conformance.ops import CLIENT_AREAS
from pullspec.conformance.ops_client import CLIENT_OP_RULES
from pullspec.conformance.remote.session import store_config_json
from pullspec.conformance.resolve import resolve
from pullspec.conformance.vectors import Verdict
from pullspec.reference.rebalance import ReferenceRebalancePushImpl
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.profiles import ALL_PROFILES, Profile

ROOT = Path(__file__).resolve().parents[1]


def mq(queue_id: int) -> dict[str, Any]:
    return {"topic": "T", "brokerName": "b", "queueId": queue_id}


# -- the five bugs, as the reference's drivers observe them ----------------------------------------


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_flow_8_the_span_the_process_queue_computes_delays_the_pull(profile: Profile) -> None:
    loop = reference.pull_loop({"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET"}, profile)
    loop.apply("put", {"queueId": 0, "count": 2011})
    loop.apply("hold", {"queueId": 0, "offsets": [0, *range(2001, 2011)]})
    loop.apply("start", {})
    seen = loop.apply("rebalance", {"queueIds": [0]})
    # 2011 messages in pulls of 32: offsets 0, 32, …, 1984 (63 pulls).
    assert [32 * i for i in range(63)] == [p["offset"] for p in seen["pulls"]]
    cached = [0, *range(2001, 2011)]
    assert [{"queueId": 0, "cachedOffsets": cached, "msgCount": 11, "maxSpan": 2010}] == [
        {k: row[k] for k in ("queueId", "cachedOffsets", "msgCount", "maxSpan")}
        for row in seen["table"]
    ]
    assert {"at": 0, "queueId": 0, "delayMs": 50, "reason": "MAX_SPAN"} == seen["delays"][0]
    later = loop.apply("advance", {"ms": 100})
    assert [50, 100] == [d["at"] for d in later["delays"]]
    assert [] == later["pulls"]


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_conc_13_a_started_service_sweeps_every_15_minutes(profile: Profile) -> None:
    service = reference.consume_concurrently({"consumeTimeout": 15}, profile)
    assert [{"task": "cleanExpireMsg", "dueAt": 900_000}] == service.apply("start", {})["scheduled"]
    stuck = {"queueOffset": 0, "consumeStartTime": 0}
    fresh = {"queueOffset": 1, "consumeStartTime": 1_000_000}
    service.apply("put_messages", {"msgs": [stuck, fresh]})
    first = service.apply("advance_clock", {"ms": 900_000})
    # At exactly 15 minutes the message is not yet expired (PQ-18 is strict).
    assert ([], [0, 1]) == (first["sentBack"], first["cachedOffsets"])
    second = service.apply("advance_clock", {"ms": 900_000})
    assert [{"queueOffset": 0, "delayLevel": 3}] == second["sentBack"]
    assert [1] == second["cachedOffsets"]
    assert [{"task": "cleanExpireMsg", "dueAt": 2_700_000}] == second["scheduled"]


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_rebal_20_lock_all_stamps_the_lock_and_the_lease_runs_from_there(
    profile: Profile,
) -> None:
    table = reference.rebalance({"consumeMode": "ORDERLY"}, profile)
    table.apply("update_table", {"topic": "T", "mqSet": [mq(0), mq(1)], "now": 0})
    locked = table.apply(
        "lock_all", {"requested": [mq(0), mq(1)], "granted": [mq(0)], "now": 20_000}
    )["locks"]
    assert (True, 20_000, False) == tuple(
        locked[0][k] for k in ("locked", "lastLockTimestamp", "lockExpired")
    )
    at_50000 = table.apply("advance_clock", {"ms": 30_000})["locks"][0]
    assert (20_000, False) == (at_50000["lastLockTimestamp"], at_50000["lockExpired"])
    assert table.apply("advance_clock", {"ms": 1})["locks"][0]["lockExpired"]


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_rebal_9_a_pull_expired_queue_is_removed_and_recreated_in_one_update(
    profile: Profile,
) -> None:
    table = reference.rebalance({}, profile)
    table.apply("update_table", {"topic": "T", "mqSet": [mq(0), mq(1)], "now": 0})
    table.apply("set_queue", {"mq": mq(0), "committedOffset": 5, "pullExpired": True})
    seen = table.apply("update_table", {"topic": "T", "mqSet": [mq(0), mq(1)], "now": 1000})
    assert [{"mq": mq(0), "reason": "PULL_EXPIRED", "unlockDelayMs": None}] == seen["removed"]
    assert [{"mq": mq(0), "outcome": "ADDED", "pullRequestOffset": 5}] == seen["added"]
    assert [{"mq": mq(0), "nextOffset": 5}] == seen["pullRequests"]
    assert [{"mq": mq(0), "offset": 5}] == seen["persisted"]
    assert [False, False] == [row["pullExpired"] for row in seen["table"]]


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_rebal_14_a_removed_queue_persists_its_committed_offset(profile: Profile) -> None:
    loop = reference.pull_loop({"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET"}, profile)
    loop.apply("put", {"queueId": 0, "count": 10})
    loop.apply("hold", {"queueId": 0, "offsets": [5, 6, 7, 8, 9]})
    loop.apply("start", {})
    assigned = loop.apply("rebalance", {"queueIds": [0]})
    assert [{"queueId": 0, "offset": 5}] == assigned["committed"]
    assert [] == assigned["persisted"]
    removed = loop.apply("rebalance", {"queueIds": []})
    assert ([], [{"queueId": 0, "offset": 5}]) == (removed["table"], removed["persisted"])


# -- the harness is a harness ---------------------------------------------------------------------


@pytest.mark.parametrize("area", [a for a in CLIENT_AREAS if a != "schedule"])
def test_a_client_area_adapter_holds_no_client_behaviour(area: str) -> None:
    source = (ROOT / "conformance" / "adapters" / f"{area}.py").read_text(encoding="utf-8")
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    # the candidates module holds the seam's protocols only and jsontypes the JSON they speak
    # (the types an adapter is written in)
    assert set() == {m for m in imported if m.startswith("pullspec.") and "profiles" not in m} - {
        "pullspec.conformance.adapters",
        "pullspec.conformance.candidates",
        "pullspec.conformance.jsontypes",
    }


def test_the_rebalance_vectors_are_what_the_reference_class_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_lock_all(self: ReferenceRebalancePushImpl) -> None:
        """A lockAll that asks no broker."""

    monkeypatch.setattr(ReferenceRebalancePushImpl, "lock_all", no_lock_all)
    folder = ROOT / "vectors" / "reference-4.9"
    results = [
        vectors.run_case(reference, c, Profile.V4_9, folder)
        for c in vectors.load_cases(folder, ["rebalance"])
    ]
    assert "rebalance.edge-rebal20-lock-timestamp" in {
        r.id for r in results if r.verdict is vectors.Verdict.DIVERGED
    }


def test_the_rule_table_is_what_the_client_cases_run_now() -> None:
    # conformance.ops_client is measured, not typed: a driver or case change that makes an op
    # run other rules must come with the table measured anew (--op-rules), or coverage lies.
    measured = client_vectors.measure_op_rules()
    expected = {
        area: {op: frozenset(found) for op, found in ops.items()} for area, ops in measured.items()
    }
    assert expected == {area: dict(ops) for area, ops in CLIENT_OP_RULES.items()}


# -- adapter authors' frictions ---------------------------------------------------------------------

_RECORDING = """
import json, sys
from pullspec.conformance.example_adapter import serve
from pullspec.conformance.resolve import resolve

log = open(sys.argv[1], "a")

def lines():
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "create":
            log.write(json.dumps([request["area"], request["profile"], request["config"]]) + "\\n")
            log.flush()
        yield line

serve(resolve("reference"), lines(), sys.stdout)
"""


def _recording(tmp_path: Path) -> tuple[str, Path]:
    script, log = tmp_path / "adapter.py", tmp_path / "creates.jsonl"
    script.write_text(_RECORDING, encoding="utf-8")
    return f"cmd:{sys.executable} {script} {log}", log


def test_lock_managers_are_created_with_the_run_s_profile(tmp_path: Path) -> None:
    impl, log = _recording(tmp_path)
    candidate = resolve(impl)
    config: JSONObject = {
        "clockStart": 0,
        "lockMaxLiveTimeMs": 60_000,
        "topic": "T",
        "brokerName": "b",
    }
    try:
        harness = lock_manager.create(candidate, config, Profile.V4_7, Path("."))
        lock_manager.apply(harness, "try_lock_batch", {"group": "G", "clientId": "c", "mqs": [0]})
    finally:
        close(candidate)
    creates = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [("lock_manager", "4.7")] == [(a, p) for a, p, _ in creates]


def test_store_creates_carry_only_settings_that_differ_from_the_defaults() -> None:
    assert {"brokerRole": "ASYNC_MASTER"} == store_config_json(StoreConfig())
    small = StoreConfig(mapped_file_size_commit_log=1024, total_physical_memory_size=6000)
    assert {
        "brokerRole": "ASYNC_MASTER",
        "mappedFileSizeCommitLog": 1024,
        "totalPhysicalMemorySize": 6000,
    } == store_config_json(small)


def test_an_unsupported_send_back_is_unsupported_not_a_divergence() -> None:
    class Refusing:
        def __init__(self, real: Any) -> None:
            self.store = real.store

        def send_back(self, request: Any, *, request_version: int | None = None) -> Any:
            raise UnsupportedError("no send-back here")

    candidate = SimpleNamespace(
        send_back=lambda *a: Refusing(reference.send_back(*a)), NAME="refusing"
    )
    folder = ROOT.parent / "shared" / "vectors" / "rocketmq-4.9.7"
    case = next(vectors.load_cases(folder, ["send_back"]))
    assert (
        vectors.Verdict.UNSUPPORTED
        is vectors.run_case(candidate, case, Profile.V4_9, folder).verdict
    )


_SLOW = """
import json, sys, time
from pullspec.conformance.example_adapter import serve
from pullspec.conformance.resolve import resolve

def lines():
    for n, line in enumerate(sys.stdin):
        if n >= 25 and json.loads(line).get("op") == "take_messages":
            time.sleep(5)
        yield line

serve(resolve("reference"), lines(), sys.stdout)
"""


def test_a_timeout_in_a_machine_is_reported_as_timeout(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text(_SLOW, encoding="utf-8")
    candidate = resolve(f"cmd:{sys.executable} {script}", timeout=0.5)
    try:
        report = run_machine("process_queue", candidate, examples=6, steps=15, seed=1)
    finally:
        close(candidate)
    assert Verdict.TIMEOUT is report.verdict, report.describe()


def test_conform_over_a_subprocess_exits_0_with_the_simulation_unsupported() -> None:
    impl = f"cmd:{sys.executable} -m pullspec.conformance.example_adapter"
    args = ["conform", "--impl", impl, "--area", "pull_loop,rebalance,simulation"]
    result = CliRunner().invoke(main, [*args, "--examples", "3", "--steps", "8", "--json"])
    assert 0 == result.exit_code, result.output
    report = json.loads(result.stdout)
    assert ["PASS", "PASS"] == [i["verdict"] for i in report["interfaces"].values()]
    assert "UNSUPPORTED" == report["simulation"]["verdict"]
