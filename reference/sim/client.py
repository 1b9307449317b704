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

from pullspec.reference.client_instance import ReferenceClientInstance
from pullspec.reference.sim import history as h
from pullspec.reference.sim.base import Run
from pullspec.reference.sim.observe import SimConsumer
from pullspec.reference.sim.watch import ClientWatch, name_of
from pullspec.spec.consume_concurrently import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from pullspec.spec.consume_orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from pullspec.spec.message import MessageQueue, StoredMessage


class SimClient(ClientWatch):
    """One incarnation of consumer `name` in simulator `sim`."""

    def __init__(self, sim: Run, name: str, incarnation: int) -> None:
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
        #: Durations of the next calls with messages of the group's topic (not a retry topic,
        #: whose few messages would not move its queue on): a stuck listener.
        self.stuck: list[int] = []
        self.send_back_faults: list[str] = []
        self._duration = 0
        self.pqs = {}
        self.queue_of = {}
        self.cursor = {}
        self.locked = {}
        self.put = None
        self.copy_of_key = {}
        self.delayed = {}
        self.calls = {}
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
            parts=sim.hooks.parts.consumer,
            offset_store=sim.hooks.offset_store,
        )
        self._wire()

    def _wire(self) -> None:
        c = self.consumer
        # the history is the record: the parts keep none, so a long run holds no growing list
        c.push.attempts.listen(self.on_attempt, keep=False)
        c.push.outcomes.listen(self.on_outcome, keep=False)
        if self.orderly:
            c.consume_service.records.listen(self.on_orderly_record, keep=False)
        else:
            c.consume_service.records.listen(self.on_record, keep=False)

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

    def calm(self) -> None:
        """Forget the injected faults that have not struck yet (the quiet tail): listener calls
        still to fail, throw or last long, send-backs still to fail. Calls under way go on."""
        self.fail_calls = self.raise_calls = 0
        self.slow.clear()
        self.stuck.clear()
        self.send_back_faults.clear()

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
        if self.stuck and mq.topic == self.sim.topic:
            self._duration = self.stuck.pop(0)
        else:
            self._duration = self.slow.pop(0) if self.slow else self._usual_duration()
        queue = name_of(mq)
        now = self.sim.clock.now_ms()
        offsets = tuple(m.queue_offset for m in msgs)
        keys = tuple(self.sim.key_of(queue, o) for o in offsets)
        fail = fail or any(k in self.sim.poison for k in keys)
        pq = self.calls[(queue, offsets, now)] = self._pq_id(mq)
        self.sim.emit(
            h.Delivered(
                **self.where(now, pq, queue),
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

    def _usual_duration(self) -> int:
        # A call lasts a few milliseconds, so the pull thread's next attempt (due at once) sees
        # the batch still cached, as RocketMQ's pull thread does while the pool consumes.
        mean = self.sim.config.consume_ms
        return self.rng.randrange(1, 2 * mean) if mean > 0 else 0

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
