"""The vector runner: replays RocketMQ-recorded vectors (../shared/vectors) against a candidate.

Each case runs on a fresh instance; each step's observation is compared field by field with the
step's `expect` (fields absent from `expect` are not compared). An `error` expect is met by any
typed `spec.errors` error. The first differing step ends the case as DIVERGED.
"""

from __future__ import annotations

import enum
import importlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import attrs

from pullspec.spec.errors import InvalidArgumentError, PullspecError, UnsupportedError
from pullspec.spec.profiles import Profile

AREAS: tuple[str, ...] = (
    *("store", "pull_code", "process_queue", "lock_manager", "send_back"),
    # Areas with reference-generated vectors only (vectors/reference-*, conformance.client_vectors).
    *("pull_loop", "pull_decision", "pull_service", "pull_request", "pull_result", "offset_store"),
    *("allocate", "rebalance", "consume_concurrently", "consume_orderly"),
    *("process_queue_maintenance", "broker_pull", "schedule", "store_layout", "invariants"),
)


class Verdict(enum.Enum):
    """The closed set of case verdicts."""

    PASS = "PASS"
    DIVERGED = "DIVERGED"
    CRASHED = "CRASHED"
    TIMEOUT = "TIMEOUT"
    UNSUPPORTED = "UNSUPPORTED"


@attrs.frozen
class CaseResult:
    """What happened to one vector case."""

    id: str
    area: str
    verdict: Verdict
    step: int | None = None
    op: str | None = None
    field: str | None = None
    expected: Any = None
    actual: Any = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form printed by `pullspec vectors check --json`."""
        out: dict[str, Any] = {"id": self.id, "area": self.area, "verdict": self.verdict.value}
        if self.verdict is not Verdict.PASS:
            out.update(
                step=self.step,
                op=self.op,
                field=self.field,
                expected=self.expected,
                actual=self.actual,
                detail=self.detail,
            )
        return out


class AreaAdapter(Protocol):
    """Runs one area's vector steps on a candidate (one module per area in conformance.adapters)."""

    def create(self, candidate: Any, config: dict[str, Any], profile: Profile, base: Path) -> Any:
        """A fresh instance for one case, or raise UnsupportedError."""
        ...

    def apply(self, instance: Any, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run one step and return the observation in the vectors' camelCase vocabulary."""
        ...


def adapter(area: str) -> AreaAdapter:
    """The adapter module of `area`."""
    if area not in AREAS:
        raise InvalidArgumentError("area", area, f"expected one of {', '.join(AREAS)}")
    try:
        module: Any = importlib.import_module(f"pullspec.conformance.adapters.{area}")
    except ModuleNotFoundError as exc:
        if exc.name != f"pullspec.conformance.adapters.{area}":
            raise
        raise UnsupportedError(f"area {area} has no adapter yet") from None
    return module  # type: ignore[no-any-return]


def load_cases(path: Path, areas: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
    """Every case in the JSON Lines files of `path` (a directory or a file), in file order."""
    wanted = set(areas) if areas else None
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise InvalidArgumentError("path", str(path), "holds no .jsonl vector files")
    for f in files:
        with f.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    case = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidArgumentError(f"{f}:{n}", line[:60], str(exc)) from None
                if wanted is None or case.get("area") in wanted:
                    yield case


def first_difference(expect: Any, actual: Any) -> tuple[str, Any, Any] | None:
    """The first field where `actual` differs from `expect`.

    Only top-level fields absent from `expect` are skipped (the vectors' rule); nested values
    (a property map, a lock table, a state array) must be equal as a whole.
    """
    if not isinstance(expect, dict) or not isinstance(actual, dict):
        return _nested_difference(expect, actual, "")
    for key, value in expect.items():
        if key not in actual:
            return (key, value, "<absent>")
        diff = _nested_difference(value, actual[key], key)
        if diff:
            return diff
    return None


def _nested_difference(expect: Any, actual: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(expect, dict) and isinstance(actual, dict):
        for key in sorted(set(expect) | set(actual), key=str):
            if key not in actual or key not in expect:
                return (f"{path}.{key}", expect.get(key, "<absent>"), actual.get(key, "<absent>"))
            diff = _nested_difference(expect[key], actual[key], f"{path}.{key}")
            if diff:
                return diff
        return None
    if isinstance(expect, list) and isinstance(actual, list | tuple):
        if len(expect) != len(actual):
            return (path or "<root>", expect, list(actual))
        for i, (e, a) in enumerate(zip(expect, actual, strict=True)):
            diff = _nested_difference(e, a, f"{path}[{i}]")
            if diff:
                return diff
        return None
    if expect != actual or (type(expect) is bool) != (type(actual) is bool):
        return (path or "<root>", expect, actual)
    return None


def run_case(candidate: Any, case: dict[str, Any], profile: Profile, base: Path) -> CaseResult:
    """Run one case on a fresh instance of `candidate`."""
    cid, area = case.get("id", "?"), case.get("area", "?")
    try:
        mod = adapter(area)
        instance = mod.create(candidate, case.get("config", {}), profile, base)
    except UnsupportedError as exc:
        return CaseResult(cid, area, Verdict.UNSUPPORTED, detail=str(exc))
    for i, step in enumerate(case["steps"]):
        op, expect = step["op"], step.get("expect", {})
        try:
            observed = mod.apply(instance, op, step.get("args", {}))
        except UnsupportedError as exc:
            return CaseResult(cid, area, Verdict.UNSUPPORTED, i, op, detail=str(exc))
        except PullspecError as exc:
            observed = {"error": exc.java_exception or exc.kind.value}
        except TimeoutError as exc:
            return CaseResult(
                cid, area, Verdict.TIMEOUT, i, op, detail=f"{type(exc).__name__}: {exc}"
            )
        except Exception as exc:  # a candidate bug: report, do not stop the run
            return CaseResult(
                cid, area, Verdict.CRASHED, i, op, detail=f"{type(exc).__name__}: {exc}"
            )
        if "error" in expect and "error" in observed:
            expect = {k: v for k, v in expect.items() if k != "error"}
        diff = first_difference(expect, observed)
        if diff:
            return CaseResult(cid, area, Verdict.DIVERGED, i, op, diff[0], diff[1], diff[2])
    return CaseResult(cid, area, Verdict.PASS)
