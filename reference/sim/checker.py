"""The anomaly checker: reads a history (`reference.sim.history`) once, in order, applies the
invariants of `spec.invariants` to every event and reports each failure by its Jepsen-style name
— `lost`, `duplicate`, `nonmonotonic-commit`, `orderly-overlap`, `orderly-reorder`,
`flow-bound-exceeded`, `dlq-accounting`, and the four below — either as *allowed*, with the
rule of RocketMQ 4.x that explains it (`reference.sim.causes`), or as a *violation*.

Loss and accounting are judged at the end, against the run's final Snapshot: a message is
consumed (a listener call said so), dead-lettered (a copy reached %DLQ%<group>), pending (its
newest copy waits in the schedule topic, is cached by a live client, or sits at or above its
queue's committed offset) or else lost (the committed offset passed an unconsumed copy nobody
handed back) or unaccounted (a hand-back reported OK but no copy was stored).

When the history has a quiet tail (a `Quiet` event), liveness is judged too: a message still
pending then is `stuck`, a poison message not dead-lettered `dlq-missing` (LIVE-1, LIVE-2).
The allowed duplicates and backward commits are held to the budgets their causes grant
(`reference.sim.budget`: `duplicate-budget`, `commit-budget`, LIVE-3), and every event counts
toward the rules it shows (`reference.sim.coverage`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pullspec.reference.sim import causes
from pullspec.reference.sim import history as h
from pullspec.reference.sim.budget import Budget, Causes, commit_budgets, duplicate_budgets
from pullspec.reference.sim.causes import (
    NONE,
    BrokerQueue,
    Call,
    ClientQueue,
    KeyInfo,
    PqInfo,
    Success,
)
from pullspec.reference.sim.coverage import Coverage
from pullspec.reference.sim.verdict import Anomaly, CheckResult
from pullspec.spec import invariants as inv
from pullspec.spec import liveness as live
from pullspec.spec.config import DEFAULT_MESSAGE_DELAY_LEVEL
from pullspec.spec.delay import parse_delay_levels

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
#: Milliseconds of each delay level (RETRY-7, the store's default messageDelayLevel).
DELAY_LEVELS = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
DLQ_PREFIX = "%DLQ%"
#: Details kept per anomaly kind (counts are always complete).
DETAILS_PER_KIND = 20

__all__ = ["Anomaly", "CheckResult", "Checker", "check"]


class Checker:
    """An incremental checker: `feed` each event in order, then `finish` once."""

    def __init__(self) -> None:
        self.result = CheckResult()
        self.setup: h.Setup | None = None
        self.snapshot: h.Snapshot | None = None
        self.keys: dict[str, KeyInfo] = {}
        self.copy_successes: dict[causes.Copy, list[Success]] = {}
        self.pqs: dict[int, PqInfo] = {}
        self.brokers: dict[str, BrokerQueue] = {}
        self.memory: dict[tuple[str, str], ClientQueue] = {}
        self.crashed: set[str] = set()
        self.truncated: dict[str, int] = {}
        self.moved_past: dict[str, int] = {}
        self.open_calls: dict[str, list[Call]] = {}
        self.left: dict[str, int] = {}
        self.pull_sent_seq: dict[tuple[str, str, int], int] = {}
        #: The last delivery of each copy, and the last one that consumed it or handed it back.
        self.last_delivery: dict[causes.Copy, Success] = {}
        self.handled: dict[causes.Copy, Success] = {}
        self.shown: dict[tuple[str, bool], int] = {}
        self.orderly_high: dict[tuple[str, str], int] = {}
        self.clock_jumps: list[int] = []
        self.last_broker_lowering: dict[str, int] = {}
        self.stats = {"events": 0, "produced": 0, "deliveries": 0, "successes": 0}
        #: Copies each queue received (produced or stored by the broker).
        self.received: dict[str, int] = {}
        #: Keys produced and neither consumed nor dead-lettered yet.
        self.open_keys: set[str] = set()
        self.quiet: h.Quiet | None = None
        self.causes = Causes()
        self.coverage = Coverage()
        self._handlers: dict[str, Callable[[Any], None]] = {
            "Setup": self._setup,
            "Produce": self._produce,
            "Stored": self._stored,
            "Assigned": self._assigned,
            "Dropped": self._dropped,
            "CursorMoved": self._cursor_moved,
            "PullSent": self._pull_sent,
            "PullAnswered": self._pull_answered,
            "Cached": self._cached,
            "Delivered": self._delivered,
            "Consumed": self._consumed,
            "SentBack": self._sent_back,
            "ClientCommit": self._client_commit,
            "BrokerCommit": self._broker_commit,
            "Truncated": self._truncated,
            "Fault": self._fault,
            "Quiet": self._quiet,
            "Snapshot": self._snapshot,
        }

    # -- reporting ----------------------------------------------------------------------------

    def report(self, kind: str, rule: str | None, at: int, detail: str) -> None:
        """Count one anomaly (a violation when `rule` is None) and keep its detail."""
        r = self.result
        if rule is None:
            r.violations[kind] = r.violations.get(kind, 0) + 1
        else:
            r.allowed[rule] = r.allowed.get(rule, 0) + 1
            per = r.allowed_by_kind.setdefault(kind, {})
            per[rule] = per.get(rule, 0) + 1
        slot = (kind, rule is None)
        self.shown[slot] = self.shown.get(slot, 0) + 1
        if self.shown[slot] <= DETAILS_PER_KIND:
            r.details.append(Anomaly(kind, rule, at, detail))

    # -- events -------------------------------------------------------------------------------

    def feed(self, e: h.Event) -> None:
        """Take the next event of the history."""
        self.stats["events"] += 1
        self.coverage.feed(e)
        handler = self._handlers.get(e.type)
        if handler is not None:
            handler(e)

    def _setup(self, e: h.Setup) -> None:
        self.setup = e

    def _copy(
        self, key: str, queue: str, offset: int, topic: str, at: int, bound: str = ""
    ) -> None:
        self.received[queue] = self.received.get(queue, 0) + 1
        info = self.keys.setdefault(key, KeyInfo())
        if topic.startswith(DLQ_PREFIX):
            info.dlq = True
            self.open_keys.discard(key)
        else:
            info.latest, info.latest_at, info.latest_bound = (queue, offset), at, bound

    def _produce(self, e: h.Produce) -> None:
        self.stats["produced"] += 1
        self.open_keys.add(e.key)
        self._copy(e.key, h.queue_name(e.topic, e.queue_id), e.offset, e.topic, e.at)
        if e.poison:
            self.keys[e.key].poison = True

    def _stored(self, e: h.Stored) -> None:
        queue = h.queue_name(e.topic, e.queue_id)
        self._copy(e.key, queue, e.offset, e.topic, e.at, e.real_topic)

    def _assigned(self, e: h.Assigned) -> None:
        self.causes.handovers.append(self.received.get(e.queue, 0))
        broker = self.brokers.get(e.queue, BrokerQueue())
        self.pqs[e.pq] = PqInfo(
            e.client,
            e.queue,
            e.at,
            e.start,
            broker.current,
            broker.highest,
            broker.lowering_rule if broker.current < broker.highest else None,
            {c: m.high for (c, q), m in self.memory.items() if q == e.queue and c != e.client},
            frozenset(self.crashed),
        )

    def _dropped(self, e: h.Dropped) -> None:
        info = self.pqs.get(e.pq)
        if info is not None and info.dropped_at is None:
            info.dropped_at = e.at

    def _cursor_moved(self, e: h.CursorMoved) -> None:
        info = self.pqs.get(e.pq)
        if info is not None and e.after < e.before:
            info.moves.append((e.at, e.after, e.rule))
            self.causes.cursor_moves += 1

    def _pull_sent(self, e: h.PullSent) -> None:
        info = self.pqs.get(e.pq)
        if info is not None:
            info.in_flight += 1
        if e.commit_offset > 0:
            self.pull_sent_seq[(e.client, e.queue, e.commit_offset)] = self.stats["events"]

    def _pull_answered(self, e: h.PullAnswered) -> None:
        info = self.pqs.get(e.pq)
        if info is not None:
            info.in_flight = max(0, info.in_flight - 1)
            for offset in e.offsets:
                puts = info.puts[offset] = info.puts.get(offset, 0) + 1
                if puts > 1:
                    self.causes.reputs += 1
        if e.status == "OFFSET_ILLEGAL":
            self.causes.corrections += 1
            self.moved_past[e.queue] = max(self.moved_past.get(e.queue, NONE), e.next_offset)

    def _cached(self, e: h.Cached) -> None:
        if inv.within_flow_bound(e.count, e.threshold, e.batch):
            return
        info = self.pqs.get(e.pq)
        rule = "RESULT-14" if info is not None and info.in_flight > 1 else None
        detail = f"{e.client} pq{e.pq} {e.queue}: {e.count} cached > {e.threshold} + {e.batch}"
        self.report(inv.FLOW_BOUND_EXCEEDED, rule, e.at, detail)

    def _delivered(self, e: h.Delivered) -> None:
        self.stats["deliveries"] += 1
        for offset, key in zip(e.offsets, e.keys, strict=True):
            copy = (e.queue, offset)
            # A copy consumed or handed back already, delivered again: remember why, for the
            # copies of the message this delivery may lead to
            prev, info = self.handled.get(copy), self.keys.get(key)
            if prev is not None and info is not None and info.redelivered is None:
                info.redelivered = self._redelivery_cause(e.pq, copy, prev)
            self.last_delivery[copy] = Success(e.at, e.client, e.pq)
        if not e.orderly:
            return
        # A call still open at e.at, of a live process, by another client is an overlap; each
        # pair of calls is reported once.
        calls = [
            c
            for c in self.open_calls.get(e.queue, [])
            if c.end > e.at and c.client not in self.crashed
        ]
        others = [c for c in calls if c.client != e.client and e.client not in c.reported]
        if not inv.one_orderly_owner(frozenset([e.client, *(c.client for c in others)])):
            for call in others:
                call.reported.add(e.client)
                self.report(
                    inv.ORDERLY_OVERLAP,
                    causes.overlap_cause(
                        call, e.at, e.end, self._lease(), self.clock_jumps, self.left
                    ),
                    e.at,
                    f"{e.queue}: {call.client} since {call.start}, {e.client} at {e.at}",
                )
        calls.append(Call(e.client, e.at, max(e.end, e.at)))
        self.open_calls[e.queue] = calls

    def _consumed(self, e: h.Consumed) -> None:
        if not e.success:
            return
        orderly = self.setup is not None and self.setup.orderly
        dup_causes: list[str | None] = []
        for offset, key in zip(e.offsets, e.keys, strict=True):
            dup_causes.append(self._success(e, offset, key))
        if orderly:
            self._orderly_order(e, dup_causes)

    def _success(self, e: h.Consumed, offset: int, key: str) -> str | None:
        """Count one success; report it when it is a duplicate; return the duplicate's cause."""
        self.stats["successes"] += 1
        info = self.keys.setdefault(key, KeyInfo())
        info.successes += 1
        self.open_keys.discard(key)
        copy = (e.queue, offset)
        earlier = self.copy_successes.setdefault(copy, [])
        success = Success(e.at, e.client, e.pq)
        cause: str | None = None
        if not inv.consumed_at_most_once(info.successes):
            cause = self._again_cause(e.pq, copy, info)
            self.report(inv.DUPLICATE, cause, e.at, f"{key} at {copy} by {e.client} pq{e.pq}")
        earlier.append(success)
        self.handled[copy] = success
        return cause

    def _redelivery_cause(self, pq_id: int, copy: causes.Copy, prev: Success) -> str | None:
        pq = self.pqs.get(pq_id)
        if pq is None:
            return None
        if prev.pq == pq_id:
            return causes.same_pq_cause(pq, copy[1], prev.at)
        return causes.new_pq_cause(pq, copy[1], prev, self.pqs)

    def _again_cause(self, pq_id: int, copy: causes.Copy, info: KeyInfo) -> str | None:
        """Why a copy of a message already consumed reached a listener in ProcessQueue `pq_id`."""
        earlier = self.copy_successes.get(copy)
        if not earlier:
            return causes.other_copy_cause(info)
        prev, pq = earlier[-1], self.pqs.get(pq_id)
        if pq is None:
            return None
        if prev.pq == pq_id:
            return causes.same_pq_cause(pq, copy[1], prev.at)
        return causes.new_pq_cause(pq, copy[1], prev, self.pqs)

    def _orderly_order(self, e: h.Consumed, dup_causes: list[str | None]) -> None:
        slot = (e.client, e.queue)
        high = self.orderly_high.get(slot, NONE)
        first = min(e.offsets)
        if not inv.orderly_in_order(high, first, False):
            rule = next((c for c in dup_causes if c is not None), None)
            info = self.pqs.get(e.pq)
            if rule is None and info is not None:
                rule = causes.same_pq_cause(info, first, info.assigned_at)
            if rule is None and self.moved_past.get(e.queue, NONE) >= 0:
                rule = "RESULT-10"
            self.report(inv.ORDERLY_REORDER, rule, e.at, f"{e.client} {e.queue}: {first} <= {high}")
        self.orderly_high[slot] = max(high, *e.offsets)

    def _sent_back(self, e: h.SentBack) -> None:
        self.causes.sent_back(e)
        info = self.keys.setdefault(e.key, KeyInfo())
        info.sent_back.append((e.via, e.ok, e.stored))
        if e.ok:
            copy = (e.queue, e.offset)
            info.handed_back.add(copy)
            last = self.last_delivery.get(copy)
            if last is not None and last.client == e.client:
                self.handled[copy] = last
            if e.stored is None:
                info.vanished = True

    def _client_commit(self, e: h.ClientCommit) -> None:
        slot = self.memory.setdefault((e.client, e.queue), ClientQueue())
        if not inv.client_offset_monotone(e.before, e.after, e.increase_only):
            detail = f"{e.client} {e.queue}: {e.before} -> {e.after} by {e.rule}"
            self.report(inv.NONMONOTONIC_COMMIT, None, e.at, detail)
        if e.before is not None and e.after < e.before and not e.increase_only:
            slot.lowered.append((e.at, e.after, e.rule))
        slot.current = e.after
        slot.high = max(slot.high, e.after)

    def _broker_commit(self, e: h.BrokerCommit) -> None:
        broker = self.brokers.setdefault(e.queue, BrokerQueue())
        before = broker.current if broker.current != NONE else None
        if not inv.broker_commit_monotone(before, e.offset):
            memory = self.memory.get((e.client, e.queue))
            sent = self.pull_sent_seq.get((e.client, e.queue, e.offset))
            rule = causes.lowering_cause(broker, e.client, memory, e.offset, e.via, sent)
            detail = f"{e.queue}: {before} -> {e.offset} by {e.client} via {e.via}"
            self.report(inv.NONMONOTONIC_COMMIT, rule, e.at, detail)
            broker.lowering_rule = rule or "COMMIT-1"
        broker.current = e.offset
        broker.highest = max(broker.highest, e.offset)
        broker.writer = e.client
        broker.written_seq = self.stats["events"]

    def _truncated(self, e: h.Truncated) -> None:
        self.truncated[e.queue] = max(self.truncated.get(e.queue, NONE), e.min_offset)

    def _fault(self, e: h.Fault) -> None:
        self.causes.fault(e)
        if e.fault == "crash":
            self.crashed.add(e.target)
        elif e.fault == "clock-jump":
            self.clock_jumps.append(e.at)
        elif e.fault == "leave":
            self.left[e.target] = e.at

    def _quiet(self, e: h.Quiet) -> None:
        self.quiet = e

    def _snapshot(self, e: h.Snapshot) -> None:
        self.snapshot = e

    # -- liveness -------------------------------------------------------------------------------

    def _gone(self, info: KeyInfo) -> bool:
        """The message's newest copy lies below its queue's expired or corrected-past offset."""
        if info.latest is None:
            return False
        queue, offset = info.latest
        return offset < max(self.truncated.get(queue, NONE), self.moved_past.get(queue, NONE))

    def _delayed_past(self, info: KeyInfo, at: int) -> bool:
        """The newest copy waits in the schedule topic, bound for the DLQ, until after `at`
        (RETRY-8: its delay level is its queue id + 1; an orderly hand-off past
        maxReconsumeTimes is delayed by level 3 + reconsumeTimes, up to 2 h, ORDER-15). A
        delayed retry is not excused: its level is at most 3 + maxReconsumeTimes."""
        if info.latest is None or not info.latest_bound.startswith(DLQ_PREFIX):
            return False
        topic, queue_id = h.split_queue_name(info.latest[0])
        if topic != SCHEDULE_TOPIC:
            return False
        delay = DELAY_LEVELS[min(queue_id, len(DELAY_LEVELS) - 1)]
        return info.latest_at + delay > at

    def unresolved(self) -> list[str]:
        """Keys not yet consumed, dead-lettered, vanished (RETRY-1), gone with their file or
        delayed past the quiet tail: what the tail still waits for."""
        keys, until = self.keys, self.quiet.until if self.quiet is not None else None
        return sorted(
            k
            for k in self.open_keys
            if not keys[k].vanished
            and not self._gone(keys[k])
            and not (until is not None and self._delayed_past(keys[k], until))
        )

    # -- the end --------------------------------------------------------------------------------

    def finish(self) -> CheckResult:
        """Judge loss and accounting against the final Snapshot; return the verdict."""
        snap = self.snapshot
        committed = (
            dict(snap.committed) if snap else {q: b.current for q, b in self.brokers.items()}
        )
        cached = {
            (q, o)
            for per_queue in (snap.cached.values() if snap else ())
            for q, offsets in per_queue.items()
            for o in offsets
        }
        at = snap.at if snap else 0
        counts = {"consumed": 0, "dlq": 0, "pending": 0, "poison": 0, "poisonInDlq": 0}
        settling = {"delayed": 0, "gone": 0, inv.STUCK: 0, inv.DLQ_MISSING: 0}
        for key, info in self.keys.items():
            consumed = info.successes > 0
            pending = lost = False
            if not consumed and not info.dlq and info.latest is not None:
                queue, offset = info.latest
                pending = (
                    h.split_queue_name(queue)[0] == SCHEDULE_TOPIC
                    or (queue, offset) in cached
                    or committed.get(queue, NONE) <= offset
                )
                handed = (queue, offset) in info.handed_back
                if not pending and not inv.copy_not_lost(
                    consumed, handed, committed.get(queue, NONE), offset
                ):
                    lost = True
                    self.report(inv.LOST, self._loss_rule(queue, offset), at, f"{key} at {queue}")
            accounted = inv.dlq_accounted(consumed, info.dlq, pending)
            if not accounted and (info.latest is None or info.latest in info.handed_back):
                rule = "RETRY-1" if self._retry_dropped() and info.vanished else None
                self.report(inv.DLQ_ACCOUNTING, rule, at, f"{key}: handed back, never stored")
            elif self.quiet is not None and not lost and not info.vanished:
                state = self._unsettled(key, info, consumed, at)
                if state is not None:
                    settling[state] += 1
            counts["consumed"] += consumed
            counts["dlq"] += info.dlq
            counts["pending"] += pending
            counts["poison"] += info.poison
            counts["poisonInDlq"] += info.poison and info.dlq
        self._budgets(at)
        self.result.stats = {**self.stats, **counts, "keys": len(self.keys)}
        self.result.liveness = self._liveness(counts, settling, at)
        self.result.coverage = self.coverage.to_json()
        return self.result

    def _unsettled(self, key: str, info: KeyInfo, consumed: bool, at: int) -> str | None:
        """After the quiet tail: a poison message must be in the DLQ (LIVE-2), any other one
        consumed or dead-lettered (LIVE-1), unless its file expired first ("gone") or its copy
        is delayed past the end ("delayed", RETRY-8); the anomaly reported, else None."""
        if consumed or info.dlq:
            return None
        if self._delayed_past(info, at):
            return "delayed"
        if self._gone(info):
            return "gone"
        where = f"{key} at {info.latest}" if info.latest else key
        if info.poison:
            self.report(inv.DLQ_MISSING, None, at, f"{where}: always fails, not in the DLQ")
            return inv.DLQ_MISSING
        self.report(inv.STUCK, None, at, f"{where}: neither consumed nor dead-lettered")
        return inv.STUCK

    def _budgets(self, at: int) -> None:
        setup = self.setup or h.Setup(
            at=0, profile="", group="", topics=(), orderly=False, consumers=0
        )
        by_kind = self.result.allowed_by_kind
        self.duplicate_budgets = duplicate_budgets(
            setup, self.causes, by_kind.get(inv.DUPLICATE, {}), self.stats["produced"], at
        )
        self.commit_budgets = commit_budgets(self.causes, by_kind.get(inv.NONMONOTONIC_COMMIT, {}))
        for kind, budgets in (
            (inv.DUPLICATE_BUDGET, self.duplicate_budgets),
            (inv.COMMIT_BUDGET, self.commit_budgets),
        ):
            for group, b in budgets.items():
                if not live.within_budget(b.count, b.budget):
                    self.report(kind, None, at, f"{group}: {b.count} allowed > budget {b.budget}")

    def _liveness(
        self, counts: dict[str, int], settling: dict[str, int], at: int
    ) -> dict[str, object]:
        def plain(budgets: dict[str, Budget]) -> dict[str, dict[str, int]]:
            return {g: {"count": b.count, "budget": b.budget} for g, b in budgets.items()}

        quiet = self.quiet
        unsettled = settling[inv.STUCK] + settling[inv.DLQ_MISSING]
        return {
            "judged": quiet is not None,
            "quietAt": quiet.at if quiet else None,
            "quietUntil": quiet.until if quiet else None,
            "endedAt": at,
            "settled": quiet is not None and unsettled == 0,
            "stuck": settling[inv.STUCK],
            "dlqMissing": settling[inv.DLQ_MISSING],
            # Neither consumed nor dead-lettered, but excused: expired with their file, or
            # their copy delayed past the end (RETRY-8).
            "gone": settling["gone"],
            "delayed": settling["delayed"],
            "poison": counts["poison"],
            "poisonInDlq": counts["poisonInDlq"],
            "duplicates": plain(self.duplicate_budgets),
            "commits": plain(self.commit_budgets),
        }

    def _lease(self) -> int:
        return self.setup.client_lock_ms if self.setup else 30_000

    def _loss_rule(self, queue: str, offset: int) -> str | None:
        if self.truncated.get(queue, NONE) > offset:
            return "STORE-19"  # its file expired before it was consumed
        if self.moved_past.get(queue, NONE) > offset:
            return "RESULT-10"  # an OFFSET_ILLEGAL correction moved the offset past it
        return None

    def _retry_dropped(self) -> bool:
        return self.setup is not None and self.setup.retry_queue_nums <= 0


def check(events: Iterable[h.Event]) -> CheckResult:
    """Check a history; every invariant failure is counted as a violation or an allowed anomaly."""
    checker = Checker()
    for event in events:
        checker.feed(event)
    return checker.finish()
