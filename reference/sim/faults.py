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
    # Targeted kinds: each reaches a rule the kinds above rarely reach (`TARGETED`).
    "listener-stuck": (True, "ms the next call on the topic hangs, short of consumeTimeout"),
    "consume-timeout": (True, "ms the next listener call lasts, past consumeTimeout"),
    "pull-stall": (True, "ms the pull thread is blocked, past pullMaxIdleTime"),
    "expire-behind": (True, "ms the consumer stops pulling; then the old files expire"),
}
#: The targeted kinds and the rule each is there to reach: a stuck listener holds its message
#: while the queue moves on, so the span check delays pulls (FLOW-8); a call past
#: consumeTimeout is swept and sent back (PQ-18); a pull thread blocked past pullMaxIdleTime
#: leaves its queues pull-expired, so rebalance drops and re-creates them (PQ-16, REBAL-9); a
#: consumer that stopped pulling while the files it has not read expired pulls below its
#: queues' min offsets and is corrected (OFFSET_ILLEGAL, RESULT-10). A generated schedule opens
#: with them (`fault_stream`).
TARGETED: dict[str, str] = {
    "listener-stuck": "FLOW-8",
    "consume-timeout": "PQ-18",
    "pull-stall": "PQ-16",
    "expire-behind": "RESULT-10",
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
    """An endless random schedule from min(`first_at_ms`, `mean_gap_ms`) on: one fault every
    `mean_gap_ms` on average, hitting consumers c0 … c<consumers−1> (joins add c<consumers>, …).

    It opens with the targeted kinds among `kinds` (`TARGETED`), twice as dense, so that every
    run reaches the rules they target: pull-stall and the two listener kinds in a seed-shuffled
    order, then expire-behind; pull-stall, expire-behind and the two listener kinds (which get
    along) hit different consumers as far as there are. Until a targeted fault has played out,
    the stream draws no crash, join or leave (a rebalance would take its queues away) and hits
    no consumer it occupies. Otherwise kinds are drawn uniformly from `kinds`. The same
    arguments always give the same steps (random.Random(seed))."""
    rng = random.Random(seed)
    if not kinds or consumers < 1:
        return
    names = [f"c{i}" for i in range(consumers)]
    opener = [k for k in TARGETED if k in kinds and k != "expire-behind"]
    rng.shuffle(opener)
    if "expire-behind" in kinds:
        opener.append("expire-behind")  # last: see _opener_value
    victims = rng.sample(names, len(names))
    victim_of = {k: victims[i % len(victims)] for k, i in _OPENER_SLOTS.items()}
    busy: dict[str, int] = {}  # consumer → until when a targeted fault occupies it
    started: dict[str, int] = {}  # targeted kind → when it struck
    at = min(first_at_ms, mean_gap_ms)
    while True:
        if opener:
            at += rng.randrange(mean_gap_ms // 4, mean_gap_ms * 3 // 4 + 1)
            kind = opener.pop(0)
            started[kind] = at
            value = _opener_value(rng, kind, at, started)
            step = FaultStep(at, kind, victim_of[kind], value)
            busy[step.target] = max(busy.get(step.target, 0), at + step.value + _PLAYS_OUT_MS)
            yield step
            continue
        at += rng.randrange(mean_gap_ms // 2, mean_gap_ms * 3 // 2 + 1)
        free = [n for n in names if busy.get(n, 0) <= at]
        settled = all(until <= at for until in busy.values())
        allowed = [
            k
            for k in kinds
            if (settled or k not in _MEMBERSHIP) and (free or not FAULT_KINDS[k][0])
        ]
        if not allowed:
            continue
        kind = rng.choice(allowed)
        target = rng.choice(free) if FAULT_KINDS[kind][0] else ""
        if kind == "join":
            target = f"c{len(names)}"
            names.append(target)
        yield FaultStep(at, kind, target, _value(rng, kind))


def _opener_value(rng: random.Random, kind: str, at: int, started: dict[str, int]) -> int:
    """A targeted fault's value. expire-behind comes last and pauses long enough that its
    expiry falls after the consume-timeout call has been swept (at most two minutes after it
    began): that call's queue lags behind its held message (FLOW-8), and an expiry meanwhile
    would correct the queue away (RESULT-10) before the sweep found the message."""
    value = _value(rng, kind)
    if kind == "expire-behind" and "consume-timeout" in started:
        value = max(value, started["consume-timeout"] + _SWEPT_WITHIN_MS - at)
    return value


#: A call past consumeTimeout (1 min) is swept by the cleaner run after it expires: within 2 min.
_SWEPT_WITHIN_MS = 125_000
#: Which of the shuffled consumers each targeted kind hits: the two listener kinds share one.
_OPENER_SLOTS = {"pull-stall": 0, "expire-behind": 1, "listener-stuck": 2, "consume-timeout": 2}
#: Faults that change the group's membership, and so move queues between consumers.
_MEMBERSHIP = frozenset({"crash", "join", "leave"})
#: How long after a targeted fault ends its rule may still be due (a rebalance, a fix-up).
_PLAYS_OUT_MS = 40_000


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
    if kind == "listener-stuck":
        return rng.randrange(40_000, 55_000)  # the span passes its bound, the sweep misses it
    if kind == "consume-timeout":
        return rng.randrange(130_000, 180_000)  # past two sweeps of a 1-minute consumeTimeout
    if kind == "pull-stall":
        return rng.randrange(150_000, 180_000)  # past 120 s and the rebalance after it
    if kind == "expire-behind":
        return rng.randrange(60_000, 80_000)  # its cursors fall a file or more behind
    return 0
