"""Fault schedules for the simulator: explicit, time-stamped steps, generated from a seed or
written by hand, with a one-line text form that replays a run (`pullspec simulate --schedule`).

A step is "<kind>@<at>[:<target>][=<value>]", e.g. "crash@42000:c1" or "slave-lag@9000=20000";
a schedule is such steps joined by commas. `at` is virtual milliseconds from the start of the run;
`target` names a consumer (c0, c1, …) where the kind hits one; `value` is the kind's amount.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterable, Iterator, Sequence

import attrs

#: kind → (hits a consumer, what `value` means).
FAULT_KINDS: dict[str, tuple[bool, str]] = {
    "crash": (True, "ms until it restarts (0: stays down)"),
    "join": (True, "unused: a new consumer starts"),
    "leave": (True, "unused: the consumer shuts down cleanly"),
    "pause": (True, "ms until resume() (suspend(), FLOW-4)"),
    "listener-fail": (True, "listener calls that return failure"),
    "listener-exception": (True, "listener calls that throw"),
    "listener-slow": (True, "ms each of the next 3 calls lasts"),
    "send-back-fail": (True, "send-backs refused by the broker"),
    "send-back-lost": (True, "send-backs stored whose answer is lost"),
    "expire": (False, "commit-log files deleted (STORE-19)"),
    "slave-lag": (False, "ms the slave lags the master"),
    "clock-jump": (False, "ms the broker lease clock jumps forward"),
    "pull-drop": (False, "ms during which the master's pull answers are lost"),
    "pull-delay": (False, "most ms each pull answer is late, for the next 30 s (reordered)"),
    "broker-down": (False, "ms during which the master refuses connections"),
}
_STEP = re.compile(r"^(?P<kind>[a-z-]+)@(?P<at>\d+)(?::(?P<target>[\w#-]+))?(?:=(?P<value>\d+))?$")


@attrs.frozen(order=True)
class FaultStep:
    """One fault: at virtual time `at` (ms), of `kind`, on `target`, with amount `value`."""

    at: int
    kind: str = attrs.field(order=False)
    target: str = attrs.field(default="", order=False)
    value: int = attrs.field(default=0, order=False)

    def __attrs_post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r} (known: {', '.join(FAULT_KINDS)})")
        if self.at < 0 or self.value < 0:
            raise ValueError(f"fault {self.kind}: time and value must be >= 0")

    def text(self) -> str:
        """The step's text form, "<kind>@<at>[:<target>][=<value>]"."""
        out = f"{self.kind}@{self.at}"
        if self.target:
            out += f":{self.target}"
        if self.value:
            out += f"={self.value}"
        return out


def parse_step(text: str) -> FaultStep:
    """The step written as `text`; ValueError when it is malformed."""
    m = _STEP.match(text.strip())
    if m is None:
        raise ValueError(f"bad fault step {text!r}: expected kind@ms[:target][=value]")
    return FaultStep(int(m["at"]), m["kind"], m["target"] or "", int(m["value"] or 0))


def parse_schedule(text: str) -> tuple[FaultStep, ...]:
    """A schedule from its text form (comma-separated steps; empty text: no faults), by time."""
    return tuple(sorted(parse_step(s) for s in text.split(",") if s.strip()))


def format_schedule(steps: Iterable[FaultStep]) -> str:
    """The text form of a schedule."""
    return ",".join(s.text() for s in steps)


def parse_kinds(text: str | None) -> tuple[str, ...]:
    """The fault kinds a "--faults" value names ("all", "none" or a comma-separated list)."""
    if text is None or text.strip() == "all":
        return tuple(FAULT_KINDS)
    if text.strip() in ("", "none"):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown} (known: {', '.join(FAULT_KINDS)})")
    return kinds


def fault_stream(
    seed: int,
    consumers: int,
    kinds: Sequence[str] = tuple(FAULT_KINDS),
    mean_gap_ms: int = 20_000,
    first_at_ms: int = 15_000,
) -> Iterator[FaultStep]:
    """An endless random schedule from `first_at_ms` on: one fault every `mean_gap_ms` on
    average, of the given kinds, hitting consumers c0 … c<consumers−1> (joins add c<consumers>,
    …); the same arguments always give the same steps (random.Random(seed))."""
    rng = random.Random(seed)
    if not kinds or consumers < 1:
        return
    names = [f"c{i}" for i in range(consumers)]
    at = first_at_ms
    while True:
        at += rng.randrange(mean_gap_ms // 2, mean_gap_ms * 3 // 2 + 1)
        kind = rng.choice(list(kinds))
        target = rng.choice(names) if FAULT_KINDS[kind][0] else ""
        if kind == "join":
            target = f"c{len(names)}"
            names.append(target)
        yield FaultStep(at, kind, target, _value(rng, kind))


def generate(
    seed: int,
    duration_ms: int,
    consumers: int,
    kinds: Sequence[str] = tuple(FAULT_KINDS),
    mean_gap_ms: int = 20_000,
) -> tuple[FaultStep, ...]:
    """The steps of `fault_stream` before `duration_ms`."""
    stream = fault_stream(seed, consumers, kinds, mean_gap_ms)
    return tuple(itertools.takewhile(lambda s: s.at < duration_ms, stream))


def _value(rng: random.Random, kind: str) -> int:
    if kind == "crash":
        return rng.randrange(1_000, 90_000)
    if kind == "pause":
        return rng.randrange(1_000, 60_000)
    if kind in ("listener-fail", "listener-exception", "send-back-fail", "send-back-lost"):
        return rng.randrange(1, 6)
    if kind == "listener-slow":
        return rng.choice([2_000, 10_000, 45_000])
    if kind == "expire":
        return rng.randrange(1, 3)
    if kind == "slave-lag":
        return rng.choice([0, 2_000, 30_000])
    if kind == "clock-jump":
        return rng.choice([5_000, 30_000, 61_000])
    if kind in ("pull-drop", "broker-down"):
        return rng.randrange(500, 40_000)
    if kind == "pull-delay":
        return rng.choice([200, 2_000, 10_000])
    return 0
