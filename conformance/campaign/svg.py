"""The campaign's plot, drawn as plain SVG (no plotting library is a dependency): rule coverage
bars — the share of traces that exercised each in-scope rule — then throughput: diffed ops per
second per core for each area, and the job's ops per second over time as the progress line saw
it.
"""

from __future__ import annotations

from html import escape

from pullspec.conformance.campaign.summary import Summary, in_scope
from pullspec.conformance.ops import rule_sort_key

WIDTH = 900
ROW = 14
BAR = 300
COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#9c755f")


def _text(x: float, y: float, body: str, anchor: str = "start", size: int = 11) -> str:
    return (
        f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}'>"
        f"{escape(body)}</text>"
    )


def _bar(x: float, y: float, width: float, colour: str, tip: str) -> str:
    return (
        f"<rect x='{x:.1f}' y='{y:.1f}' width='{max(width, 0.0):.1f}' height='{ROW - 3}' "
        f"fill='{colour}'><title>{escape(tip)}</title></rect>"
    )


def coverage(s: Summary) -> dict[str, float]:
    """Rule ID → share of the traces, of the areas that can exercise it, that did."""
    hits: dict[str, int] = {}
    totals: dict[str, int] = {}
    for a in s.areas:
        for rule in in_scope(a.area):
            hits[rule] = hits.get(rule, 0) + a.rules.get(rule, 0)
            totals[rule] = totals.get(rule, 0) + a.traces
    return {r: hits[r] / totals[r] if totals[r] else 0.0 for r in sorted(hits, key=rule_sort_key)}


def _coverage_panel(s: Summary, top: float) -> tuple[list[str], float]:
    shares = coverage(s)
    parts = [_text(10, top + 16, "Rule coverage: share of traces exercising each rule", size=14)]
    families = sorted({r.partition("-")[0] for r in shares})
    half = (len(shares) + 1) // 2
    for i, (rule, share) in enumerate(shares.items()):
        column, row = divmod(i, half) if half else (0, i)
        x, y = 10 + column * (WIDTH // 2), top + 30 + row * ROW
        colour = COLOURS[families.index(rule.partition("-")[0]) % len(COLOURS)]
        parts.append(_text(x + 70, y + 9, rule, "end", 10))
        parts.append(_bar(x + 76, y, BAR * share, colour, f"{rule}: {share:.0%} of traces"))
        parts.append(_text(x + 80 + BAR * share, y + 9, f"{share:.0%}", size=9))
    if not shares:
        parts.append(_text(10, top + 40, "no traces ran"))
    return parts, top + 40 + max(half, 1) * ROW


def _throughput_panel(s: Summary, top: float) -> tuple[list[str], float]:
    parts = [_text(10, top + 16, "Throughput: diffed ops/s per core by area", size=14)]
    fastest = max((a.ops_per_core_s for a in s.areas), default=0.0) or 1.0
    y = top + 30
    for i, a in enumerate(s.areas):
        width = BAR * a.ops_per_core_s / fastest
        parts.append(_text(100, y + 9, a.area, "end", 10))
        parts.append(_bar(106, y, width, COLOURS[i % len(COLOURS)], f"{a.area}: ops/s/core"))
        parts.append(_text(110 + width, y + 9, f"{a.ops_per_core_s:,.0f}", size=9))
        y += ROW
    # The job's rate over time: cumulative ops over elapsed seconds at each progress sample.
    x0, y0, w, h = WIDTH // 2 + 40, top + 30, WIDTH // 2 - 80, 120
    parts.append(
        _text(x0, top + 16, f"Job: {s.ops_per_s:,.0f} ops/s over {s.wall_s:.0f} s", size=14)
    )
    parts.append(f"<rect x='{x0}' y='{y0}' width='{w}' height='{h}' fill='none' stroke='#999'/>")
    rates = [(t, ops / t) for t, ops in s.samples if t > 0]
    if rates:
        t_max = max(t for t, _ in rates) or 1.0
        r_max = max(r for _, r in rates) or 1.0
        points = " ".join(
            f"{x0 + w * t / t_max:.1f},{y0 + h - h * r / r_max:.1f}" for t, r in rates
        )
        parts.append(f"<polyline points='{points}' fill='none' stroke='#4e79a7' stroke-width='2'/>")
        parts.append(_text(x0 - 4, y0 + 10, f"{r_max:,.0f}", "end", 9))
        parts.append(_text(x0 + w, y0 + h + 12, f"{t_max:.0f} s", "end", 9))
    parts.append(_text(x0 - 4, y0 + h, "0", "end", 9))
    return parts, max(y, y0 + h + 20) + 10


def plot(s: Summary) -> str:
    """The SVG document: the coverage panel above the throughput panel."""
    cover, y = _coverage_panel(s, 0)
    speed, height = _throughput_panel(s, y + 10)
    body = "".join(cover + speed)
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height:.0f}' "
        f"viewBox='0 0 {WIDTH} {height:.0f}' font-family='sans-serif' role='img'>"
        f"<title>Campaign {escape(s.impl)}: rule coverage and throughput</title>{body}</svg>\n"
    )
