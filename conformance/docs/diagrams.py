"""The narrative pages' diagrams, drawn as inline SVG when the site is built.

A page asks for one with ``<!-- pullspec:diagram NAME -->``. Nothing is loaded from a CDN (no
mermaid): the site must render offline. Two kinds are enough for the narrative: a *decision
chain* (a column of steps, each decision with one exit to the side) and a *sequence diagram*
(participants, messages, and loop / alt / else frames). Text widths are estimated, not measured,
so boxes err on the wide side.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import attrs

FONT_SIZE = 13
#: Estimated width of one character at FONT_SIZE (sans-serif, generous).
CHAR_W = 6.9
LINE_H = 17
INK = "#212529"
EDGE = "#495057"


def _width(lines: Sequence[str]) -> float:
    return max((len(line) for line in lines), default=0) * CHAR_W


def _text_lines(
    x: float, y: float, lines: Sequence[str], anchor: str = "middle", weight: str = "normal"
) -> str:
    """Lines centred vertically on `y`."""
    top = y - (len(lines) - 1) * LINE_H / 2 + 4.5
    return "".join(
        f'<text x="{x:.1f}" y="{top + i * LINE_H:.1f}" text-anchor="{anchor}" '
        f'font-weight="{weight}" fill="{INK}">{html.escape(line)}</text>'
        for i, line in enumerate(lines)
    )


def _svg(name: str, width: float, height: float, body: list[str], title: str) -> str:
    w, h = int(width + 1), int(height + 1)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="pullspec-diagram" role="img" style="max-width:none" '
        f'width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'font-family="sans-serif" font-size="{FONT_SIZE}">'
        f"<title>{html.escape(title)}</title>"
        f'<defs><marker id="{name}-arrow" markerWidth="10" markerHeight="10" refX="9" refY="5" '
        f'orient="auto"><path d="M0,1 L9,5 L0,9 z" fill="{EDGE}"/></marker></defs>'
        + "".join(body)
        + "</svg>"
    )


# -- decision chains ------------------------------------------------------------------------------


@attrs.frozen
class Step:
    """A box on the main column; a decision when `exit` is set (its side branch)."""

    lines: tuple[str, ...]
    exit: tuple[str, ...] = ()
    exit_on: str = "yes"
    go_on: str = "no"


def chain_svg(name: str, title: str, steps: Sequence[Step]) -> str:
    """The steps top to bottom; each decision's exit is a box to its right."""
    pad, gap, side_gap = 12, 34, 70
    main_w = max(_width(s.lines) for s in steps) + 2 * pad + 40
    side_w = max((_width(s.exit) for s in steps if s.exit), default=0) + 2 * pad
    cx = 20 + main_w / 2
    sx = 20 + main_w + side_gap
    body: list[str] = []
    y = 14.0
    marker = f'marker-end="url(#{name}-arrow)"'
    for i, step in enumerate(steps):
        h = len(step.lines) * LINE_H + 2 * pad
        if step.exit:
            w = _width(step.lines) + 2 * pad + 40
            left, right, mid = cx - w / 2, cx + w / 2, y + h / 2
            points = (
                f"{left},{mid} {left + 20},{y} {right - 20},{y} {right},{mid} "
                f"{right - 20},{y + h} {left + 20},{y + h}"
            )
            body.append(f'<polygon points="{points}" fill="#fff3bf" stroke="{EDGE}"/>')
            eh = len(step.exit) * LINE_H + 2 * pad
            body.append(
                f'<rect x="{sx}" y="{mid - eh / 2}" width="{side_w}" height="{eh}" rx="4" '
                f'fill="#f1f3f5" stroke="{EDGE}"/>'
            )
            body.append(_text_lines(sx + pad, mid, step.exit, anchor="start"))
            body.append(
                f'<path d="M{right} {mid} L{sx - 1} {mid}" stroke="{EDGE}" stroke-width="1.5" '
                f"{marker}/>"
            )
            body.append(_text_lines((right + sx) / 2, mid - 10, [step.exit_on]))
        else:
            w = _width(step.lines) + 2 * pad
            body.append(
                f'<rect x="{cx - w / 2}" y="{y}" width="{w}" height="{h}" rx="6" '
                f'fill="#d0ebff" stroke="{EDGE}"/>'
            )
        body.append(_text_lines(cx, y + h / 2, step.lines))
        y += h
        if i < len(steps) - 1:
            body.append(
                f'<path d="M{cx} {y} L{cx} {y + gap - 1}" stroke="{EDGE}" stroke-width="1.5" '
                f"{marker}/>"
            )
            if step.exit:
                body.append(_text_lines(cx + 8, y + gap / 2, [step.go_on], anchor="start"))
            y += gap
    return _svg(name, sx + side_w + 20, y + 14, body, title)


# -- sequence diagrams ----------------------------------------------------------------------------


@attrs.frozen
class Message:
    """An arrow from one participant to another (or to itself); `reply` draws it dashed."""

    source: str
    target: str
    lines: tuple[str, ...]
    reply: bool = False


@attrs.frozen
class Frame:
    """``loop``, ``alt`` or ``else`` opens a frame (``else`` splits the open ``alt``); ``end``
    closes it."""

    kind: str
    label: str = ""


def sequence_svg(
    name: str,
    title: str,
    participants: Sequence[tuple[str, tuple[str, ...]]],
    events: Sequence[Message | Frame],
    numbered: bool = False,
) -> str:
    """Participants as columns, events top to bottom."""
    keys = [key for key, _ in participants]
    col = {key: i for i, key in enumerate(keys)}
    head_w = [max(_width(lines) + 24, 90) for _, lines in participants]
    # The gap between neighbouring columns' centres, widened until every label fits.
    gaps = [(head_w[i] + head_w[i + 1]) / 2 + 16 for i in range(len(keys) - 1)] + [
        head_w[-1] / 2 + 20
    ]
    for m in (e for e in events if isinstance(e, Message)):
        lo, hi = sorted((col[m.source], col[m.target]))
        need = _width(m.lines) + (50 if lo == hi else 40)
        span = range(lo, hi) if lo != hi else range(lo, lo + 1)
        have = sum(gaps[i] for i in span)
        if have < need:
            for i in span:
                gaps[i] += (need - have) / len(span)
    xs = [30 + head_w[0] / 2]
    for g in gaps[:-1]:
        xs.append(xs[-1] + g)
    right_edge = xs[-1] + gaps[-1]
    head_h = max(len(lines) for _, lines in participants) * LINE_H + 16
    body: list[str] = []
    marker = f'marker-end="url(#{name}-arrow)"'
    y = 14 + head_h + 24.0
    open_frames: list[tuple[float, Frame, list[float]]] = []
    frames: list[str] = []
    depth_pad = 10
    number = 0
    for event in events:
        if isinstance(event, Frame):
            if event.kind in ("loop", "alt"):
                open_frames.append((y, event, []))
                y += 26
            elif event.kind == "else":
                _, _, splits = open_frames[-1]
                splits.append(y)
                y += 26
            else:
                top, frame, splits = open_frames.pop()
                depth = len(open_frames)
                x0, x1 = 12 + depth * depth_pad, right_edge - depth * depth_pad
                frames.append(
                    f'<rect x="{x0}" y="{top}" width="{x1 - x0}" height="{y - top}" '
                    f'fill="none" stroke="#868e96"/>'
                    f'<rect x="{x0}" y="{top}" width="{len(frame.kind) * CHAR_W + 14}" '
                    f'height="18" fill="#e9ecef" stroke="#868e96"/>'
                    + _text_lines(x0 + 6, top + 9, [frame.kind], anchor="start", weight="bold")
                    + _text_lines(
                        x0 + len(frame.kind) * CHAR_W + 22, top + 9, [f"[{frame.label}]"], "start"
                    )
                )
                for split in splits:
                    frames.append(
                        f'<path d="M{x0} {split} L{x1} {split}" stroke="#868e96" '
                        f'stroke-dasharray="5 4"/>'
                        + _text_lines(x0 + 8, split + 11, ["[else]"], anchor="start")
                    )
                y += 14
            continue
        a, b = xs[col[event.source]], xs[col[event.target]]
        label_h = len(event.lines) * LINE_H
        y += label_h
        dash = ' stroke-dasharray="6 4"' if event.reply else ""
        if a == b:
            body.append(_text_lines(a + 40, y - label_h / 2 + 4, event.lines, anchor="start"))
            body.append(
                f'<path d="M{a} {y - 4} L{a + 30} {y - 4} L{a + 30} {y + 14} L{a + 2} {y + 14}" '
                f'fill="none" stroke="{EDGE}" stroke-width="1.5"{dash} {marker}/>'
            )
            y += 18
        else:
            body.append(_text_lines((a + b) / 2, y - label_h / 2 - 4, event.lines))
            end = b - 2 if b > a else b + 2
            body.append(
                f'<path d="M{a} {y} L{end} {y}" stroke="{EDGE}" stroke-width="1.5"{dash} {marker}/>'
            )
        if numbered:
            number += 1
            body.append(
                f'<circle cx="{a}" cy="{y - (4 if a == b else 0)}" r="8" fill="{INK}"/>'
                f'<text x="{a}" y="{y + (0 if a == b else 4):.1f}" text-anchor="middle" '
                f'font-size="10" fill="#ffffff">{number}</text>'
            )
        y += 16
    bottom = y + 10
    heads: list[str] = []
    for x, w, (_, lines) in zip(xs, head_w, participants, strict=True):
        heads.append(
            f'<line x1="{x}" y1="{14 + head_h}" x2="{x}" y2="{bottom}" stroke="#adb5bd" '
            f'stroke-dasharray="3 3"/>'
        )
        for top in (14.0, bottom):
            heads.append(
                f'<rect x="{x - w / 2}" y="{top}" width="{w}" height="{head_h}" rx="4" '
                f'fill="#d0ebff" stroke="{EDGE}"/>' + _text_lines(x, top + head_h / 2, lines)
            )
    return _svg(name, right_edge + 12, bottom + head_h + 14, heads + frames + body, title)


# -- the diagrams of the narrative pages ----------------------------------------------------------


def flow_control() -> str:
    """The gates of ``pullMessage``, in their order (FLOW-1 … FLOW-13)."""
    return chain_svg(
        "flow-control",
        "The gates pullMessage checks before it sends a pull",
        [
            Step(("take PullRequest",)),
            Step(("dropped?",), ("request dies — FLOW-1",)),
            Step(("lastPullTimestamp = now — FLOW-2",)),
            Step(("running? not paused?",), ("later E or 1000 ms — FLOW-3, FLOW-4",), "no", "yes"),
            Step(("count, size, span over?",), ("later 50 ms — FLOW-6…8",)),
            Step(("orderly and not locked?",), ("later E — FLOW-11",)),
            Step(("subscription?",), ("later E — FLOW-13",), "no", "yes"),
            Step(("send the pull",)),
        ],
    )


def offset_correction() -> str:
    """How the store picks the status and the next offset of a pull (STORE-5 … STORE-17)."""
    return chain_svg(
        "offset-correction",
        "The store's status and next offset for a pull",
        [
            Step(("max == 0?",), ("NO_MESSAGE_IN_QUEUE", "next = corr(offset, 0)")),
            Step(("offset below min?",), ("OFFSET_TOO_SMALL", "next = corr(offset, min)")),
            Step(("offset == max?",), ("OFFSET_OVERFLOW_ONE", "next = offset (caught up)")),
            Step(
                ("offset past max?",),
                (
                    "OFFSET_OVERFLOW_BADLY",
                    "4.7: min == 0 ? corr(offset, 0) : corr(offset, max)",
                    "4.9: corr(offset, max)",
                ),
            ),
            Step(
                ("an index window?",),
                ("OFFSET_FOUND_NULL", "next = corr(offset, first index of the next CQ file)"),
                "no",
                "yes",
            ),
            Step(
                (
                    "scan: FOUND / NO_MATCHED_MESSAGE / MESSAGE_WAS_REMOVING",
                    "next = offset + entries examined (never corrected)",
                )
            ),
        ],
    )


def pull_loop() -> str:
    """One turn of the pull loop, client to store and back."""
    m = Message
    return sequence_svg(
        "pull-loop",
        "One turn of the pull loop",
        [
            ("R", ("RebalanceImpl",)),
            ("S", ("PullMessage", "Service", "(1 thread)")),
            ("C", ("DefaultMQPush", "ConsumerImpl", ".pullMessage")),
            ("B", ("Broker:", "PullMessage", "Processor")),
            ("M", ("DefaultMessage", "Store", ".getMessage")),
            ("H", ("PullRequest", "HoldService")),
            ("P", ("ProcessQueue",)),
            ("W", ("consume", "threads")),
        ],
        [
            m("R", "S", ("new PullRequest(mq, pq,", "nextOffset)", "REBAL-10, REBAL-12")),
            Frame("loop", "every attempt"),
            m("S", "C", ("take() the head of the queue", "PULLQ-1")),
            m("C", "C", ("dropped? paused? flow", "control? lock?", "subscription?", "FLOW-1…13")),
            m(
                "C",
                "B",
                (
                    "PULL_MESSAGE(offset,",
                    "maxMsgNums, commitOffset,",
                    "suspend 15 s)",
                    "REQ-2, REQ-5",
                ),
            ),
            m(
                "B",
                "B",
                ("permission, group,", "topic, queue id,", "subscription", "CODE-2, CODE-3"),
            ),
            m("B", "M", ("getMessage(group, topic,", "queueId, offset,", "maxMsgNums, filter)")),
            m("M", "B", ("status, nextBeginOffset,", "min, max, records", "STORE-5…17"), True),
            Frame("alt", "PULL_NOT_FOUND and suspend flag"),
            m("B", "H", ("hold until a message", "arrives or the hold", "times out — HOLD-1…7")),
            m("H", "B", ("re-run the request", "without suspending", "HOLD-6"), True),
            Frame("end"),
            m("B", "C", ("response code → PullStatus", "CODE-7, CODE-13"), True),
            m("C", "P", ("putMessage(found messages)", "RESULT-5, PQ-2")),
            m(
                "C",
                "S",
                ("re-enqueue the same PullRequest", "nextOffset = nextBeginOffset", "PULLQ-9"),
            ),
            m("P", "W", ("submitConsumeRequest", "CONC-2 / ORDER-3")),
            m("W", "P", ("removeMessage(consumed)", "→ offset to commit", "PQ-7, CONC-9")),
            Frame("end"),
        ],
        numbered=True,
    )


def retry_dlq() -> str:
    """What RECONSUME_LATER becomes: a retry through the schedule topic, or the DLQ."""
    m = Message
    return sequence_svg(
        "retry-dlq",
        "A message consumed with RECONSUME_LATER",
        [
            ("W", ("consume thread",)),
            ("C", ("client",)),
            ("B", ("broker", "(CONSUMER_SEND_MSG_BACK)")),
            ("S", ("SCHEDULE_TOPIC_XXXX",)),
            ("R", ("%RETRY%group",)),
            ("D", ("%DLQ%group",)),
        ],
        [
            m("W", "C", ("RECONSUME_LATER",)),
            m("C", "B", ("sendMessageBack(offset,", "delayLevel 0,", "maxReconsumeTimes 16)")),
            Frame("alt", "stored reconsumeTimes ≥ max, or delayLevel < 0"),
            m("B", "D", ("new message, reconsumeTimes + 1",)),
            Frame("else"),
            m("B", "S", ("new message,", "DELAY = 3 + reconsumeTimes,", "queue DELAY − 1")),
            m("S", "R", ("when due: REAL_TOPIC,", "REAL_QID restored"), True),
            m(
                "R",
                "C",
                ("pulled like any topic", "(the consumer subscribes", "to its retry topic)"),
                True,
            ),
            Frame("end"),
        ],
    )


DIAGRAMS = {
    "flow-control": flow_control,
    "offset-correction": offset_correction,
    "pull-loop": pull_loop,
    "retry-dlq": retry_dlq,
}


def diagram(name: str) -> str:
    """The diagram as a raw-HTML block for a Markdown page (one line: no blank line inside)."""
    try:
        make = DIAGRAMS[name]
    except KeyError:
        raise KeyError(f"no diagram {name!r}; known: {', '.join(sorted(DIAGRAMS))}") from None
    # Shown at its natural size (a scaled-down diagram is unreadable); wide ones scroll.
    return f'<div class="pullspec-diagram" style="overflow-x:auto">{make()}</div>'
