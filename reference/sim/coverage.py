"""Which rules a simulation reached: each history event (`reference.sim.history`) names the
rules whose effect it shows — a pull delayed for MAX_SPAN is FLOW-8, a hand-back by the
consume-timeout sweep PQ-18, a ProcessQueue dropped as pull-expired and re-created PQ-16,
an OFFSET_ILLEGAL answer RESULT-10 — and `Coverage` counts them over a history.

Only what the history shows counts, so a history written by any implementation is measured the
same way. `TARGETS` are the rules a default run must reach (the fault kinds of
`reference.sim.faults.TARGETED` are there to reach them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pullspec.reference.sim import history as h

#: The rules every default run reaches: span flow control, the consume-timeout sweep, pull
#: expiry and the OFFSET_ILLEGAL correction.
TARGETS = ("FLOW-8", "PQ-18", "PQ-16", "RESULT-10")
#: Targets an orderly consumer cannot reach: it skips the span check (FLOW-8) and runs no
#: consume-timeout sweep (ORDER-18).
CONCURRENT_ONLY = ("FLOW-8", "PQ-18")

#: PullDelayed.reason → the FLOW rule that delays (PULLQ-9's rows).
_DELAY_RULES = {
    "CONSUMER_NOT_RUNNING": "FLOW-3",
    "PAUSED": "FLOW-4",
    "CACHED_MESSAGE_COUNT": "FLOW-6",
    "CACHED_MESSAGE_SIZE": "FLOW-7",
    "MAX_SPAN": "FLOW-8",
    "NOT_LOCKED": "FLOW-11",
    "FIRST_LOCK_OFFSET_FAILED": "FLOW-12",
    "NO_SUBSCRIPTION": "FLOW-13",
}
#: PullAnswered.status → the RESULT rule of its branch (None: onException).
_ANSWER_RULES = {
    "FOUND": "RESULT-5",
    "NO_NEW_MSG": "RESULT-8",
    "NO_MATCHED_MSG": "RESULT-8",
    "OFFSET_ILLEGAL": "RESULT-10",
    None: "RESULT-13",
}
_SENT_BACK_RULES = {
    "rpc": "CONC-10",
    "fallback": "CONC-11",
    "cleaner": "PQ-18",
    "orderly": "ORDER-15",
}
_BROKER_COMMIT_RULES = {"pull": "COMMIT-2", "persist": "OFFSET-6", "fix-up": "RESULT-10"}
_LEASE_RULES = {"grant": "LEASE-5", "refuse": "LEASE-5", "expire": "LEASE-3", "release": "LEASE-7"}
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_RULE_ID = re.compile(r"^[A-Z]+-\d+$")


def _rule_key(rule_id: str) -> tuple[str, int]:
    area, _, number = rule_id.rpartition("-")
    return area, int(number) if number.isdigit() else 0


def _stored(e: h.Stored) -> tuple[str, ...]:
    if e.topic.startswith("%DLQ%"):
        return ("RETRY-4",)
    if e.topic == SCHEDULE_TOPIC:
        return ("RETRY-8",)
    return ("RETRY-9",)  # a delayed copy delivered to its real (retry) topic


def _consumed(e: h.Consumed) -> tuple[str, ...]:
    if e.status == "SUSPEND_CURRENT_QUEUE_A_MOMENT":
        return ("ORDER-14",)
    if e.status in ("SUCCESS", "COMMIT", "ROLLBACK"):
        return ("ORDER-9",)
    return ("CONC-9",) if e.success else ("CONC-8",)


def _named(rule_id: str) -> tuple[str, ...]:
    return (rule_id,) if _RULE_ID.match(rule_id) else ()


_RULES: dict[str, Callable[[Any], tuple[str, ...]]] = {
    "Stored": _stored,
    "PullSent": lambda e: ("CODE-6",) if e.broker_id != 0 else ("PULLQ-9",),
    "PullDelayed": lambda e: (_DELAY_RULES[e.reason],) if e.reason in _DELAY_RULES else (),
    "PullAnswered": lambda e: (_ANSWER_RULES.get(e.status, "RESULT-12"),),
    "Delivered": lambda e: ("ORDER-7",) if e.orderly else ("CONC-4",),
    "Consumed": _consumed,
    "SentBack": lambda e: (_SENT_BACK_RULES.get(e.via, "CONC-10"),),
    "ClientCommit": lambda e: ("OFFSET-2", *_named(e.rule)),
    "BrokerCommit": lambda e: (_BROKER_COMMIT_RULES.get(e.via, "COMMIT-1"),),
    "Assigned": lambda e: ("REBAL-10",),
    "Dropped": lambda e: ("PQ-16", "REBAL-9") if e.reason == "PQ-16" else ("PQ-14",),
    "CursorMoved": lambda e: _named(e.rule),
    "Cached": lambda e: ("PQ-2",),
    "Lease": lambda e: (_LEASE_RULES.get(e.action, "LEASE-4"),),
    "Truncated": lambda e: ("STORE-19",),
}


#: Every rule the history can show, by area and number.
COVERABLE: tuple[str, ...] = tuple(
    sorted(
        {
            *_DELAY_RULES.values(),
            *_ANSWER_RULES.values(),
            *_SENT_BACK_RULES.values(),
            *_BROKER_COMMIT_RULES.values(),
            *_LEASE_RULES.values(),
            *("RETRY-4", "RETRY-8", "RETRY-9", "CODE-6", "PULLQ-9", "CONC-4", "ORDER-7"),
            *("CONC-8", "CONC-9", "ORDER-9", "ORDER-11", "ORDER-14", "OFFSET-2", "REBAL-17"),
            *("REBAL-9", "REBAL-10", "PQ-2", "PQ-14", "PQ-16", "STORE-19"),
        },
        key=_rule_key,
    )
)


class Coverage:
    """Counts, per rule, the history events that show it."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.targets: tuple[str, ...] = TARGETS

    def feed(self, e: h.Event) -> None:
        """Count the rules event `e` shows."""
        if isinstance(e, h.Setup) and e.orderly:
            self.targets = tuple(t for t in TARGETS if t not in CONCURRENT_ONLY)
        rules = _RULES.get(e.type)
        if rules is None:
            return
        counts = self.counts
        for rule_id in rules(e):
            counts[rule_id] = counts.get(rule_id, 0) + 1

    @property
    def missed(self) -> tuple[str, ...]:
        """The targets (of this consume mode) no event showed."""
        return tuple(t for t in self.targets if not self.counts.get(t))

    def to_json(self) -> dict[str, object]:
        """{"rules": {rule: events}, "targets": {rule: events}, "missed": [rule, …]}: the
        targets are those of the history's consume mode."""
        return {
            "rules": dict(sorted(self.counts.items(), key=lambda kv: _rule_key(kv[0]))),
            "targets": {t: self.counts.get(t, 0) for t in self.targets},
            "missed": list(self.missed),
        }
