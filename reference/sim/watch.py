"""What a `SimClient` reports of its consumer's pull path and consume service (`ClientWatch`,
a base of SimClient): new ProcessQueues and their PullRequests (Assigned), puts (Cached), pull
attempts (CursorMoved, PullDelayed, PullSent) and answers (PullAnswered), listener results
(Consumed), and — polled after every step — dropped ProcessQueues and lock flags (Dropped,
ClientLock). The parts' records (`reference.records.Records`) call these handlers."""

from __future__ import annotations

from collections.abc import Sequence

from pullspec.reference.consume_concurrently import ConsumeRecord
from pullspec.reference.consume_orderly import OrderlyConsumeRecord
from pullspec.reference.push_consumer import PullAttempt, PullOutcome
from pullspec.reference.rebalance import NewPullRequest
from pullspec.reference.sim import history as h
from pullspec.reference.sim.base import Run
from pullspec.reference.sim.observe import ObservedProcessQueue, SimConsumer, message_key
from pullspec.spec.consumer_config import ReadOffsetType
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.pull_actions import Delay, Pull

_OK = {"CONSUME_SUCCESS", "SUCCESS", "COMMIT"}


def name_of(mq: MessageQueue) -> str:
    """The history's name of a queue."""
    return h.queue_name(mq.topic, mq.queue_id)


class ClientWatch:
    """The observers of one consumer incarnation (the state they keep lives on SimClient)."""

    sim: Run
    client_id: str
    orderly: bool
    #: The client lease its ProcessQueues keep (PQ-15).
    client_lock_ms: int
    consumer: SimConsumer
    #: Live (not dropped) ProcessQueues by id, their queues, cursors and lock flags.
    pqs: dict[int, ObservedProcessQueue]
    queue_of: dict[int, str]
    cursor: dict[int, int]
    locked: dict[int, bool]
    #: The last put, until the pull answer that made it is reported.
    put: tuple[ObservedProcessQueue, tuple[int, ...]] | None
    #: key → (queue, offset) of the copy of it this client cached last.
    copy_of_key: dict[str, tuple[str, int]]
    #: The reason of the last PullDelayed of each ProcessQueue, until it pulls again.
    delayed: dict[int, str]
    #: (queue, offsets, start) → ProcessQueue of each listener call in progress.
    calls: dict[tuple[str, tuple[int, ...], int], int]

    @property
    def alive(self) -> bool:
        """The process runs and the consumer has not been shut down."""
        raise NotImplementedError

    def where(self, at: int, pq: int, queue: str) -> h.QueueEventFields:
        """The first fields of an event of this client's ProcessQueue `pq` of `queue` at `at`."""
        return {"at": at, "client": self.client_id, "pq": pq, "queue": queue}

    def new_process_queue(self) -> ProcessQueue:
        """A new ProcessQueue of this consumer, numbered in the run (the rebalance's factory)."""
        return self.sim.hooks.new_process_queue(
            self.sim.clock, self.sim.config.profile, self, self.sim.next_pq_id()
        )

    def _pq_id(self, mq: MessageQueue) -> int:
        pq = self.consumer.process_queues().get(mq)
        return pq.pq_id if isinstance(pq, ObservedProcessQueue) else -1

    def on_dispatch(self, request: NewPullRequest) -> None:
        """A new ProcessQueue and its PullRequest (REBAL-10)."""
        pq = request.process_queue
        if not isinstance(pq, ObservedProcessQueue) or not self.alive:
            return
        queue = name_of(request.message_queue)
        self.pqs[pq.pq_id], self.queue_of[pq.pq_id] = pq, queue
        self.cursor[pq.pq_id] = request.next_offset
        self.locked[pq.pq_id] = pq.locked
        where = self.where(self.sim.clock.now_ms(), pq.pq_id, queue)
        self.sim.emit(h.Assigned(**where, start=request.next_offset))

    def on_put(self, pq: ObservedProcessQueue, msgs: Sequence[StoredMessage]) -> None:
        """A pull's messages entered `pq`."""
        if not self.alive:
            return
        queue = self.queue_of.get(pq.pq_id, "")
        offsets = tuple(m.queue_offset for m in msgs)
        for m in msgs:
            self.copy_of_key[message_key(m)] = (queue, m.queue_offset)
        self.put = (pq, offsets)
        config = self.consumer.push.config
        self.sim.emit(
            h.Cached(
                **self.where(self.sim.clock.now_ms(), pq.pq_id, queue),
                count=len(pq.cached_offsets) + len(pq.consuming_offsets),
                threshold=config.pull_threshold_for_queue,
                batch=config.pull_batch_size,
            )
        )

    def on_attempt(self, attempt: PullAttempt) -> None:
        """A pullMessage attempt: a cursor moved back (FLOW-12), a pull sent."""
        pq = self.consumer.process_queues().get(attempt.mq)
        if not self.alive or not isinstance(pq, ObservedProcessQueue):
            return
        pid, queue = pq.pq_id, name_of(attempt.mq)
        where = self.where(self.sim.clock.now_ms(), pid, queue)
        before = self.cursor.get(pid)
        if before is not None and attempt.next_offset < before:
            rule = "FLOW-12" if self.orderly else "unexplained"
            self.sim.emit(
                h.CursorMoved(**where, before=before, after=attempt.next_offset, rule=rule)
            )
        self.cursor[pid] = attempt.next_offset
        action = attempt.action
        if isinstance(action, Delay):
            reason = action.reason.value
            if self.delayed.get(pid) != reason:
                self.delayed[pid] = reason
                self.sim.emit(h.PullDelayed(**where, reason=reason, ms=action.ms))
            return
        self.delayed.pop(pid, None)
        if not isinstance(action, Pull):
            return
        broker_id = self.consumer.push.pull_from_which_node.get(attempt.mq, 0)
        memory = self.consumer.offset_store.read_offset(attempt.mq, ReadOffsetType.READ_FROM_MEMORY)
        commit = memory if memory > 0 and broker_id == 0 else -1
        if commit > 0:
            self.sim.pull_commits.setdefault(queue, {})[commit] = self.client_id
        self.sim.emit(
            h.PullSent(
                **where, offset=attempt.next_offset, broker_id=broker_id, commit_offset=commit
            )
        )

    def on_outcome(self, outcome: PullOutcome) -> None:
        """The PullCallback's outcome."""
        if not self.alive:
            return
        offsets: tuple[int, ...] = ()
        pq: ProcessQueue | None
        if self.put is not None:
            pq, offsets = self.put
            self.put = None
        else:
            pq = self.consumer.process_queues().get(outcome.mq)
        pid = pq.pq_id if isinstance(pq, ObservedProcessQueue) else -1
        self.cursor[pid] = outcome.next_offset
        self.sim.emit(
            h.PullAnswered(
                **self.where(outcome.at, pid, name_of(outcome.mq)),
                status=outcome.status.value if outcome.status else None,
                next_offset=outcome.next_offset,
                offsets=offsets,
            )
        )

    def _consumed(
        self, start: int, end: int, mq: MessageQueue, offsets: tuple[int, ...], status: str
    ) -> None:
        if not self.alive:
            return
        queue = name_of(mq)
        # The ProcessQueue the call was given, though it may have been replaced since.
        pq = self.calls.pop((queue, offsets, start), None)
        self.sim.emit(
            h.Consumed(
                **self.where(end, self._pq_id(mq) if pq is None else pq, queue),
                offsets=offsets,
                keys=tuple(self.sim.key_of(queue, o) for o in offsets),
                status=status,
                success=status in _OK,
            )
        )

    def on_record(self, record: ConsumeRecord) -> None:
        """A concurrent listener call's end and normalised status (CONC-5)."""
        self._consumed(record.at, record.end, record.mq, record.offsets, record.status.value)

    def on_orderly_record(self, record: OrderlyConsumeRecord) -> None:
        """An orderly listener call's end and normalised status (ORDER-8)."""
        self._consumed(record.start, record.end, record.mq, record.offsets, record.status.value)

    def poll(self) -> None:
        """Report ProcessQueues dropped and lock flags changed since the last poll."""
        if not self.alive:
            return
        now = self.sim.clock.now_ms()
        for pid, pq in list(self.pqs.items()):
            queue = self.queue_of[pid]
            if pq.dropped:
                del self.pqs[pid]
                self.delayed.pop(pid, None)
                reason = "PQ-16" if self._replaced_pull_expired(pq) else "PQ-14"
                self.sim.emit(h.Dropped(**self.where(now, pid, queue), reason=reason))
            elif self.orderly and pq.locked != self.locked.get(pid):
                self.locked[pid] = pq.locked
                self.sim.emit(h.ClientLock(**self.where(now, pid, queue), locked=pq.locked))

    def _replaced_pull_expired(self, pq: ObservedProcessQueue) -> bool:
        """`pq`, just dropped, was pull-expired and its queue has a new ProcessQueue already:
        rebalance removed and re-created it in one pass (REBAL-9)."""
        if not pq.is_pull_expired():
            return False
        queue = self.queue_of[pq.pq_id]
        return any(q == queue and p is not pq for p, q in self._live_queues())

    def _live_queues(self) -> list[tuple[ProcessQueue, str]]:
        return [(p, name_of(mq)) for mq, p in self.consumer.process_queues().items()]

    def cached(self) -> dict[str, tuple[int, ...]]:
        """Offsets each live ProcessQueue still holds, cached or taken (the Snapshot's)."""
        out: dict[str, tuple[int, ...]] = {}
        for pid, pq in self.pqs.items():
            if not pq.dropped:
                held = tuple(sorted({*pq.cached_offsets, *pq.consuming_offsets}))
                out[self.queue_of[pid]] = held
        return out
