"""The RocketMQ-recorded broker vectors (areas store and pull_code) and the 4.9.7 store answers,
run through the conformance runner against the reference candidate, and the CLI over them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import pullspec.reference.factories
from pullspec.conformance.cli import main
from pullspec.conformance.vectors import CaseResult, Verdict, load_cases, run_case
from pullspec.spec.profiles import Profile

AREAS = ("store", "pull_code")
#: (file relative to ../shared, profile, number of cases it must hold)
VECTOR_FILES = [
    ("vectors/rocketmq-4.9.7/store.jsonl", Profile.V4_9, 30),
    ("vectors/rocketmq-4.9.7/pull_code.jsonl", Profile.V4_9, 42),
    ("vectors/rocketmq-4.7.1/store.jsonl", Profile.V4_7, 30),
    ("vectors/rocketmq-4.7.1/pull_code.jsonl", Profile.V4_7, 42),
    ("stores/basic/answers.jsonl", Profile.V4_9, 59),
    ("stores/expired/answers.jsonl", Profile.V4_9, 61),
]


@pytest.mark.parametrize(
    ("relative", "profile", "count"), VECTOR_FILES, ids=[f for f, _, _ in VECTOR_FILES]
)
def test_every_case_passes_on_the_reference(
    shared_dir: Path, relative: str, profile: Profile, count: int
) -> None:
    path = shared_dir / relative
    assert path.exists(), f"missing vector file {path}"
    cases = list(load_cases(path, AREAS))
    assert count == len(cases)
    results = [run_case(pullspec.reference.factories, case, profile, path.parent) for case in cases]
    failures: list[CaseResult] = [r for r in results if r.verdict is not Verdict.PASS]
    assert [] == failures, "\n".join(repr(f) for f in failures)


def check(directory: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        main, ["vectors", "check", str(directory), "--area", "store,pull_code", "--json", *extra]
    )
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize(("version", "total"), [("rocketmq-4.9.7", 72), ("rocketmq-4.7.1", 72)])
def test_cli_vectors_check_json_passes(vectors_dir: Path, version: str, total: int) -> None:
    code, data = check(vectors_dir / version)
    assert 0 == code
    assert ["summary", "cases"] == list(data)
    assert {
        "total": total,
        "passed": total,
        "diverged": 0,
        "crashed": 0,
        "timeout": 0,
        "unsupported": 0,
    } == data["summary"]
    assert total == len(data["cases"])
    assert {"PASS"} == {c["verdict"] for c in data["cases"]}
    assert {"store", "pull_code"} == {c["area"] for c in data["cases"]}
    assert all({"id", "area", "verdict"} == set(c) for c in data["cases"])


def test_cli_vectors_check_fails_on_a_corrupted_vector(vectors_dir: Path, tmp_path: Path) -> None:
    source = vectors_dir / "rocketmq-4.9.7"
    copy = tmp_path / "rocketmq-4.9.7"
    copy.mkdir()
    for area in AREAS:
        shutil.copy(source / f"{area}.jsonl", copy / f"{area}.jsonl")
    lines = (copy / "pull_code.jsonl").read_text(encoding="utf-8").splitlines()
    case = json.loads(lines[0])
    expect = case["steps"][-1]["expect"]
    assert 0 == expect["nextBeginOffset"]
    expect["nextBeginOffset"] = 12345
    lines[0] = json.dumps(case)
    (copy / "pull_code.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    code, data = check(copy)
    assert 1 == code
    assert (72, 71, 1) == (
        data["summary"]["total"],
        data["summary"]["passed"],
        data["summary"]["diverged"],
    )
    [diverged] = [c for c in data["cases"] if c["verdict"] != "PASS"]
    assert (case["id"], "DIVERGED", "nextBeginOffset", 12345, 0) == (
        diverged["id"],
        diverged["verdict"],
        diverged["field"],
        diverged["expected"],
        diverged["actual"],
    )


def test_cli_vectors_check_reads_the_profile_from_the_folder(
    vectors_dir: Path, tmp_path: Path
) -> None:
    # the 4.7.1 expectations are not those of 4.9 (STORE-8, LAYOUT-9): run them as 4.9
    copy = tmp_path / "renamed"
    shutil.copytree(vectors_dir / "rocketmq-4.7.1", copy)
    code, data = check(copy)
    assert 1 == code
    assert data["summary"]["diverged"] > 0
    code, data = check(copy, "--profile", "4.7")
    assert (0, 72) == (code, data["summary"]["passed"])
