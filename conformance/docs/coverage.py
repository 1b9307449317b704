"""Which tests and which vector cases cover each rule, found rather than typed by hand.

Tests: every `tests/**/test_*.py` is parsed (never imported). A test covers a rule when its source
names the rule ID (``"STORE-5"``), refers to one of the rule's functions through the names it
imports (``spec.store.next_offset_correction``), carries the ID in its name
(``test_flow_5_to_8_...`` covers FLOW-5 … FLOW-8), or calls a helper function or class of the
same file that does one of these.

Vectors: every recorded case is replayed against the reference candidate with a profiler
installed; a case covers a rule when one of the rule's functions ran while the case passed. The
repository's reference-generated vectors (`vectors/reference-<profile>`, written by
`conformance.client_vectors`) are replayed the same way after the recorded ones, so the client
areas the recordings never reach count too.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import FrameType

import attrs

from pullspec.conformance import vectors
from pullspec.conformance.resolve import resolve
from pullspec.spec import rules
from pullspec.spec.errors import PullspecError
from pullspec.spec.profiles import ALL_PROFILES, Profile

_ID_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_-])([A-Z]+)-([0-9]+)(?![0-9])")


@attrs.frozen
class TestRef:
    """One test that covers a rule, and how that was found."""

    file: str
    name: str
    line: int
    how: str

    @property
    def node_id(self) -> str:
        """The pytest node id, ``tests/test_x.py::test_y``."""
        return f"{self.file}::{self.name}"


@attrs.frozen
class VectorHit:
    """One vector case during which a rule function ran, and the vector file it is in."""

    profile: Profile
    case_id: str
    area: str
    verdict: vectors.Verdict
    #: The vector file's path (its folder names the case page that shows the case).
    path: str = ""


@attrs.frozen
class VectorRun:
    """The verdict counts of one vector area in one profile's folder."""

    profile: Profile
    area: str
    verdicts: dict[str, int]
    rule_areas: tuple[str, ...]
    detail: str | None = None

    @property
    def total(self) -> int:
        """The number of cases run."""
        return sum(self.verdicts.values())


@attrs.frozen
class Coverage:
    """Tests and vector cases per rule ID, plus the vector runs' summaries."""

    tests: dict[str, tuple[TestRef, ...]]
    vectors: dict[str, tuple[VectorHit, ...]]
    runs: tuple[VectorRun, ...]

    def passing_vectors(self, rule_id: str) -> tuple[VectorHit, ...]:
        """The cases that ran the rule and passed."""
        return tuple(h for h in self.vectors.get(rule_id, ()) if h.verdict is vectors.Verdict.PASS)


# -- tests ---------------------------------------------------------------------------------------


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name → the qualified name it was imported as."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                out[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def _dotted(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _references(node: ast.AST, imports: dict[str, str]) -> tuple[set[str], set[str]]:
    """(qualified names reached through imports, bare names used) inside `node`."""
    qualified: set[str] = set()
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        if isinstance(sub, ast.Name | ast.Attribute):
            parts = _dotted(sub)
            if parts and parts[0] in imports:
                qualified.add(".".join([imports[parts[0]], *parts[1:]]))
    return qualified, names


def _ids_in_name(name: str, known: set[str]) -> set[str]:
    """Rule IDs a test name spells: test_flow_5_to_8_x → FLOW-5..8, test_pullq_4_6_8 → 4, 6, 8."""
    tokens = name.removeprefix("test_").split("_")
    if len(tokens) < 2:
        return set()
    area = tokens[0].upper()
    numbers: list[int] = []
    pending_range = False
    for token in tokens[1:]:
        if token.isdigit():
            n = int(token)
            if pending_range and numbers:
                numbers.extend(range(numbers[-1] + 1, n + 1))
            else:
                numbers.append(n)
            pending_range = False
        elif token == "to":
            pending_range = True
        elif token != "and":
            break
    return {f"{area}-{n}" for n in numbers} & known


@attrs.frozen
class _Unit:
    name: str
    line: int
    ids: frozenset[str]
    how: dict[str, str]
    uses: frozenset[str]


def _segment(lines: list[str], node: ast.AST) -> str:
    """The source lines of `node` (ast.get_source_segment re-splits the file on every call)."""
    first = getattr(node, "lineno", 1)
    last = getattr(node, "end_lineno", None) or first
    return "\n".join(lines[first - 1 : last])


def _unit(
    name: str,
    nodes: list[ast.AST],
    source: list[str],
    imports: dict[str, str],
    functions: dict[str, set[str]],
    known: set[str],
) -> _Unit:
    how: dict[str, str] = {}
    uses: set[str] = set()
    line = min(getattr(n, "lineno", 0) for n in nodes)
    for node in nodes:
        decorators = getattr(node, "decorator_list", [])
        pieces = [_segment(source, d) for d in decorators]
        pieces.append(_segment(source, node))
        for m in _ID_IN_TEXT.finditer("\n".join(pieces)):
            rid = f"{m.group(1)}-{m.group(2)}"
            if rid in known:
                how.setdefault(rid, "rule ID")
        qualified, names = _references(node, imports)
        uses |= names
        for q in qualified:
            if q.startswith("spec."):
                for rid in functions.get(q.rsplit(".", 1)[-1], set()):
                    how.setdefault(rid, "rule function")
    for rid in _ids_in_name(name, known):
        how.setdefault(rid, "test name")
    return _Unit(name, line, frozenset(how), how, frozenset(uses))


def scan_tests(
    tests_dir: Path, catalogue: Iterable[rules.Rule], root: Path | None = None
) -> dict[str, tuple[TestRef, ...]]:
    """Rule ID → the tests under `tests_dir` that cover it (see the module docstring)."""
    cat = list(catalogue)
    known = {r.id for r in cat}
    functions: dict[str, set[str]] = {}
    for r in cat:
        for v in r.variants:
            functions.setdefault(v.function.rsplit(".", 1)[-1], set()).add(r.id)
    base = root or tests_dir.parent
    found: dict[str, list[TestRef]] = {}
    for path in sorted(tests_dir.rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        source = text.splitlines()
        imports = _imports(tree)
        rel = path.relative_to(base).as_posix()
        helpers: dict[str, _Unit] = {}
        tests: list[_Unit] = []
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name.startswith("test_"):
                    tests.append(_unit(node.name, [node], source, imports, functions, known))
                elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and item.name.startswith("test_"):
                            name = f"{node.name}::{item.name}"
                            tests.append(_unit(name, [item], source, imports, functions, known))
                else:
                    helpers[node.name] = _unit(node.name, [node], source, imports, functions, known)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                # `test_machine = Machine.TestCase`: a Hypothesis state machine collected as a test
                target = node.targets[0]
                if isinstance(target, ast.Name) and target.id.startswith(("test_", "Test")):
                    tests.append(_unit(target.id, [node], source, imports, functions, known))
        for test in tests:
            how = dict(test.how)
            for used in sorted(test.uses):
                helper = helpers.get(used)
                if helper is not None:
                    for rid in helper.ids:
                        how.setdefault(rid, f"helper {used}")
            for rid, why in how.items():
                found.setdefault(rid, []).append(TestRef(rel, test.name, test.line, why))
    return {rid: tuple(refs) for rid, refs in found.items()}


# -- vectors -------------------------------------------------------------------------------------


def trace_profile(
    vectors_dir: Path,
    profile: Profile,
    impl: str = "reference",
    generated_dir: Path | None = vectors.GENERATED_VECTORS,
) -> tuple[dict[str, tuple[VectorHit, ...]], tuple[VectorRun, ...]]:
    """Replay one profile's recorded vector folders on `impl` (``rocketmq-<tag>`` and, when
    present, ``generated-<tag>``), recording the rule functions each case ran; then, unless
    `generated_dir` is None, its reference-generated folder there as well.

    Module-level and self-contained so that the two profiles can run in two processes.
    """
    codes = rules.rule_codes()
    candidate = resolve(impl)
    hits: dict[str, list[VectorHit]] = {}
    current: set[str] = set()

    def profiler(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            found = codes.get(frame.f_code)
            if found:
                current.update(found)

    recorded = vectors.profile_folder(profile)
    folders = [vectors_dir / recorded, vectors_dir / recorded.replace("rocketmq-", "generated-")]
    if generated_dir is not None:
        folders.append(generated_dir / vectors.generated_folder(profile))
    per_area: dict[str, dict[str, int]] = {}
    area_rules: dict[str, set[str]] = {}
    details: dict[str, str] = {}
    cases = (
        (folder, file, case)
        for folder in folders
        if folder.is_dir()
        for file in vectors.vector_files(folder)
        for case in vectors.load_cases(file)
    )
    for folder, file, case in cases:
        current.clear()
        previous = sys.getprofile()
        sys.setprofile(profiler)
        try:
            result = vectors.run_case(candidate, case, profile, folder)
        finally:
            sys.setprofile(previous)
        counts = per_area.setdefault(result.area, {})
        counts[result.verdict.value] = counts.get(result.verdict.value, 0) + 1
        if result.verdict is not vectors.Verdict.PASS:
            details.setdefault(result.area, _reason(result))
        for rid in current:
            hits.setdefault(rid, []).append(
                VectorHit(profile, result.id, result.area, result.verdict, str(file))
            )
            area_rules.setdefault(result.area, set()).add(rid.split("-")[0])
    runs = tuple(
        VectorRun(profile, area, counts, tuple(sorted(area_rules.get(area, ()))), details.get(area))
        for area, counts in per_area.items()
    )
    return {rid: tuple(h) for rid, h in hits.items()}, runs


def _reason(result: vectors.CaseResult) -> str:
    if result.detail:
        return f"{result.id}: {result.detail}"
    return (
        f"{result.id} step {result.step} {result.op}: {result.field} expected "
        f"{result.expected!r} actual {result.actual!r}"
    )


def merge(
    parts: Iterable[tuple[dict[str, tuple[VectorHit, ...]], tuple[VectorRun, ...]]],
) -> tuple[dict[str, tuple[VectorHit, ...]], tuple[VectorRun, ...]]:
    """Join the per-profile traces."""
    hits: dict[str, tuple[VectorHit, ...]] = {}
    runs: list[VectorRun] = []
    for part_hits, part_runs in parts:
        for rid, found in part_hits.items():
            hits[rid] = hits.get(rid, ()) + found
        runs.extend(part_runs)
    return hits, tuple(runs)


def trace_vectors(
    vectors_dir: Path, impl: str = "reference"
) -> tuple[dict[str, tuple[VectorHit, ...]], tuple[VectorRun, ...]]:
    """Replay every vector case of both profiles on `impl`, one profile per process."""
    with ProcessPoolExecutor(max_workers=len(ALL_PROFILES)) as pool:
        futures = [pool.submit(trace_profile, vectors_dir, p, impl) for p in ALL_PROFILES]
        return merge(f.result() for f in futures)


def coverage(
    tests_dir: Path, vectors_dir: Path, catalogue: Iterable[rules.Rule], impl: str = "reference"
) -> Coverage:
    """Tests and vector cases for every rule of `catalogue`."""
    cat = list(catalogue)
    try:
        hits, runs = trace_vectors(vectors_dir, impl)
    except PullspecError as exc:
        raise RuntimeError(f"cannot replay the vectors in {vectors_dir}: {exc}") from exc
    return Coverage(scan_tests(tests_dir, cat), hits, runs)
