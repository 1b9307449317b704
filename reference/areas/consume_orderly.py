"""The reference driver of area `consume_orderly` (vocabulary:
conformance.adapters.consume_orderly): one `ReferenceConsumeOrderlyService` over a
`ReferenceProcessQueue` of queue T/b/0 on a virtual clock at 0, stepped one ConsumeRequest stage
at a time through its seams (`enter`, `take`, `consume_taken`); the listener answers what the op
says, send-backs go to a recording client and offsets to a recording store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.areas.consume_concurrently import SendBackStandIn, client_message_json
from pullspec.reference.consume_orderly import OrderlyRequest, ReferenceConsumeOrderlyService
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import consume_orderly as order
from pullspec.spec.clock import ManualClock
from pullspec.spec.consume_orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from pullspec.spec.message import PROPERTY_CONSUME_START_TIME, MessageQueue, StoredMessage
from pullspec.spec.process_queue import LOCK_MAX_LIVE_TIME_MS
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "consume_orderly"
#: The one queue of the case's ProcessQueue.
QUEUE = _wiring.QUEUE


class _Locking:
    """RebalanceImpl's locking as the orderly service asks it: lock(mq) answers `ok`,
    lockAll throws from its `fail_from`-th call on."""

    def __init__(self) -> None:
        self.ok = True
        self.calls = 0
        self.fail_from: int | None = None

    def lock(self, mq: MessageQueue) -> bool:
        return self.ok

    def lock_all(self) -> None:
        self.calls += 1
        if self.fail_from is not None and self.calls >= self.fail_from:
            raise RuntimeError("lockAll threw")

    def unlock_all(self, oneway: bool) -> None:
        return None


class _RacyQueue(ReferenceProcessQueue):
    """A ProcessQueue that rebalance drops right after commit when `race` is set (the window
    before processConsumeResult's isDropped check), and whose `dropped` reads true from the
    `drop_on_read`-th read on (a queue dropped while a request waited for its monitor)."""

    race = False
    drop_on_read: int | None = None
    reads = 0

    def commit(self) -> int:
        offset = super().commit()
        if self.race:
            self.dropped = True
        return offset

    @property
    def dropped(self) -> bool:
        self.reads += 1
        if self.drop_on_read is not None and self.reads >= self.drop_on_read:
            return True
        return self.snapshot().dropped

    @dropped.setter
    def dropped(self, value: bool) -> None:
        ReferenceProcessQueue.dropped.fset(self, value)  # type: ignore[attr-defined]


class Driver(_client.DriverBase):
    """The reference driver: a ReferenceConsumeOrderlyService stepped stage by stage."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)
        self.group = str(config.get("consumerGroup", _wiring.GROUP))
        self.clock = ManualClock(0)
        self.pq = _RacyQueue(self.clock, profile)
        self.store = _wiring.RecordingOffsetStore()
        self.sender = SendBackStandIn()
        self.locking = _Locking()
        self.service = self._service(Scheduler(self.clock))
        self.taken: tuple[StoredMessage, ...] = ()
        self.request = OrderlyRequest(self.pq, QUEUE, self.service.monitor_of(QUEUE))

    def _service(self, scheduler: Scheduler) -> ReferenceConsumeOrderlyService:
        return self.classes.orderly_service(
            scheduler,
            group=self.group,
            config=self.consumer,
            profile=self.profile,
            listener=lambda msgs, context: ConsumeOrderlyStatus.SUCCESS,
            offset_store=self.store,
            send_back=self.sender,
            rebalance=self.locking,
        )

    def _queues(self) -> dict[str, Any]:
        return {
            "cachedOffsets": list(self.pq.cached_offsets),
            "consumingOffsets": list(self.pq.consuming_offsets),
        }

    def _lease(self, pq: ReferenceProcessQueue, locked: bool, expired: bool) -> None:
        pq.locked = locked
        now = self.clock.now_ms()
        pq.last_lock_timestamp = now - LOCK_MAX_LIVE_TIME_MS - 1 if expired else now

    def op_put_messages(self, args: _client.Args) -> dict[str, Any]:
        """putMessage, then the pull callback's submitConsumeRequest (ORDER-3)."""
        msgs = [_client.message(m) for m in args.req("msgs")]
        dispatch = self.pq.put_messages(msgs)
        before = len(self.service.submitted)
        self.service.submit_consume_request(msgs, self.pq, QUEUE, dispatch)
        return {
            "dispatchToConsume": dispatch,
            "submitsConsumeRequest": len(self.service.submitted) > before,
            **self._queues(),
        }

    def op_gate(self, args: _client.Args) -> dict[str, Any]:
        """ConsumeRequest.run's entry (ORDER-2, ORDER-4) for a queue in the op's state."""
        mq = MessageQueue(QUEUE.topic, QUEUE.broker_name, args.int("queueId", 0))
        pq = _RacyQueue(self.clock, self.profile)
        self._lease(pq, args.bool("locked"), args.bool("lockExpired", False))
        pq.dropped = args.bool("droppedOnEntry", False)
        if args.bool("droppedInMonitor", False):
            pq.drop_on_read = 2  # alive at the entry check, dropped inside the monitor
        gate = self.service.enter(pq, mq)
        return {"gate": gate.value, "monitor": self.service.monitor_of(mq)}

    def op_loop_step(self, args: _client.Args) -> dict[str, Any]:
        """One loop iteration (ORDER-5, ORDER-6, ORDER-16) of the case's ConsumeRequest."""
        self.clock.jump_to(args.int("now", self.clock.now_ms()))
        self.request.begin_time = args.int("beginTime", self.clock.now_ms())
        self.pq.dropped = args.bool("dropped", False)
        self._lease(self.pq, args.bool("locked", True), args.bool("lockExpired", False))
        self.service.scheduler = scheduler = Scheduler(self.clock)
        step, taken = self.service.take(self.request)
        if step.exit is None or step.exit is order.LoopExit.EMPTY_TAKE:
            self.taken = taken  # the next listener op consumes this take (an empty one too)
        later = {
            name.split(" ")[0]: due - self.clock.now_ms() for due, name in scheduler.pending_at()
        }
        return {
            "exit": None if step.exit is None else step.exit.value,
            "take": step.take,
            "tryLockLaterMs": later.get("tryLock"),
            "submitLaterMs": later.get("resubmit"),
            "taken": [m.queue_offset for m in taken],
            "consuming": self.pq.consuming,
            "stampsConsumeStartTime": any(
                m.get_property(PROPERTY_CONSUME_START_TIME) is not None for m in taken
            ),
            **self._queues(),
        }

    def op_listener(self, args: _client.Args) -> dict[str, Any]:
        """The listener call on the last batch taken and processConsumeResult (ORDER-7 …
        ORDER-15)."""
        raw = args.get("status")
        status = None if raw is None else _client.enum_of(ConsumeOrderlyStatus, raw)
        throws = args.bool("exception", False)
        seen: list[ConsumeOrderlyContext] = []

        def listener(msgs: Sequence[StoredMessage], context: ConsumeOrderlyContext) -> Any:
            context.auto_commit = args.bool("autoCommit", context.auto_commit)
            context.suspend_current_queue_time_millis = args.int(
                "suspendMs", context.suspend_current_queue_time_millis
            )
            seen.append(context)
            if throws:
                raise RuntimeError("the listener threw")
            return status

        service = self.service
        service.listener = listener
        rt = args.int("consumeRtMs", 0)
        service.consume_time = lambda _msgs: rt
        service.scheduler = scheduler = Scheduler(self.clock)
        self.sender.fallbacks.clear()
        self.sender.fallback_oks = [bool(ok) for ok in args.get("sendBackOk") or []]
        records, results, updates = (
            len(service.records),
            len(service.results),
            len(self.store.updates),
        )
        under_lock = args.bool("droppedUnderConsumeLock", False)
        if under_lock:
            self.pq.dropped = True
        self.pq.race = args.bool("dropped", False)
        ended: list[bool] = []
        try:
            service.consume_taken(self.request, self.taken, ended.append)
            if rt > 0:
                scheduler.run_until(self.clock.now_ms() + rt, max_tasks=1)
        finally:
            self.pq.race = False
            if under_lock or args.bool("dropped", False):
                self.pq.dropped = False
        if not seen:
            return {
                "context": None,
                "exit": order.LoopExit.DROPPED_UNDER_CONSUME_LOCK.value,
                **self._queues(),
            }
        record, result = service.records[records], service.results[results]
        later = [
            due - self.clock.now_ms()
            for due, name in scheduler.pending_at()
            if name.startswith("resubmit")
        ]
        written = self.store.updates[updates:]
        plan = result.plan
        return {
            "context": {
                "autoCommit": seen[0].auto_commit,
                "suspendMs": seen[0].suspend_current_queue_time_millis,
            },
            "status": record.status.value,
            "returnType": record.return_type.value,
            "plan": {
                "action": plan.action.value,
                "continueConsume": plan.continue_consume,
                "okTps": plan.ok_tps,
                "failedTps": plan.failed_tps,
            },
            "deadLetters": [client_message_json(m) for m in self.sender.fallbacks],
            "submitLaterMs": later[0] if later else None,
            "commitOffset": None
            if result.commit_offset < 0 and plan.action.value != "COMMIT"
            else result.commit_offset,
            "offsetUpdate": None
            if not written
            else {"offset": written[0][1], "increaseOnly": written[0][2]},
            "reconsumeTimes": [m.reconsume_times for m in result.msgs],
            **self._queues(),
        }

    def op_try_lock_later(self, args: _client.Args) -> dict[str, Any]:
        """tryLockLaterAndReconsume's resubmission delay (ORDER-13)."""
        return {
            "resubmitMs": order.resubmit_after_try_lock(args.bool("stopped"), args.bool("lockOk"))
        }

    def op_lock_schedule(self, args: _client.Args) -> dict[str, Any]:
        """The periodic lockAll of the orderly service (ORDER-1), read off a started scratch
        service whose second lockAll throws."""
        scheduler = Scheduler(ManualClock(0))
        service = self._service(scheduler)
        locking = _Locking()
        locking.fail_from = 2
        service.rebalance = locking
        service.start()
        return {"schedule": _client.periodic_schedule(scheduler)}

    def op_shutdown(self, args: _client.Args) -> dict[str, Any]:
        """shutdown's order (ORDER-17)."""
        self.service.shutdown()
        return {"steps": [s.value for s in self.service.shutdown_steps]}
