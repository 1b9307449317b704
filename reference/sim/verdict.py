"""The checker's verdict (`reference.sim.checker`): each anomaly found, and the counts by kind
(violations) and by rule (anomalies RocketMQ 4.x allows)."""

from __future__ import annotations

import attrs


@attrs.frozen
class Anomaly:
    """One failed invariant: its kind, the rule that allows it (None: a violation), when, what."""

    kind: str
    rule: str | None
    at: int
    detail: str


@attrs.define
class CheckResult:
    """The checker's verdict: violations by kind, allowed anomalies by rule, a few details of
    each kind, and counts of what the history holds."""

    violations: dict[str, int] = attrs.Factory(dict)
    allowed: dict[str, int] = attrs.Factory(dict)
    allowed_by_kind: dict[str, dict[str, int]] = attrs.Factory(dict)
    details: list[Anomaly] = attrs.Factory(list)
    stats: dict[str, int] = attrs.Factory(dict)
    #: The liveness verdict and the budgets (`Checker.finish`), and the rules the history
    #: showed (`reference.sim.coverage`).
    liveness: dict[str, object] = attrs.Factory(dict)
    coverage: dict[str, object] = attrs.Factory(dict)

    @property
    def ok(self) -> bool:
        """True when nothing is a violation."""
        return not self.violations

    def to_json(self) -> dict[str, object]:
        """{"violations": {kind: n}, "allowed": {rule: n}, "allowedByKind", "stats",
        "liveness", "coverage", "details"}."""
        return {
            "violations": dict(sorted(self.violations.items())),
            "allowed": dict(sorted(self.allowed.items())),
            "allowedByKind": {k: dict(sorted(v.items())) for k, v in self.allowed_by_kind.items()},
            "stats": dict(self.stats),
            "liveness": dict(self.liveness),
            "coverage": dict(self.coverage),
            "details": [attrs.asdict(a) for a in self.details],
        }
