"""A campaign's summary (conformance.campaign.summary) printed as a table and written as JSON,
Markdown and HTML (with the SVG plot of
conformance.campaign.svg) in the report folder.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from pullspec.conformance.campaign import svg as campaign_svg
from pullspec.conformance.campaign.rows import SIMULATION
from pullspec.conformance.campaign.summary import VERDICTS, Summary


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
    # The area column as wide as the longest name and a blank (consume_concurrently is 20).
    w = max([14, *(len(a.area) + 1 for a in s.areas), *(len(a) + 1 for a in s.unsupported)])
    head = f"{'area':<{w}}{'traces':>8}{'ops':>11}" + "".join(f"{v:>12}" for v in VERDICTS[:4])
    lines = [_header(s), head + f"{'ops/s/core':>12}{'rules':>8}"]
    for a in s.areas:
        counts = "".join(f"{a.verdicts.get(v, 0):>12}" for v in VERDICTS[:4])
        rules = a.rules_shown("/")
        lines.append(
            f"{a.area:<{w}}{a.traces:>8}{a.ops:>11,}{counts}{a.ops_per_core_s:>12,.0f}{rules:>8}"
        )
    lines.extend(f"{area:<{w}}UNSUPPORTED: {why}" for area, why in s.unsupported.items())
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


def _cell(value: object) -> str:
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
