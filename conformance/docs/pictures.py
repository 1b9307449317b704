"""The pictures of the narrative pages, drawn as SVG from what the reference model does.

Each picture runs the reference implementation on a manual clock when the site is built, so it
shows the spec's behaviour rather than a drawing of it.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from pullspec.spec.profiles import Profile


def process_queue_svg() -> str:
    """The ProcessQueue cache and the offset removeMessage returns, computed with the reference."""
    from pullspec.conformance.adapters.process_queue import to_message
    from pullspec.reference.process_queue import ReferenceProcessQueue
    from pullspec.spec.clock import ManualClock

    first, count = 100, 8
    done_first = [100, 101, 103, 104]
    rows: list[tuple[str, set[int], int]] = []
    q = ReferenceProcessQueue(ManualClock(0), Profile.V4_9)
    q.put_messages([to_message([o, 10]) for o in range(first, first + count)])
    commit = q.remove_messages([to_message([o, 10]) for o in done_first])
    rows.append(
        (f"after 100, 101, 103, 104 were consumed: commit {commit}", set(q.cached_offsets), commit)
    )
    commit = q.remove_messages([to_message([o, 10]) for o in range(first, first + count)])
    rows.append((f"after the rest were consumed: commit {commit}", set(q.cached_offsets), commit))
    box, gap, left, top, row_h = 46, 6, 20, 30, 110
    width = left * 2 + (count + 1) * (box + gap) + 120
    parts = [_svg_open(width, top + row_h * len(rows))]
    for i, (caption, cached, commit) in enumerate(rows):
        y = top + i * row_h
        parts.append(_text(left, y - 8, caption, weight="bold"))
        for j in range(count + 1):
            o = first + j
            x = left + j * (box + gap)
            fill = "#ffd166" if o in cached else ("#e9ecef" if j < count else "#ffffff")
            dash = ' stroke-dasharray="4 3"' if j == count else ""
            parts.append(
                f'<rect x="{x}" y="{y}" width="{box}" height="{box}" fill="{fill}" '
                f'stroke="#495057"{dash}/>'
            )
            parts.append(_text(x + box / 2, y + box / 2 + 5, str(o), anchor="middle"))
            if o == commit:
                parts.append(
                    f'<path d="M{x + box / 2} {y + box + 26} L{x + box / 2} {y + box + 4}" '
                    'stroke="#d62828" stroke-width="2" marker-end="url(#arrow)"/>'
                )
                parts.append(
                    _text(
                        x + box / 2,
                        y + box + 40,
                        "committed offset",
                        anchor="middle",
                        fill="#d62828",
                    )
                )
    lx = left + (count + 1) * (box + gap) + 10
    parts.append(
        f'<rect x="{lx}" y="{top}" width="14" height="14" fill="#ffd166" stroke="#495057"/>'
    )
    parts.append(_text(lx + 20, top + 12, "cached"))
    parts.append(
        f'<rect x="{lx}" y="{top + 22}" width="14" height="14" fill="#e9ecef" stroke="#495057"/>'
    )
    parts.append(_text(lx + 20, top + 34, "consumed"))
    parts.append("</svg>")
    return "\n".join(parts)


def lease_timeline_svg() -> str:
    """Client A renews every 20 s and stops after its second renewal; B asks every 20 s.
    Computed with the reference lock manager and process queue."""
    from pullspec.reference.lock_manager import ReferenceLockManager
    from pullspec.reference.process_queue import ReferenceProcessQueue
    from pullspec.spec import lease
    from pullspec.spec import process_queue as pq
    from pullspec.spec.clock import ManualClock
    from pullspec.spec.message import MessageQueue

    clock = ManualClock(0)
    manager = ReferenceLockManager(clock=clock)
    queue = ReferenceProcessQueue(clock, Profile.V4_9)
    mq = MessageQueue("T", "b", 0)
    renewals = [0, pq.LOCK_INTERVAL_MS]
    b_tries = list(range(10_000, 130_001, pq.LOCK_INTERVAL_MS))
    a_consumes_until, b_locked_at = 0, None
    for t in range(0, 130_001, 1_000):
        clock.jump_to(t)
        if t in renewals and manager.try_lock_batch("G", [mq], "A"):
            queue.locked, queue.last_lock_timestamp = True, t
        if queue.locked and not queue.is_lock_expired():
            a_consumes_until = t
        if t in b_tries and b_locked_at is None and manager.try_lock_batch("G", [mq], "B"):
            b_locked_at = t
    end = 130_000
    scale, left, width = 6.0, 70, 0
    width = int(left + end / 1000 * scale + 60)

    def x(ms: int) -> float:
        return left + ms / 1000 * scale

    parts = [_svg_open(width, 210)]
    for s in range(0, end // 1000 + 1, 10):
        parts.append(
            f'<line x1="{x(s * 1000)}" y1="30" x2="{x(s * 1000)}" y2="175" stroke="#dee2e6"/>'
        )
        parts.append(_text(x(s * 1000), 192, f"{s}s", anchor="middle"))
    parts.append(_text(5, 62, "client A", weight="bold"))
    parts.append(
        _bar(x(0), 48, x(a_consumes_until) - x(0), "#06d6a0", "A may consume (client lease 30 s)")
    )
    for t in renewals:
        parts.append(_tick(x(t), 44, "lock" if t == renewals[0] else "renew"))
    broker_until = renewals[-1] + lease.REBALANCE_LOCK_MAX_LIVE_TIME_MS
    parts.append(_text(5, 112, "broker", weight="bold"))
    parts.append(
        _bar(
            x(0),
            98,
            x(broker_until) - x(0),
            "#adb5bd",
            "broker entry held by A (60 s after last renewal)",
        )
    )
    parts.append(_text(5, 162, "client B", weight="bold"))
    for t in b_tries:
        label = "try" if b_locked_at is None or t < b_locked_at else "lock"
        parts.append(
            _tick(x(t), 144, "renew" if b_locked_at is not None and t > b_locked_at else label)
        )
    if b_locked_at is not None:
        parts.append(
            _bar(x(b_locked_at), 148, x(end) - x(b_locked_at), "#118ab2", "B holds the lock")
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _svg_open(width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">\n'
        '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="4" refY="4" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#d62828"/></marker></defs>'
    )


def _text(
    x: float,
    y: float,
    text: str,
    anchor: str = "start",
    weight: str = "normal",
    fill: str = "#212529",
) -> str:
    return (
        f'<text x="{x}" y="{y}" text-anchor="{anchor}" font-weight="{weight}" fill="{fill}">'
        f"{html.escape(text)}</text>"
    )


def _bar(x: float, y: float, width: float, fill: str, label: str) -> str:
    return (
        f'<rect x="{x}" y="{y}" width="{max(width, 1)}" height="22" fill="{fill}" rx="3"/>'
        + _text(x + 6, y + 15, label)
    )


def _tick(x: float, y: float, label: str) -> str:
    # Above the bar only, so that it never hides the bar's label.
    mark = f'<path d="M{x} {y - 10} L{x} {y + 4}" stroke="#212529" stroke-width="2"/>'
    return mark + (_text(x + 3, y - 2, label, fill="#495057") if label else "")


#: Generated files that are not Markdown pages: path relative to docs/ → content.
PICTURES: dict[str, Callable[[], str]] = {
    "images/process-queue.svg": process_queue_svg,
    "images/lease-timeline.svg": lease_timeline_svg,
}


def pictures() -> dict[str, str]:
    """Every generated picture, by path relative to docs/."""
    return {path: make() for path, make in PICTURES.items()}
