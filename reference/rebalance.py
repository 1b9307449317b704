"""The reference RebalancePushImpl (REBAL-2 … REBAL-23) on the deterministic scheduler; the
rebalance thread (REBAL-1) and a broker lock client over reference lock managers are in
`reference.rebalance_service`.

The process-queue table is a plain dict; every decision is a rule of `spec.allocate` /
`spec.rebalance`, fed a snapshot (`QueueView`) of the table. Java walks the assigned set (a
HashSet) in an unspecified order; here new queues are added in MessageQueue order. The orderly
consume service reports whether a ProcessQueue's consume lock is free through
`consume_lock_free` (wired after construction); new PullRequests go to `dispatch`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from types import MappingProxyType

import attrs

from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.pull_service import PullRequest
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import allocate as al
from pullspec.spec import rebalance as rb
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.consumer_config import (
    ConsumerConfig,
    MessageModel,
    ReadOffsetType,
    default_consume_timestamp,
)
from pullspec.spec.consumer_config import parse_consume_timestamp as parse_timestamp
from pullspec.spec.errors import InvalidTypeError, NullPointerError
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import MessageQueue
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import BrokerLockClient, ProcessQueue
from pullspec.spec.pull_from_where import OffsetQueries
from pullspec.spec.rebalance import LockMarks, NewQueueOutcome, QueueView
from pullspec.spec.ruleset import Ruleset


@attrs.frozen
class TableUpdate:
    """What one updateProcessQueueTableInRebalance did: pass 1's steps (each queue it dropped,
    why, and whether it left the table), pass 2's verdict on each newly assigned queue, and
    whether the table changed. Tests and the conformance drivers read `updates`."""

    topic: str
    steps: tuple[rb.Pass1Step, ...]
    new_queues: tuple[tuple[MessageQueue, rb.NewQueue], ...]
    changed: bool


@attrs.frozen
class NewPullRequest:
    """A PullRequest rebalance creates for a newly added queue (REBAL-10, REBAL-12)."""

    consumer_group: str
    message_queue: MessageQueue
    process_queue: ProcessQueue
    next_offset: int

    def pull_request(self) -> PullRequest:
        """The PullRequest dispatchPullRequest hands the pull service (REBAL-12)."""
        return PullRequest(
            self.consumer_group, self.message_queue, self.process_queue, self.next_offset
        )


class ReferenceRebalancePushImpl:
    """RebalancePushImpl: the process-queue table, allocation, client locking and removal; it
    provides what the pull path needs (reference.push_consumer.RebalanceHooks)."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        group: str,
        client_id: str,
        config: ConsumerConfig,
        profile: Profile,
        lock_client: BrokerLockClient,
        offset_store: OffsetStore,
        admin: OffsetQueries,
        route: Callable[[str], Collection[MessageQueue] | None],
        consumer_ids: Callable[[str, str], Collection[str] | None],
        strategy: al.AllocateStrategy = al.allocate_averagely,
        dispatch: Callable[[NewPullRequest], None] | None = None,
        process_queue_factory: Callable[[], ProcessQueue] | None = None,
    ) -> None:
        if not isinstance(scheduler, Scheduler):
            raise InvalidTypeError("scheduler", scheduler, "Scheduler")
        self.scheduler = scheduler
        self.group = group
        self.client_id = client_id
        #: The consumer's configuration; messageQueueChanged rewrites its per-queue thresholds.
        self.config = config
        self.profile = Profile.parse(profile)
        #: The rules of the profile, looked up once (a mutant swaps one).
        self.rules = Ruleset.of(self.profile)
        self.lock_client = lock_client
        self.offset_store = offset_store
        self.admin = admin
        self.route = route
        self.consumer_ids = consumer_ids
        self.strategy = strategy
        self.dispatched: list[NewPullRequest] = []
        self.dispatch: Callable[[NewPullRequest], None] = dispatch or self.dispatched.append
        self.process_queue_factory: Callable[[], ProcessQueue] = process_queue_factory or (
            lambda: ReferenceProcessQueue(scheduler.clock, self.profile)
        )
        #: consumeType() == CONSUME_PASSIVELY: true for the push consumer; a pull consumer's
        #: rebalance (false) keeps pull-expired queues (REBAL-9).
        self.consume_passively = True
        #: The orderly service's answer to pq.consumeLock.tryLock (REBAL-14); free by default.
        self.consume_lock_free: Callable[[ProcessQueue], bool] = lambda _pq: True
        #: sendHeartbeatToAllBrokerWithLock, run by messageQueueChanged (REBAL-13); the client
        #: instance wires it, so the brokers learn the new subVersion before the next pull.
        self.send_heartbeat: Callable[[], None] = lambda: None
        #: Told the rewritten config when FLOW-14 changes the per-queue thresholds, so the pull
        #: path (which holds its own copy) applies them too.
        self.config_changed: Callable[[ConsumerConfig], None] = lambda _config: None
        #: consumeTimestamp: the configured one, else construction time − 30 min at second
        #: precision (REBAL-18), parsed when computePullFromWhere needs it.
        self.consume_timestamp = config.consume_timestamp or default_consume_timestamp(
            scheduler.clock.now_ms()
        )
        self.consume_timestamp_ms = parse_timestamp(self.consume_timestamp)
        #: Every table update and every messageQueueChanged plan, in order.
        self.updates: list[TableUpdate] = []
        self.queue_changes: list[rb.QueueChangedPlan] = []
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.paused = False
        self.heartbeats = 0
        #: (level, message) for what RocketMQ logs; tests read it.
        self.log: list[tuple[str, str]] = []
        self._table: dict[MessageQueue, ProcessQueue] = {}

    @property
    def orderly(self) -> bool:
        """consumeOrderly: the listener is a MessageListenerOrderly."""
        return self.config.orderly

    @property
    def clustering(self) -> bool:
        """The message model is CLUSTERING."""
        return self.config.message_model is MessageModel.CLUSTERING

    # -- what the pull path reads -------------------------------------------------------------------

    def subscribe(self, subscription: SubscriptionData) -> None:
        """Put `subscription` into subscriptionInner (the consumer's subscribe / copySubscription,
        which also adds %RETRY%<group> in CLUSTERING)."""
        self.subscription_inner[subscription.topic] = subscription

    def subscription(self, topic: str) -> SubscriptionData | None:
        """subscriptionInner.get(topic)."""
        return self.subscription_inner.get(topic)

    def process_queues(self) -> Mapping[MessageQueue, ProcessQueue]:
        """processQueueTable, read-only."""
        return MappingProxyType(self._table)

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """REBAL-17 as this profile's rebalance calls it: 4.7 gives −1 on a failed broker query,
        4.9 (computePullFromWhereWithException) raises MQClientError."""
        last = self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        return self.rules.compute_pull_from_where(
            self.config.consume_from_where,
            mq,
            last,
            self.admin,
            self.consume_timestamp_ms,
        )

    # -- doRebalance (REBAL-2 … REBAL-5) -----------------------------------------------------------

    def do_rebalance(self) -> None:
        """The consumer's doRebalance (REBAL-2): nothing while paused, else every subscribed
        topic, then the truncation of unsubscribed ones."""
        if self.paused:
            return
        for topic in al.rebalance_topics(self.paused, list(self.subscription_inner)):
            try:
                self.rebalance_by_topic(topic)
            except Exception as exc:
                if al.warns_on_failure(topic):
                    self.log.append(("warn", f"rebalanceByTopic Exception {topic}: {exc!r}"))
        self.truncate_message_queue_not_my_topic()

    def rebalance_by_topic(self, topic: str) -> frozenset[MessageQueue] | None:
        """rebalanceByTopic: allocate (REBAL-4/5), update the table, report a change; answers
        the allocation (None when the route or the consumer list is unknown)."""
        mq_set = self.route(topic)
        if not self.clustering:
            allocated = al.broadcasting_allocation(mq_set)
        else:
            try:
                cid_all = self.consumer_ids(topic, self.group)
            except Exception:
                cid_all = None
            allocated = al.clustering_allocation(
                mq_set, cid_all, self.group, self.client_id, self.strategy
            )
        if allocated is None:
            self.log.append(("warn", f"doRebalance, {self.group}, {topic}: no allocation"))
            return None
        if self.update_process_queue_table_in_rebalance(topic, allocated):
            self.message_queue_changed(topic, mq_set or frozenset(), allocated)
        return frozenset(allocated)

    def truncate_message_queue_not_my_topic(self) -> None:
        """REBAL-3: drop the ProcessQueues of unsubscribed topics, nothing else."""
        for mq in al.truncated_queues(list(self._table), self.subscription_inner):
            self._table.pop(mq).dropped = True
            self.log.append(("info", f"doRebalance, truncateMessageQueueNotMyTopic {mq}"))

    # -- the table update (REBAL-9 … REBAL-16) -------------------------------------------------

    def update_process_queue_table_in_rebalance(
        self, topic: str, mq_set: Collection[MessageQueue]
    ) -> bool:
        """Pass 1 (REBAL-9) then pass 2 (REBAL-10/11); dispatch the new PullRequests (REBAL-12)."""
        views = {
            mq: QueueView(
                pq.dropped,
                pq.locked,
                pq.is_pull_expired(),
                self.consume_lock_free(pq),
                pq.has_temp_message(),
            )
            for mq, pq in self._table.items()
            if mq.topic == topic
        }
        plan = rb.rebalance_pass1(
            topic, views, mq_set, self.consume_passively, self.orderly, self.clustering
        )
        for step in plan.steps:
            pq = self._table[step.mq]
            pq.dropped = True
            self._apply_removal(step.mq, pq, step.removal)
            if step.removal.removed:
                del self._table[step.mq]
                self.log.append(
                    ("info", f"doRebalance, remove unnecessary mq {step.mq} {step.reason.value}")
                )
        changed = plan.changed
        requests: list[NewPullRequest] = []
        verdicts: list[tuple[MessageQueue, rb.NewQueue]] = []
        for mq in rb.pass2_candidates(self._table.keys(), mq_set):
            request, verdict = self._add(mq)
            verdicts.append((mq, verdict))
            if request is not None:
                requests.append(request)
                changed = True
        self.updates.append(TableUpdate(topic, plan.steps, tuple(verdicts), changed))
        for request in rb.dispatch_pull_requests(requests):
            self.dispatch(request)
        return changed

    def _add(self, mq: MessageQueue) -> tuple[NewPullRequest | None, rb.NewQueue]:
        lock_ok = self.lock(mq) if self.orderly else True
        if self.orderly and not lock_ok:
            self.log.append(("warn", f"add a new mq failed, {mq}, because lock failed"))
            return None, self.rules.new_queue(True, False, None)
        self.offset_store.remove_offset(mq)  # removeDirtyOffset (OFFSET-13)
        pq = self.process_queue_factory()
        if self.rules.new_process_queue_locked():
            pq.locked = True  # REBAL-11: lastLockTimestamp is the creation time already
        try:
            next_offset: int | None = self.compute_pull_from_where(mq)
        except MQClientError:
            next_offset = None
        decision = self.rules.new_queue(self.orderly, lock_ok, next_offset)
        if decision.outcome is not NewQueueOutcome.ADDED:
            self.log.append(("warn", f"add new mq failed, {mq}: {decision.outcome.value}"))
            return None, decision
        self._table[mq] = pq
        assert decision.pull_request_offset is not None
        self.log.append(("info", f"doRebalance, add a new mq, {mq}"))
        return NewPullRequest(self.group, mq, pq, decision.pull_request_offset), decision

    def _apply_removal(self, mq: MessageQueue, pq: ProcessQueue, removal: rb.Removal) -> None:
        self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        if removal.inc_try_unlock_times:
            pq.inc_try_unlock_times()
            self.log.append(("warn", f"[WRONG]mq is consuming, so can not unlock it, {mq}"))
        if removal.unlock_delay_ms == 0:
            self.unlock(mq, True)
        elif removal.unlock_delay_ms is not None:
            # The client instance's scheduler ("MQClientFactoryScheduledThread")
            self.scheduler.call_later(
                removal.unlock_delay_ms, lambda: self.unlock(mq, True), f"unlockDelay {mq.queue_id}"
            )

    def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """removeUnnecessaryMessageQueue (REBAL-14, REBAL-15)."""
        view = QueueView(
            consume_lock_free=self.consume_lock_free(pq), has_temp_message=pq.has_temp_message()
        )
        removal = rb.remove_unnecessary(self.orderly, self.clustering, view)
        self._apply_removal(mq, pq, removal)
        return removal.removed

    def remove_process_queue(self, mq: MessageQueue) -> None:
        """removeProcessQueue (REBAL-16)."""
        prev = self._table.pop(mq, None)
        if "drop" in rb.remove_process_queue(prev is not None) and prev is not None:
            was_dropped = prev.dropped
            prev.dropped = True
            self.remove_unnecessary_message_queue(mq, prev)
            self.log.append(
                ("info", f"Fix Offset, {mq}, remove unnecessary mq, Droped: {was_dropped}")
            )

    def message_queue_changed(
        self, topic: str, mq_all: Collection[MessageQueue], mq_divided: Collection[MessageQueue]
    ) -> None:
        """messageQueueChanged (REBAL-13); a topic without SubscriptionData throws (REBAL-2
        catches it)."""
        sub = self.subscription_inner.get(topic)
        if sub is None:
            raise NullPointerError(f"subscriptionInner has no {topic}")
        plan = rb.message_queue_changed(
            self.scheduler.clock.now_ms(), len(self._table), self.config
        )
        self.queue_changes.append(plan)
        self.subscription_inner[topic] = evolve(sub, sub_version=plan.sub_version)
        if plan.queue_thresholds is not None:
            self.config = self.config.with_queue_thresholds(*plan.queue_thresholds)
            self.config_changed(self.config)
        if plan.send_heartbeat:
            self.heartbeats += 1
            self.send_heartbeat()

    # -- client locking (REBAL-19 … REBAL-21, REBAL-23) -------------------------------------------

    def _apply(self, marks: LockMarks) -> None:
        now = self.scheduler.clock.now_ms()
        for mq in marks.locked:
            pq = self._table[mq]
            pq.locked = True
            pq.last_lock_timestamp = now
        for mq in marks.unlocked:
            self._table[mq].locked = False

    def _lock_rpc(self, broker: str, mqs: Iterable[MessageQueue]) -> set[MessageQueue] | None:
        try:
            return self.lock_client.lock_batch(broker, self.group, self.client_id, mqs)
        except Exception as exc:
            self.log.append(("error", f"lockBatchMQ exception, {broker}: {exc!r}"))
            return None

    def lock(self, mq: MessageQueue) -> bool:
        """lock(mq) (REBAL-19): false without a master or on an exception."""
        if not self.lock_client.has_master(mq.broker_name):
            return False
        ok, marks = rb.lock_one(mq, self._lock_rpc(mq.broker_name, [mq]), set(self._table))
        self._apply(marks)
        self.log.append(("info", f"the message queue lock {'OK' if ok else 'Failed'}, {mq}"))
        return ok

    def lock_all(self) -> None:
        """lockAll (REBAL-20): per broker, every table queue, dropped ones included."""
        for broker, mqs in rb.group_by_broker(self._table).items():
            if not self.lock_client.has_master(broker):
                continue
            self._apply(rb.lock_all_marks(mqs, self._lock_rpc(broker, mqs), set(self._table)))

    def _unlock_rpc(self, broker: str, mqs: Iterable[MessageQueue], oneway: bool) -> bool:
        try:
            self.lock_client.unlock_batch(broker, self.group, self.client_id, mqs, oneway)
            return False
        except Exception as exc:
            self.log.append(("error", f"unlockBatchMQ exception, {broker}: {exc!r}"))
            return True

    def unlock(self, mq: MessageQueue, oneway: bool) -> None:
        """unlock(mq, oneway) (REBAL-21): the ProcessQueue's flag is not touched."""
        if self.lock_client.has_master(mq.broker_name):
            raised = self._unlock_rpc(mq.broker_name, [mq], oneway)
            self._apply(rb.unlock_marks(False, [mq], raised))
            self.log.append(("warn", f"unlock messageQueue. group:{self.group}, {mq}"))

    def unlock_all(self, oneway: bool) -> None:
        """unlockAll (REBAL-21): clears the flags of a broker's queues once its call succeeded."""
        for broker, mqs in rb.group_by_broker(self._table).items():
            if self.lock_client.has_master(broker):
                raised = self._unlock_rpc(broker, mqs, oneway)
                self._apply(rb.unlock_marks(True, [q for q in mqs if q in self._table], raised))

    def put_process_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Install `pq` as the table entry of `mq` (how a driver or a test sets a table up)."""
        self._table[mq] = pq

    def destroy(self) -> None:
        """destroy (REBAL-23): every ProcessQueue dropped, the table cleared."""
        for mq in rb.destroy(self._table):
            self._table[mq].dropped = True
        self._table.clear()
