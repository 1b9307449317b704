"""REBAL — the process-queue table update and client locking (RebalanceImpl, RebalancePushImpl;
rulebook-client §9). Which queues a consumer gets (REBAL-1…8, REBAL-24) is in `spec.allocate`,
where a new queue starts (REBAL-17) in `spec.pull_from_where`, consumeTimestamp (REBAL-18) in
`spec.consumer_config`.

The process-queue table update is a pure function over a snapshot of the table (`QueueView`
per queue): pass 1 (`rebalance_pass1`) decides which ProcessQueues are dropped and removed,
pass 2 (`new_queue_v47` / `new_queue_v49`) whether a newly assigned queue is added. Lock RPC
answers come in as arguments; the caller sends the RPCs and applies the outcome.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TypeVar

import attrs

from pullspec.spec.allocate import sort_message_queues
from pullspec.spec.consumer_config import ConsumerConfig, rewrite_queue_thresholds
from pullspec.spec.lease import REBALANCE_LOCK_MAX_LIVE_TIME_MS
from pullspec.spec.message import MessageQueue
from pullspec.spec.process_queue import LOCK_INTERVAL_MS, LOCK_MAX_LIVE_TIME_MS
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

#: ORDER-1, REBAL-20: the first lockAll's delay (the interval is PQ's LOCK_INTERVAL_MS).
REBALANCE_LOCK_INITIAL_DELAY_MILLIS = 1_000
#: REBAL-19..21: LOCK_BATCH_MQ / UNLOCK_BATCH_MQ RPC timeout.
LOCK_RPC_TIMEOUT_MILLIS = 1_000
#: REBAL-14: how long removeUnnecessaryMessageQueue waits for the consume lock.
CONSUME_LOCK_TRY_MILLIS = 1_000
#: REBAL-15: rocketmq.client.unlockDelayTimeMills.
UNLOCK_DELAY_TIME_MILLS = 20_000

T = TypeVar("T")
_IMPL = "RebalanceImpl"
_PUSH = "RebalancePushImpl"
_UPDATE = f"{_IMPL}.updateProcessQueueTableInRebalance"
_S2 = ("002_c88c8921902728c1.txt",)
_S24 = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")
_S234 = ("002_c88c8921902728c1.txt", "003_97f7c1df5f6104bc.txt", "004_60fc00b6c6a023ff.txt")


@attrs.frozen
class QueueView:
    """What the rebalance reads of one ProcessQueue of the table."""

    dropped: bool = False
    locked: bool = False
    pull_expired: bool = False
    #: pq.consumeLock.tryLock(1000) would succeed (no orderly listener call holds it).
    consume_lock_free: bool = True
    #: hasTempMessage: the cached tree is non-empty (PQ-12).
    has_temp_message: bool = False


@attrs.frozen
class Removal:
    """removeUnnecessaryMessageQueue's effects (REBAL-14); persist and removeOffset always run."""

    removed: bool
    #: unlock(mq, oneway) after this delay (REBAL-15), None when nothing is unlocked.
    unlock_delay_ms: int | None = None
    inc_try_unlock_times: bool = False


@rule("REBAL-15", source=f"{_PUSH}.unlockDelay")
def unlock_delay(has_temp_message: bool) -> int:
    """A removed orderly queue is unlocked one-way after UNLOCK_DELAY_TIME_MILLS (20000 ms) when
    it still caches messages and at once otherwise.

    post: __return__ == (20000 if has_temp_message else 0)
    """
    # Cached messages: they may still be in flight, so the broker lock is kept a while.
    return UNLOCK_DELAY_TIME_MILLS if has_temp_message else 0


@rule("REBAL-14", source=f"{_PUSH}.removeUnnecessaryMessageQueue", seeds=_S2, versions=(
    "the consume lock getter is getLockConsume in 4.7.1, getConsumeLock in 4.9.7"))  # fmt: skip
def remove_unnecessary(orderly: bool, clustering: bool, view: QueueView) -> Removal:
    """Removing a queue persists and forgets its offset, and an orderly CLUSTERING consumer then
    removes it only if it gets the consume lock within 1000 ms, unlocking it (REBAL-15), and
    otherwise counts a failed try and keeps it.

    post: __return__.removed == (not (orderly and clustering) or view.consume_lock_free)
    post: __return__.inc_try_unlock_times == (not __return__.removed)
    """
    # The consumer is orderly and clustering: only then does a broker lock exist.
    if not (orderly and clustering):
        return Removal(True)
    # The consume lock: a listener call still running keeps the queue in the table.
    if not view.consume_lock_free:
        return Removal(False, None, True)
    return Removal(True, unlock_delay(view.has_temp_message))


class RemovalReason(enum.Enum):
    """Why pass 1 drops a ProcessQueue (REBAL-9)."""

    NOT_ASSIGNED = "NOT_ASSIGNED"
    PULL_EXPIRED = "PULL_EXPIRED"


@attrs.frozen
class Pass1Step:
    """One ProcessQueue pass 1 sets dropped and tries to remove."""

    mq: MessageQueue
    reason: RemovalReason
    removal: Removal


@attrs.frozen
class Pass1Plan:
    """Pass 1's verdict over the table: the steps in table order and whether anything changed."""

    steps: tuple[Pass1Step, ...]
    changed: bool

    @property
    def removed(self) -> frozenset[MessageQueue]:
        """The queues whose entries leave the table."""
        return frozenset(s.mq for s in self.steps if s.removal.removed)


@rule("REBAL-9", source=_UPDATE, seeds=_S234)
def rebalance_pass1(
    topic: str,
    table: Mapping[MessageQueue, QueueView],
    mq_set: Collection[MessageQueue],
    consume_passively: bool,
    orderly: bool,
    clustering: bool,
) -> Pass1Plan:
    """Each ProcessQueue of the topic that is no longer assigned, or (push consumer only) has not
    pulled for more than 120 s, is dropped and leaves the table only if its removal succeeds, a
    dropped ProcessQueue left behind blocking its re-creation until it is pull-expired.

    post: all(s.mq.topic == topic for s in __return__.steps)
    post: __return__.changed == bool(__return__.removed)
    post: all(s.mq in table for s in __return__.steps)
    """
    steps: list[Pass1Step] = []
    for mq, view in table.items():
        if mq.topic != topic:
            continue
        # The assignment first, then (push only) the pull-idle self-heal.
        if mq not in mq_set:
            reason = RemovalReason.NOT_ASSIGNED
        elif view.pull_expired and consume_passively:
            reason = RemovalReason.PULL_EXPIRED
        else:
            continue
        steps.append(Pass1Step(mq, reason, remove_unnecessary(orderly, clustering, view)))
    return Pass1Plan(tuple(steps), any(s.removal.removed for s in steps))


def pass2_candidates(
    table_mqs: Collection[MessageQueue], mq_set: Iterable[MessageQueue]
) -> tuple[MessageQueue, ...]:
    """REBAL-10: the assigned queues without a table entry, in MessageQueue order (Java walks a
    HashSet, whose order is unspecified)."""
    return tuple(q for q in sort_message_queues(mq_set) if q not in table_mqs)


class NewQueueOutcome(enum.Enum):
    """What pass 2 does with one newly assigned queue (REBAL-10)."""

    LOCK_FAILED = "LOCK_FAILED"
    OFFSET_FAILED = "OFFSET_FAILED"
    OFFSET_NEGATIVE = "OFFSET_NEGATIVE"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    ADDED = "ADDED"


@attrs.frozen
class NewQueue:
    """Pass 2's verdict on one queue: whether removeDirtyOffset and computePullFromWhere ran,
    and the PullRequest offset when the queue is added."""

    outcome: NewQueueOutcome
    computes_offset: bool
    pull_request_offset: int | None = None


def _decide_offset(next_offset: int, present_at_put: bool) -> NewQueue:
    if next_offset < 0:
        return NewQueue(NewQueueOutcome.OFFSET_NEGATIVE, True)
    if present_at_put:
        return NewQueue(NewQueueOutcome.ALREADY_EXISTS, True)
    return NewQueue(NewQueueOutcome.ADDED, True, next_offset)


# [4.7]
@rule("REBAL-10", source=_UPDATE, seeds=_S24, profiles=(Profile.V4_7,), versions=(
    "4.9.7 skips the queue when computePullFromWhereWithException throws (4.7.1: −1)"))  # fmt: skip
def new_queue_v47(
    is_order: bool, lock_ok: bool, next_offset: int | None, present_at_put: bool = False
) -> NewQueue:
    """A newly assigned queue is skipped when an orderly consumer cannot lock it, else its dirty
    offset is removed and it is added with a PullRequest at computePullFromWhere's offset when
    that is ≥ 0, and retried at the next rebalance otherwise.

    post: (__return__.outcome is NewQueueOutcome.LOCK_FAILED) == (is_order and not lock_ok)
    post: __return__.pull_request_offset is None or __return__.pull_request_offset == next_offset >= 0
    """
    # The broker lock first, in both message models.
    if is_order and not lock_ok:
        return NewQueue(NewQueueOutcome.LOCK_FAILED, False)
    # 4.7's computePullFromWhere never throws (it returns −1), so no offset reads as −1.
    return _decide_offset(-1 if next_offset is None else next_offset, present_at_put)


# [Modified in 4.9]
@rule("REBAL-10", source=_UPDATE, profiles=(Profile.V4_9,))
def new_queue_v49(
    is_order: bool, lock_ok: bool, next_offset: int | None, present_at_put: bool = False
) -> NewQueue:
    """A newly assigned queue is skipped when an orderly consumer cannot lock it or its offset
    computation throws (None), else its dirty offset is removed and it is added with a
    PullRequest at the computed offset when that is ≥ 0.

    post: (__return__.outcome is NewQueueOutcome.LOCK_FAILED) == (is_order and not lock_ok)
    post: __return__.outcome is not NewQueueOutcome.OFFSET_FAILED or next_offset is None
    """
    if is_order and not lock_ok:
        return NewQueue(NewQueueOutcome.LOCK_FAILED, False)
    # Check that the offset computation did not throw (computePullFromWhereWithException).
    if next_offset is None:
        return NewQueue(NewQueueOutcome.OFFSET_FAILED, True)
    return _decide_offset(next_offset, present_at_put)


# [4.7]
@rule("REBAL-11", source=_UPDATE, seeds=("004_60fc00b6c6a023ff.txt",), profiles=(Profile.V4_7,),
      versions="4.9.7 creates the new ProcessQueue locked; 4.7.1 leaves it unlocked")  # fmt: skip
def new_process_queue_locked_v47() -> bool:
    """A ProcessQueue created by rebalance starts unlocked although lock(mq) just succeeded, so
    its pulls wait for the next lockAll (up to 20 s) and an orderly BROADCASTING one never pulls.

    post: __return__ is False
    """
    # The late lock: lock(mq) marked only queues already in the table.
    return False


# [Modified in 4.9]
@rule("REBAL-11", source=_UPDATE, profiles=(Profile.V4_9,))
def new_process_queue_locked_v49() -> bool:
    """A ProcessQueue created by rebalance starts locked with lastLockTimestamp at its creation,
    so it pulls at once and may consume for 30 s before lockAll must have renewed it.

    post: __return__ is True
    """
    # The fix: pq.setLocked(true) right after creation, for every consumer.
    return True


@rule("REBAL-12", source=f"{_PUSH}.dispatchPullRequest", seeds=_S2)
def dispatch_pull_requests(pull_requests: Sequence[T]) -> tuple[T, ...]:
    """The push consumer hands every new PullRequest of a rebalance to the pull service
    immediately, in order.

    post: __return__ == tuple(pull_requests)
    """
    # Nothing is delayed: executePullRequestImmediately for each.
    return tuple(pull_requests)


@attrs.frozen
class QueueChangedPlan:
    """messageQueueChanged's effects (REBAL-13)."""

    sub_version: int
    #: The rewritten (pullThresholdForQueue, pullThresholdSizeForQueue), None when unchanged.
    queue_thresholds: tuple[int, int] | None
    send_heartbeat: bool = True


@rule("REBAL-13", source=f"{_PUSH}.messageQueueChanged", seeds=_S2)
def message_queue_changed(
    now: int, process_queue_count: int, config: ConsumerConfig
) -> QueueChangedPlan:
    """A changed rebalance sets the topic's subVersion to now, rewrites the per-queue thresholds
    from the per-topic ones when the table is non-empty (FLOW-14) and sends a heartbeat to all
    brokers.

    pre: process_queue_count >= 0
    post: __return__.sub_version == now and __return__.send_heartbeat
    post: (__return__.queue_thresholds is None) == (process_queue_count == 0)
    """
    # The table is non-empty: FLOW-14 divides by its size.
    thresholds = (
        rewrite_queue_thresholds(config, process_queue_count) if process_queue_count else None
    )
    return QueueChangedPlan(now, thresholds)


@rule("REBAL-16", source=f"{_IMPL}.removeProcessQueue", seeds=("000_26b83a4251c26823.txt", *_S24))
def remove_process_queue(present: bool) -> tuple[str, ...]:
    """removeProcessQueue removes the queue's entry and, if there was one, sets it dropped and
    runs removeUnnecessaryMessageQueue ignoring its answer.

    post: __return__ == (("remove", "drop", "remove_unnecessary") if present else ("remove",))
    """
    # There was an entry; the removal's answer is not consulted.
    return ("remove", "drop", "remove_unnecessary") if present else ("remove",)


@attrs.frozen
class LockMarks:
    """Which ProcessQueues a lock RPC's answer marks: `locked` get locked = true and
    lastLockTimestamp = now, `unlocked` get locked = false."""

    locked: frozenset[MessageQueue] = frozenset()
    unlocked: frozenset[MessageQueue] = frozenset()


@rule("REBAL-19", source=f"{_IMPL}.lock", seeds=_S24)
def lock_one(
    mq: MessageQueue, granted: Collection[MessageQueue] | None, table_mqs: Collection[MessageQueue]
) -> tuple[bool, LockMarks]:
    """lock(mq) asks the master for the one queue (1000 ms), marks every returned queue that has
    a ProcessQueue locked now and answers whether mq was returned, false without a master or on
    an exception (None).

    post: __return__[0] == (granted is not None and mq in granted)
    post: __return__[1].unlocked == frozenset()
    """
    # An answer arrived (no master: no RPC; an exception is logged).
    if granted is None:
        return False, LockMarks()
    marks = frozenset(q for q in granted if q in table_mqs)
    return mq in granted, LockMarks(locked=marks)


def group_by_broker(mqs: Iterable[MessageQueue]) -> dict[str, tuple[MessageQueue, ...]]:
    """REBAL-20/21: buildProcessQueueTableByBrokerName, every table key (dropped ones too) by
    broker, brokers and queues in sorted order."""
    out: dict[str, list[MessageQueue]] = {}
    for mq in sort_message_queues(mqs):
        out.setdefault(mq.broker_name, []).append(mq)
    return {b: tuple(qs) for b, qs in sorted(out.items())}


@rule("REBAL-20", source=f"{_IMPL}.lockAll", seeds=("004_60fc00b6c6a023ff.txt",))
def lock_all_marks(
    requested: Collection[MessageQueue],
    granted: Collection[MessageQueue] | None,
    table_mqs: Collection[MessageQueue],
) -> LockMarks:
    """lockAll asks each broker's master for all its table queues and locks the returned ones
    now and unlocks the requested ones not returned, while a missing master or an exception
    (None) leaves the flags to expire.

    post: granted is not None or __return__ == LockMarks()
    post: not (__return__.locked & __return__.unlocked)
    """
    # An answer arrived: without one nothing changes (FLOW-11 keeps pulling).
    if granted is None:
        return LockMarks()
    present = frozenset(q for q in requested if q in table_mqs)
    return LockMarks(
        locked=frozenset(q for q in granted if q in table_mqs),
        unlocked=frozenset(q for q in present if q not in granted),
    )


@rule("REBAL-21", source=f"{_IMPL}.unlock, {_IMPL}.unlockAll")
def unlock_marks(all_queues: bool, requested: Collection[MessageQueue], raised: bool) -> LockMarks:
    """unlock(mq) never changes the ProcessQueue's flag, and unlockAll clears the flag of a
    broker's queues once its UNLOCK_BATCH_MQ call did not throw.

    post: __return__.locked == frozenset()
    post: __return__.unlocked == (frozenset(requested) if all_queues and not raised else frozenset())
    """
    # Which call: only unlockAll touches the flags, and only after success.
    if all_queues and not raised:
        return LockMarks(unlocked=frozenset(requested))
    return LockMarks()


@attrs.frozen
class LeaseTimeline:
    """After a successful lock at t: the next renewal, and the first instants the client lease
    and the broker lease are expired."""

    renew_at: int
    client_expired_from: int
    broker_expired_from: int


@rule("REBAL-22", source="ProcessQueue.isLockExpired, RebalanceLockManager",
      seeds=("004_60fc00b6c6a023ff.txt",))  # fmt: skip
def lease_timeline(last_lock: int) -> LeaseTimeline:
    """A client renews its locks every 20 s, stops consuming once more than 30 s passed since
    its last successful lock and loses the broker lease once more than 60 s passed, so a
    silent client stops 30 s before anyone else can lock.

    post: __return__.broker_expired_from - __return__.client_expired_from == 30000
    post: __return__.renew_at < __return__.client_expired_from
    """
    # Both expiries are strict (>): live at +30000 and +60000 exactly.
    return LeaseTimeline(
        last_lock + LOCK_INTERVAL_MS,
        last_lock + LOCK_MAX_LIVE_TIME_MS + 1,
        last_lock + REBALANCE_LOCK_MAX_LIVE_TIME_MS + 1,
    )


@rule("REBAL-23", source=f"{_IMPL}.destroy")
def destroy(table_mqs: Iterable[MessageQueue]) -> frozenset[MessageQueue]:
    """At shutdown every ProcessQueue of the table is set dropped and the table is cleared.

    post: __return__ == frozenset(table_mqs)
    """
    # Nothing is persisted or unlocked here (the services do that).
    return frozenset(table_mqs)


class RebalanceRules(Rules):
    """The changed REBAL rules of a new queue (see `spec.rules.Rules`)."""

    new_queue = stated(new_queue_v47, new_queue_v49)
    new_process_queue_locked = stated(new_process_queue_locked_v47, new_process_queue_locked_v49)
