"""The life cycle of both consume services: the consume pool (CONC-1), the periodic tasks
(the consume-timeout cleaner CONC-13, periodic locking ORDER-1, ORDER-18) and shutdown (CONC-14,
ORDER-17); the rules of what a ConsumeRequest does are in `spec.consume_concurrently` and
`spec.consume_orderly`."""

from __future__ import annotations

from pullspec.spec.consume_types import (
    MAX_CORE_POOL_SIZE,
    REBALANCE_LOCK_INITIAL_DELAY_MILLIS,
    REBALANCE_LOCK_INTERVAL_MILLIS,
    PeriodicTask,
    ShutdownStep,
)
from pullspec.spec.consumer_config import ConsumeMode, MessageModel
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import rule

_CONC = "ConsumeMessageConcurrentlyService"
_SVC = "ConsumeMessageOrderlyService"
_S2 = ("002_c88c8921902728c1.txt",)
_S4 = ("004_60fc00b6c6a023ff.txt",)


@rule("CONC-1", source=f"{_CONC}.<init>, {_CONC}.updateCorePoolSize", seeds=_S2, versions=(
    "consume thread names gain the group in 4.9.7; no behavioural change"))  # fmt: skip
def core_pool_size_after_update(core_pool_size: int, n: int, consume_thread_max: int) -> int:
    """The consume pool runs exactly its core size of threads (consumeThreadMin, because its
    unbounded queue never lets it grow), and updateCorePoolSize(n) changes that size only when
    0 < n ≤ 32767 and n < consumeThreadMax.

    post: __return__ == (n if 0 < n <= 32767 and n < consume_thread_max else core_pool_size)
    """
    # Verify the bounds; incCorePoolSize and decCorePoolSize are empty and never change it
    if 0 < n <= MAX_CORE_POOL_SIZE and n < consume_thread_max:
        return n
    return core_pool_size


# [4.7]
@rule("CONC-13", source=f"{_CONC}.start, {_CONC}.cleanExpireMsg", seeds=_S2,
      profiles=(Profile.V4_7,), versions=(
    "4.9.7 catches an exception of a run; in 4.7.1 it cancels the schedule"))  # fmt: skip
def clean_expire_schedule_v47(consume_timeout_min: int) -> PeriodicTask:
    """The consume-timeout cleaner runs PQ-18 over every ProcessQueue of the table at a fixed
    rate whose initial delay and period are both consumeTimeout minutes, and an exception
    escaping one run cancels it for good.

    post: __return__ == PeriodicTask(consume_timeout_min * 60000, consume_timeout_min * 60000, False)
    """
    # Verify the unit: consumeTimeout is in minutes
    period = consume_timeout_min * 60_000
    return PeriodicTask(period, period, False)


# [Modified in 4.9]
@rule("CONC-13", source=f"{_CONC}.start, {_CONC}.cleanExpireMsg", profiles=(Profile.V4_9,))
def clean_expire_schedule_v49(consume_timeout_min: int) -> PeriodicTask:
    """The consume-timeout cleaner runs PQ-18 over every ProcessQueue of the table at a fixed
    rate whose initial delay and period are both consumeTimeout minutes, and an exception of
    one run is logged and the schedule goes on.

    post: __return__ == PeriodicTask(consume_timeout_min * 60000, consume_timeout_min * 60000, True)
    """
    # Verify the try/catch 4.9.7 wraps around each run
    period = consume_timeout_min * 60_000
    return PeriodicTask(period, period, True)


@rule("CONC-14", source=f"{_CONC}.shutdown", seeds=_S2)
def concurrent_shutdown_steps() -> tuple[ShutdownStep, ...]:
    """Shutdown stops the resubmit scheduler, then the consume pool (gracefully), then the
    cleaner, and results of consumption still in flight are discarded because their queues are
    dropped by then.

    post: __return__ == (ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL, ShutdownStep.CLEANER)
    """
    # Verify there is no unlock: only the orderly service unlocks (ORDER-17)
    return (ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL, ShutdownStep.CLEANER)


def _lock_schedule(message_model: MessageModel, survives: bool) -> PeriodicTask | None:
    if message_model is MessageModel.BROADCASTING:
        return None
    return PeriodicTask(
        REBALANCE_LOCK_INITIAL_DELAY_MILLIS, REBALANCE_LOCK_INTERVAL_MILLIS, survives
    )


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
    # Verify the model: only CLUSTERING starts periodic locking
    return _lock_schedule(message_model, False)


# [Modified in 4.9]
@rule("ORDER-1", source=f"{_SVC}.start, {_SVC}.lockMQPeriodically", profiles=(Profile.V4_9,))
def lock_schedule_v49(message_model: MessageModel) -> PeriodicTask | None:
    """In CLUSTERING the orderly service calls lockAll 1000 ms after start and then every 20000
    ms until stopped, an exception of one run being logged, and in BROADCASTING it never locks.

    post: (__return__ is None) == (message_model is MessageModel.BROADCASTING)
    post: __return__ is None or __return__ == PeriodicTask(1000, 20000, True)
    """
    # Verify the model: only CLUSTERING starts periodic locking
    return _lock_schedule(message_model, True)


@rule("ORDER-17", source=f"{_SVC}.shutdown, {_SVC}.unlockAllMQ")
def orderly_shutdown_steps(message_model: MessageModel) -> tuple[ShutdownStep, ...]:
    """Shutdown marks the service stopped, stops its scheduler and its pool, and in CLUSTERING
    then unlocks every queue synchronously (unlockAll with oneway false).

    post: __return__[:3] == (ShutdownStep.STOP, ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL)
    post: (ShutdownStep.UNLOCK_ALL in __return__) == (message_model is MessageModel.CLUSTERING)
    """
    steps = (ShutdownStep.STOP, ShutdownStep.SCHEDULER, ShutdownStep.CONSUME_POOL)
    # Verify the model: BROADCASTING never locked anything
    if message_model is MessageModel.CLUSTERING:
        return (*steps, ShutdownStep.UNLOCK_ALL)
    return steps


@rule("ORDER-18", source=f"{_SVC}.start")
def has_consume_timeout_cleaner(consume_mode: ConsumeMode) -> bool:
    """Only the concurrent service runs a consume-timeout cleaner, so in orderly mode
    consumeTimeout only changes the hook's return type.

    post: __return__ == (consume_mode is ConsumeMode.CONCURRENTLY)
    """
    # Verify the mode: the orderly service schedules no cleanExpireMsg
    return consume_mode is ConsumeMode.CONCURRENTLY
