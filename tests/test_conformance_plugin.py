"""The pytest plugin inside another project's test run (a separate pytest process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pullspec.conformance.ops import MACHINE_AREAS

OWN_TEST = """
def test_own_check(pullspec_candidate):
    assert hasattr(pullspec_candidate, "lock_manager")
"""


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in `project` with only this plugin (no entry points, no cache)."""
    (project / "test_own.py").write_text(OWN_TEST, encoding="utf-8")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "pullspec.conformance.plugin",
        "-p",
        "no:cacheprovider",
    ]
    return subprocess.run(
        [*command, "-q", "-rfs", "--pullspec-examples", "4", "--pullspec-steps", "10", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_suite_joins_the_run_and_passes_for_the_reference(tmp_path: Path) -> None:
    run = _pytest(tmp_path, "--pullspec-impl", "reference")
    assert 0 == run.returncode, run.stdout + run.stderr
    assert f"{2 * len(MACHINE_AREAS) + 1} passed" in run.stdout


def test_a_wrong_candidate_fails_the_run_with_its_divergence(tmp_path: Path) -> None:
    run = _pytest(tmp_path, "--pullspec-impl", "pullspec.conformance.mutants.impl:lease_inclusive")
    assert 1 == run.returncode, run.stdout + run.stderr
    assert "FAILED ::pullspec-vectors[lock_manager]" in run.stdout
    # The third step (1-based, as campaign rows), its arguments and the lease rules it involves.
    assert (
        "DIVERGED    edge-lm-lease-boundary step 3 try_lock_batch(group=G1, clientId=c2, mqs=[0]):"
        " result expected [] actual [0] [LEASE-2, LEASE-3, LEASE-4, LEASE-5, LEASE-6]"
        in (run.stdout)
    )


def test_areas_a_candidate_lacks_are_skipped(tmp_path: Path) -> None:
    run = _pytest(
        tmp_path,
        "--pullspec-impl",
        "pullspec.conformance.mutants.impl:lease_inclusive",
        "-k",
        "store",
    )
    assert 0 == run.returncode, run.stdout + run.stderr
    assert "4 skipped" in run.stdout  # store and offset_store, vectors and machine each


def test_a_candidate_that_cannot_load_is_one_usage_error(tmp_path: Path) -> None:
    run = _pytest(tmp_path, "--pullspec-impl", "nosuch.module:factory")
    assert 4 == run.returncode  # pytest's usage-error status
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    assert 1 == len(lines), lines
    assert lines[0].startswith("ERROR: --pullspec-impl nosuch.module:factory: ")
    assert "cannot import nosuch.module" in lines[0]


@pytest.mark.parametrize(
    ("args", "items"),
    [
        ((), ["test_own.py::test_own_check"]),
        (
            ("--pullspec-impl", "reference"),
            ["test_own.py::test_own_check", "::pullspec-vectors[store]"],
        ),
    ],
)
def test_items_join_only_with_the_option(
    tmp_path: Path, args: tuple[str, ...], items: list[str]
) -> None:
    run = _pytest(tmp_path, "--collect-only", *args)
    collected = [line for line in run.stdout.splitlines() if "::" in line]
    assert items == collected[: len(items)]
    assert (2 * len(MACHINE_AREAS) if args else 0) == sum("pullspec-" in line for line in collected)
