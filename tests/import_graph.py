"""The import graph of pullspec's four folders, read from the source (never by importing it).

A node is a module (`pullspec.conformance.observe`) or a package's `__init__` (named after the
package). An edge A → B is any import in A that names B: at module level, inside a function, under
`if TYPE_CHECKING:`, or through `importlib.import_module` with a literal name (an f-string such as
``f"pullspec.conformance.adapters.{area}"`` stands for every module under its fixed prefix).
`from P import n` is an edge to the module `P.n` when there is one, and always to the package `P`
itself: it reads P's namespace, which during a cycle is only partly built. `from P.n import x` is
an edge to `P.n` alone: a package whose `__init__` imports nothing of its own cannot close a cycle.

`python tests/import_graph.py` prints the cycles and the layer breaks of the working tree.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs

FOLDERS = ("spec", "reference", "fast", "conformance")


@attrs.frozen
class Edge:
    """One import: where it is (`top`, `function` or `typing`) and the line it is on."""

    source: str
    target: str
    kind: str
    line: int


def modules(root: Path) -> dict[str, Path]:
    """Every module of the four folders under `root`, by its installed name."""
    found: dict[str, Path] = {}
    for top in FOLDERS:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(["pullspec", *parts])] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_module_target(node: ast.Call) -> tuple[str, bool] | None:
    """The name an `importlib.import_module(...)` call imports, and whether it is only a prefix."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name != "import_module" or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.BoolOp):  # `__package__ or "pullspec.spec"`: the fallback name
        arg = arg.values[-1]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value, False
    if isinstance(arg, ast.JoinedStr) and arg.values:
        first = arg.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value, True
    return None


class _Reader:
    def __init__(self, name: str, path: Path, known: Mapping[str, Path]) -> None:
        self.name = name
        self.known = known
        self.package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        self.edges: list[Edge] = []

    def add(self, target: str, kind: str, line: int) -> None:
        while target not in self.known and "." in target:
            target = target.rsplit(".", 1)[0]  # `import a.b.c` of a name in module a.b
        if target in self.known and target != self.name:
            self.edges.append(Edge(self.name, target, kind, line))

    def walk(self, node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.body:
                    self.visit(stmt, "typing")
                for stmt in child.orelse:
                    self.visit(stmt, kind)
            else:
                self.visit(child, kind)

    def visit(self, node: ast.AST, kind: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            self.walk(node, "function" if kind == "top" else kind)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                self.add(alias.name, kind, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            self.import_from(node, kind)
        elif isinstance(node, ast.Call) and (target := _import_module_target(node)):
            name, prefix = target
            if prefix:
                for module in self.known:
                    if module.startswith(name):
                        self.add(module, kind, node.lineno)
            else:
                self.add(name, kind, node.lineno)
            self.walk(node, kind)
        else:
            self.walk(node, kind)

    def import_from(self, node: ast.ImportFrom, kind: str) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        for alias in node.names:
            if f"{source}.{alias.name}" in self.known:
                self.add(f"{source}.{alias.name}", kind, node.lineno)
        self.add(source, kind, node.lineno)


def edges(root: Path) -> list[Edge]:
    """Every import edge between the modules under `root`."""
    known = modules(root)
    out: list[Edge] = []
    for name, path in known.items():
        reader = _Reader(name, path, known)
        reader.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), "top")
        out.extend(reader.edges)
    return out


def cycles(found: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in found:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(start: str) -> None:
        # Iterative, so a long chain of modules cannot exhaust the recursion limit.
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(out)


def folder(module: str) -> str:
    """The top folder of an installed module name: `spec`, `reference`, `fast`, `conformance`."""
    return module.split(".")[1]


if __name__ == "__main__":
    here = Path(__file__).resolve().parents[1]
    graph = edges(here)
    for component in cycles(graph):
        print("cycle:", " ".join(component))
        members = set(component)
        for e in graph:
            if e.source in members and e.target in members:
                print(f"    {e.source} -> {e.target} ({e.kind}, line {e.line})")
    for e in graph:
        if folder(e.target) not in (folder(e.source), "spec") and folder(e.source) != "conformance":
            print(f"layer: {e.source} -> {e.target} ({e.kind}, line {e.line})")
