"""`pullspec vectors export` then `pullspec vectors check` round-trips: the reference (both
profiles) and fast (the store it implements) reproduce the vectors the reference wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pullspec.conformance.cli import main
from pullspec.conformance.export import generate
from pullspec.conformance.machines.edges import EDGE_CASES
from pullspec.conformance.ops import AREAS


def _export(tmp_path: Path, profile: str, *extra: str) -> Path:
    out = tmp_path / f"out-{profile}"
    result = CliRunner().invoke(main, ["vectors", "export", str(out), "--profile", profile, *extra])
    assert 0 == result.exit_code, result.output
    return out


def _check(directory: Path, impl: str, profile: str) -> dict[str, int]:
    args = ["vectors", "check", str(directory), "--impl", impl, "--profile", profile, "--json"]
    result = CliRunner().invoke(main, args)
    assert 0 == result.exit_code, result.output
    summary: dict[str, int] = json.loads(result.stdout)["summary"]
    return summary


@pytest.mark.parametrize("profile", ["4.9", "4.7"])
def test_export_then_check_round_trips_for_the_reference(tmp_path: Path, profile: str) -> None:
    out = _export(tmp_path, profile, "--random", "4")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    total = len(manifest["cases"])
    assert len(EDGE_CASES) + 4 * len(AREAS) == total
    assert {
        "total": total,
        "passed": total,
        "diverged": 0,
        "crashed": 0,
        "timeout": 0,
        "unsupported": 0,
    } == (_check(out, "reference", profile))


def test_export_then_check_round_trips_for_fast_on_its_areas(tmp_path: Path) -> None:
    out = _export(tmp_path, "4.9", "--random", "4")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    fast_areas = ("store", "process_queue")
    implemented = sum(1 for c in manifest["cases"] if c["area"] in fast_areas)
    summary = _check(out, "fast", "4.9")
    assert (implemented, 0, 0) == (summary["passed"], summary["diverged"], summary["crashed"])


def test_the_manifest_names_the_spec_the_profile_and_each_case_rules(tmp_path: Path) -> None:
    out = _export(tmp_path, "4.7", "--random", "2", "--seed", "5")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert ("pullspec-vectors/1", "4.7", "4.7.1", 5) == (
        manifest["format"],
        manifest["profile"],
        manifest["rocketmqVersion"],
        manifest["seed"],
    )
    assert manifest["specVersion"]
    expiry = next(c for c in manifest["cases"] if c["id"] == "edge-store-expiry")
    assert {"STORE-19", "LAYOUT-7", "STORE-8"} <= set(expiry["rules"])
    assert {f"{a}.jsonl" for a in AREAS} == set(manifest["files"].values())
    first = json.loads((out / "store.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert ("store", "4.7.1") == (first["area"], first["version"])


def test_the_same_seed_writes_the_same_vectors() -> None:
    from pullspec.spec.profiles import Profile

    assert generate(Profile.V4_9, 3, 2) == generate(Profile.V4_9, 3, 2)
    assert generate(Profile.V4_9, 3, 2) != generate(Profile.V4_9, 4, 2)


def test_exported_errors_are_error_kinds(tmp_path: Path) -> None:
    out = _export(tmp_path, "4.9", "--random", "0")
    errors = {
        s["expect"]["error"]
        for line in (out / "process_queue.jsonl").read_text(encoding="utf-8").splitlines()
        for s in json.loads(line)["steps"]
        if "error" in s["expect"]
    }
    assert {"NO_SUCH_ELEMENT", "INVALID_ARGUMENT"} == errors
