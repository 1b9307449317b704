"""The architecture map (docs/architecture.md) kept honest: the layer rules and no import cycles,
checked on the import graph read from the source (tests/import_graph.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.import_graph import Edge, cycles, edges, folder

ROOT = Path(__file__).resolve().parents[1]

#: Cycles still being broken elsewhere (issue 18 is shared by three helpers): a cycle is tolerated
#: only while every module in it starts with one of an entry's prefixes. Delete an entry once its
#: work lands; `test_every_tolerated_cycle_still_exists` says when.
TOLERATED: dict[str, tuple[str, ...]] = {}

#: Imports across the layers still being moved elsewhere (none left).
TOLERATED_LAYER_BREAKS: frozenset[tuple[str, str]] = frozenset()


@pytest.fixture(scope="module")
def graph() -> list[Edge]:
    return edges(ROOT)


def _tolerated_by(component: list[str]) -> str | None:
    for label, prefixes in TOLERATED.items():
        if all(m.startswith(prefixes) for m in component):
            return label
    return None


def _show(component: list[str], graph: list[Edge]) -> str:
    members = set(component)
    return "\n".join(
        f"  {e.source} -> {e.target} ({e.kind} import, line {e.line})"
        for e in graph
        if e.source in members and e.target in members
    )


def test_no_import_cycles(graph: list[Edge]) -> None:
    untolerated = [c for c in cycles(graph) if _tolerated_by(c) is None]
    assert [] == untolerated, "\n".join(_show(c, graph) for c in untolerated)


def test_every_tolerated_cycle_still_exists(graph: list[Edge]) -> None:
    live = {_tolerated_by(c) for c in cycles(graph)}
    assert set(TOLERATED) == live, "delete the entries of TOLERATED whose cycles are gone"


@pytest.mark.parametrize(
    ("layer", "may_import"),
    [
        ("spec", {"spec"}),
        ("reference", {"spec", "reference"}),
        ("fast", {"spec", "fast"}),
        ("conformance", {"spec", "reference", "fast", "conformance"}),
    ],
)
def test_each_layer_imports_only_what_the_map_allows(
    graph: list[Edge], layer: str, may_import: set[str]
) -> None:
    breaks = [
        f"{e.source} -> {e.target} (line {e.line})"
        for e in graph
        if folder(e.source) == layer
        and folder(e.target) not in may_import
        and (e.source, e.target) not in TOLERATED_LAYER_BREAKS
    ]
    assert [] == breaks


def test_every_tolerated_layer_break_still_exists(graph: list[Edge]) -> None:
    assert TOLERATED_LAYER_BREAKS <= {(e.source, e.target) for e in graph}


def _packages_on_the_map() -> set[str]:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = page.split("## Packages", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(pullspec(?:\.\w+)+)` \|", table, re.M))


def test_the_map_names_every_package_and_only_packages() -> None:
    packages = {
        ".".join(["pullspec", *init.parent.relative_to(ROOT).parts])
        for top in ("spec", "reference", "fast", "conformance")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert packages == _packages_on_the_map()


def test_the_map_is_in_the_site_nav() -> None:
    assert "architecture.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_graph_sees_cycles_through_faces_functions_type_checking_and_import_module(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {
            # a face that imports a submodule which reads the face
            "conformance/__init__.py": "",
            "conformance/p/__init__.py": "from pullspec.conformance.p.a import A\n",
            "conformance/p/a.py": "from pullspec.conformance.p import helper\nA = 1\n",
            "conformance/p/helper.py": "",
            # a registry loading its plugins by name, each plugin reading the registry
            "conformance/r/__init__.py": (
                "import importlib\n"
                "def load(n):\n"
                "    return importlib.import_module(f'pullspec.conformance.r.{n}')\n"
            ),
            "conformance/r/one.py": "from pullspec.conformance.r import load\n",
            # two modules meeting through a function's import and a TYPE_CHECKING import
            "conformance/x.py": "def f():\n    from pullspec.conformance import y\n",
            "conformance/y.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pullspec.conformance.x import f\n"
            ),
            # no cycle: a submodule importing its sibling past an empty face
            "conformance/q/__init__.py": '"""A docstring only."""\n',
            "conformance/q/a.py": "from pullspec.conformance.q.b import B\n",
            "conformance/q/b.py": "B = 1\n",
            "spec/__init__.py": "",
            "reference/__init__.py": "",
            "fast/__init__.py": "",
        },
    )
    assert [
        ["pullspec.conformance.p", "pullspec.conformance.p.a"],
        ["pullspec.conformance.r", "pullspec.conformance.r.one"],
        ["pullspec.conformance.x", "pullspec.conformance.y"],
    ] == cycles(edges(root))


def test_the_graph_sees_a_layer_break_inside_a_function(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "spec/__init__.py": "",
            "reference/__init__.py": "",
            "conformance/__init__.py": "",
            "fast/__init__.py": "",
            "fast/bench.py": "def run():\n    import pullspec.conformance\n",
        },
    )
    assert [Edge("pullspec.fast.bench", "pullspec.conformance", "function", 2)] == edges(root)
