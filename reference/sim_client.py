"""One consumer process of a simulation (`SimClient`): a fully wired `ClientConsumer` on its own
`ReferenceClientInstance`, its listener (which fails, throws or lasts as the faults say), its
fault counters, and the observers that turn what its parts do into history events.

A client is named "<name>#<incarnation>" ("c1#2": c1 after its second start), which is also its
RocketMQ client id (REBAL-24 orders consumers by it). Once its process crashed or shut down it
reports nothing more: pull answers that still reach its callbacks only touch its dead memory.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from reference import sim_history as h
from reference.client_instance import ReferenceClientInstance
from reference.consume_concurrently import ConsumeRecord, ReferenceConsumeConcurrentlyService
from reference.consume_orderly import OrderlyConsumeRecord, ReferenceConsumeOrderlyService
from reference.push_consumer import PullAttempt, PullOutcome
from reference.rebalance import NewPullRequest
from reference.sim_observe import (
    ObservedList,
    ObservedProcessQueue,
    ObservedSendBack,
    SimConsumer,
    message_key,
)
from spec.consume_types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from spec.consumer_config import ReadOffsetType
from spec.message import MessageQueue, StoredMessage
from spec.protocols import ProcessQueue
from spec.pull_actions import Pull

if TYPE_CHECKING:
    from reference.simulator import Simulator

_OK = {"CONSUME_SUCCESS", "SUCCESS", "COMMIT"}


def name_of(mq: MessageQueue) -> str:
    """The history's name of a queue."""
    return h.queue_name(mq.topic, mq.queue_id)


class SimClient:
    """One incarnation of consumer `name` in simulator `sim`."""

    def __init__(self, sim: Simulator, name: str, incarnation: int) -> None:
        self.sim = sim
        self.name = name
        self.client_id = f"{name}#{incarnation}"
        self.orderly = sim.config.orderly
        self.client_lock_ms = sim.hooks.client_lock_ms
        self.rng = random.Random(f"{sim.config.seed}:{self.client_id}")
        self.left = False
        #: Fault state: listener calls still to fail or throw, durations of the next calls,
        #: send-back faults still to inject ("fail" or "lost").
        self.fail_calls = 0
        self.raise_calls = 0
        self.slow: list[int] = []
        self.send_back_faults: list[str] = []
        self._duration = 0
        #: Live (not dropped) ProcessQueues by id, their queues, cursors and lock flags.
        self.pqs: dict[int, ObservedProcessQueue] = {}
        self.queue_of: dict[int, str] = {}
        self.cursor: dict[int, int] = {}
        self.locked: dict[int, bool] = {}
        self._put: tuple[ObservedProcessQueue, tuple[int, ...]] | None = None
        #: key → (queue, offset) of the copy of it this client cached last.
        self.copy_of_key: dict[str, tuple[str, int]] = {}
        instance = ReferenceClientInstance(
            sim.scheduler,
            sim.remoting,
            sim.config.profile,
            client_id=self.client_id,
            rng=random.Random(f"{sim.config.seed}:{self.client_id}:instance"),
        )
        listener = self.orderly_listener if self.orderly else self.concurrent_listener
        self.consumer = SimConsumer(
            self,
            instance,
            sim.group,
            sim.consumer_config,
            listener,
            {sim.topic: "*"},
            consume_time=self.consume_time,
        )
        self._wire()

    def _wire(self) -> None:
        c = self.consumer
        c.rebalance.process_queue_factory = self._new_pq
        original = c.rebalance.dispatch

        def dispatch(request: NewPullRequest) -> None:
            self.on_dispatch(request)
            original(request)

        c.rebalance.dispatch = dispatch
        service = c.consume_service
        service.send_back = ObservedSendBack(c.send_back, self)
        c.push.attempts = ObservedList(self.on_attempt)
        c.push.outcomes = ObservedList(self.on_outcome)
        if isinstance(service, ReferenceConsumeOrderlyService):
            service.records = ObservedList(self.on_orderly_record)
        elif isinstance(service, ReferenceConsumeConcurrentlyService):
            service.records = ObservedList(self.on_record)

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """The process runs and the consumer has not been shut down."""
        return self.consumer.instance.alive and not self.left

    def start(self) -> None:
        """DefaultMQPushConsumer.start."""
        self.consumer.start()

    def crash(self) -> None:
        """The process dies (nothing persisted, nothing unlocked)."""
        self.consumer.instance.crash()

    def leave(self) -> None:
        """A clean shutdown (persist, unregister, unlock)."""
        self.consumer.shutdown()
        self.left = True

    # -- the listener ---------------------------------------------------------------------------

    def _call(self, msgs: Sequence[StoredMessage], mq: MessageQueue) -> bool:
        """One listener call: report it and decide its outcome (raises for an exception)."""
        fail = self.rng.random() < self.sim.config.fail_rate
        throw = False
        if self.raise_calls > 0:
            self.raise_calls, throw = self.raise_calls - 1, True
        elif self.fail_calls > 0:
            self.fail_calls, fail = self.fail_calls - 1, True
        self._duration = self.slow.pop(0) if self.slow else 0
        queue = name_of(mq)
        now = self.sim.clock.now_ms()
        offsets = tuple(m.queue_offset for m in msgs)
        keys = tuple(self.sim.key_of(queue, o) for o in offsets)
        fail = fail or any(k in self.sim.poison for k in keys)
        self.sim.emit(
            h.Delivered(
                at=now,
                client=self.client_id,
                pq=self._pq_id(mq),
                queue=queue,
                offsets=offsets,
                keys=keys,
                reconsume_times=tuple(m.reconsume_times for m in msgs),
                orderly=self.orderly,
                end=now + self._duration,
            )
        )
        if throw:
            raise RuntimeError("listener exception (injected)")
        return not fail

    def concurrent_listener(
        self, msgs: Sequence[StoredMessage], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        """MessageListenerConcurrently."""
        ok = self._call(msgs, ctx.message_queue)
        return (
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            if ok
            else ConsumeConcurrentlyStatus.RECONSUME_LATER
        )

    def orderly_listener(
        self, msgs: Sequence[StoredMessage], ctx: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        """MessageListenerOrderly."""
        ok = self._call(msgs, ctx.message_queue)
        return (
            ConsumeOrderlyStatus.SUCCESS
            if ok
            else ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        )

    def consume_time(self, msgs: Sequence[StoredMessage]) -> int:
        """How long the listener call just made lasts."""
        return self._duration

    # -- observers ------------------------------------------------------------------------------

    def _new_pq(self) -> ProcessQueue:
        return self.sim.hooks.process_queue(
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
        self.sim.emit(
            h.Assigned(
                at=self.sim.clock.now_ms(),
                client=self.client_id,
                pq=pq.pq_id,
                queue=queue,
                start=request.next_offset,
            )
        )

    def on_put(self, pq: ObservedProcessQueue, msgs: Sequence[StoredMessage]) -> None:
        """A pull's messages entered `pq`."""
        if not self.alive:
            return
        queue = self.queue_of.get(pq.pq_id, "")
        offsets = tuple(m.queue_offset for m in msgs)
        for m in msgs:
            self.copy_of_key[message_key(m)] = (queue, m.queue_offset)
        self._put = (pq, offsets)
        config = self.consumer.push.config
        self.sim.emit(
            h.Cached(
                at=self.sim.clock.now_ms(),
                client=self.client_id,
                pq=pq.pq_id,
                queue=queue,
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
        pid, queue, now = pq.pq_id, name_of(attempt.mq), self.sim.clock.now_ms()
        before = self.cursor.get(pid)
        if before is not None and attempt.next_offset < before:
            self.sim.emit(
                h.CursorMoved(
                    at=now,
                    client=self.client_id,
                    pq=pid,
                    queue=queue,
                    before=before,
                    after=attempt.next_offset,
                    rule="FLOW-12" if self.orderly else "unexplained",
                )
            )
        self.cursor[pid] = attempt.next_offset
        if not isinstance(attempt.action, Pull):
            return
        broker_id = self.consumer.push.pull_from_which_node.get(attempt.mq, 0)
        memory = self.consumer.offset_store.read_offset(attempt.mq, ReadOffsetType.READ_FROM_MEMORY)
        commit = memory if memory > 0 and broker_id == 0 else -1
        if commit > 0:
            self.sim.pull_commits.setdefault(queue, {})[commit] = self.client_id
        self.sim.emit(
            h.PullSent(
                at=now,
                client=self.client_id,
                pq=pid,
                queue=queue,
                offset=attempt.next_offset,
                broker_id=broker_id,
                commit_offset=commit,
            )
        )

    def on_outcome(self, outcome: PullOutcome) -> None:
        """The PullCallback's outcome."""
        if not self.alive:
            return
        offsets: tuple[int, ...] = ()
        pq: ProcessQueue | None
        if self._put is not None:
            pq, offsets = self._put
            self._put = None
        else:
            pq = self.consumer.process_queues().get(outcome.mq)
        pid = pq.pq_id if isinstance(pq, ObservedProcessQueue) else -1
        self.cursor[pid] = outcome.next_offset
        self.sim.emit(
            h.PullAnswered(
                at=outcome.at,
                client=self.client_id,
                pq=pid,
                queue=name_of(outcome.mq),
                status=outcome.status.value if outcome.status else None,
                next_offset=outcome.next_offset,
                offsets=offsets,
            )
        )

    def _consumed(self, at: int, mq: MessageQueue, offsets: tuple[int, ...], status: str) -> None:
        if not self.alive:
            return
        queue = name_of(mq)
        self.sim.emit(
            h.Consumed(
                at=at,
                client=self.client_id,
                pq=self._pq_id(mq),
                queue=queue,
                offsets=offsets,
                keys=tuple(self.sim.key_of(queue, o) for o in offsets),
                status=status,
                success=status in _OK,
            )
        )

    def on_record(self, record: ConsumeRecord) -> None:
        """A concurrent listener call's normalised status (CONC-5)."""
        self._consumed(record.at, record.mq, record.offsets, record.status.value)

    def on_orderly_record(self, record: OrderlyConsumeRecord) -> None:
        """An orderly listener call's end and normalised status (ORDER-8)."""
        self._consumed(record.end, record.mq, record.offsets, record.status.value)

    def on_client_commit(
        self,
        mq: MessageQueue,
        offset: int,
        increase_only: bool,
        before: int | None,
        after: int | None,
        rule: str,
    ) -> None:
        """An in-memory offset write (OFFSET-2)."""
        if not self.alive or after is None:
            return
        self.sim.emit(
            h.ClientCommit(
                at=self.sim.clock.now_ms(),
                client=self.client_id,
                queue=name_of(mq),
                offset=offset,
                increase_only=increase_only,
                before=before,
                after=after,
                rule=rule,
            )
        )

    def writer_rule(self, increase_only: bool) -> str:
        """The writer an offset write comes from (OFFSET-3), as far as the store can tell."""
        if increase_only:
            return "CONC-9"
        return "ORDER-11" if self.orderly else "RESULT-10"

    @contextlib.contextmanager
    def writing(self, via: str) -> Iterator[None]:
        """Broker commits made meanwhile are this client's, through `via`."""
        previous, self.sim.writer = self.sim.writer, (self.client_id, via)
        try:
            yield
        finally:
            self.sim.writer = previous

    @contextlib.contextmanager
    def capture_stored(self) -> Iterator[list[str]]:
        """The topics the master stores records of meanwhile."""
        previous, captured = self.sim.capture, list[str]()
        self.sim.capture = captured
        try:
            yield captured
        finally:
            self.sim.capture = previous

    def take_send_back_fault(self) -> str | None:
        """The next injected send-back fault, if any."""
        return self.send_back_faults.pop(0) if self.send_back_faults else None

    def on_sent_back(self, key: str, via: str, ok: bool, stored: str | None) -> None:
        """A hand-back of the copy of `key` this client cached last."""
        if not self.alive:
            return
        queue, offset = self.copy_of_key.get(key, ("", -1))
        self.sim.emit(
            h.SentBack(
                at=self.sim.clock.now_ms(),
                client=self.client_id,
                key=key,
                queue=queue,
                offset=offset,
                via=via,
                ok=ok,
                stored=stored,
            )
        )

    def poll(self) -> None:
        """Report ProcessQueues dropped and lock flags changed since the last poll."""
        if not self.alive:
            return
        now = self.sim.clock.now_ms()
        for pid, pq in list(self.pqs.items()):
            queue = self.queue_of[pid]
            if pq.dropped:
                del self.pqs[pid]
                self.sim.emit(
                    h.Dropped(at=now, client=self.client_id, pq=pid, queue=queue, reason="PQ-14")
                )
            elif self.orderly and pq.locked != self.locked.get(pid):
                self.locked[pid] = pq.locked
                self.sim.emit(
                    h.ClientLock(
                        at=now, client=self.client_id, pq=pid, queue=queue, locked=pq.locked
                    )
                )

    def cached(self) -> dict[str, tuple[int, ...]]:
        """Offsets each live ProcessQueue still holds, cached or taken (the Snapshot's)."""
        out: dict[str, tuple[int, ...]] = {}
        for pid, pq in self.pqs.items():
            if not pq.dropped:
                held = tuple(sorted({*pq.cached_offsets, *pq.consuming_offsets}))
                out[self.queue_of[pid]] = held
        return out
