"""ORDER — orderly consumption (ConsumeMessageOrderlyService, rulebook-client §7).

The per-queue consume loop is a pure step function: `run_gate` decides whether a ConsumeRequest
loops at all, `loop_step` is one iteration's checks in RocketMQ's order (dropped, not locked,
lease expired, 60 s time slice, empty take), and the result tables of processConsumeResult
(`process_result_auto_commit`, `process_result_manual_commit`) say what happens to the taken
messages. The caller takes the messages, calls the listener and sends messages back; it hands
the outcomes in. Periodic locking, shutdown and the absent cleaner (ORDER-1, ORDER-17, ORDER-18)
close the module; the orderly DLQ message (ORDER-15) is in `spec.retry`.

A listener's context is mutable on purpose: the listener reports through it
(setAutoCommit, setSuspendCurrentQueueTimeMillis), exactly as a Java listener does; the rule
functions only read it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence

import attrs

from pullspec.spec.consume_concurrently import ConsumeReturnType, PeriodicTask, ShutdownStep
from pullspec.spec.consumer_config import ConsumeMode, MessageModel
from pullspec.spec.errors import check_bool, check_int, set_bool, set_int
from pullspec.spec.evolve import evolve
from pullspec.spec.message import PROPERTY_RECONSUME_TIME, MessageQueue, StoredMessage, put_property
from pullspec.spec.offset_store import OffsetUpdate
from pullspec.spec.process_queue import LOCK_INTERVAL_MS
from pullspec.spec.profiles import Profile
from pullspec.spec.rebalance import REBALANCE_LOCK_INITIAL_DELAY_MILLIS
from pullspec.spec.rules import Rules, rule, stated

#: ORDER-1: rocketmq.client.maxTimeConsumeContinuously, one ConsumeRequest's time slice.
MAX_TIME_CONSUME_CONTINUOUSLY_MILLIS = 60_000
#: ORDER-12: the suspend time is clamped into [10, 30000].
MIN_SUSPEND_MILLIS = 10
MAX_SUSPEND_MILLIS = 30_000
#: ORDER-12: the context's "use the consumer's default suspend time" value.
SUSPEND_USE_DEFAULT = -1
#: ORDER-5/ORDER-13: the resubmit delays after a time slice or a re-acquired lock, and after a
#: failed one; tryLockLaterAndReconsume waits 100 at the gate and 10 inside the loop.
RESUBMIT_AFTER_SLICE_MILLIS = 10
RESUBMIT_AFTER_LOCK_FAILED_MILLIS = 3_000
TRY_LOCK_LATER_AT_GATE_MILLIS = 100
TRY_LOCK_LATER_IN_LOOP_MILLIS = 10


class ConsumeOrderlyStatus(enum.Enum):
    """What a MessageListenerOrderly returns; COMMIT and ROLLBACK are deprecated in RocketMQ and
    only meaningful with autoCommit false (ORDER-9/10)."""

    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@attrs.define
class ConsumeOrderlyContext:
    """ConsumeOrderlyContext: built per listener call (ORDER-7); the listener may switch
    `auto_commit` off (ORDER-10) or set its own suspend time (ORDER-12)."""

    message_queue: MessageQueue
    auto_commit: bool = attrs.field(default=True, validator=check_bool, on_setattr=set_bool)
    #: −1: use the consumer's suspendCurrentQueueTimeMillis (ORDER-12).
    suspend_current_queue_time_millis: int = attrs.field(
        default=SUSPEND_USE_DEFAULT, validator=check_int, on_setattr=set_int
    )


#: A scripted MessageListenerOrderly: it may return None or raise (ORDER-8).
OrderlyListener = Callable[
    [Sequence[StoredMessage], ConsumeOrderlyContext], ConsumeOrderlyStatus | None
]


_SVC = "ConsumeMessageOrderlyService"
_RUN = f"{_SVC}.ConsumeRequest.run"
_RESULT = f"{_SVC}.processConsumeResult"
_S4 = ("004_60fc00b6c6a023ff.txt",)

Batch = tuple[StoredMessage, ...]
_SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


@rule("ORDER-2", source="MessageQueueLock.fetchLockObject", seeds=_S4)
def fetch_lock_object(
    monitors: Mapping[MessageQueue, int], mq: MessageQueue
) -> tuple[dict[MessageQueue, int], int]:
    """MessageQueueLock hands out one monitor per MessageQueue, created on first use and never
    removed, and every orderly ConsumeRequest of the queue runs its body holding it.

    A monitor is a number here; a re-created ProcessQueue's requests share the old monitor.

    post: __return__[0][mq] == __return__[1]
    post: all(__return__[0][q] == n for q, n in monitors.items())
    """
    table = dict(monitors)
    # Check that the queue has a monitor already (putIfAbsent keeps the first).
    if mq not in table:
        table[mq] = max(table.values(), default=-1) + 1
    return table, table[mq]


@rule("ORDER-3", source=f"{_SVC}.submitConsumeRequest")
def submits_consume_request(dispatch_to_consume: bool) -> bool:
    """The orderly service starts a ConsumeRequest only when the pull dispatches consumption,
    ignores the pulled list (messages are taken from the ProcessQueue) and handles no
    rejection.

    post: __return__ == dispatch_to_consume
    """
    # The dispatch flag: a pull into a queue already being consumed starts nothing.
    return dispatch_to_consume


class Gate(enum.Enum):
    """What ConsumeRequest.run does on entry (ORDER-4)."""

    RETURN_DROPPED = "RETURN_DROPPED"
    LOOP = "LOOP"
    TRY_LOCK_LATER = "TRY_LOCK_LATER"


@rule("ORDER-4", source=_RUN, seeds=_S4)
def run_gate(
    dropped_on_entry: bool,
    message_model: MessageModel,
    locked: bool,
    lock_expired: bool,
    dropped_in_monitor: bool,
) -> Gate:
    """A ConsumeRequest returns on a dropped queue, and otherwise, holding the queue's monitor,
    loops when the model is BROADCASTING or the queue is locked and its lock not expired,
    returns if the queue was dropped meanwhile, and else retries the lock after 100 ms
    (TRY_LOCK_LATER_AT_GATE_MILLIS).

    post: not dropped_on_entry or __return__ is Gate.RETURN_DROPPED
    post: (__return__ is Gate.LOOP) == (not dropped_on_entry and (message_model is MessageModel.BROADCASTING or (locked and not lock_expired)))
    """
    # Check that the queue is alive before taking the monitor.
    if dropped_on_entry:
        return Gate.RETURN_DROPPED
    # The lease: BROADCASTING needs none, CLUSTERING a locked, unexpired one.
    if message_model is MessageModel.BROADCASTING or (locked and not lock_expired):
        return Gate.LOOP
    # Check that the queue was not dropped while the request waited for the monitor.
    if dropped_in_monitor:
        return Gate.RETURN_DROPPED
    return Gate.TRY_LOCK_LATER


class LoopExit(enum.Enum):
    """How one pass of the orderly loop ends (ORDER-5, ORDER-7, ORDER-9/10)."""

    DROPPED = "DROPPED"
    NOT_LOCKED = "NOT_LOCKED"
    LOCK_EXPIRED = "LOCK_EXPIRED"
    TIME_SLICE = "TIME_SLICE"
    EMPTY_TAKE = "EMPTY_TAKE"
    #: ORDER-7: the queue was dropped by the time the consume lock was taken.
    DROPPED_UNDER_CONSUME_LOCK = "DROPPED_UNDER_CONSUME_LOCK"
    #: ORDER-9/10: processConsumeResult answered continueConsume = false.
    RESULT_STOPPED = "RESULT_STOPPED"


@attrs.frozen
class LoopStep:
    """One iteration's verdict: `exit` None means take and consume `take` messages."""

    exit: LoopExit | None
    take: int = 0
    #: tryLockLaterAndReconsume after this delay (ORDER-13).
    try_lock_later_ms: int | None = None
    #: submitConsumeRequestLater with this suspend time (ORDER-12).
    submit_later_ms: int | None = None


@rule("ORDER-5", source=_RUN, seeds=_S4)
def loop_step(
    dropped: bool,
    message_model: MessageModel,
    locked: bool,
    lock_expired: bool,
    now: int,
    begin_time: int,
    cached: int,
    batch_size: int,
) -> LoopStep:
    """Each loop iteration breaks on a dropped queue, in CLUSTERING retries the lock after 10 ms
    when the queue is not locked or its lock expired, resubmits after 10 ms once more than 60000
    ms passed since the loop began, and otherwise takes up to batch size messages, ending the
    loop normally when that take is empty.

    pre: cached >= 0 and batch_size >= 1
    post: not dropped or __return__.exit is LoopExit.DROPPED
    post: __return__.exit is not LoopExit.TIME_SLICE or now - begin_time > 60000
    post: __return__.exit is not None or __return__.take == min(cached, batch_size) > 0
    """
    clustering = message_model is MessageModel.CLUSTERING
    if dropped:
        return LoopStep(LoopExit.DROPPED)
    # The client lock is checked each time round, not only at the gate.
    if clustering and not locked:
        return LoopStep(LoopExit.NOT_LOCKED, try_lock_later_ms=TRY_LOCK_LATER_IN_LOOP_MILLIS)
    if clustering and lock_expired:
        return LoopStep(LoopExit.LOCK_EXPIRED, try_lock_later_ms=TRY_LOCK_LATER_IN_LOOP_MILLIS)
    # The time slice compares with a strict >: it bounds time, not the number of messages.
    if now - begin_time > MAX_TIME_CONSUME_CONTINUOUSLY_MILLIS:
        return LoopStep(LoopExit.TIME_SLICE, submit_later_ms=RESUBMIT_AFTER_SLICE_MILLIS)
    take = min(cached, batch_size)
    # The take found something; an empty take is the normal end.
    if take == 0:
        return LoopStep(LoopExit.EMPTY_TAKE)
    return LoopStep(None, take=take)


@rule("ORDER-6", source=_RUN, seeds=_S4)
def take_size(consume_message_batch_max_size: int) -> tuple[int, bool]:
    """The orderly loop takes consumeMessageBatchMaxSize messages per iteration and, unlike the
    concurrent service, never stamps CONSUME_START_TIME.

    post: __return__ == (consume_message_batch_max_size, False)
    """
    # No CONSUME_START_TIME: the orderly service has no expiry cleaner (ORDER-18).
    return consume_message_batch_max_size, False


@rule("ORDER-7", source=_RUN, seeds=_S4)
def listener_context(
    mq: MessageQueue, dropped_under_consume_lock: bool
) -> ConsumeOrderlyContext | None:
    """The listener is called under the ProcessQueue's consume lock with a fresh context
    (autoCommit true, suspend time −1), unless the queue was dropped by the time the lock was
    taken, which breaks the loop leaving the taken messages in the consuming map.

    post: (__return__ is None) == dropped_under_consume_lock
    post: __return__ is None or (__return__.auto_commit and __return__.suspend_current_queue_time_millis == -1)
    """
    # Check that the queue survived until the consume lock was held.
    if dropped_under_consume_lock:
        return None
    return ConsumeOrderlyContext(mq)


@rule("ORDER-8", source=_RUN, seeds=_S4)
def normalise_orderly_status(
    status: ConsumeOrderlyStatus | None,
    has_exception: bool,
    consume_rt_ms: int,
    consume_timeout_min: int,
) -> tuple[ConsumeOrderlyStatus, ConsumeReturnType]:
    """A listener that returns null or throws counts as SUSPEND_CURRENT_QUEUE_A_MOMENT, and the
    hook's return type is EXCEPTION, RETURNNULL, TIME_OUT (≥ consumeTimeout minutes), FAILED
    for SUSPEND, else SUCCESS, COMMIT and ROLLBACK included.

    pre: not has_exception or status is None
    post: __return__[0] is (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT if status is None else status)
    post: status is None or (__return__[1] is ConsumeReturnType.TIME_OUT) == (consume_rt_ms >= consume_timeout_min * 60000)
    """
    # A status came back; a thrown Throwable leaves it null.
    if status is None:
        kind = ConsumeReturnType.EXCEPTION if has_exception else ConsumeReturnType.RETURNNULL
        return _SUSPEND, kind
    if consume_rt_ms >= consume_timeout_min * 60_000:
        return status, ConsumeReturnType.TIME_OUT
    # SUSPEND is the only failure; COMMIT and ROLLBACK keep the initial SUCCESS.
    if status is _SUSPEND:
        return status, ConsumeReturnType.FAILED
    return status, ConsumeReturnType.SUCCESS


class ResultAction(enum.Enum):
    """What processConsumeResult does with the ProcessQueue (ORDER-9/10)."""

    NONE = "NONE"
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    #: makeMessageToConsumeAgain(msgs), then submitConsumeRequestLater(suspend).
    CONSUME_AGAIN = "CONSUME_AGAIN"


@attrs.frozen
class OrderlyResultPlan:
    """processConsumeResult's plan: the ProcessQueue action, the later resubmission (the raw
    suspend time, ORDER-12 clamps it) and whether the loop continues."""

    action: ResultAction
    continue_consume: bool
    submit_later_ms: int | None = None
    ok_tps: int = 0
    failed_tps: int = 0


def _again(size: int, suspend_ms: int) -> OrderlyResultPlan:
    return OrderlyResultPlan(ResultAction.CONSUME_AGAIN, False, suspend_ms, failed_tps=size)


@rule("ORDER-9", source=_RESULT, seeds=_S4)
def process_result_auto_commit(
    status: ConsumeOrderlyStatus, size: int, suspend_ms: int, reconsume_suspends: bool
) -> OrderlyResultPlan:
    """With autoCommit, SUCCESS (and COMMIT or ROLLBACK, logged as illegal) commits and
    continues, and SUSPEND makes the batch consumable again and stops until the resubmission
    when checkReconsumeTimes says so, and otherwise commits.

    `reconsume_suspends` is checkReconsumeTimes(msgs) (ORDER-14), called only for SUSPEND.

    post: __return__.continue_consume == (__return__.action is ResultAction.COMMIT)
    post: status is not ConsumeOrderlyStatus.ROLLBACK or __return__.action is ResultAction.COMMIT
    """
    # The status: COMMIT and ROLLBACK fall through to SUCCESS.
    if status is not _SUSPEND:
        return OrderlyResultPlan(ResultAction.COMMIT, True, ok_tps=size)
    # CheckReconsumeTimes: false only when every message reached the DLQ.
    if reconsume_suspends:
        return _again(size, suspend_ms)
    return OrderlyResultPlan(ResultAction.COMMIT, True, failed_tps=size)


@rule("ORDER-10", source=_RESULT, seeds=_S4)
def process_result_manual_commit(
    status: ConsumeOrderlyStatus, size: int, suspend_ms: int, reconsume_suspends: bool
) -> OrderlyResultPlan:
    """Without autoCommit, SUCCESS only counts (the messages stay in the consuming map), COMMIT
    commits the whole consuming map, ROLLBACK returns it to the cache and stops until the
    resubmission, and SUSPEND does so for the batch when checkReconsumeTimes says so.

    post: (__return__.action is ResultAction.COMMIT) == (status is ConsumeOrderlyStatus.COMMIT)
    post: __return__.continue_consume == (__return__.action in (ResultAction.NONE, ResultAction.COMMIT))
    """
    if status is ConsumeOrderlyStatus.SUCCESS:
        return OrderlyResultPlan(ResultAction.NONE, True, ok_tps=size)
    # COMMIT: it releases every uncommitted batch, earlier SUCCESS ones included.
    if status is ConsumeOrderlyStatus.COMMIT:
        return OrderlyResultPlan(ResultAction.COMMIT, True)
    if status is ConsumeOrderlyStatus.ROLLBACK:
        return OrderlyResultPlan(ResultAction.ROLLBACK, False, suspend_ms)
    # CheckReconsumeTimes; when false nothing happens and the batch stays taken.
    if reconsume_suspends:
        return _again(size, suspend_ms)
    return OrderlyResultPlan(ResultAction.NONE, True, failed_tps=size)


@rule("ORDER-11", source=_RESULT, seeds=_S4)
def orderly_offset_update(commit_offset: int, dropped: bool) -> OffsetUpdate | None:
    """A commit offset ≥ 0 of a queue that is not dropped is written with increaseOnly false,
    so the orderly path may move the offset backwards.

    post: (__return__ is None) == (commit_offset < 0 or dropped)
    post: __return__ is None or __return__ == OffsetUpdate(commit_offset, False)
    """
    # Check that there is a commit and the queue is still ours.
    if commit_offset < 0 or dropped:
        return None
    return OffsetUpdate(commit_offset, False)


@rule("ORDER-12", source=f"{_SVC}.submitConsumeRequestLater")
def suspend_delay(suspend_ms: int, default_suspend_ms: int) -> int:
    """A later resubmission waits the given time, −1 meaning the consumer's
    suspendCurrentQueueTimeMillis, clamped into [10, 30000], and always starts a new request.

    post: 10 <= __return__ <= 30000
    post: __return__ == min(30000, max(10, default_suspend_ms if suspend_ms == -1 else suspend_ms))
    """
    delay = default_suspend_ms if suspend_ms == SUSPEND_USE_DEFAULT else suspend_ms
    # The clamps; a listener cannot suspend a queue for more than 30 s.
    if delay < MIN_SUSPEND_MILLIS:
        return MIN_SUSPEND_MILLIS
    if delay > MAX_SUSPEND_MILLIS:
        return MAX_SUSPEND_MILLIS
    return delay


@rule("ORDER-13", source=f"{_SVC}.tryLockLaterAndReconsume, {_SVC}.lockOneMQ", seeds=_S4)
def resubmit_after_try_lock(stopped: bool, lock_ok: bool) -> int:
    """After its delay, tryLockLaterAndReconsume locks the queue on the broker (never once the
    service is stopped) and resubmits after 10 ms on success and after 3000 ms otherwise.

    The lock marks whichever ProcessQueue is in the table then, perhaps a newer instance.

    post: __return__ == (10 if lock_ok and not stopped else 3000)
    """
    # The service runs: a stopped service sends no lock RPC and counts as failed.
    if not stopped and lock_ok:
        return RESUBMIT_AFTER_SLICE_MILLIS
    return RESUBMIT_AFTER_LOCK_FAILED_MILLIS


def reaches_dead_letter(msg: StoredMessage, max_reconsume_times: int) -> bool:
    """ORDER-14: a message at or above the orderly maximum is sent back towards the DLQ."""
    return msg.reconsume_times >= max_reconsume_times


@rule("ORDER-14", source=f"{_SVC}.checkReconsumeTimes, {_SVC}.getMaxReconsumeTimes")
def check_reconsume_times(
    msgs: Sequence[StoredMessage], max_reconsume_times: int, send_back_ok: Sequence[bool]
) -> tuple[bool, Batch]:
    """A message below the maximum (−1 → Integer.MAX_VALUE) gets reconsumeTimes + 1 and suspends
    the queue, a message at it gets RECONSUME_TIME = reconsumeTimes and is sent back, suspending
    and counting + 1 only if that send-back failed.

    `send_back_ok[i]` is the ORDER-15 outcome for `msgs[i]`, read only for messages at the
    maximum; the counter lives only in the cached message.

    pre: len(send_back_ok) == len(msgs)
    post: len(__return__[1]) == len(msgs)
    post: __return__[0] == any(m.reconsume_times < max_reconsume_times or not ok for m, ok in zip(msgs, send_back_ok))
    post: all(r.reconsume_times == m.reconsume_times + (0 if m.reconsume_times >= max_reconsume_times and ok else 1) for r, m, ok in zip(__return__[1], msgs, send_back_ok))
    """
    suspend = False
    out: list[StoredMessage] = []
    for msg, ok in zip(msgs, send_back_ok, strict=True):
        # The message is at the maximum: only then is it sent towards the DLQ.
        if reaches_dead_letter(msg, max_reconsume_times):
            msg = put_property(msg, PROPERTY_RECONSUME_TIME, str(msg.reconsume_times))
            if ok:
                out.append(msg)
                continue
        suspend = True
        out.append(evolve(msg, reconsume_times=msg.reconsume_times + 1))
    return suspend, tuple(out)


@rule("ORDER-16", source=_RUN)
def consuming_after_exit(consuming: bool, exit: LoopExit) -> bool:
    """Only an empty take clears the ProcessQueue's consuming flag, so every other exit keeps
    later pulls from starting a new chain and consumption resumes only by a scheduled
    resubmission.

    post: __return__ == (False if exit is LoopExit.EMPTY_TAKE else consuming)
    """
    # The exit: takeMessages clears the flag only when it finds nothing (PQ-8).
    return False if exit is LoopExit.EMPTY_TAKE else consuming


def _lock_schedule(message_model: MessageModel, survives: bool) -> PeriodicTask | None:
    if message_model is MessageModel.BROADCASTING:
        return None
    return PeriodicTask(REBALANCE_LOCK_INITIAL_DELAY_MILLIS, LOCK_INTERVAL_MS, survives)


# [4.7]
@rule("ORDER-1", source=f"{_SVC}.start, {_SVC}.lockMQPeriodically", seeds=_S4,
      profiles=(Profile.V4_7,), versions=(
    "4.9.7 catches an exception of lockMQPeriodically; in 4.7.1 it cancels the schedule"))  # fmt: skip
def lock_schedule_v47(message_model: MessageModel) -> PeriodicTask | None:
    """In CLUSTERING the orderly service calls lockAll 1000 ms after start and then every 20000
    ms until stopped, an escaping exception cancelling the schedule for good, and in
    BROADCASTING it never locks.

    post: (__return__ is None) == (message_model is MessageModel.BROADCASTING)
    post: __return__ is None or __return__ == PeriodicTask(1000, 20000, False)
    """
    # The model: only CLUSTERING starts periodic locking.
    return _lock_schedule(message_model, False)


# [Modified in 4.9]
@rule("ORDER-1", source=f"{_SVC}.start, {_SVC}.lockMQPeriodically", profiles=(Profile.V4_9,))
def lock_schedule_v49(message_model: MessageModel) -> PeriodicTask | None:
    """In CLUSTERING the orderly service calls lockAll 1000 ms after start and then every 20000
    ms until stopped, an exception of one run being logged, and in BROADCASTING it never locks.

    post: (__return__ is None) == (message_model is MessageModel.BROADCASTING)
    post: __return__ is None or __return__ == PeriodicTask(1000, 20000, True)
    """
    # The model: only CLUSTERING starts periodic locking.
    return _lock_schedule(message_model, True)


@rule("ORDER-17", source=f"{_SVC}.shutdown, {_SVC}.unlockAllMQ")
def orderly_shutdown_steps(message_model: MessageModel) -> tuple[ShutdownStep, ...]:
    """Shutdown marks the service stopped, stops its scheduler and its pool, and in CLUSTERING
    then unlocks every queue synchronously (unlockAll with oneway false).

    post: __return__[:3] == (ShutdownStep.STOP, ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL)
    post: (ShutdownStep.UNLOCK_ALL in __return__) == (message_model is MessageModel.CLUSTERING)
    """
    steps = (ShutdownStep.STOP, ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL)
    # The model: BROADCASTING never locked anything.
    if message_model is MessageModel.CLUSTERING:
        return (*steps, ShutdownStep.UNLOCK_ALL)
    return steps


@rule("ORDER-18", source=f"{_SVC}.start")
def has_consume_timeout_cleaner(consume_mode: ConsumeMode) -> bool:
    """Only the concurrent service runs a consume-timeout cleaner, so in orderly mode
    consumeTimeout only changes the hook's return type.

    post: __return__ == (consume_mode is ConsumeMode.CONCURRENTLY)
    """
    # The mode: the orderly service schedules no cleanExpireMsg.
    return consume_mode is ConsumeMode.CONCURRENTLY


class ConsumeOrderlyRules(Rules):
    """The changed ORDER rule of the lock schedule (see `spec.rules.Rules`)."""

    lock_schedule = stated(lock_schedule_v47, lock_schedule_v49)
