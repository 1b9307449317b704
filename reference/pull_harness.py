"""Stand-ins that let the pull loop run end to end before the real rebalance (issue 4) and consume
services exist: `StaticAssignment`, the RebalanceHooks of a fixed set of queues, and
`ScriptedConsumeService`, a ConsumeMessageService that calls a scripted listener. Both follow the
rulebook where they act (REBAL-9/10/12/14/16/17, CONC-4/9) and model nothing else."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.pull_service import PullRequest
from pullspec.reference.scheduler import Scheduler
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.clock import Clock
from pullspec.spec.consumer_config import (
    ConsumeFromWhere,
    ConsumerConfig,
    ReadOffsetType,
    default_consume_timestamp,
    parse_consume_timestamp,
)
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, require_int, require_str
from pullspec.spec.filter import SubscriptionData, build_subscription_data
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.process_queue import require_messages
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.pull_from_where import OffsetQueries
from pullspec.spec.ruleset import Ruleset

#: A scripted listener: consume `msgs` of `mq` now (True) or leave them waiting (False), as a
#: listener still busy would; `ScriptedConsumeService.release` offers them again.
Listener = Callable[[Sequence[StoredMessage], MessageQueue], bool]


class PullDispatcher(Protocol):
    """Where new PullRequests go (DefaultMQPushConsumerImpl.executePullRequestImmediately)."""

    def execute_pull_request_immediately(self, pull_request: PullRequest) -> None:
        """Enqueue `pull_request` at once (REBAL-12)."""
        ...


def _mq(value: object) -> MessageQueue:
    if not isinstance(value, MessageQueue):
        raise InvalidTypeError("mq", value, "MessageQueue")
    return value


class StaticAssignment:
    """RebalanceHooks over a fixed set of queues: every subscribed queue gets a ProcessQueue and
    a PullRequest starting at computePullFromWhere (REBAL-10/12); `do_rebalance` re-creates
    removed and pull-expired queues (REBAL-9). Broker locks are always granted: 4.9 creates
    orderly queues locked (REBAL-11), 4.7 leaves them unlocked until `lock_all`."""

    def __init__(
        self,
        group: str,
        queues: Iterable[MessageQueue],
        subscriptions: Mapping[str, str],
        offset_store: OffsetStore,
        admin: OffsetQueries,
        config: ConsumerConfig,
        profile: Profile,
        clock: Clock,
    ) -> None:
        self.group = require_str("group", group)
        self.queues = tuple(sorted(_mq(q) for q in queues))
        for name, value, kind in (
            ("offset_store", offset_store, OffsetStore),
            ("admin", admin, OffsetQueries),
            ("config", config, ConsumerConfig),
            ("clock", clock, Clock),
        ):
            if not isinstance(value, kind):
                raise InvalidTypeError(name, value, kind.__name__)
        self.offset_store, self.admin, self.config, self.clock = offset_store, admin, config, clock
        self.profile = Profile.parse(profile)
        self._subscriptions: dict[str, SubscriptionData] = {}
        for topic, expression in subscriptions.items():
            self.subscribe(topic, expression)
        self._table: dict[MessageQueue, ReferenceProcessQueue] = {}
        #: The PullRequest created last for each queue.
        self.pull_requests: dict[MessageQueue, PullRequest] = {}
        self._dispatcher: PullDispatcher | None = None
        self.log: list[tuple[str, str]] = []

    # -- subscriptions (subscriptionInner) ---------------------------------------------------

    def subscribe(self, topic: str, expression: str) -> None:
        """subscribe(topic, expression): a TAG subscription (FilterAPI.buildSubscriptionData)."""
        name = require_str("topic", topic)
        self._subscriptions[name] = build_subscription_data(
            name, require_str("expression", expression)
        )

    def unsubscribe(self, topic: str) -> None:
        """unsubscribe(topic): its pulls then wait E each (FLOW-13)."""
        self._subscriptions.pop(require_str("topic", topic), None)

    def subscription(self, topic: str) -> SubscriptionData | None:
        """subscriptionInner.get(topic)."""
        return self._subscriptions.get(require_str("topic", topic))

    def process_queues(self) -> Mapping[MessageQueue, ProcessQueue]:
        """A read-only view of processQueueTable."""
        return MappingProxyType(self._table)

    # -- rebalance ---------------------------------------------------------------------------

    def start(self, dispatcher: PullDispatcher) -> None:
        """Remember where PullRequests go and run the first rebalance."""
        if not callable(getattr(dispatcher, "execute_pull_request_immediately", None)):
            raise InvalidTypeError("dispatcher", dispatcher, "PullDispatcher")
        self._dispatcher = dispatcher
        self.do_rebalance()

    @property
    def rules(self) -> Ruleset:
        """The rules of this object's profile (a mutant swaps one)."""
        return Ruleset.of(self.profile)

    def do_rebalance(self) -> None:
        """REBAL-3 (queues of unsubscribed topics are dropped), REBAL-9 (pull-expired queues are
        dropped and removed) and REBAL-10 (missing queues of subscribed topics are created and
        their PullRequests dispatched, REBAL-12)."""
        if self._dispatcher is None:
            raise InvalidArgumentError("dispatcher", None, "call start() first")
        for mq, pq in list(self._table.items()):
            if mq.topic not in self._subscriptions:  # REBAL-3: no persist, no offset removal
                pq.dropped = True
                del self._table[mq]
            elif pq.is_pull_expired():
                pq.dropped = True
                self._remove_unnecessary(mq)
                del self._table[mq]
                self.log.append(
                    ("error", f"[BUG]doRebalance, {self.group}, remove unnecessary mq, {mq}")
                )
        created: list[PullRequest] = []
        for mq in self.queues:
            if mq in self._table or mq.topic not in self._subscriptions:
                continue
            self.offset_store.remove_offset(mq)  # removeDirtyOffset (OFFSET-13)
            pq = ReferenceProcessQueue(self.clock, self.profile)
            if self.config.orderly and self.rules.new_process_queue_locked():
                pq.locked = True  # REBAL-11: pre-locked, lastLockTimestamp = creation time
            try:
                offset = self.compute_pull_from_where(mq)
            except MQClientError as exc:  # 4.9 only: computePullFromWhereWithException
                self.log.append(
                    ("info", f"doRebalance, {self.group}, compute offset failed, {exc}")
                )
                continue
            if offset < 0:
                self.log.append(("warn", f"doRebalance, {self.group}, add new mq failed, {mq}"))
                continue
            self._table[mq] = pq
            created.append(PullRequest(self.group, mq, pq, offset))
        for pr in created:
            self.pull_requests[pr.message_queue] = pr
            self._dispatcher.execute_pull_request_immediately(pr)

    def lock_all(self) -> None:
        """lockAll (REBAL-20) with every lock granted: locked = true, lastLockTimestamp = now."""
        for pq in self._table.values():
            pq.locked = True
            pq.last_lock_timestamp = self.clock.now_ms()

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """REBAL-17 in this profile: readOffset(READ_FROM_STORE), then ConsumeFromWhere."""
        queue = _mq(mq)
        last = self.offset_store.read_offset(queue, ReadOffsetType.READ_FROM_STORE)
        timestamp = 0
        if self.config.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            text = self.config.consume_timestamp or default_consume_timestamp(self.clock.now_ms())
            timestamp = parse_consume_timestamp(text)
        return self.rules.compute_pull_from_where(
            self.config.consume_from_where, queue, last, self.admin, timestamp
        )

    def remove_process_queue(self, mq: MessageQueue) -> None:
        """removeProcessQueue (REBAL-16): drop and remove the queue's entry, if any."""
        prev = self._table.pop(_mq(mq), None)
        if prev is not None:
            was_dropped = prev.dropped
            prev.dropped = True
            self._remove_unnecessary(mq)
            self.log.append(("info", f"Fix Offset, {mq}, remove unnecessary mq, {was_dropped}"))

    def _remove_unnecessary(self, mq: MessageQueue) -> None:
        # REBAL-14: persist, then forget the offset; the orderly unlock is not modelled.
        self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)


class ScriptedConsumeService:
    """A ConsumeMessageService for tests: batches of `batch_size` messages are consumed on the
    scheduler (call_soon) by the listener; a consumed batch is removed from its ProcessQueue and
    the offset removeMessage returns is committed increase-only unless the queue was dropped
    (CONC-4, CONC-9)."""

    def __init__(
        self,
        scheduler: Scheduler,
        offset_store: OffsetStore,
        listener: Listener | None = None,
        batch_size: int = 1,
    ) -> None:
        if not isinstance(scheduler, Scheduler):
            raise InvalidTypeError("scheduler", scheduler, "Scheduler")
        if not isinstance(offset_store, OffsetStore):
            raise InvalidTypeError("offset_store", offset_store, "OffsetStore")
        if listener is not None and not callable(listener):
            raise InvalidTypeError("listener", listener, "a callable")
        self.batch_size = require_int("batch_size", batch_size)
        if self.batch_size < 1:
            raise InvalidArgumentError("batch_size", batch_size, "must be >= 1")
        self.scheduler, self.offset_store = scheduler, offset_store
        self.listener: Listener = listener or (lambda msgs, mq: True)
        #: Batches the listener left waiting, oldest first.
        self.waiting: list[tuple[tuple[StoredMessage, ...], ProcessQueue, MessageQueue]] = []
        #: (time, queue, offsets) of every batch consumed.
        self.consumed: list[tuple[int, MessageQueue, tuple[int, ...]]] = []
        #: (time, queue, offset) of every offset committed.
        self.committed: list[tuple[int, MessageQueue, int]] = []
        #: (time, queue, offsets) of batches discarded because their queue was dropped.
        self.discarded: list[tuple[int, MessageQueue, tuple[int, ...]]] = []

    def submit_consume_request(
        self,
        msgs: Sequence[StoredMessage],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        """submitConsumeRequest: one consume event per batch, whatever dispatch_to_consume says
        (the concurrent service ignores it, CONC-2)."""
        batch = require_messages("msgs", msgs)
        if not isinstance(process_queue, ProcessQueue):
            raise InvalidTypeError("process_queue", process_queue, "ProcessQueue")
        mq = _mq(message_queue)
        if not isinstance(dispatch_to_consume, bool):
            raise InvalidTypeError("dispatch_to_consume", dispatch_to_consume, "bool")
        for i in range(0, len(batch), self.batch_size):
            self._submit(batch[i : i + self.batch_size], process_queue, mq)

    def release(self) -> None:
        """Offer every waiting batch to the listener again (each in its own consume event)."""
        waiting, self.waiting = self.waiting, []
        for batch, pq, mq in waiting:
            self._submit(batch, pq, mq)

    def _submit(self, batch: tuple[StoredMessage, ...], pq: ProcessQueue, mq: MessageQueue) -> None:
        self.scheduler.call_soon(lambda: self._consume(batch, pq, mq), "consume")

    def _consume(
        self, batch: tuple[StoredMessage, ...], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        now = self.scheduler.clock.now_ms()
        offsets = tuple(m.queue_offset for m in batch)
        if pq.dropped:  # CONC-4: a dropped queue's request is not consumed
            self.discarded.append((now, mq, offsets))
            return
        if not self.listener(batch, mq):
            self.waiting.append((batch, pq, mq))
            return
        self.consumed.append((now, mq, offsets))
        if pq.dropped:  # CONC-9: no result processing for a queue dropped meanwhile
            return
        offset = pq.remove_messages(batch)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(mq, offset, True)
            self.committed.append((now, mq, offset))
