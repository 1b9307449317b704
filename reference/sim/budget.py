"""How many allowed duplicates and backward commits a run may show (LIVE-3): each cause the
history records grants a budget, and the allowed anomalies of that cause must stay within it.

RocketMQ 4.x allows a duplicate when a queue changes hands (REBAL-9, OFFSET-8, PQ-7, FLOW-12,
COMMIT-1, …), when a send-back stored a copy the client believed failed (CONC-8, CONC-11),
when the consume-timeout sweep sent back a message still being consumed (PQ-18) and when a
pull put an offset into a ProcessQueue a second time (PQ-13). None of them can repeat more
than a bounded number of messages:

- a handover (an `Assigned` ProcessQueue) repeats what the old owner consumed but had not
  persisted: at most one cache (pullThresholdForQueue + pullBatchSize) plus one persist interval
  of the queue's traffic, and never more than the queue had received by then; a fault that holds one message while the queue moves on (a stuck or
  slow listener, a failed send-back retried locally) widens that by one span
  (consumeConcurrentlyMaxSpan, PQ-7's commit stays at the held message);
- a failed send-back that stored a copy, a message the sweep handed back, a re-put: one message
  each.

Backward commits: a handover may bring two (a stale owner's last persist and a pull it sent
before), a first-lock cursor move one (ORDER-11), an OFFSET_ILLEGAL correction one (RESULT-10).

A broken implementation that repeats far more (an offset store that never persists, a
ProcessQueue that commits too little) stays "allowed" message by message, but exceeds these
budgets: `duplicate-budget` / `commit-budget`.
"""

from __future__ import annotations

import math

import attrs

from pullspec.reference.sim import history as h

#: Allowed-duplicate rule → its budget group (every other rule is a handover's).
DUPLICATE_GROUPS = {
    "CONC-8": "send-back",
    "CONC-11": "send-back",
    "PQ-18": "sweep",
    "PQ-13": "re-put",
}
#: Allowed backward-commit rule → its budget group (every other rule is a handover's).
COMMIT_GROUPS = {"RESULT-10": "correction"}
#: Fault kinds whose message holds its queue's commit while later ones are consumed.
HOLDING_FAULTS = {
    "listener-stuck": 1,
    "consume-timeout": 1,
    "listener-slow": 3,
    "send-back-fail": 1,
}
#: Backward commits one handover can bring.
COMMITS_PER_HANDOVER = 2


@attrs.define
class Causes:
    """The causes a history shows, counted as the checker reads it."""

    #: For each handover (an Assigned ProcessQueue), the messages its queue had received by
    #: then: no handover repeats more than that.
    handovers: list[int] = attrs.Factory(list)
    holding_faults: int = 0
    stored_failed_send_backs: int = 0
    swept: int = 0
    reputs: int = 0
    corrections: int = 0
    cursor_moves: int = 0

    def fault(self, e: h.Fault) -> None:
        """Count a fault that holds a message (an applied one: "ignored" ones hold nothing)."""
        if not e.detail.startswith("ignored"):
            self.holding_faults += HOLDING_FAULTS.get(e.fault, 0)

    def sent_back(self, e: h.SentBack) -> None:
        """A hand-back: a sweep's (which stores at most one copy, by the RPC or by the
        fallback the client falls back on), or a failure that stored a copy anyway."""
        if e.via == "cleaner":
            self.swept += 1
        elif not e.ok and e.stored is not None:
            self.stored_failed_send_backs += 1


@attrs.frozen
class Budget:
    """One group's allowed anomalies and the budget its causes grant."""

    count: int
    budget: int

    @property
    def ok(self) -> bool:
        """Within budget."""
        return self.count <= self.budget


def per_handover(setup: h.Setup, produced: int, duration_ms: int) -> int:
    """Messages one handover may repeat: one cache plus one persist interval of one queue's
    traffic (the run's produce rate shared by the topic's queues)."""
    per_queue_per_ms = produced / max(duration_ms, 1) / max(setup.queues, 1)
    traffic = math.ceil(per_queue_per_ms * setup.persist_interval_ms)
    return setup.pull_threshold_for_queue + setup.pull_batch_size + traffic


def duplicate_budgets(
    setup: h.Setup, causes: Causes, by_rule: dict[str, int], produced: int, duration_ms: int
) -> dict[str, Budget]:
    """Allowed duplicates per group against their budgets."""
    counts = {"handover": 0, "send-back": 0, "sweep": 0, "re-put": 0}
    for rule_id, n in by_rule.items():
        counts[DUPLICATE_GROUPS.get(rule_id, "handover")] += n
    most = per_handover(setup, produced, duration_ms)
    handover = sum(min(most, received) for received in causes.handovers)
    grants = {
        "handover": handover + causes.holding_faults * setup.max_span,
        "send-back": causes.stored_failed_send_backs,
        "sweep": causes.swept,
        "re-put": causes.reputs,
    }
    return {g: Budget(counts[g], grants[g]) for g in counts}


def commit_budgets(causes: Causes, by_rule: dict[str, int]) -> dict[str, Budget]:
    """Allowed backward broker commits per group against their budgets."""
    counts = {"handover": 0, "correction": 0}
    for rule_id, n in by_rule.items():
        counts[COMMIT_GROUPS.get(rule_id, "handover")] += n
    grants = {
        "handover": COMMITS_PER_HANDOVER * len(causes.handovers) + causes.cursor_moves,
        "correction": causes.corrections,
    }
    return {g: Budget(counts[g], grants[g]) for g in counts}
