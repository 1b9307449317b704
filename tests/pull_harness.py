"""A stand-in for the rebalance that lets the pull loop run end to end in tests: `StaticAssignment`,
the RebalanceHooks of a fixed set of queues. It follows the rulebook where it acts (REBAL-9/10/12/
14/16/17) and models nothing else; the reference's own rebalance is `ReferenceRebalancePushImpl`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Protocol

from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.pull_service import PullRequest
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.clock import Clock
from pullspec.spec.consumer_config import (
    ConsumeFromWhere,
    ConsumerConfig,
    ReadOffsetType,
    default_consume_timestamp,
    parse_consume_timestamp,
)
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, require_str
from pullspec.spec.filter import SubscriptionData, build_subscription_data
from pullspec.spec.message import MessageQueue
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.pull_from_where import OffsetQueries
from pullspec.spec.ruleset import Ruleset


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
        #: The rules of the profile, looked up once.
        self.rules = Ruleset.of(self.profile)
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
