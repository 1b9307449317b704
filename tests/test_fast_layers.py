"""fast's layer rule: it imports spec and itself only, never reference or conformance."""

from __future__ import annotations

import ast
from pathlib import Path

FAST = Path(__file__).resolve().parent.parent / "fast"


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
    return names


def test_fast_imports_neither_reference_nor_conformance() -> None:
    offending = sorted(
        f"{path.name}: {name}"
        for path in FAST.glob("*.py")
        for name in _imported(path)
        if name.startswith(("pullspec.reference", "pullspec.conformance"))
    )
    assert [] == offending
