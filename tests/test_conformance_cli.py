"""`pullspec conform` and `pullspec mutants` from the command line."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from click.testing import CliRunner

from pullspec.conformance.cli import main
from pullspec.conformance.ops import MACHINE_AREAS as AREAS

SMALL = ["--examples", "6", "--steps", "12"]


def _conform(*args: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(main, ["conform", *SMALL, "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def test_conform_reference_reports_no_divergence_and_every_interface_passing() -> None:
    code, report = _conform("--impl", "reference")
    assert 0 == code
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert (0, 0, 0, 0) == (
        summary["divergences"],
        summary["crashed"],
        summary["timeouts"],
        summary["unsupported"],
    )
    assert 0 < summary["ops"]
    interfaces = report["interfaces"]
    assert isinstance(interfaces, dict)
    assert dict.fromkeys(AREAS, "PASS") == {a: i["verdict"] for a, i in interfaces.items()}
    covered = report["rules"]
    assert isinstance(covered, dict) and {"STORE-8", "PQ-7", "LEASE-3", "RETRY-4", "CODE-9"} <= set(
        covered["covered"]
    )


def test_conform_fast_passes_its_areas_and_reports_the_rest_unsupported() -> None:
    code, report = _conform("--impl", "fast", "--profile", "4.7")
    assert 0 == code
    interfaces = report["interfaces"]
    assert isinstance(interfaces, dict)
    expected = {a: "UNSUPPORTED" for a in AREAS} | {"store": "PASS", "process_queue": "PASS"}
    assert expected == {a: i["verdict"] for a, i in interfaces.items()}


def test_conform_over_the_example_adapter() -> None:
    impl = f"cmd:{sys.executable} -m pullspec.conformance.example_adapter"
    code, report = _conform("--impl", impl, "--area", "process_queue,lock_manager")
    assert 0 == code
    summary = report["summary"]
    assert isinstance(summary, dict) and 0 == summary["divergences"]
    interfaces = report["interfaces"]
    assert isinstance(interfaces, dict) and ["process_queue", "lock_manager"] == list(interfaces)


def test_conform_a_mutant_fails_with_replay_commands_that_replay(tmp_path: Path) -> None:
    impl = "pullspec.conformance.mutants.impl:empty_batch_creates_group"
    area = ["--area", "lock_manager", "--examples", "20"]
    code, report = _conform("--impl", impl, *area, "--replay-dir", str(tmp_path))
    assert 1 == code
    face = report["interfaces"]
    assert isinstance(face, dict)
    lock = face["lock_manager"]
    assert ("DIVERGED", "DIVERGED") == (lock["verdict"], lock["machine"]["verdict"])
    assert "LEASE-6" in lock["machine"]["rules"]
    replay = shlex.split(lock["failures"][0]["replay"])
    assert ["pullspec", "vectors", "check"] == replay[:3]
    runner = CliRunner()
    assert 1 == runner.invoke(main, replay[1:]).exit_code
    as_reference = [*replay[1:4], "--impl", "reference", "--profile", "4.9"]
    assert 0 == runner.invoke(main, as_reference).exit_code


def test_mutants_json_reports_kills_and_times() -> None:
    args = ["mutants", "--json", "--mutant", "lease-inclusive", "--mutant", "remove_returns_max"]
    result = CliRunner().invoke(main, args)
    assert 0 == result.exit_code, result.output
    data = json.loads(result.stdout)
    assert {"total": 2, "killed": 2, "survived": 0} == {
        k: data["summary"][k] for k in ("total", "killed", "survived")
    }
    assert ["lease-inclusive", "remove-returns-max"] == [m["name"] for m in data["mutants"]]
    assert all(m["killed"] and m["seconds"] >= 0 and m["by"] for m in data["mutants"])


def test_mutants_list_names_rule_and_change() -> None:
    result = CliRunner().invoke(main, ["mutants", "--list"])
    assert 0 == result.exit_code
    line = next(x for x in result.output.splitlines() if x.startswith("lease-inclusive"))
    assert "LEASE-3" in line and ">=" in line
