"""A campaign's summary: counts per area and verdict, rule coverage, throughput and the shrunk
failures (conformance.campaign.report prints and writes it, conformance.campaign.svg draws it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict

import attrs

from pullspec.conformance.campaign.rows import SIMULATION, Aggregates, Replay, RowJSON
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.ops import OP_RULES, rule_sort_key
from pullspec.reference.sim.coverage import COVERABLE, TARGETS

#: Verdict columns of the tables, in order.
VERDICTS = ("PASS", "DIVERGED", "CRASHED", "TIMEOUT", "UNSUPPORTED")


def in_scope(area: str) -> tuple[str, ...]:
    """The rule IDs the ops of `area` can exercise (for the simulation, the rules a history can
    show, reference.sim.coverage), in catalogue order."""
    if area == SIMULATION:
        return tuple(sorted(COVERABLE, key=rule_sort_key))
    found = {r for ids in OP_RULES.get(area, {}).values() for r in ids}
    return tuple(sorted(found, key=rule_sort_key))


class AreaJSON(TypedDict):
    """One area in the summary's JSON."""

    traces: int
    ops: int
    verdicts: dict[str, int]
    ops_per_core_s: float
    rules_hit: list[str]
    rules_in_scope: int
    statuses: dict[str, int]
    #: The simulation only: seeds that reached each targeted rule.
    targets: NotRequired[dict[str, int]]


class Figures(TypedDict):
    """The summary's totals (`pullspec campaign --json`, "summary")."""

    impl: str
    master: str
    cores: int
    profiles: list[str]
    steps: int
    first_seed: int
    seeds: int
    partitions: int
    traces: int
    ops: int
    sim_events: int
    divergences: int
    crashed: int
    timeouts: int
    failed: int
    wall_s: float
    ops_per_s: float
    ops_per_min: int
    ops_per_core_s: float


class SummaryJSON(TypedDict):
    """What `pullspec campaign --json` prints and summary.json holds."""

    summary: Figures
    areas: dict[str, AreaJSON]
    unsupported: dict[str, str]
    failures: list[RowJSON]
    replays: list[JSONObject]
    timings: dict[str, float]
    out: str
    report: str


@attrs.frozen
class AreaLine:
    """One area's totals."""

    area: str
    traces: int
    ops: int
    #: Seconds the traces took, and CPU seconds they used (conformance.campaign.run.COLUMNS).
    elapsed_s: float
    cpu_s: float
    verdicts: Mapping[str, int]
    rules: Mapping[str, int]
    statuses: Mapping[str, int]

    @property
    def ops_per_core_s(self) -> float:
        """Diffed ops per CPU second of the traces: the rate of one busy core on this area."""
        return self.ops / self.cpu_s if self.cpu_s > 0 else 0.0

    @property
    def rules_hit(self) -> tuple[str, ...]:
        """In-scope rules at least one trace of this area exercised."""
        return tuple(r for r in in_scope(self.area) if self.rules.get(r))

    def rules_shown(self, sep: str) -> str:
        """Rules hit out of those in scope (`12/16`)."""
        return f"{len(self.rules_hit)}{sep}{len(in_scope(self.area))}"

    @property
    def targets(self) -> dict[str, int]:
        """The simulation's targeted rules (reference.sim.coverage.TARGETS) and how many seeds
        reached each; empty for the other areas."""
        if self.area != SIMULATION:
            return {}
        return {t: int(self.rules.get(t, 0)) for t in TARGETS}

    def to_json(self) -> AreaJSON:
        """The JSON form of this area in the summary."""
        out: AreaJSON = {
            "traces": self.traces,
            "ops": self.ops,
            "verdicts": dict(self.verdicts),
            "ops_per_core_s": round(self.ops_per_core_s, 1),
            "rules_hit": list(self.rules_hit),
            "rules_in_scope": len(in_scope(self.area)),
            "statuses": dict(sorted(self.statuses.items())),
        }
        if self.area == SIMULATION:
            out["targets"] = self.targets
        return out


@attrs.frozen
class Summary:
    """Everything a campaign reports."""

    impl: str
    master: str
    cores: int
    profiles: tuple[str, ...]
    steps: int
    first_seed: int
    seeds: int
    partitions: int
    wall_s: float
    areas: tuple[AreaLine, ...]
    unsupported: Mapping[str, str]
    failures: tuple[RowJSON, ...] = ()
    replays: tuple[Replay, ...] = ()
    #: (seconds, ops) as the progress line saw them.
    samples: tuple[tuple[float, int], ...] = ()
    out: str = ""
    report_dir: str = ""
    #: Seconds spent per phase on the driver: start (Spark), job, aggregate, shrink.
    timings: Mapping[str, float] = attrs.field(factory=dict)

    def count(self, verdict: str) -> int:
        """Traces with `verdict`."""
        return sum(a.verdicts.get(verdict, 0) for a in self.areas)

    @property
    def diffed(self) -> tuple[AreaLine, ...]:
        """The lockstep areas (all but the simulation, whose ops are history events)."""
        return tuple(a for a in self.areas if a.area != SIMULATION)

    @property
    def ops(self) -> int:
        """Diffed ops in all traces."""
        return sum(a.ops for a in self.diffed)

    @property
    def failed(self) -> int:
        """Traces that diverged, crashed or timed out."""
        return sum(self.count(v) for v in ("DIVERGED", "CRASHED", "TIMEOUT"))

    @property
    def ops_per_s(self) -> float:
        """Diffed ops per second of the job's wall time (Spark start-up excluded)."""
        return self.ops / self.wall_s if self.wall_s > 0 else 0.0

    def to_json(self) -> SummaryJSON:
        """The JSON `pullspec campaign --json` prints and summary.json holds."""
        cpu = sum(a.cpu_s for a in self.diffed)
        return {
            "summary": {
                "impl": self.impl,
                "master": self.master,
                "cores": self.cores,
                "profiles": list(self.profiles),
                "steps": self.steps,
                "first_seed": self.first_seed,
                "seeds": self.seeds,
                "partitions": self.partitions,
                "traces": sum(a.traces for a in self.areas),
                "ops": self.ops,
                "sim_events": sum(a.ops for a in self.areas if a.area == SIMULATION),
                "divergences": self.count("DIVERGED"),
                "crashed": self.count("CRASHED"),
                "timeouts": self.count("TIMEOUT"),
                "failed": self.failed,
                "wall_s": round(self.wall_s, 3),
                "ops_per_s": round(self.ops_per_s, 1),
                "ops_per_min": round(self.ops_per_s * 60),
                "ops_per_core_s": round(self.ops / cpu, 1) if cpu > 0 else 0.0,
            },
            "areas": {a.area: a.to_json() for a in self.areas},
            "unsupported": dict(self.unsupported),
            "failures": [RowJSON(**f) for f in self.failures],
            "replays": [r.to_json() for r in self.replays],
            "timings": {k: round(v, 2) for k, v in self.timings.items()},
            "out": self.out,
            "report": self.report_dir,
        }


def area_lines(aggregated: Aggregates, areas: tuple[str, ...]) -> tuple[AreaLine, ...]:
    """Each area's totals, from conformance.campaign.spark.aggregates."""
    lines = []
    for area in areas:
        groups = [g for g in aggregated["groups"] if g["area"] == area]
        verdicts = {v: sum(int(g["traces"]) for g in groups if g["verdict"] == v) for v in VERDICTS}
        lines.append(
            AreaLine(
                area,
                sum(int(g["traces"]) for g in groups),
                sum(int(g["ops"] or 0) for g in groups),
                sum(float(g["elapsed_s"] or 0.0) for g in groups),
                sum(float(g["cpu_s"] or 0.0) for g in groups),
                verdicts,
                aggregated["rules"].get(area, {}),
                aggregated["statuses"].get(area, {}),
            )
        )
    return tuple(lines)
