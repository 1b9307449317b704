"""The reference driver of area `rebalance` (vocabulary: conformance.adapters.rebalance): one
`ReferenceRebalancePushImpl` over real `ReferenceProcessQueue`s on a virtual clock, a remote
offset store whose broker side is observed, broker locks answered as the op says, and
computePullFromWhere answering the op's offsets (else reading the store, with a broker whose max
and search offsets are 0)."""

from __future__ import annotations

from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.rebalance import NewPullRequest
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import consumer_config as cc
from pullspec.spec import rebalance
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.clock import ManualClock
from pullspec.spec.filter import build_subscription_data
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.rebalance import NewQueueOutcome

#: The vector area this module serves.
AREA = "rebalance"
#: lastPullTimestamp of a queue the op marks pull-expired: expired at any time.
_LONG_AGO = -(10**15)


class _Scripted:
    """Mixed into the rebalance class: computePullFromWhere answers the op's offsets where it
    gives one (None: it throws) and otherwise computes as usual."""

    scripted: dict[MessageQueue, int | None]

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        if mq in self.scripted:
            answer = self.scripted[mq]
            if answer is None:
                raise MQClientError(f"computePullFromWhere of {mq} failed")
            return answer
        computed: int = super().compute_pull_from_where(mq)  # type: ignore[misc]
        return computed


def _key(q: MessageQueue) -> tuple[str, str, int]:
    return (q.topic, q.broker_name, q.queue_id)


class Driver(_client.DriverBase):
    """The reference driver: a ReferenceRebalancePushImpl and its ProcessQueues."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.clock = ManualClock(0)
        self.scheduler = Scheduler(self.clock)
        self.store = _wiring.RecordingOffsetStore()
        self.locks = _wiring.ScriptedLocks()
        self.requests: list[NewPullRequest] = []
        #: Queues whose consume lock is held (a listener call in progress), by identity.
        self.busy: set[ProcessQueue] = set()
        #: Queues the op marked pull-expired; every other queue keeps pulling.
        self.expired: set[ProcessQueue] = set()
        self.rebalance = self._rebalance(_client.consumer_config(config))
        self.rebalance.consume_passively = bool(config.get("consumePassively", True))

    def _rebalance(self, consumer: cc.ConsumerConfig, admin: Any = None) -> Any:
        scripted = type("ScriptedRebalance", (_Scripted, self.classes.rebalance), {})
        built = scripted(
            self.scheduler,
            group=_wiring.GROUP,
            client_id="c1",
            config=consumer,
            profile=self.profile,
            lock_client=self.locks,
            offset_store=self.store,
            admin=admin or _wiring.ScriptedAdmin(),
            route=lambda _topic: None,
            consumer_ids=lambda _topic, _group: None,
            dispatch=self.requests.append,
            process_queue_factory=self._new_queue,
        )
        built.scripted = {}
        built.consume_lock_free = lambda pq: pq not in self.busy
        return built

    def _new_queue(self) -> ProcessQueue:
        return self.classes.process_queue(self.clock, self.profile)

    # -- observations ---------------------------------------------------------------------------

    def _queues(self) -> list[tuple[MessageQueue, ProcessQueue]]:
        return sorted(self.rebalance.process_queues().items(), key=lambda kv: _key(kv[0]))

    def _table(self) -> list[dict[str, Any]]:
        return [
            {
                "mq": _client.mq_json(q),
                "dropped": pq.dropped,
                "locked": pq.locked,
                "pullExpired": pq.is_pull_expired(),
                "consumeLockFree": pq not in self.busy,
                "hasTempMessage": pq.has_temp_message(),
                "tryUnlockTimes": pq.try_unlock_times,
            }
            for q, pq in self._queues()
        ]

    def _locks(self) -> list[dict[str, Any]]:
        return [
            {
                "mq": _client.mq_json(q),
                "locked": pq.locked,
                "lastLockTimestamp": pq.last_lock_timestamp,
                "lockExpired": pq.is_lock_expired(),
            }
            for q, pq in self._queues()
        ]

    def _persisted(self) -> list[dict[str, Any]]:
        offsets = self.store.broker.offsets
        return [{"mq": _client.mq_json(q), "offset": offsets[q]} for q in sorted(offsets, key=_key)]

    def _views(self) -> dict[str, Any]:
        return {"table": self._table(), "locks": self._locks(), "persisted": self._persisted()}

    def _keep_pulling(self) -> None:
        """Every queue the op did not mark pull-expired has just pulled (nothing else pulls)."""
        now = self.clock.now_ms()
        for _, pq in self._queues():
            if pq not in self.expired:
                pq.last_pull_timestamp = now

    def _at(self, now: int | None) -> None:
        if now is not None:
            self.clock.jump_to(now)
        self.scheduler.run_until(self.clock.now_ms())
        self._keep_pulling()

    # -- ops ------------------------------------------------------------------------------------

    def op_update_table(self, args: _client.Args) -> dict[str, Any]:
        """updateProcessQueueTableInRebalance: pass 1 (REBAL-9, 14, 15), pass 2 (REBAL-10 … 12)
        and messageQueueChanged (REBAL-13)."""
        topic = str(args.req("topic"))
        mq_set = _client.mqs(args.req("mqSet")) or []
        self._at(args.int("now", 0))
        rb = self.rebalance
        if rb.subscription(topic) is None:
            rb.subscribe(build_subscription_data(topic, "*"))
        self.locks.granted, self.locks.refused = (
            None,
            set(_client.mqs(args.get("lockRefused", [])) or []),
        )
        rb.scripted = {_client.mq(o["mq"]): o["offset"] for o in args.get("offsets", [])}
        self.requests.clear()
        changes = len(rb.queue_changes)
        changed = rb.update_process_queue_table_in_rebalance(topic, mq_set)
        if changed:
            rb.message_queue_changed(topic, mq_set, mq_set)
        update = rb.updates[-1]
        removed: list[dict[str, Any]] = []
        kept: list[dict[str, Any]] = []
        for step in update.steps:
            if step.removal.removed:
                removed.append(
                    {
                        "mq": _client.mq_json(step.mq),
                        "reason": step.reason.value,
                        "unlockDelayMs": step.removal.unlock_delay_ms,
                    }
                )
            else:
                kept.append({"mq": _client.mq_json(step.mq), "reason": step.reason.value})
        added: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        for q, verdict in update.new_queues:
            row = {
                "mq": _client.mq_json(q),
                "outcome": verdict.outcome.value,
                "pullRequestOffset": verdict.pull_request_offset,
            }
            (added if verdict.outcome is NewQueueOutcome.ADDED else skipped).append(row)
        plans = rb.queue_changes[changes:]
        self._keep_pulling()
        return {
            "removed": _client.sorted_by_mq(removed),
            "kept": _client.sorted_by_mq(kept),
            "added": added,
            "skipped": skipped,
            "pullRequests": _client.sorted_by_mq(
                [
                    {"mq": _client.mq_json(r.message_queue), "nextOffset": r.next_offset}
                    for r in self.requests
                ]
            ),
            "changed": changed,
            "queueChanged": _client.value_json(plans[-1]) if plans else None,
            **self._views(),
        }

    def op_set_queue(self, args: _client.Args) -> dict[str, Any]:
        """Set what a ProcessQueue shows rebalance (an entry is created when missing); with
        `committedOffset`, the consumer's offset of the queue in memory."""
        q = _client.mq(args.req("mq"))
        pq = self.rebalance.process_queues().get(q)
        if pq is None:
            pq = self._new_queue()
            self.rebalance.put_process_queue(q, pq)
        if "dropped" in args.raw:
            pq.dropped = args.bool("dropped")
        if "locked" in args.raw:
            pq.locked = args.bool("locked")
        if "pullExpired" in args.raw:
            if args.bool("pullExpired"):
                self.expired.add(pq)
                pq.last_pull_timestamp = _LONG_AGO
            else:
                self.expired.discard(pq)
                pq.last_pull_timestamp = self.clock.now_ms()
        if "consumeLockFree" in args.raw:
            (self.busy.discard if args.bool("consumeLockFree") else self.busy.add)(pq)
        if "hasTempMessage" in args.raw:
            if args.bool("hasTempMessage") and not pq.has_temp_message():
                pq.put_messages([_cached(q)])
            elif not args.bool("hasTempMessage"):
                pq.clear()
        if "committedOffset" in args.raw:
            self.store.update_offset(q, args.int("committedOffset"), False)
        return {"table": self._table(), "locks": self._locks()}

    def op_remove_process_queue(self, args: _client.Args) -> dict[str, Any]:
        """removeProcessQueue (REBAL-16)."""
        q = _client.mq(args.req("mq"))
        steps = rebalance.remove_process_queue(q in self.rebalance.process_queues())
        self.rebalance.remove_process_queue(q)
        return {"steps": list(steps), **self._views()}

    def op_lock(self, args: _client.Args) -> dict[str, Any]:
        """lock(mq) (REBAL-19)."""
        self._at(args.get("now"))
        self.locks.answer(_client.mqs(args.req("granted")))
        ok = self.rebalance.lock(_client.mq(args.req("mq")))
        return {"result": ok, "table": self._table(), "locks": self._locks()}

    def op_lock_all(self, args: _client.Args) -> dict[str, Any]:
        """lockAll (REBAL-20): the table's queues, per broker."""
        self._at(args.get("now"))
        self.locks.answer(_client.mqs(args.req("granted")))
        self.rebalance.lock_all()
        return {"table": self._table(), "locks": self._locks()}

    def op_unlock(self, args: _client.Args) -> dict[str, Any]:
        """unlock(mq) / unlockAll (REBAL-21)."""
        self.locks.raises = args.bool("raised", False)
        if args.bool("all"):
            self.rebalance.unlock_all(False)
        else:
            for q in _client.mqs(args.req("requested")) or []:
                self.rebalance.unlock(q, False)
        self.locks.raises = False
        return {"table": self._table(), "locks": self._locks()}

    def op_advance_clock(self, args: _client.Args) -> dict[str, Any]:
        """Let time pass: delayed unlocks run, lock leases age."""
        self._at(self.clock.now_ms() + args.int("ms"))
        return {"now": self.clock.now_ms(), **self._views()}

    def op_lease_timeline(self, args: _client.Args) -> dict[str, Any]:
        """The three lease moments after a successful lock (REBAL-22)."""
        timeline: dict[str, Any] = _client.value_json(
            rebalance.lease_timeline(args.int("lastLock"))
        )
        return timeline

    def op_destroy(self, args: _client.Args) -> dict[str, Any]:
        """destroy at shutdown (REBAL-23)."""
        before = self._queues()
        self.rebalance.destroy()
        dropped = [q for q, pq in before if pq.dropped]
        return {"dropped": _client.mqs_json(dropped), **self._views()}

    def op_compute_pull_from_where(self, args: _client.Args) -> dict[str, Any]:
        """computePullFromWhere(WithException) (REBAL-17) with REBAL-18's default timestamp, on
        a rebalance constructed at `constructionMs` whose offset store reads `lastOffset`."""
        stamp = args.get("consumeTimestamp")
        consumer = cc.ConsumerConfig(
            consume_from_where=args.enum("consumeFromWhere", cc.ConsumeFromWhere),
            consume_timestamp=stamp,
        )
        self.clock.jump_to(args.int("constructionMs", 0))
        built = self._rebalance(
            consumer, _wiring.ScriptedAdmin(args.get("maxOffset"), args.get("searchOffset"))
        )
        built.offset_store = _FixedRead(args.int("lastOffset"))
        try:
            offset = built.compute_pull_from_where(_client.mq(args.req("mq")))
        except MQClientError:
            return {
                "exception": MQClientError.java_exception,
                "consumeTimestamp": built.consume_timestamp,
            }
        return {"offset": offset, "consumeTimestamp": built.consume_timestamp}


class _FixedRead(_wiring.RecordingOffsetStore):
    """An offset store whose readOffset answers one scripted value."""

    def __init__(self, value: int) -> None:
        super().__init__()
        self.value = value

    def read_offset(self, mq: Any, read_type: Any) -> int:
        return self.value


def _cached(q: MessageQueue) -> StoredMessage:
    """A message for a queue that must cache something (hasTempMessage)."""
    return _client.message({"queueOffset": 0}, q.topic, q.queue_id)
