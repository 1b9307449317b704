"""The reference driver of area `rebalance` (vocabulary: conformance.adapters.rebalance, docs/protocol.md)."""

from __future__ import annotations

from typing import Any

import attrs

from pullspec.reference.areas import _vocab as _client
from pullspec.spec import consumer_config as cc
from pullspec.spec import pull_from_where, rebalance
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "rebalance"
_VIEW_FIELDS = ("dropped", "locked", "pullExpired", "consumeLockFree", "hasTempMessage")


@attrs.define
class Entry:
    """One table entry: the ProcessQueue facts rebalance reads, and its failed unlock tries."""

    view: rebalance.QueueView
    try_unlock_times: int = 0


class _Admin:
    """MQAdminImpl's offset queries for computePullFromWhere; None answers throw."""

    def __init__(self, max_offset: int | None, search_offset: int | None) -> None:
        self._max, self._search = max_offset, search_offset

    def max_offset(self, mq: MessageQueue) -> int:
        if self._max is None:
            raise MQClientError("maxOffset failed")
        return self._max

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        if self._search is None:
            raise MQClientError("searchOffset failed")
        return self._search


def _key(q: MessageQueue) -> tuple[str, str, int]:
    return (q.topic, q.broker_name, q.queue_id)


class Driver(_client.DriverBase):
    """The reference driver: spec.rebalance over a table of queue views."""

    area = AREA

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)
        self.passive = bool(config.get("consumePassively", True))
        self.table: dict[MessageQueue, Entry] = {}

    def _table(self) -> list[dict[str, Any]]:
        return [
            {
                "mq": _client.mq_json(q),
                **_client.value_json(e.view),
                "tryUnlockTimes": e.try_unlock_times,
            }
            for q, e in sorted(self.table.items(), key=lambda kv: _key(kv[0]))
        ]

    def _mark(self, marks: rebalance.LockMarks) -> None:
        for q in marks.locked | marks.unlocked:
            if q in self.table:
                entry = self.table[q]
                entry.view = attrs.evolve(entry.view, locked=q in marks.locked)

    def op_update_table(self, args: _client.Args) -> dict[str, Any]:
        """updateProcessQueueTableInRebalance: pass 1 (REBAL-9, 14, 15), pass 2 (REBAL-10 … 12)
        and messageQueueChanged (REBAL-13)."""
        topic = str(args.req("topic"))
        mq_set = _client.mqs(args.req("mqSet")) or []
        clustering = self.consumer.message_model is cc.MessageModel.CLUSTERING
        views = {q: e.view for q, e in self.table.items()}
        plan = rebalance.rebalance_pass1(
            topic, views, mq_set, self.passive, self.consumer.orderly, clustering
        )
        removed, kept = [], []
        for step in plan.steps:
            # Pass 1 drops the queue before trying to remove it (RocketMQ sets dropped first).
            entry = self.table[step.mq]
            entry.view = attrs.evolve(entry.view, dropped=True)
            if step.removal.removed:
                del self.table[step.mq]
                removed.append(
                    {
                        "mq": _client.mq_json(step.mq),
                        "reason": step.reason.value,
                        "unlockDelayMs": step.removal.unlock_delay_ms,
                    }
                )
            else:
                entry.try_unlock_times += int(step.removal.inc_try_unlock_times)
                kept.append({"mq": _client.mq_json(step.mq), "reason": step.reason.value})
        refused = {_key(q) for q in _client.mqs(args.get("lockRefused", [])) or []}
        offsets = {_key(_client.mq(o["mq"])): o["offset"] for o in args.get("offsets", [])}
        added, skipped, requests = [], [], []
        for q in rebalance.pass2_candidates(set(self.table), mq_set):
            outcome = rebalance.new_queue(
                self.profile,
                self.consumer.orderly,
                _key(q) not in refused,
                offsets.get(_key(q), 0),
            )
            row = {
                "mq": _client.mq_json(q),
                "outcome": outcome.outcome.value,
                "pullRequestOffset": outcome.pull_request_offset,
            }
            if outcome.outcome is rebalance.NewQueueOutcome.ADDED:
                locked = (
                    rebalance.new_process_queue_locked_v47()
                    if self.profile is Profile.V4_7
                    else rebalance.new_process_queue_locked_v49()
                )
                self.table[q] = Entry(rebalance.QueueView(locked=locked))
                added.append(row)
                requests.append({"mq": row["mq"], "nextOffset": outcome.pull_request_offset})
            else:
                skipped.append(row)
        changed = plan.changed or bool(added)
        queue_changed = None
        if changed:
            change = rebalance.message_queue_changed(
                args.int("now", 0), len(self.table), self.consumer
            )
            queue_changed = _client.value_json(change)
        return {
            "removed": _client.sorted_by_mq(removed),
            "kept": _client.sorted_by_mq(kept),
            "added": added,
            "skipped": skipped,
            "pullRequests": _client.sorted_by_mq(rebalance.dispatch_pull_requests(requests)),
            "changed": changed,
            "queueChanged": queue_changed,
            "table": self._table(),
        }

    def op_set_queue(self, args: _client.Args) -> dict[str, Any]:
        """Set what a ProcessQueue shows rebalance (an entry is created when missing)."""
        q = _client.mq(args.req("mq"))
        entry = self.table.setdefault(q, Entry(rebalance.QueueView()))
        changes = {
            f: args.bool(c)
            for f, c in zip(
                ("dropped", "locked", "pull_expired", "consume_lock_free", "has_temp_message"),
                _VIEW_FIELDS,
                strict=True,
            )
            if c in args.raw
        }
        entry.view = attrs.evolve(entry.view, **changes)
        return {"table": self._table()}

    def op_remove_process_queue(self, args: _client.Args) -> dict[str, Any]:
        """removeProcessQueue (REBAL-16)."""
        q = _client.mq(args.req("mq"))
        steps = rebalance.remove_process_queue(q in self.table)
        self.table.pop(q, None)
        return {"steps": list(steps), "table": self._table()}

    def op_lock(self, args: _client.Args) -> dict[str, Any]:
        """lock(mq) (REBAL-19)."""
        granted = _client.mqs(args.req("granted"))
        ok, marks = rebalance.lock_one(_client.mq(args.req("mq")), granted, set(self.table))
        self._mark(marks)
        return {"result": ok, "table": self._table()}

    def op_lock_all(self, args: _client.Args) -> dict[str, Any]:
        """lockAll for one broker (REBAL-20)."""
        marks = rebalance.lock_all_marks(
            _client.mqs(args.req("requested")) or [],
            _client.mqs(args.req("granted")),
            set(self.table),
        )
        self._mark(marks)
        return {"table": self._table()}

    def op_unlock(self, args: _client.Args) -> dict[str, Any]:
        """unlock(mq) / unlockAll (REBAL-21)."""
        marks = rebalance.unlock_marks(
            args.bool("all"), _client.mqs(args.req("requested")) or [], args.bool("raised", False)
        )
        self._mark(marks)
        return {"table": self._table()}

    def op_lease_timeline(self, args: _client.Args) -> dict[str, Any]:
        """The three lease moments after a successful lock (REBAL-22)."""
        timeline: dict[str, Any] = _client.value_json(
            rebalance.lease_timeline(args.int("lastLock"))
        )
        return timeline

    def op_destroy(self, args: _client.Args) -> dict[str, Any]:
        """destroy at shutdown (REBAL-23)."""
        dropped = rebalance.destroy(list(self.table))
        self.table.clear()
        return {"dropped": _client.mqs_json(dropped), "table": self._table()}

    def op_compute_pull_from_where(self, args: _client.Args) -> dict[str, Any]:
        """computePullFromWhere(WithException) (REBAL-17) with REBAL-18's default timestamp."""
        stamp = args.get("consumeTimestamp")
        if stamp is None:
            stamp = cc.default_consume_timestamp(args.int("constructionMs", 0))
        how = args.enum("consumeFromWhere", cc.ConsumeFromWhere)
        admin = _Admin(args.get("maxOffset"), args.get("searchOffset"))
        try:
            offset = pull_from_where.compute_pull_from_where_for(
                self.profile,
                how,
                _client.mq(args.req("mq")),
                args.int("lastOffset"),
                admin,
                cc.parse_consume_timestamp(stamp),
            )
        except MQClientError:
            return {"exception": MQClientError.java_exception, "consumeTimestamp": stamp}
        return {"offset": offset, "consumeTimestamp": stamp}
