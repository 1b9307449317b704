"""The reference ConsumeMessageOrderlyService (ORDER-1 … ORDER-18) on the deterministic
scheduler.

A ConsumeRequest is a chain of events: `_run` (entry, monitor), `_gate` (ORDER-4), `_iterate`
(one pass of ORDER-5: `take`, then `consume_taken`) and `_finish` (after the listener call,
ORDER-8 … ORDER-11); `enter`, `take` and `consume_taken` are also the seams the conformance
driver steps one at a time. A listener
call lasts `consume_time(msgs)` virtual milliseconds (0 by default); meanwhile the queue's
monitor (ORDER-2) and its ProcessQueue's consume lock are held, so a second request of the same
queue waits for the monitor and the rebalance's zero-wait consume-lock try (REBAL-14) fails.
Java's tryLock waits up to 1000 ms; here it does not wait, which only delays a removal to the
next rebalance. Every decision is a rule of `spec.consume_orderly`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from pullspec.reference.records import Records
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import consume_orderly as co
from pullspec.spec import retry as sb
from pullspec.spec.consume_concurrently import (
    ConsumeReturnType,
    PeriodicTask,
    ShutdownStep,
    reset_retry_and_namespace,
)
from pullspec.spec.consume_orderly import (
    TRY_LOCK_LATER_AT_GATE_MILLIS,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    Gate,
    OrderlyListener,
    ResultAction,
)
from pullspec.spec.consumer_config import ConsumerConfig
from pullspec.spec.errors import InvalidTypeError, RejectedExecutionError, conforms
from pullspec.spec.evolve import evolve
from pullspec.spec.message import PROPERTY_RECONSUME_TIME, MessageQueue, StoredMessage, put_property
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.ruleset import Ruleset

Task = Callable[[], None]
#: How long a listener call lasts, in virtual milliseconds.
ConsumeTime = Callable[[Sequence[StoredMessage]], int]
_SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


@runtime_checkable
class RebalanceLocking(Protocol):
    """What the orderly service asks of RebalanceImpl (REBAL-19 … REBAL-21)."""

    def lock(self, mq: MessageQueue) -> bool:
        """lock(mq): LOCK_BATCH_MQ for one queue; marks the table's ProcessQueue."""
        ...

    def lock_all(self) -> None:
        """lockAll: renew every table queue's lock, broker by broker."""
        ...

    def unlock_all(self, oneway: bool) -> None:
        """unlockAll: release every table queue's lock."""
        ...


@attrs.frozen
class OrderlyConsumeRecord:
    """One listener call as a test sees it: the interval it ran and what it returned."""

    mq: MessageQueue
    start: int
    end: int
    offsets: tuple[int, ...]
    reconsume_times: tuple[int, ...]
    status: ConsumeOrderlyStatus
    return_type: ConsumeReturnType


@attrs.define(eq=False)
class OrderlyRequest:
    """One ConsumeRequest of a queue: its monitor and when its loop began."""

    pq: ProcessQueue
    mq: MessageQueue
    monitor: int = -1
    begin_time: int = 0


@attrs.frozen
class OrderlyResult:
    """One processConsumeResult: the messages as it left them, its plan, and the offset commit
    answered (−1 when it did not commit)."""

    msgs: tuple[StoredMessage, ...]
    plan: co.OrderlyResultPlan
    commit_offset: int


#: What a listener call's end does next: continue the loop (True) or end the request.
Then = Callable[[bool], None]


class ReferenceConsumeOrderlyService:
    """ConsumeMessageOrderlyService (spec.protocols.ConsumeMessageService)."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        group: str,
        config: ConsumerConfig,
        profile: Profile,
        listener: OrderlyListener,
        offset_store: OffsetStore,
        send_back: sb.SendBackClient,
        rebalance: RebalanceLocking,
        namespace: str | None = None,
        consume_time: ConsumeTime | None = None,
    ) -> None:
        if not isinstance(scheduler, Scheduler):
            raise InvalidTypeError("scheduler", scheduler, "Scheduler")
        if not conforms(rebalance, RebalanceLocking):
            raise InvalidTypeError("rebalance", rebalance, "RebalanceLocking")
        self.scheduler = scheduler
        self.group = group
        self.config = config
        self.profile = Profile.parse(profile)
        #: The rules of the profile, looked up once (a mutant swaps one).
        self.rules = Ruleset.of(self.profile)
        self.listener = listener
        self.offset_store = offset_store
        self.send_back = send_back
        self.rebalance = rebalance
        self.namespace = namespace
        self.consume_time: ConsumeTime = consume_time or (lambda _msgs: 0)
        #: Every listener call, in the order the calls ended.
        self.records = Records[OrderlyConsumeRecord]()
        #: Every processConsumeResult, every ConsumeRequest submitted (its time) and the
        #: shutdown steps taken, in order (tests and the conformance drivers read them).
        self.results: list[OrderlyResult] = []
        self.submitted: list[int] = []
        self.shutdown_steps: list[ShutdownStep] = []
        #: (level, message) for what RocketMQ logs; tests read it.
        self.log: list[tuple[str, str]] = []
        self._monitor_ids: dict[MessageQueue, int] = {}
        self._holders: dict[int, OrderlyRequest | None] = {}
        self._waiters: dict[int, collections.deque[OrderlyRequest]] = {}
        #: id(pq) → (mq, pq, start) of each listener call in progress (consume lock held).
        self._in_flight: dict[int, tuple[MessageQueue, ProcessQueue, int]] = {}
        self._queued: set[int] = set()
        self._delayed: set[int] = set()
        self._stopped = False
        self._scheduler_stopped = False
        self._pool_stopped = False

    # -- life cycle (ORDER-1, ORDER-17) -----------------------------------------------------------

    def start(self) -> None:
        """Start periodic lockAll in CLUSTERING (ORDER-1)."""
        schedule = self.rules.lock_schedule(self.config.message_model)
        if schedule is not None:
            due = self.scheduler.clock.now_ms() + schedule.initial_delay_ms
            self._at(due, lambda: self._lock_periodically(schedule, due), "lockMQPeriodically")

    def _lock_periodically(self, schedule: PeriodicTask, due: int) -> None:
        if not self._stopped:
            try:
                self.rebalance.lock_all()
            except Exception as exc:
                self.log.append(("error", f"lockMQPeriodically exception: {exc!r}"))
                # 4.7.1 has no try/catch: the exception cancels periodic locking for good
                if not schedule.survives_exception:
                    return
        nxt = due + schedule.period_ms
        self._at(nxt, lambda: self._lock_periodically(schedule, nxt), "lockMQPeriodically")

    def shutdown(self, await_terminate_millis: int = 0) -> None:
        """ORDER-17: stop, shut the scheduler and the pool (queued requests dropped without a
        wait), then in CLUSTERING unlock everything; calls in progress still finish."""
        for step in co.orderly_shutdown_steps(self.config.message_model):
            self.shutdown_steps.append(step)
            if step is ShutdownStep.STOP:
                self._stopped = True
            elif step is ShutdownStep.SCHEDULER:
                self._scheduler_stopped = True
                self._cancel(self._delayed)
            elif step is ShutdownStep.CONSUME_POOL:
                self._pool_stopped = True
                if await_terminate_millis <= 0:
                    self._cancel(self._queued)
            elif step is ShutdownStep.UNLOCK_ALL:
                self.rebalance.unlock_all(False)

    def _cancel(self, handles: set[int]) -> None:
        for handle in handles:
            self.scheduler.cancel(handle)
        handles.clear()

    def _at(self, at: int, task: Task, name: str) -> None:
        """A task of the service's scheduler; once that is shut down the task is lost."""
        if self._scheduler_stopped:
            self.log.append(("warn", f"scheduler shut down, {name} rejected"))
            return
        handle = 0

        def run() -> None:
            self._delayed.discard(handle)
            task()

        handle = self.scheduler.call_at(at, run, name)
        self._delayed.add(handle)

    # -- observation --------------------------------------------------------------------------------

    def consume_lock_free(self, pq: ProcessQueue) -> bool:
        """pq.consumeLock is free right now (no listener call of this queue in progress)."""
        return id(pq) not in self._in_flight

    def in_flight(self) -> list[tuple[MessageQueue, ProcessQueue, int]]:
        """Every listener call in progress: (queue, ProcessQueue, start time)."""
        return list(self._in_flight.values())

    # -- submission (ORDER-3, ORDER-12, ORDER-13) ---------------------------------------------------

    def submit_consume_request(
        self,
        msgs: Sequence[StoredMessage] | None,
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        """submitConsumeRequest (ORDER-3): a new ConsumeRequest only when dispatching; a shut
        pool rejects it (RejectedExecutionError), which RocketMQ does not handle."""
        if not co.submits_consume_request(dispatch_to_consume):
            return
        if self._pool_stopped:
            raise RejectedExecutionError("consume service shut down: request rejected")
        handle = 0

        def run() -> None:
            self._queued.discard(handle)
            self._run(process_queue, message_queue)

        handle = self.scheduler.call_soon(run, f"consume-orderly {message_queue.queue_id}")
        self._queued.add(handle)
        self.submitted.append(self.scheduler.clock.now_ms())

    def _submit_later(self, pq: ProcessQueue, mq: MessageQueue, suspend_ms: int) -> None:
        delay = co.suspend_delay(suspend_ms, self.config.suspend_current_queue_time_millis)

        def resubmit() -> None:
            try:
                self.submit_consume_request(None, pq, mq, True)
            except RejectedExecutionError as exc:
                self.log.append(("error", f"submitConsumeRequestLater: {exc}"))

        self._at(self.scheduler.clock.now_ms() + delay, resubmit, f"resubmit {mq.queue_id}")

    def lock_one_mq(self, mq: MessageQueue) -> bool:
        """lockOneMQ (ORDER-13): false once stopped, without any RPC."""
        return False if self._stopped else self.rebalance.lock(mq)

    def _try_lock_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        def attempt() -> None:
            ok = self.lock_one_mq(mq)
            self._submit_later(pq, mq, co.resubmit_after_try_lock(self._stopped, ok))

        self._at(self.scheduler.clock.now_ms() + delay_ms, attempt, f"tryLock {mq.queue_id}")

    # -- ConsumeRequest.run (ORDER-2 … ORDER-11, ORDER-16) ---------------------------------------

    def monitor_of(self, mq: MessageQueue) -> int:
        """messageQueueLock.fetchLockObject(mq): the queue's monitor, created on first use."""
        self._monitor_ids, monitor = co.fetch_lock_object(self._monitor_ids, mq)
        return monitor

    def _gate_of(self, pq: ProcessQueue) -> Gate:
        model = self.config.message_model
        return co.run_gate(False, model, pq.locked, pq.is_lock_expired(), pq.dropped)

    def enter(self, pq: ProcessQueue, mq: MessageQueue) -> Gate:
        """ConsumeRequest.run's entry without its loop (ORDER-2, ORDER-4): RETURN_DROPPED for a
        dropped queue, else — holding the queue's monitor — LOOP, or TRY_LOCK_LATER with the
        lock retry scheduled (or RETURN_DROPPED when the queue was dropped meanwhile)."""
        if pq.dropped:
            return Gate.RETURN_DROPPED
        self.monitor_of(mq)
        gate = self._gate_of(pq)
        if gate is Gate.TRY_LOCK_LATER:
            self._try_lock_later(pq, mq, TRY_LOCK_LATER_AT_GATE_MILLIS)
        return gate

    def _run(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped:
            self.log.append(
                ("warn", f"run, the message queue not be able to consume, dropped {mq}")
            )
            return
        request = OrderlyRequest(pq, mq, self.monitor_of(mq))
        # Verify the monitor is free; otherwise wait for it like a blocked thread
        if self._holders.get(request.monitor) is not None:
            self._waiters.setdefault(request.monitor, collections.deque()).append(request)
            return
        self._holders[request.monitor] = request
        self._gate(request)

    def _release(self, request: OrderlyRequest) -> None:
        waiting = self._waiters.get(request.monitor)
        if waiting:
            nxt = waiting.popleft()
            self._holders[request.monitor] = nxt
            self.scheduler.call_soon(lambda: self._gate(nxt), f"monitor {nxt.mq.queue_id}")
        else:
            self._holders[request.monitor] = None

    def _gate(self, request: OrderlyRequest) -> None:
        pq, mq = request.pq, request.mq
        gate = self._gate_of(pq)
        if gate is Gate.LOOP:
            request.begin_time = self.scheduler.clock.now_ms()
            self._iterate(request)
            return
        if gate is Gate.TRY_LOCK_LATER:
            self._try_lock_later(pq, mq, TRY_LOCK_LATER_AT_GATE_MILLIS)
        self._release(request)

    def _iterate(self, request: OrderlyRequest) -> None:
        step, taken = self.take(request)
        if step.exit is not None:
            self._release(request)
            return
        self.consume_taken(request, taken, lambda go: self._continue(request, go))

    def _continue(self, request: OrderlyRequest, go: bool) -> None:
        if go:
            self._iterate(request)
        else:
            self._release(request)

    def take(self, request: OrderlyRequest) -> tuple[co.LoopStep, tuple[StoredMessage, ...]]:
        """One loop iteration's checks and take (ORDER-5, ORDER-6, ORDER-16): the verdict and
        the messages taken (none when the iteration exits; its retry is then scheduled)."""
        pq, mq = request.pq, request.mq
        batch, _stamps = co.take_size(self.config.consume_message_batch_max_size)
        step = co.loop_step(
            pq.dropped,
            self.config.message_model,
            pq.locked,
            pq.is_lock_expired(),
            self.scheduler.clock.now_ms(),
            request.begin_time,
            len(pq.cached_offsets),
            batch,
        )
        if step.exit is not None:
            if not co.consuming_after_exit(True, step.exit):
                pq.take_messages(batch)  # the empty take is what clears `consuming` (ORDER-16)
            if step.try_lock_later_ms is not None:
                self._try_lock_later(pq, mq, step.try_lock_later_ms)
            if step.submit_later_ms is not None:
                self._submit_later(pq, mq, step.submit_later_ms)
            return step, ()
        return step, tuple(pq.take_messages(batch))

    def consume_taken(
        self, request: OrderlyRequest, taken: Sequence[StoredMessage], then: Then
    ) -> None:
        """The listener call on `taken` under the consume lock and, when it ends,
        processConsumeResult (ORDER-7 … ORDER-15); `then(continueConsume)` follows (not when
        the queue was dropped under the consume lock, which ends the request)."""
        pq, mq = request.pq, request.mq
        msgs = reset_retry_and_namespace(tuple(taken), self.group, self.namespace)
        context = co.listener_context(mq, pq.dropped)
        if context is None:
            self.log.append(("warn", f"consumeMessage, the message queue is dropped {mq}"))
            self._release(request)
            return
        start = self.scheduler.clock.now_ms()
        self._in_flight[id(pq)] = (mq, pq, start)
        status: object = None
        has_exception = False
        try:
            status = self.listener(msgs, context)
        except Exception as exc:
            has_exception = True
            self.log.append(("warn", f"consumeMessage exception: {exc!r}"))
        if status is not None and not isinstance(status, ConsumeOrderlyStatus):
            raise InvalidTypeError("listener status", status, "ConsumeOrderlyStatus")

        def finish() -> None:
            then(self._finish(request, msgs, context, status, has_exception, start))

        duration = self.consume_time(msgs)
        if duration > 0:
            self.scheduler.call_later(duration, finish, f"consumed {mq.queue_id}")
        else:
            finish()

    def _finish(
        self,
        request: OrderlyRequest,
        msgs: tuple[StoredMessage, ...],
        context: ConsumeOrderlyContext,
        status: object,
        has_exception: bool,
        start: int,
    ) -> bool:
        pq, mq = request.pq, request.mq
        self._in_flight.pop(id(pq), None)
        now = self.scheduler.clock.now_ms()
        assert status is None or isinstance(status, ConsumeOrderlyStatus)
        final, kind = co.normalise_orderly_status(
            status, has_exception, now - start, self.config.consume_timeout
        )
        offsets = tuple(m.queue_offset for m in msgs)
        times = tuple(m.reconsume_times for m in msgs)
        self.records.append(OrderlyConsumeRecord(mq, start, now, offsets, times, final, kind))
        return self._process_consume_result(msgs, final, context, request)

    def _process_consume_result(
        self,
        msgs: tuple[StoredMessage, ...],
        status: ConsumeOrderlyStatus,
        context: ConsumeOrderlyContext,
        request: OrderlyRequest,
    ) -> bool:
        pq, mq = request.pq, request.mq
        suspends, again = False, msgs
        if status is _SUSPEND:
            suspends, again = self._check_reconsume_times(msgs)
        table = (
            co.process_result_auto_commit
            if context.auto_commit
            else co.process_result_manual_commit
        )
        plan = table(status, len(msgs), context.suspend_current_queue_time_millis, suspends)
        commit_offset = -1
        if plan.action is ResultAction.COMMIT:
            commit_offset = pq.commit()
        elif plan.action is ResultAction.ROLLBACK:
            pq.rollback()
        elif plan.action is ResultAction.CONSUME_AGAIN:
            pq.make_messages_to_consume_again(again)
        self.results.append(OrderlyResult(again, plan, commit_offset))
        if plan.submit_later_ms is not None:
            self._submit_later(pq, mq, plan.submit_later_ms)
        update = co.orderly_offset_update(commit_offset, pq.dropped)
        if update is not None:
            self.offset_store.update_offset(mq, update.offset, update.increase_only)
        return plan.continue_consume

    def _check_reconsume_times(
        self, msgs: tuple[StoredMessage, ...]
    ) -> tuple[bool, tuple[StoredMessage, ...]]:
        """ORDER-14 with the ORDER-15 send-backs it makes for messages at the maximum."""
        max_times = sb.max_reconsume_times_orderly(self.config.max_reconsume_times)
        current: list[StoredMessage] = []
        oks: list[bool] = []
        for msg in msgs:
            ok = False
            if co.reaches_dead_letter(msg, max_times):
                msg = put_property(msg, PROPERTY_RECONSUME_TIME, str(msg.reconsume_times))
                build = self.rules.orderly_dead_letter_message(
                    msg, self.group, self.config.max_reconsume_times
                )
                # The build shares (and so mutates) the consumed message's property map
                msg = evolve(msg, properties=build.original_properties)
                try:
                    self.send_back.send_retry_message(build.message)
                    ok = True
                except Exception as exc:
                    self.log.append(
                        ("error", f"sendMessageBack exception, group: {self.group}: {exc!r}")
                    )
            current.append(msg)
            oks.append(ok)
        return co.check_reconsume_times(current, max_times, oks)
