"""The reference PullMessageService (PULLQ-1 … PULLQ-11) on the deterministic scheduler.

RocketMQ's pull thread blocks on `LinkedBlockingQueue.take()`; here every take is one scheduler
event ("pull-thread"), scheduled whenever the queue is non-empty and the service runs, so the
requests are handled strictly one at a time in FIFO order (PULLQ-11) and interleave with the
other events due at the same virtual time. The single-thread timer of delayed re-enqueues and
tasks (PULLQ-4, PULLQ-5) is the same scheduler.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import attrs

from pullspec.reference.scheduler import Scheduler
from pullspec.spec.errors import (
    InvalidTypeError,
    check_bool,
    conforms,
    require_int,
    require_non_negative,
    require_str,
)
from pullspec.spec.message import MessageQueue
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.pull_actions import dispatches_to_consumer, schedules_later
from pullspec.spec.pull_service import (
    delayed_task_runs_after_shutdown,
    enqueue,
    enqueues_immediately,
    pull_loop_continues,
    pull_request_key,
    schedules_task_later,
)

#: A task for the timer (executeTaskLater's Runnable).
Task = Callable[[], None]


def _str(instance: Any, attribute: attrs.Attribute[str], value: object) -> None:
    require_str(attribute.name, value)


def _mq(instance: Any, attribute: attrs.Attribute[MessageQueue], value: object) -> None:
    if not isinstance(value, MessageQueue):
        raise InvalidTypeError(attribute.name, value, "MessageQueue")


def _pq(instance: Any, attribute: attrs.Attribute[ProcessQueue], value: object) -> None:
    if not conforms(value, ProcessQueue):
        raise InvalidTypeError(attribute.name, value, "ProcessQueue")


def _int(instance: Any, attribute: attrs.Attribute[int], value: object) -> None:
    require_int(attribute.name, value)


@attrs.define(eq=False)
class PullRequest:
    """RocketMQ's PullRequest (PULLQ-7): one mutable object per ProcessQueue, re-enqueued itself;
    `next_offset` is the only cursor of the pull position. Equality and hashing use only
    (consumer_group, message_queue). Every assignment is validated (attrs runs the validators
    on setattr), so a bad value raises and leaves the field as it was."""

    consumer_group: str = attrs.field(validator=_str)
    message_queue: MessageQueue = attrs.field(validator=_mq)
    process_queue: ProcessQueue = attrs.field(validator=_pq)
    next_offset: int = attrs.field(validator=_int)
    #: lockedFirst (4.7) / previouslyLocked (4.9): FLOW-12 has corrected the cursor once.
    previously_locked: bool = attrs.field(default=False, validator=check_bool)

    @property
    def key(self) -> tuple[str, MessageQueue]:
        """The identity PULLQ-7 compares: (consumer_group, message_queue)."""
        return pull_request_key(self.consumer_group, self.message_queue)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PullRequest):
            return NotImplemented
        return self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@runtime_checkable
class PullConsumer(Protocol):
    """What selectConsumer returns for a group: DefaultMQPushConsumerImpl.pullMessage (PULLQ-6)."""

    def pull_message(self, pull_request: PullRequest) -> None:
        """Run one pull attempt for `pull_request` (FLOW, REQ)."""
        ...


def _request(value: object) -> PullRequest:
    if not isinstance(value, PullRequest):
        raise InvalidTypeError("pull_request", value, "PullRequest")
    return value


class PullMessageService:
    """PullMessageService: a FIFO of PullRequests taken by one "thread", plus its timer."""

    def __init__(self, scheduler: Scheduler) -> None:
        if not isinstance(scheduler, Scheduler):
            raise InvalidTypeError("scheduler", scheduler, "Scheduler")
        self._scheduler = scheduler
        self._queue: collections.deque[PullRequest] = collections.deque()
        self._consumers: dict[str, PullConsumer] = {}
        self._started = False
        self._stopped = False
        self._take_scheduled = False
        #: scheduler handle → due time of every delayed re-enqueue or task not yet run.
        self._timers: dict[int, int] = {}
        #: The request the pull thread is handling right now (None between takes).
        self.current: PullRequest | None = None
        #: How many requests the pull thread has taken.
        self.taken = 0
        #: The pull thread takes nothing before this virtual time (`block_until`).
        self._blocked_until = 0
        #: (level, message) for what RocketMQ logs; tests read it.
        self.log: list[tuple[str, str]] = []

    # -- state ------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """True once `start` ran (MQClientInstance.start starts the thread)."""
        return self._started

    @property
    def stopped(self) -> bool:
        """ServiceThread.isStopped: true after `shutdown`."""
        return self._stopped

    @property
    def queued(self) -> tuple[PullRequest, ...]:
        """The pull queue, head first (PULLQ-2)."""
        return tuple(self._queue)

    @property
    def pending_timers(self) -> int:
        """Delayed re-enqueues and tasks scheduled and not yet run or cancelled."""
        return len(self._timers)

    # -- consumers (MQClientInstance.registerConsumer / selectConsumer) -------------------------

    def register_consumer(self, group: str, consumer: PullConsumer) -> bool:
        """Register `consumer` for `group`; False (and no change) when the group has one."""
        name = require_str("group", group)
        if not conforms(consumer, PullConsumer):
            raise InvalidTypeError("consumer", consumer, "PullConsumer")
        if name in self._consumers:
            return False
        self._consumers[name] = consumer
        return True

    def unregister_consumer(self, group: str) -> None:
        """Forget the consumer of `group`; its requests then die at their next take (PULLQ-6)."""
        self._consumers.pop(require_str("group", group), None)

    def select_consumer(self, group: str) -> PullConsumer | None:
        """MQClientInstance.selectConsumer: the consumer registered for `group`, or None."""
        return self._consumers.get(require_str("group", group))

    # -- the queue and the timer -------------------------------------------------------------

    def start(self) -> None:
        """Start the pull thread; requests queued before start are taken from now on."""
        self._started = True
        self._schedule_take()

    def execute_pull_request_immediately(self, pull_request: PullRequest) -> None:
        """executePullRequestImmediately (PULLQ-3): put at the tail, stopped or not."""
        pr = _request(pull_request)
        if enqueues_immediately(self._stopped):
            self._queue = collections.deque(enqueue(tuple(self._queue), pr))
            self._schedule_take()

    def execute_pull_request_later(self, pull_request: PullRequest, delay_ms: int) -> None:
        """executePullRequestLater (PULLQ-4): re-enqueue after `delay_ms`, unless stopped."""
        pr = _request(pull_request)
        delay = require_non_negative("delay_ms", delay_ms)
        if not schedules_later(self._stopped):
            self.log.append(("warn", "PullMessageServiceScheduledThread has shutdown"))
            return
        self._timer(delay, lambda: self.execute_pull_request_immediately(pr), "pull-later")

    def execute_task_later(self, task: Task, delay_ms: int) -> None:
        """executeTaskLater (PULLQ-5): run `task` after `delay_ms` on the same timer."""
        if not callable(task):
            raise InvalidTypeError("task", task, "a callable")
        delay = require_non_negative("delay_ms", delay_ms)
        if not schedules_task_later(self._stopped):
            self.log.append(("warn", "PullMessageServiceScheduledThread has shutdown"))
            return
        self._timer(delay, task, "pull-task")

    def shutdown(self) -> None:
        """shutdown(interrupt=true) (PULLQ-10): stop taking, abandon the queue, and keep only
        the delayed tasks that fall due within the 1000 ms graceful wait."""
        if self._stopped:
            return
        self._stopped = True
        now = self._scheduler.clock.now_ms()
        for handle, due in list(self._timers.items()):
            if not delayed_task_runs_after_shutdown(max(0, due - now)):
                self._scheduler.cancel(handle)
                del self._timers[handle]

    # -- internals ---------------------------------------------------------------------------

    def _timer(self, delay: int, task: Task, name: str) -> None:
        box: list[int] = []

        def fire() -> None:
            self._timers.pop(box[0], None)
            try:
                task()
            except Exception as exc:
                # A ScheduledExecutorService keeps a task's exception in its Future: nobody sees it.
                self.log.append(("error", f"scheduled task failed: {exc!r}"))

        handle = self._scheduler.call_later(delay, fire, name)
        box.append(handle)
        self._timers[handle] = self._scheduler.clock.now_ms() + delay

    def block_until(self, at: int) -> None:
        """The pull thread is stuck inside a call that returns at virtual time `at` (a fault a
        test or the simulator injects): nothing is taken before then, while the timer, and so
        the delayed re-enqueues, run on."""
        self._blocked_until = max(self._blocked_until, require_int("at", at))

    def _schedule_take(self) -> None:
        if self._started and not self._stopped and self._queue and not self._take_scheduled:
            self._take_scheduled = True
            self._scheduler.call_soon(self._take, "pull-thread")

    def _take(self) -> None:
        if self._blocked_until > self._scheduler.clock.now_ms():
            self._scheduler.call_at(self._blocked_until, self._take, "pull-thread")
            return
        self._take_scheduled = False
        if self._stopped or not self._queue:
            return
        pr = self._queue.popleft()
        self.taken += 1
        self.current = pr
        raised = False
        try:
            consumer = self._consumers.get(pr.consumer_group)
            if dispatches_to_consumer(consumer is not None):
                assert consumer is not None
                consumer.pull_message(pr)
            else:
                self.log.append(("warn", f"No matched consumer for the PullRequest {pr}, drop it"))
        except Exception as exc:
            raised = True
            self.log.append(("error", f"Pull Message Service Run Method exception: {exc!r}"))
        finally:
            self.current = None
        if pull_loop_continues(self._stopped, raised):
            self._schedule_take()
