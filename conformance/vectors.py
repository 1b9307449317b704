"""The vector runner: replays RocketMQ-recorded vectors (../shared/vectors) against a candidate.

Each case runs on a fresh instance; each step's observation is compared field by field with the
step's `expect` (fields absent from `expect` are not compared). An `error` expect is met by any
typed `spec.errors` error. The first differing step ends the case as DIVERGED; its result names
the step (1-based, as campaign rows do), the op's arguments and the rule IDs the step involves.

A vector path is a JSON Lines file, a folder of them, or a store directory of `../shared/stores/`
(its `answers.jsonl`). Every line must be a case object of the vector format; a line that is not
(not UTF-8, not JSON, not an object, a field of the wrong type) is a `VectorFormatError` naming
the file and line.
"""

from __future__ import annotations

import enum
import importlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NotRequired, Protocol, TypedDict, TypeVar, cast

import attrs

from pullspec.conformance import differences
from pullspec.conformance.candidates import Candidate
from pullspec.conformance.jsontypes import JSONObject, JSONValue, is_array, is_object
from pullspec.conformance.ops import OP_RULES, rules_for
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


class CaseResultJSON(TypedDict):
    """A CaseResult as `pullspec vectors check --json` prints it: where a case that did not pass
    stopped, and why."""

    id: str
    area: str
    verdict: str
    step: NotRequired[int | None]
    op: NotRequired[str | None]
    args: NotRequired[JSONObject | None]
    field: NotRequired[str | None]
    expected: NotRequired[JSONValue]
    actual: NotRequired[JSONValue]
    rules: NotRequired[list[str]]
    detail: NotRequired[str | None]


@attrs.frozen
class CaseResult:
    """What happened to one vector case: for a case that did not pass, the step (1-based) and op
    where it stopped, the op's arguments, the first differing field and the rule IDs involved."""

    id: str
    area: str
    verdict: Verdict
    step: int | None = None
    op: str | None = None
    field: str | None = None
    expected: JSONValue = None
    actual: JSONValue = None
    detail: str | None = None
    args: JSONObject | None = None
    rules: tuple[str, ...] = ()

    def to_json(self) -> CaseResultJSON:
        """The JSON form printed by `pullspec vectors check --json`."""
        out: CaseResultJSON = {"id": self.id, "area": self.area, "verdict": self.verdict.value}
        if self.verdict is not Verdict.PASS:
            out.update(
                {
                    "step": self.step,
                    "op": self.op,
                    "args": self.args,
                    "field": self.field,
                    "expected": self.expected,
                    "actual": self.actual,
                    "rules": list(self.rules),
                    "detail": self.detail,
                }
            )
        return out

    def describe(self) -> str:
        """One line: verdict, case, step, op and arguments, the difference, the rules."""
        where = f"step {self.step} {self.op}({_args_text(self.args)})" if self.op else "create"
        if self.verdict is Verdict.DIVERGED:
            what = f"{self.field} expected {self.expected!r} actual {self.actual!r}"
        else:
            what = self.detail or ""
        rules = f" [{', '.join(self.rules)}]" if self.rules else ""
        return f"{self.verdict.value:<11} {self.id} {where}: {what}{rules}".rstrip()


#: Characters of an op's arguments shown in a one-line divergence.
ARGS_SHOWN = 160


def _args_text(args: JSONObject | None) -> str:
    text = json.dumps(args or {}, separators=(", ", "="), default=str)[1:-1].replace('"', "")
    return text if len(text) <= ARGS_SHOWN else text[: ARGS_SHOWN - 1] + "…"


class VectorFormatError(InvalidArgumentError):
    """A vector file that is not in the vector format: names the file and line."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(where, None, reason)

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


class Step(TypedDict):
    """One step of a case: an op, its arguments and what RocketMQ answered (absent fields of
    `expect` are not compared)."""

    op: str
    args: NotRequired[JSONObject]
    expect: NotRequired[JSONObject]


class Case(TypedDict):
    """One vector case (../shared/vectors/README.md, "Format"), as `parse_case` checked it."""

    area: str
    steps: list[Step]
    id: NotRequired[str | int]
    config: NotRequired[JSONObject]
    version: NotRequired[str]
    seed: NotRequired[int]


class ManifestCase(TypedDict):
    """One case of a generated folder's manifest.json: its id, area, kind (``edge`` or
    ``random``) and the rule IDs it covers."""

    id: str
    area: str
    kind: str
    rules: list[str]


class Manifest(TypedDict):
    """What the manifest.json of every generated vector folder holds: its format, profile and
    seed, the file of each area, and the rule IDs the folder and each case cover."""

    format: str
    profile: str
    rocketmqVersion: str
    seed: int
    files: dict[str, str]
    rules: list[str]
    cases: list[ManifestCase]


#: What an adapter's `create` answers and its `apply` is given back: opaque to the runner.
Instance = TypeVar("Instance")


class AreaAdapter(Protocol[Instance]):
    """Runs one area's vector steps on a candidate (one module per area in conformance.adapters)."""

    def create(
        self, candidate: Candidate, config: JSONObject, profile: Profile, base: Path
    ) -> Instance:
        """A fresh instance for one case, or raise UnsupportedError."""
        ...

    def apply(self, instance: Instance, op: str, args: JSONObject) -> JSONObject:
        """Run one step and return the observation in the vectors' camelCase vocabulary."""
        ...


def adapter(area: str) -> AreaAdapter[object]:
    """The adapter module of `area` (the runner only hands `create`'s answer back to `apply`)."""
    if area not in AREAS:
        raise InvalidArgumentError("area", area, f"expected one of {', '.join(AREAS)}")
    try:
        module = importlib.import_module(f"pullspec.conformance.adapters.{area}")
    except ModuleNotFoundError as exc:
        if exc.name != f"pullspec.conformance.adapters.{area}":
            raise
        raise UnsupportedError(f"area {area} has no adapter yet") from None
    # A module found by name: tests/test_vectors_generated.py checks each one is an AreaAdapter.
    return cast("AreaAdapter[object]", module)


def profile_folder(profile: Profile) -> str:
    """The recorded vector folder of a profile: ``rocketmq-4.9.7`` for 4.9."""
    return "rocketmq-" + profile.tag.removeprefix("rocketmq-all-")


#: The repository's reference-generated vectors (one ``reference-<profile>`` folder each).
GENERATED_VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def generated_folder(profile: Profile) -> str:
    """The reference-generated vector folder of a profile: ``reference-4.9`` for 4.9."""
    return f"reference-{profile.value}"


#: The files of a store directory of ../shared/stores: the broker's answers are its vectors.
STORE_ANSWERS, STORE_MESSAGES = "answers.jsonl", "messages.jsonl"


def vector_files(path: Path) -> list[Path]:
    """The vector files of `path`: the file itself, a store directory's answers.jsonl, or every
    .jsonl file of a folder (sorted)."""
    if not path.exists():
        raise VectorFormatError(str(path), "no such file or folder")
    if not path.is_dir():
        return [path]
    if (path / STORE_ANSWERS).is_file() and (path / STORE_MESSAGES).is_file():
        return [path / STORE_ANSWERS]
    files = sorted(p for p in path.glob("*.jsonl") if p.is_file())
    if not files:
        raise VectorFormatError(str(path), "holds no .jsonl vector files")
    return files


def load_cases(path: Path, areas: Iterable[str] | None = None) -> Iterator[Case]:
    """Every case in the vector files of `path` (a file, a folder or a store directory), in
    file order, each checked against the vector format."""
    wanted = set(areas) if areas else None
    for f in vector_files(path):
        try:
            with f.open("rb") as fh:
                for n, raw in enumerate(fh, 1):
                    if not raw.strip():
                        continue
                    case = parse_case(raw, f"{f}:{n}")
                    if wanted is None or case["area"] in wanted:
                        yield case
        except IsADirectoryError:
            raise VectorFormatError(str(f), "is a folder, not a vector file") from None


def base_of(path: Path) -> Path:
    """The folder a vector path's cases resolve their files from (a store case's `storeDir`)."""
    return path if path.is_dir() else path.parent


def load_cases_with_base(
    paths: Iterable[Path], areas: Iterable[str] | None = None
) -> list[tuple[Case, Path]]:
    """Every case of every path, each with the folder `run_case` must be given for it."""
    wanted = list(areas) if areas is not None else None
    return [(case, base_of(path)) for path in paths for case in load_cases(path, wanted)]


def parse_case(raw: bytes, where: str) -> Case:
    """One line of a vector file as a case, or VectorFormatError naming `where`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VectorFormatError(where, f"not UTF-8 (byte {exc.start})") from None
    try:
        case: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VectorFormatError(where, f"not JSON: {exc.msg} at column {exc.colno}") from None
    if not is_object(case):
        raise VectorFormatError(where, f"a case must be a JSON object, not {_json_type(case)}")
    _require(case, "area", str, where)
    if case["area"] not in AREAS:
        raise VectorFormatError(where, f"unknown area {case['area']!r}")
    if "id" in case and not isinstance(case["id"], str | int):
        raise VectorFormatError(where, f"id must be a string, not {_json_type(case['id'])}")
    if "config" in case:
        _require(case, "config", dict, where)
    steps = _require(case, "steps", list, where)
    for i, step in enumerate(steps if is_array(steps) else (), 1):
        at = f"{where} step {i}"
        if not is_object(step):
            raise VectorFormatError(at, f"a step must be a JSON object, not {_json_type(step)}")
        _require(step, "op", str, at)
        for key in ("args", "expect"):
            if key in step:
                _require(step, key, dict, at)
    # Checked above: every key the runner reads has its type (the others are informational).
    return cast(Case, case)


def _require(obj: Mapping[str, JSONValue], key: str, kind: type, where: str) -> JSONValue:
    if key not in obj:
        raise VectorFormatError(where, f"{key} is missing")
    if not isinstance(obj[key], kind) or isinstance(obj[key], bool):
        expected = {"str": "a string", "dict": "an object", "list": "a list"}[kind.__name__]
        raise VectorFormatError(where, f"{key} must be {expected}, not {_json_type(obj[key])}")
    return obj[key]


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


#: Where a step's observation first differs from its expect: (field path, expected, actual).
Difference = tuple[str, JSONValue, JSONValue]


def first_difference(expect: JSONValue, actual: JSONValue) -> Difference | None:
    """The first field where `actual` differs from `expect`.

    Only top-level fields absent from `expect` are skipped (the vectors' rule); nested values
    (a property map, a lock table, a state array) must be equal as a whole.
    """
    if not is_object(expect) or not is_object(actual):
        return _nested_difference(expect, actual, "")
    for key, value in expect.items():
        if key not in actual:
            return (key, value, "<absent>")
        diff = _nested_difference(value, actual[key], key)
        if diff:
            return diff
    return None


def _nested_difference(expect: JSONValue, actual: JSONValue, path: str) -> Difference | None:
    if is_object(expect) and is_object(actual):
        for key in sorted(set(expect) | set(actual), key=str):
            if key not in actual or key not in expect:
                return (f"{path}.{key}", expect.get(key, "<absent>"), actual.get(key, "<absent>"))
            diff = _nested_difference(expect[key], actual[key], f"{path}.{key}")
            if diff:
                return diff
        return None
    # An expected tuple (a Python side's observation) is compared as a whole, as ever.
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


def step_rules(case: Case, op: str, field: str | None, expect: JSONValue) -> tuple[str, ...]:
    """The rule IDs a step of `case` involves: those of the differing field when known, else
    every rule the op exercises (empty for areas whose ops carry no rule table)."""
    area = case["area"]
    if area not in OP_RULES:
        return ()
    fields = case.get("config", {}).get("stateFields", ())
    return rules_for(
        area,
        op,
        field,
        tuple(str(f) for f in fields) if is_array(fields) else (),
        expect if is_object(expect) else None,
    )


def missing_field(exc: KeyError, given: tuple[JSONObject, ...], where: str, what: str) -> None:
    """Raise VectorFormatError when the adapter looked up a key that none of the vector's
    dictionaries `given` has (the vector's fault); any other KeyError is the candidate's crash."""
    key = exc.args[0] if exc.args else None
    if isinstance(key, str) and not any(is_object(d) and key in d for d in given):
        raise VectorFormatError(where, f"{key} is missing from {what}") from None


def run_case(candidate: Candidate, case: Case, profile: Profile, base: Path) -> CaseResult:
    """Run one case on a fresh instance of `candidate`."""
    cid, area = str(case.get("id", "?")), case.get("area", "?")
    config = case.get("config", {})
    try:
        mod = adapter(area)
        instance = mod.create(candidate, config, profile, base)
    except UnsupportedError as exc:
        return CaseResult(cid, area, Verdict.UNSUPPORTED, detail=str(exc))
    except KeyError as exc:
        missing_field(exc, (config,), f"case {cid}", "its config")
        return CaseResult(cid, area, Verdict.CRASHED, detail=f"create: KeyError: {exc}")
    except TimeoutError as exc:
        return CaseResult(cid, area, Verdict.TIMEOUT, detail=f"create: {type(exc).__name__}: {exc}")
    except PullspecError:
        raise  # a config value the spec refuses: the vector's fault, not the candidate's
    except Exception as exc:  # the candidate's factory crashed
        return CaseResult(cid, area, Verdict.CRASHED, detail=f"create: {type(exc).__name__}: {exc}")
    for n, step in enumerate(case["steps"], 1):
        op, expect, args = step["op"], step.get("expect", {}), step.get("args", {})

        def stopped(verdict: Verdict, detail: str) -> CaseResult:
            rules = step_rules(case, op, None, expect)  # noqa: B023 - called at once
            return CaseResult(cid, area, verdict, n, op, detail=detail, args=args, rules=rules)  # noqa: B023

        try:
            observed = mod.apply(instance, op, args)
        except UnsupportedError as exc:
            return stopped(Verdict.UNSUPPORTED, str(exc))
        except PullspecError as exc:
            observed = {"error": exc.java_exception or exc.kind.value}
        except TimeoutError as exc:
            return stopped(Verdict.TIMEOUT, f"{type(exc).__name__}: {exc}")
        except KeyError as exc:
            missing_field(exc, (args, config), f"case {cid} step {n} ({op})", "its args and config")
            return stopped(Verdict.CRASHED, f"KeyError: {exc}")
        except Exception as exc:  # a candidate bug: report, do not stop the run
            return stopped(Verdict.CRASHED, f"{type(exc).__name__}: {exc}")
        if "error" in expect and "error" in observed:
            expect = {k: v for k, v in expect.items() if k != "error"}
        diff = first_difference(expect, observed)
        if diff:
            known = differences.explain(area, op, args, expect, observed)
            return CaseResult(
                cid, area, Verdict.DIVERGED, n, op, diff[0], diff[1], diff[2], args=args,
                rules=step_rules(case, op, diff[0], expect), detail=known,
            )  # fmt: skip
    return CaseResult(cid, area, Verdict.PASS)
