"""Observing candidates: run ops through the area adapters and compare what two candidates saw.

A `Session` is one fresh instance of one area on one candidate, built and driven by the area's
adapter (conformance.adapters.<area>), so every candidate — reference, fast, a `module:factory`
object or a subprocess (`cmd:`) — is observed through the same mapping. `compare` finds the first
field where an observation differs from the expected one and classifies it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from pathlib import Path

import attrs

from pullspec.conformance import vectors
from pullspec.conformance.candidates import Candidate
from pullspec.conformance.jsontypes import JSONValue
from pullspec.conformance.ops import (
    Observation,
    Op,
    check_area,
    rule_sort_key,
    rules_for,
    state_fields,
)
from pullspec.spec.errors import PullspecError, UnsupportedError
from pullspec.spec.profiles import Profile


class DivergenceKind(enum.Enum):
    """What kind of difference a DIVERGED verdict found."""

    #: One side raised a typed error and the other did not, or the error kinds differ.
    ERROR = "ERROR"
    #: A result field (status, code, offsets, returned messages…) differs.
    RESULT = "RESULT"
    #: A state field observed after the call (counters, trees, lock table, queue offsets…).
    STATE = "STATE"


@attrs.frozen
class Divergence:
    """The first difference between an expected and an actual observation."""

    kind: DivergenceKind
    field: str
    expected: JSONValue
    actual: JSONValue


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


class Session:
    """One fresh instance of `area` on `candidate`, created and driven by the area's adapter."""

    def __init__(
        self,
        candidate: Candidate,
        area: str,
        config: Mapping[str, JSONValue],
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
        return state_fields(self.area, self.config)


def case_rules(case: vectors.Case) -> tuple[str, ...]:
    """Every rule ID the ops of a vector case exercise, sorted."""
    area = check_area(case.get("area"))
    found = set(rules_for(area, "create"))
    for step in case.get("steps", ()):
        found.update(rules_for(area, str(step.get("op"))))
    return tuple(sorted(found, key=rule_sort_key))
