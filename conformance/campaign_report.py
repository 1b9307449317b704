"""A campaign's summary: counts per area and verdict, rule coverage, throughput and the shrunk
failures, printed as a table and written as JSON, Markdown and HTML (with the SVG plot of
conformance.campaign_svg) in the report folder.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from pullspec.conformance import campaign_svg
from pullspec.conformance.campaign import SIMULATION
from pullspec.conformance.campaign_shrink import Replay
from pullspec.conformance.ops import OP_RULES, rule_sort_key
from pullspec.reference.sim_coverage import COVERABLE, TARGETS

#: Verdict columns of the tables, in order.
VERDICTS = ("PASS", "DIVERGED", "CRASHED", "TIMEOUT", "UNSUPPORTED")


def in_scope(area: str) -> tuple[str, ...]:
    """The rule IDs the ops of `area` can exercise (for the simulation, the rules a history can
    show, reference.sim_coverage), in catalogue order."""
    if area == SIMULATION:
        return tuple(sorted(COVERABLE, key=rule_sort_key))
    found = {r for ids in OP_RULES.get(area, {}).values() for r in ids}
    return tuple(sorted(found, key=rule_sort_key))


@attrs.frozen
class AreaLine:
    """One area's totals."""

    area: str
    traces: int
    ops: int
    #: Seconds the traces took, and CPU seconds they used (conformance.campaign.COLUMNS).
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
        """The simulation's targeted rules (reference.sim_coverage.TARGETS) and how many seeds
        reached each; empty for the other areas."""
        if self.area != SIMULATION:
            return {}
        return {t: int(self.rules.get(t, 0)) for t in TARGETS}

    def to_json(self) -> dict[str, Any]:
        """The JSON form of this area in the summary."""
        return {
            "traces": self.traces,
            "ops": self.ops,
            "verdicts": dict(self.verdicts),
            "ops_per_core_s": round(self.ops_per_core_s, 1),
            "rules_hit": list(self.rules_hit),
            "rules_in_scope": len(in_scope(self.area)),
            "statuses": dict(sorted(self.statuses.items())),
            **({"targets": self.targets} if self.area == SIMULATION else {}),
        }


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
    failures: tuple[Mapping[str, Any], ...] = ()
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

    def to_json(self) -> dict[str, Any]:
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
            "failures": [dict(f) for f in self.failures],
            "replays": [r.to_json() for r in self.replays],
            "timings": {k: round(v, 2) for k, v in self.timings.items()},
            "out": self.out,
            "report": self.report_dir,
        }


def summarise(aggregated: Mapping[str, Any], areas: tuple[str, ...], **fields: Any) -> Summary:
    """A Summary from conformance.campaign_spark.aggregates and the campaign's settings."""
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
    return Summary(areas=tuple(lines), failures=tuple(aggregated.get("failures", ())), **fields)


def _ops(n: int) -> str:
    return f"{n} op" if n == 1 else f"{n} ops"


def _seeds(s: Summary) -> str:
    return f"{s.first_seed}…{s.first_seed + s.seeds - 1}" if s.seeds else "none"


def _header(s: Summary) -> str:
    return (
        f"campaign {s.impl} vs reference: profile {', '.join(s.profiles)}, {s.steps} steps, "
        f"seeds {_seeds(s)}, {s.master} ({s.cores} core{'s' if s.cores != 1 else ''}, "
        f"{s.partitions} tasks)"
    )


def _throughput(s: Summary) -> str:
    plural = "s" if s.failed != 1 else ""
    verdict = f"{s.failed} failing trace{plural}" if s.failed else "0 divergences"
    return (
        f"{s.ops:,} diffed ops in {s.wall_s:.1f} s: {s.ops_per_s:,.0f} ops/s "
        f"({s.ops_per_s * 60 / 1e6:.2f} M ops/min); {verdict}"
    )


def _targets(s: Summary) -> list[str]:
    """A line per simulation area: how many seeds reached each targeted rule."""
    return [
        f"{a.area} targets reached: "
        + ", ".join(f"{rule} {n}/{a.traces}" for rule, n in a.targets.items())
        for a in s.areas
        if a.area == SIMULATION
    ]


def text(s: Summary) -> str:
    """The summary table printed at the end of a campaign."""
    head = f"{'area':<14}{'traces':>8}{'ops':>11}" + "".join(f"{v:>12}" for v in VERDICTS[:4])
    lines = [_header(s), head + f"{'ops/s/core':>12}{'rules':>8}"]
    for a in s.areas:
        counts = "".join(f"{a.verdicts.get(v, 0):>12}" for v in VERDICTS[:4])
        rules = a.rules_shown("/")
        lines.append(
            f"{a.area:<14}{a.traces:>8}{a.ops:>11,}{counts}{a.ops_per_core_s:>12,.0f}{rules:>8}"
        )
    lines.extend(f"{area:<14}UNSUPPORTED: {why}" for area, why in s.unsupported.items())
    if len(s.diffed) < len(s.areas):
        lines.append(
            "(simulation: the simulator run with the reference's parts and with the "
            "candidate's, histories compared event by event; its ops are events)"
        )
        lines.extend(_targets(s))
    lines.append(_throughput(s))
    for f in s.failures[:10]:
        lines.append(
            f"  {f['verdict']} {f['area']} profile {f['profile']} seed {f['seed']} step "
            f"{f['first_divergent_step']} {f['divergent_op'] or ''}: "
            f"{f['divergent_field'] or f['detail'] or ''} [{', '.join(f['divergence_rules'])}]"
        )
    for r in s.replays:
        lines.append(f"  minimal trace ({_ops(r.steps)}): {r.command}")
    if s.out:
        lines.append(f"rows: {s.out} (Parquet, area=…/verdict=…); report: {s.report_dir}")
    return "\n".join(lines)


def markdown(s: Summary) -> str:
    """The summary as a Markdown page (summary.md)."""
    out = [f"# Campaign: {s.impl} vs reference", "", _header(s) + ".", "", _throughput(s) + ".", ""]
    out += ["| area | traces | ops | " + " | ".join(VERDICTS) + " | ops/s per core | rules hit |"]
    out += ["|---" * (len(VERDICTS) + 5) + "|"]
    for a in s.areas:
        counts = " | ".join(str(a.verdicts.get(v, 0)) for v in VERDICTS)
        rules = a.rules_shown(" of ")
        out.append(
            f"| {a.area} | {a.traces} | {a.ops:,} | {counts} | {a.ops_per_core_s:,.0f} | {rules} |"
        )
    for area, why in s.unsupported.items():
        out.append(f"| {area} | – | – | UNSUPPORTED: {why} |" + " |" * (len(VERDICTS) + 1))
    out += ["", *_targets(s), "", "![Rule coverage and throughput](campaign.svg)", ""]
    if s.replays:
        out += ["## Minimal failing traces", ""]
        out += [f"- {r.area} seed {r.seed} ({_ops(r.steps)}): `{r.command}`" for r in s.replays]
        out.append("")
    return "\n".join(out)


def _cell(value: Any) -> str:
    return f"<td>{html.escape(str(value))}</td>"


def page(s: Summary, svg: str) -> str:
    """The summary as a self-contained HTML page (summary.html) with the plot inline."""
    heads = ["area", "traces", "ops", *VERDICTS, "ops/s per core", "rules hit"]
    rows = [
        "<tr>"
        + "".join(
            _cell(v)
            for v in (
                a.area,
                a.traces,
                f"{a.ops:,}",
                *(a.verdicts.get(v, 0) for v in VERDICTS),
                f"{a.ops_per_core_s:,.0f}",
                a.rules_shown(" of "),
            )
        )
        + "</tr>"
        for a in s.areas
    ]
    rows += [
        f"<tr>{_cell(area)}<td colspan='{len(heads) - 1}' style='text-align:left'>"
        f"UNSUPPORTED: {html.escape(why)}</td></tr>"
        for area, why in s.unsupported.items()
    ]
    replays = "".join(
        f"<li>{html.escape(r.area)} seed {r.seed} ({_ops(r.steps)}): "
        f"<code>{html.escape(r.command)}</code></li>"
        for r in s.replays
    )
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>Campaign: {html.escape(s.impl)} vs reference</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style></head><body>"
        f"<h1>Campaign: {html.escape(s.impl)} vs reference</h1>"
        f"<p>{html.escape(_header(s))}.</p><p>{html.escape(_throughput(s))}.</p>"
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in heads)
        + "</tr>"
        + "".join(rows)
        + "</table>"
        + (f"<h2>Minimal failing traces</h2><ul>{replays}</ul>" if replays else "")
        + svg
        + "</body></html>\n"
    )


def write(s: Summary, directory: Path) -> dict[str, str]:
    """Write summary.json, summary.md, summary.html and campaign.svg; answer their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    svg = campaign_svg.plot(s)
    files = {
        "json": ("summary.json", json.dumps(s.to_json(), indent=2, default=str) + "\n"),
        "markdown": ("summary.md", markdown(s)),
        "html": ("summary.html", page(s, svg)),
        "svg": ("campaign.svg", svg),
    }
    for name, content in files.values():
        (directory / name).write_text(content, encoding="utf-8")
    return {key: str(directory / name) for key, (name, _) in files.items()}
