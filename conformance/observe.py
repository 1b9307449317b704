"""Observing candidates: run ops through the area adapters and compare what two candidates saw.

A `Session` is one fresh instance of one area on one candidate, built and driven by the area's
adapter (conformance.adapters.<area>), so every candidate — reference, fast, a `module:factory`
object or a subprocess (`cmd:`) — is observed through the same mapping. `compare` finds the first
field where an observation differs from the expected one and classifies it.

`Verdict` extends conformance.vectors.Verdict with TIMEOUT (a subprocess candidate that did not
answer in time); `verdict_of` maps a vector CaseResult onto it.
"""

from __future__ import annotations

import enum
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from pullspec.conformance import candidates, vectors
from pullspec.conformance.ops import Observation, Op, check_area, rules_for
from pullspec.spec.errors import PullspecError, UnsupportedError
from pullspec.spec.profiles import Profile


class Verdict(enum.Enum):
    """The closed set of verdicts: a case, a machine run or an interface as a whole."""

    PASS = "PASS"
    DIVERGED = "DIVERGED"
    CRASHED = "CRASHED"
    TIMEOUT = "TIMEOUT"
    UNSUPPORTED = "UNSUPPORTED"


class DivergenceKind(enum.Enum):
    """What kind of difference a DIVERGED verdict found."""

    #: One side raised a typed error and the other did not, or the error kinds differ.
    ERROR = "ERROR"
    #: A result field (status, code, offsets, returned messages…) differs.
    RESULT = "RESULT"
    #: A state field observed after the call (counters, trees, lock table, queue offsets…).
    STATE = "STATE"


class CandidateTimeoutError(TimeoutError):
    """A subprocess candidate did not answer within its timeout."""


class CandidateCrashedError(RuntimeError):
    """A subprocess candidate exited, closed its output or answered something unparseable."""


@attrs.frozen
class Divergence:
    """The first difference between an expected and an actual observation."""

    kind: DivergenceKind
    field: str
    expected: Any
    actual: Any


def compare(expected: Observation, actual: Observation) -> Divergence | None:
    """The first difference of `actual` from `expected`: error kind, then result, then state.

    Fields absent from `expected` are not compared (the shared vectors' comparison rule)."""
    if expected.error != actual.error:
        return Divergence(
            DivergenceKind.ERROR,
            "error",
            expected.error.value if expected.error else None,
            actual.error.value if actual.error else None,
        )
    for kind, want, got in (
        (DivergenceKind.RESULT, expected.fields, actual.fields),
        (DivergenceKind.STATE, expected.state, actual.state),
    ):
        diff = vectors.first_difference(dict(want), dict(got))
        if diff is not None:
            return Divergence(kind, diff[0], diff[1], diff[2])
    return None


def resolve_candidate(impl: str, timeout: float = 10.0) -> Any:
    """`candidates.resolve`, plus `cmd:<command>`: a subprocess speaking docs/protocol.md."""
    if impl.startswith("cmd:"):
        from pullspec.conformance.subprocess_candidate import SubprocessCandidate

        return SubprocessCandidate(shlex.split(impl[len("cmd:") :]), timeout=timeout)
    return candidates.resolve(impl)


class Session:
    """One fresh instance of `area` on `candidate`, created and driven by the area's adapter."""

    def __init__(
        self,
        candidate: Any,
        area: str,
        config: Mapping[str, Any],
        profile: Profile,
        base: Path = Path("."),
    ) -> None:
        self.area = check_area(area)
        self.config = dict(config)
        self._adapter = vectors.adapter(area)  # raises UnsupportedError without an adapter
        self._instance = self._adapter.create(candidate, self.config, profile, base)

    def apply(self, op: Op) -> Observation:
        """Run one op; a typed spec error becomes an error observation, UnsupportedError and
        anything else (a candidate bug, a dead subprocess) propagate."""
        try:
            raw = self._adapter.apply(self._instance, op.name, dict(op.args))
        except UnsupportedError:
            raise
        except PullspecError as exc:
            return Observation.failure(exc)
        return Observation.from_json(self.area, raw)

    @property
    def state_fields(self) -> tuple[str, ...]:
        """The positional state field names of this session's config (process_queue)."""
        fields = self.config.get("stateFields")
        if fields is None and self.area == "process_queue":
            from pullspec.conformance.adapters.process_queue import DEFAULT_STATE_FIELDS

            return DEFAULT_STATE_FIELDS
        return tuple(fields or ())


def verdict_of(result: vectors.CaseResult) -> Verdict:
    """A vector case's verdict in the richer enum: a CRASHED case whose candidate timed out is
    TIMEOUT (conformance.vectors has no TIMEOUT member yet and reports it as a crash)."""
    if result.verdict is vectors.Verdict.CRASHED and (result.detail or "").startswith(
        f"{CandidateTimeoutError.__name__}:"
    ):
        return Verdict.TIMEOUT
    return Verdict(result.verdict.value)


def case_rules(case: Mapping[str, Any]) -> tuple[str, ...]:
    """Every rule ID the ops of a vector case exercise, sorted."""
    area = check_area(case.get("area"))
    found = set(rules_for(area, "create"))
    for step in case.get("steps", ()):
        found.update(rules_for(area, str(step.get("op"))))
    return tuple(sorted(found, key=rule_sort_key))


def rule_sort_key(rule_id: str) -> tuple[str, int]:
    """Sort rule IDs by area, then number (STORE-2 before STORE-10)."""
    area, _, number = rule_id.partition("-")
    return (area, int(number) if number.isdigit() else 0)
