"""The installed package: one import name (`pullspec`), a library that needs only attrs and numpy,
and the main job runnable by a stranger (a stripped PATH, another working folder)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("spec", "reference", "fast", "conformance")
#: What a stranger's shell has: no virtual environment, no pyenv, nothing of ours on PATH.
STRIPPED = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=STRIPPED,
        capture_output=True,
        text=True,
        check=False,
    )


def test_pyproject_installs_every_package_folder_under_pullspec() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    folders = sorted(
        str(init.parent.relative_to(ROOT)).replace("/", ".")
        for top in FOLDERS
        for init in (ROOT / top).rglob("__init__.py")
    )
    assert ["pullspec." + f for f in folders] == sorted(config["setuptools"]["packages"])
    assert {f"pullspec.{f}": f for f in FOLDERS} == config["setuptools"]["package-dir"]


def test_only_pullspec_is_importable_from_another_folder(tmp_path: Path) -> None:
    probe = (
        "import importlib.util as u, json;"
        "print(json.dumps({n: u.find_spec(n) is not None for n in "
        "('pullspec', 'pullspec.fast', 'spec', 'reference', 'fast', 'conformance')}))"
    )
    run = _python(probe, tmp_path)
    assert "" == run.stderr
    assert {
        "pullspec": True,
        "pullspec.fast": True,
        "spec": False,
        "reference": False,
        "fast": False,
        "conformance": False,
    } == json.loads(run.stdout)


def test_the_fast_library_imports_nothing_beyond_attrs_and_numpy(tmp_path: Path) -> None:
    probe = (
        "import sys, pullspec.fast;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'hypothesis', 'click', 'pyspark', 'pyarrow', 'numba', 'crosshair', 'pytest'}))"
    )
    run = _python(probe, tmp_path)
    assert ("[]\n", "") == (run.stdout, run.stderr)


@pytest.mark.slow
def test_a_campaign_runs_with_a_stripped_path_from_another_folder(tmp_path: Path) -> None:
    """Spark's Python workers must be this environment's interpreter, not `python3` on PATH
    (the system's has no attrs), and nothing may depend on the working folder."""
    pullspec = Path(sys.executable).with_name("pullspec")
    argv = [str(pullspec), "campaign", "--master", "local[2]", "--seeds", "2", "--steps", "20"]
    argv += ["--area", "store,process_queue", "--out", str(tmp_path / "out"), "--json"]
    run = subprocess.run(
        argv, cwd=tmp_path, env=STRIPPED, capture_output=True, text=True, check=False
    )
    assert 0 == run.returncode, run.stderr[-3000:]
    summary = json.loads(run.stdout)["summary"]
    assert (0, 0, 0) == (summary["divergences"], summary["crashed"], summary["failed"])
    assert 2 * 2 * 20 == summary["ops"]
