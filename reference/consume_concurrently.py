"""The reference ConsumeMessageConcurrentlyService (CONC-1 … CONC-14) on the deterministic
scheduler.

The consume pool and both single-thread schedulers of RocketMQ are events of one `Scheduler`:
a ConsumeRequest runs as an event due now, a delayed resubmission or a cleaner run as an event
due later. A listener call takes `consume_time(msgs)` virtual milliseconds (0 by default): the
consume thread is inside the listener until then, and the result is processed when it returns.
Every decision is a rule of `spec.consume_concurrently` / `spec.retry`; this class
calls the listener and the send-back client, and applies the plans.

RocketMQ mutates the cached MessageExt objects (CONSUME_START_TIME, the restored retry topic,
reconsumeTimes, the fallback's property puts); spec messages are frozen, so each change is
written back into the ProcessQueue's cache (`make_messages_to_consume_again` replaces cached
objects without touching a counter, and the concurrent service never takes, so its consuming
tree is empty).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, cast, runtime_checkable

import attrs

from pullspec.reference.records import Records
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import consume_concurrently as cc
from pullspec.spec import retry as sb
from pullspec.spec.consume_concurrently import (
    ConcurrentListener,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeReturnType,
    PeriodicTask,
    ShutdownStep,
)
from pullspec.spec.consumer_config import ConsumerConfig, MessageModel
from pullspec.spec.errors import (
    IndexOutOfBoundsError,
    InvalidTypeError,
    RejectedExecutionError,
    conforms,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.message import MessageQueue, StoredMessage, with_namespace
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.ruleset import Ruleset

#: How long a listener call lasts for the TIME_OUT return type (CONC-5); 0 by default.
ConsumeTime = Callable[[Sequence[StoredMessage]], int]


@runtime_checkable
class ExpirableProcessQueue(Protocol):
    """A ProcessQueue with RocketMQ's cleanExpiredMsg (PQ-18), which the cleaner calls."""

    def clean_expired_msg(
        self,
        send_message_back: Callable[[StoredMessage, int], object],
        consume_timeout_min: int = 15,
        consume_orderly: bool = False,
    ) -> None:
        """Send expired head messages back with delay level 3 and uncache them."""
        ...


@attrs.frozen
class ConsumeRecord:
    """One listener call as a test sees it."""

    at: int
    mq: MessageQueue
    offsets: tuple[int, ...]
    reconsume_times: tuple[int, ...]
    status: ConsumeConcurrentlyStatus
    return_type: ConsumeReturnType
    #: When the listener returned (`at` for a call that took no time).
    end: int = attrs.field(default=attrs.Factory(lambda self: self.at, takes_self=True))


@attrs.frozen
class Submission:
    """One ConsumeRequest handed to the pool (`later` False) or to the scheduler for 5 s later
    (`later` True: the pool rejected it, or its send-back failed), as a test sees it."""

    at: int
    offsets: tuple[int, ...]
    later: bool


@attrs.frozen
class SendBackRecord:
    """One DefaultMQPushConsumerImpl.sendMessageBack: the message and target as called, and
    the RPC header and fallback it planned (CONC-11)."""

    msg: StoredMessage
    delay_level: int
    broker_name: str | None
    plan: sb.SendBackPlan


@attrs.frozen
class ResultRecord:
    """One processConsumeResult: the ack it computed (None: nothing to do) and its plan."""

    ack: cc.AckResult | None
    plan: cc.ConsumeResultPlan | None


def _write_back(pq: ProcessQueue, msgs: Sequence[StoredMessage]) -> None:
    """Make the cached objects carry the changes Java makes to the shared MessageExt."""
    cached = set(pq.cached_offsets)
    still = [m for m in msgs if m.queue_offset in cached]
    if still:
        pq.make_messages_to_consume_again(still)


class ReferenceConsumeConcurrentlyService:
    """ConsumeMessageConcurrentlyService (spec.protocols.ConsumeMessageService)."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        group: str,
        config: ConsumerConfig,
        profile: Profile,
        listener: ConcurrentListener,
        offset_store: OffsetStore,
        send_back: sb.SendBackClient,
        process_queues: Callable[[], Mapping[MessageQueue, ProcessQueue]] = dict,
        namespace: str | None = None,
        consume_time: ConsumeTime | None = None,
    ) -> None:
        if not isinstance(scheduler, Scheduler):
            raise InvalidTypeError("scheduler", scheduler, "Scheduler")
        if not conforms(send_back, sb.SendBackClient):
            raise InvalidTypeError("send_back", send_back, "SendBackClient")
        self.scheduler = scheduler
        self.group = group
        self.config = config
        self.profile = Profile.parse(profile)
        #: The rules of the profile, looked up once (a mutant swaps one).
        self.rules = Ruleset.of(self.profile)
        self.listener = listener
        self.offset_store = offset_store
        self.send_back = send_back
        self.process_queues = process_queues
        self.namespace = namespace
        self.consume_time: ConsumeTime = consume_time or (lambda _msgs: 0)
        #: consumeExecutor's core size (CONC-1): the number of threads it ever runs.
        self.core_pool_size = config.consume_thread_min
        #: Every listener call, in order.
        self.records = Records[ConsumeRecord]()
        #: Every request submitted, every send-back planned, every result processed, and the
        #: shutdown steps taken, in order (tests and the conformance drivers read them).
        self.submissions: list[Submission] = []
        self.send_backs: list[SendBackRecord] = []
        self.results: list[ResultRecord] = []
        self.shutdown_steps: list[ShutdownStep] = []
        #: Whether consumeExecutor accepts one more request (its queue is unbounded: always).
        self.pool_accepts: Callable[[], bool] = lambda: True
        #: (level, message) for what RocketMQ logs; tests read it.
        self.log: list[tuple[str, str]] = []
        self._queued: set[int] = set()
        self._delayed: set[int] = set()
        self._cleaner: int | None = None
        self._stopped = False

    # -- life cycle (CONC-1, CONC-13, CONC-14) ----------------------------------------------------

    def start(self) -> None:
        """Schedule the consume-timeout cleaner (CONC-13)."""
        schedule = self.rules.clean_expire_schedule(self.config.consume_timeout)
        due = self.scheduler.clock.now_ms() + schedule.initial_delay_ms
        self._cleaner = self.scheduler.call_at(
            due, lambda: self._clean(schedule, due), "clean-expire"
        )

    def shutdown(self, await_terminate_millis: int = 0) -> None:
        """Stop the scheduler, then the pool, then the cleaner (CONC-14); with no wait, queued
        ConsumeRequests are dropped (shutdownNow)."""
        for step in cc.concurrent_shutdown_steps():
            self.shutdown_steps.append(step)
            if step is ShutdownStep.SCHEDULER:
                self._cancel(self._delayed)
            elif step is ShutdownStep.CONSUME_POOL and await_terminate_millis <= 0:
                self._cancel(self._queued)
            elif step is ShutdownStep.CLEANER and self._cleaner is not None:
                self.scheduler.cancel(self._cleaner)
        self._stopped = True

    def _cancel(self, handles: set[int]) -> None:
        for handle in handles:
            self.scheduler.cancel(handle)
        handles.clear()

    def update_core_pool_size(self, core_pool_size: int) -> None:
        """updateCorePoolSize (CONC-1)."""
        self.core_pool_size = cc.core_pool_size_after_update(
            self.core_pool_size, core_pool_size, self.config.consume_thread_max
        )

    # -- submission (CONC-2, CONC-3) --------------------------------------------------------------

    def submit_consume_request(
        self,
        msgs: Sequence[StoredMessage],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        """submitConsumeRequest (CONC-2): one request per batch; the batch the pool rejects,
        with every message after it, is submitted again 5 s later (CONC-3). After shutdown
        the resubmission scheduler is gone too, so RejectedExecutionError reaches the caller."""
        size = self.config.consume_message_batch_max_size
        rejected_at = None
        for i, chunk in enumerate(cc.split_for_submit(msgs, size, None).submitted):
            if self._stopped or not self.pool_accepts():
                rejected_at = i
                break
            self._enqueue(chunk, process_queue, message_queue)
        if rejected_at is not None:
            later = cc.split_for_submit(msgs, size, rejected_at).later
            assert later is not None
            self._resubmit_rejected(later, process_queue, message_queue)

    def _resubmit_rejected(self, msgs: cc.Batch, pq: ProcessQueue, mq: MessageQueue) -> None:
        """submitConsumeRequestLater(consumeRequest): the same request to the pool in 5 s."""
        if self._stopped:
            raise RejectedExecutionError("consume service shut down: request rejected")
        plan = cc.resubmit_plan(cc.Resubmission.REJECTED)
        now = self.scheduler.clock.now_ms()
        self.submissions.append(Submission(now, tuple(m.queue_offset for m in msgs), True))
        handle = 0

        def resubmit() -> None:
            self._delayed.discard(handle)
            if self.pool_accepts():
                self._enqueue(msgs, pq, mq)

        handle = self.scheduler.call_later(plan.delay_ms, resubmit, f"resubmit {mq.queue_id}")
        self._delayed.add(handle)

    def _enqueue(self, msgs: cc.Batch, pq: ProcessQueue, mq: MessageQueue) -> None:
        now = self.scheduler.clock.now_ms()
        self.submissions.append(Submission(now, tuple(m.queue_offset for m in msgs), False))
        handle = 0

        def run() -> None:
            self._queued.discard(handle)
            self._run(msgs, pq, mq)

        handle = self.scheduler.call_soon(run, f"consume {mq.queue_id}")
        self._queued.add(handle)

    def _later(self, msgs: cc.Batch, pq: ProcessQueue, mq: MessageQueue) -> None:
        plan = cc.resubmit_plan(cc.Resubmission.SEND_BACK_FAILED)
        now = self.scheduler.clock.now_ms()
        self.submissions.append(Submission(now, tuple(m.queue_offset for m in msgs), True))
        handle = 0

        def resubmit() -> None:
            self._delayed.discard(handle)
            self.submit_consume_request(msgs, pq, mq, True)

        handle = self.scheduler.call_later(plan.delay_ms, resubmit, f"resubmit {mq.queue_id}")
        self._delayed.add(handle)

    # -- ConsumeRequest.run (CONC-4 … CONC-9) -----------------------------------------------------

    def consume(self, msgs: Sequence[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> None:
        """ConsumeRequest.run of `msgs` now, in the caller's event (what a pool thread runs)."""
        self._run(tuple(msgs), pq, mq)

    def _run(self, msgs: cc.Batch, pq: ProcessQueue, mq: MessageQueue) -> None:
        # CONC-4 step 1: a dropped queue keeps its messages and commits nothing
        if pq.dropped:
            self.log.append(("info", f"the message queue not be able to consume, dropped {mq}"))
            return
        context = ConsumeConcurrentlyContext(mq)
        now = self.scheduler.clock.now_ms()
        msgs = cc.reset_retry_and_namespace(msgs, self.group, self.namespace)
        msgs = cc.stamp_consume_start_time(msgs, now)
        _write_back(pq, msgs)
        status: object = None
        has_exception = False
        try:
            status = self.listener(msgs, context)
        except Exception as exc:
            has_exception = True
            self.log.append(("warn", f"consumeMessage exception: {exc!r}"))
        if status is not None and not isinstance(status, ConsumeConcurrentlyStatus):
            raise InvalidTypeError("listener status", status, "ConsumeConcurrentlyStatus")
        duration = self.consume_time(msgs)
        if duration <= 0:
            self._finish(msgs, pq, mq, context, status, has_exception, now)
            return
        # The consume thread stays inside the listener: the result is acted on when it returns,
        # and meanwhile the cleaner (PQ-18) or a rebalance (CONC-4 step 10) may act on the queue.
        self.scheduler.call_later(
            duration,
            lambda: self._finish(msgs, pq, mq, context, status, has_exception, now),
            f"consumed {mq.queue_id}",
        )

    def _finish(
        self,
        msgs: cc.Batch,
        pq: ProcessQueue,
        mq: MessageQueue,
        context: ConsumeConcurrentlyContext,
        status: object,
        has_exception: bool,
        start: int,
    ) -> None:
        """The listener returned: normalise its status (CONC-5) and process the result."""
        assert status is None or isinstance(status, ConsumeConcurrentlyStatus)
        now = self.scheduler.clock.now_ms()
        final, kind = cc.normalise_status(
            status, has_exception, now - start, self.config.consume_timeout
        )
        offsets = tuple(m.queue_offset for m in msgs)
        times = tuple(m.reconsume_times for m in msgs)
        self.records.append(ConsumeRecord(start, mq, offsets, times, final, kind, now))
        # CONC-4 step 10: the result of a queue dropped meanwhile is discarded
        if pq.dropped:
            self.log.append(
                ("warn", f"processQueue is dropped without process consume result {mq}")
            )
            return
        try:
            self.process_consume_result(final, context, msgs, pq, mq)
        except IndexOutOfBoundsError as exc:
            # Thrown in the consume thread and lost: the messages stay cached, nothing commits
            self.log.append(("error", f"processConsumeResult: {exc}"))

    def process_consume_result(
        self,
        status: ConsumeConcurrentlyStatus,
        context: ConsumeConcurrentlyContext,
        msgs: cc.Batch,
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        """processConsumeResult (CONC-6 … CONC-9) of a request of `msgs`; the context is the one
        the listener saw (ackIndex, delayLevelWhenNextConsume)."""
        msgs = tuple(msgs)
        ack = cc.ack_result(status, context.ack_index, len(msgs))
        if ack is None:
            self.results.append(ResultRecord(None, None))
            return
        if self.config.message_model is MessageModel.BROADCASTING:
            for i in ack.failed:
                self.log.append(
                    ("warn", f"BROADCASTING, the message consume failed, drop it, {msgs[i]}")
                )
            plan = cc.broadcasting_result(msgs, ack.failed)
        else:
            current = list(msgs)
            oks: list[bool] = []
            for i in ack.failed:
                ok, current[i] = self._send_back_with(current[i], context)
                oks.append(ok)
            plan = cc.clustering_result(current, ack.failed, oks)
            if plan.retry_later:
                _write_back(pq, plan.retry_later)
                self._later(plan.retry_later, pq, mq)
        self.results.append(ResultRecord(ack, plan))
        offset = pq.remove_messages(plan.remove)
        update = cc.offset_after_remove(offset, pq.dropped)
        if update is not None:
            self.offset_store.update_offset(mq, update.offset, update.increase_only)

    # -- send-back (CONC-10, CONC-11) -------------------------------------------------------------

    def send_message_back(self, msg: StoredMessage, context: ConsumeConcurrentlyContext) -> bool:
        """The service's sendMessageBack (CONC-10): True unless the impl's call failed."""
        return self._send_back_with(msg, context)[0]

    def _send_back_with(
        self, msg: StoredMessage, context: ConsumeConcurrentlyContext
    ) -> tuple[bool, StoredMessage]:
        call = sb.service_send_back_call(msg, context, self.namespace)
        return self._impl_send_back(call.msg, call.delay_level, call.broker_name)

    def _impl_send_back(
        self, msg: StoredMessage, delay_level: int, broker_name: str | None
    ) -> tuple[bool, StoredMessage]:
        """DefaultMQPushConsumerImpl.sendMessageBack (CONC-11): the RPC, else the fallback
        send; returns whether one succeeded and the message as Java leaves it."""
        plan = self.rules.send_back_plan(
            msg,
            self.group,
            delay_level,
            broker_name,
            self.config.max_reconsume_times,
            self.namespace,
        )
        after = evolve(msg, topic=plan.topic_after)
        self.send_backs.append(SendBackRecord(msg, delay_level, broker_name, plan))
        try:
            self.send_back.send_message_back(
                msg, delay_level, broker_name, plan.header.max_reconsume_times
            )
            return True, after
        except Exception as exc:
            self.log.append(("error", f"sendMessageBack Exception, {self.group}: {exc!r}"))
        # The fallback build puts into the consumed message's own property map
        after = evolve(after, properties=plan.fallback.original_properties)
        try:
            self.send_back.send_retry_message(plan.fallback.message)
        except Exception as exc:
            self.log.append(("error", f"sendMessageBack exception, group: {self.group}: {exc!r}"))
            return False, after
        return True, after

    def _cleaner_send_back(self, msg: StoredMessage, delay_level: int) -> None:
        """DefaultMQPushConsumer.sendMessageBack(msg, delayLevel), as PQ-18 calls it: no
        broker name (the store host is used); raises when both ways failed."""
        wrapped = evolve(msg, topic=with_namespace(msg.topic, self.namespace))
        ok, _ = self._impl_send_back(wrapped, delay_level, None)
        if not ok:
            raise RuntimeError("sendMessageBack failed")

    # -- the consume-timeout cleaner (CONC-13) ----------------------------------------------------

    def clean_expire_msg(self) -> None:
        """One cleaner run: PQ-18 over every ProcessQueue of the rebalance table."""
        for pq in list(self.process_queues().values()):
            if conforms(pq, ExpirableProcessQueue):  # conforms does not narrow as isinstance
                cast(ExpirableProcessQueue, pq).clean_expired_msg(
                    self._cleaner_send_back, self.config.consume_timeout, False
                )

    def _clean(self, schedule: PeriodicTask, due: int) -> None:
        try:
            self.clean_expire_msg()
        except Exception as exc:
            self.log.append(("error", f"scheduleAtFixedRate cleanExpireMsg exception: {exc!r}"))
            # 4.7.1 has no try/catch: the exception cancels the fixed-rate schedule for good
            if not schedule.survives_exception:
                self._cleaner = None
                return
        nxt = due + schedule.period_ms
        self._cleaner = self.scheduler.call_at(
            nxt, lambda: self._clean(schedule, nxt), "clean-expire"
        )
