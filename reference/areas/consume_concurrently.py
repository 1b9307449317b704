"""The reference driver of area `consume_concurrently` (vocabulary:
conformance.adapters.consume_concurrently): one `ReferenceConsumeConcurrentlyService` over a
`ReferenceProcessQueue` of queue T/b/0 on a virtual clock at 0, whose send-backs go to a
recording client (the CONSUMER_SEND_MSG_BACK RPC fails, so each builds its fallback; the
fallback send succeeds unless the op says otherwise), whose offsets go to a recording store and
whose listener consumes everything."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.consume_concurrently import ReferenceConsumeConcurrentlyService
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import consume_concurrently as conc
from pullspec.spec import retry as csb
from pullspec.spec.clock import ManualClock
from pullspec.spec.consume_concurrently import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from pullspec.spec.consume_orderly import has_consume_timeout_cleaner
from pullspec.spec.evolve import evolve
from pullspec.spec.message import PROPERTY_CONSUME_START_TIME, MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "consume_concurrently"
#: The one queue of the case's ProcessQueue.
QUEUE = _wiring.QUEUE
#: The vocabulary's names of the service's scheduled tasks.
TASK_NAMES = {"clean-expire": "cleanExpireMsg", "consume": "consumeRequest"}
_RESUBMIT = "submitConsumeRequestLater"


def client_message_json(msg: csb.ClientMessage) -> dict[str, Any]:
    """A client-built message: topic, flag and properties (the body is the consumed one's)."""
    return {"topic": msg.topic, "flag": msg.flag, "properties": dict(sorted(msg.properties))}


class SendBackStandIn:
    """The client's two ways back (spec.retry.SendBackClient): the RPC always fails,
    the fallback send fails for the messages `failing` names (queue offsets, or by position in
    `fallback_oks`, consumed in order)."""

    def __init__(self) -> None:
        self.rpc: list[tuple[StoredMessage, int, str | None]] = []
        self.fallbacks: list[csb.ClientMessage] = []
        self.fallback_oks: list[bool] = []

    def send_message_back(
        self, msg: StoredMessage, delay_level: int, broker_name: str | None, max_times: int
    ) -> None:
        self.rpc.append((msg, delay_level, broker_name))
        raise RuntimeError("CONSUMER_SEND_MSG_BACK failed")

    def send_retry_message(self, message: csb.ClientMessage) -> None:
        self.fallbacks.append(message)
        if self.fallback_oks and not self.fallback_oks.pop(0):
            raise RuntimeError("the retry send failed")


class _DroppingQueue(ReferenceProcessQueue):
    """A ProcessQueue that rebalance drops right after removeMessage when `race` is set (the
    window between removeMessage and processConsumeResult's isDropped check)."""

    race = False

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        offset = super().remove_messages(msgs)
        if self.race:
            self.dropped = True
        return offset


def _status(value: object) -> ConsumeConcurrentlyStatus | None:
    return None if value is None else _client.enum_of(ConsumeConcurrentlyStatus, value)


class Driver(_client.DriverBase):
    """The reference driver: a ReferenceConsumeConcurrentlyService and its ProcessQueue."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)
        self.group = str(config.get("consumerGroup", _wiring.GROUP))
        self.namespace: str | None = config.get("namespace")
        self.clock = ManualClock(0)
        self.pq = _DroppingQueue(self.clock, profile)
        self.cache: dict[int, StoredMessage] = {}
        self.store = _wiring.RecordingOffsetStore()
        self.sender = SendBackStandIn()
        self.service = self._service(Scheduler(self.clock))

    def _service(self, scheduler: Scheduler) -> ReferenceConsumeConcurrentlyService:
        return self.classes.concurrent_service(
            scheduler,
            group=self.group,
            config=self.consumer,
            profile=self.profile,
            listener=lambda msgs, context: ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
            offset_store=self.store,
            send_back=self.sender,
            process_queues=lambda: {QUEUE: self.pq},
            namespace=self.namespace,
        )

    def _msgs(self, offsets: list[int]) -> list[StoredMessage]:
        """The messages of `offsets` as the ProcessQueue holds them now (else as put)."""
        cached = {m.queue_offset: m for m in self.pq.snapshot().msg_tree}
        return [cached.get(o, self.cache[o]) for o in offsets]

    def _scheduled(self) -> list[dict[str, Any]]:
        out = []
        for due, name in self.service.scheduler.pending_at():
            stem = name.split(" ")[0]
            out.append({"task": TASK_NAMES.get(stem, _RESUBMIT), "dueAt": due})
        return out

    def op_put_messages(self, args: _client.Args) -> dict[str, Any]:
        """ProcessQueue.putMessage of a pulled list (a message may carry the
        CONSUME_START_TIME a consume thread stamped: `consumeStartTime`)."""
        msgs = []
        for raw in args.req("msgs"):
            msg = _client.message(raw)
            if raw.get("consumeStartTime") is not None:
                props = {
                    **dict(msg.properties),
                    PROPERTY_CONSUME_START_TIME: str(raw["consumeStartTime"]),
                }
                msg = evolve(msg, properties=props)
            msgs.append(msg)
        self.cache.update({m.queue_offset: m for m in msgs})
        self.pq.put_messages(msgs)
        return {"cachedOffsets": list(self.pq.cached_offsets)}

    def op_submit(self, args: _client.Args) -> dict[str, Any]:
        """submitConsumeRequest of the cached messages with a pool that rejects the
        `rejectedAt`-th request (CONC-2, CONC-3); the requests run when the clock advances."""
        service = self.service
        service.config = evolve(
            self.consumer, consume_message_batch_max_size=args.int("batchMaxSize")
        )
        rejected_at, accepted = args.get("rejectedAt"), [0]

        def accepts() -> bool:
            accepted[0] += 1
            return rejected_at is None or accepted[0] <= rejected_at

        service.pool_accepts = accepts
        before = len(service.submissions)
        try:
            service.submit_consume_request(self._msgs(args.req("offsets")), self.pq, QUEUE, True)
        finally:
            service.config, service.pool_accepts = self.consumer, lambda: True
        made = service.submissions[before:]
        later = [list(s.offsets) for s in made if s.later]
        return {
            "requests": [list(s.offsets) for s in made if not s.later],
            "later": later[0] if later else None,
        }

    def op_resubmit(self, args: _client.Args) -> dict[str, Any]:
        """submitConsumeRequestLater (CONC-3)."""
        plan = conc.resubmit_plan(args.enum("kind", conc.Resubmission))
        return {"delayMs": plan.delay_ms, "resplit": plan.resplit}

    def op_run_request(self, args: _client.Args) -> dict[str, Any]:
        """ConsumeRequest.run's steps (CONC-4)."""
        steps = conc.consume_request_steps(
            args.bool("droppedOnEntry"), args.bool("hasHook"), args.bool("droppedAfterListener")
        )
        return {"steps": [s.value for s in steps]}

    def _scratch_run(self, msgs: list[StoredMessage], listener: Any, rt: int = 0) -> None:
        """One ConsumeRequest.run on a scratch service and queue, dropped by the listener so
        that its result is discarded (CONC-4's last check)."""
        scratch = self.classes.process_queue(self.clock, self.profile)
        scratch.put_messages(msgs)
        scheduler = Scheduler(ManualClock(self.clock.now_ms()))
        service = self._service(scheduler)
        service.consume_time = lambda _msgs: rt

        def dropping(batch: Sequence[StoredMessage], context: ConsumeConcurrentlyContext) -> Any:
            scratch.dropped = True
            return listener(batch, context)

        service.listener = dropping
        service.consume(msgs, scratch, QUEUE)
        # a listener that lasts `rt` returns `rt` later (CONC-4): its result is recorded then
        scheduler.run_for(rt)
        self._last_scratch = service

    def op_listener_returned(self, args: _client.Args) -> dict[str, Any]:
        """The listener's answer as the service classifies it (CONC-5)."""
        status, throws = _status(args.get("status")), args.bool("exception", False)

        def listener(batch: Any, context: Any) -> Any:
            if throws:
                raise RuntimeError("the listener threw")
            return status

        self._scratch_run([_client.message({"queueOffset": 0})], listener, args.int("consumeRtMs"))
        record = self._last_scratch.records[-1]
        return {"status": record.status.value, "returnType": record.return_type.value}

    def op_process_result(self, args: _client.Args) -> dict[str, Any]:
        """processConsumeResult (CONC-6 … CONC-11) on the case's ProcessQueue."""
        msgs = self._msgs(args.req("offsets"))
        context = ConsumeConcurrentlyContext(
            QUEUE,
            delay_level_when_next_consume=args.int("delayLevelWhenNextConsume", 0),
            ack_index=args.int("ackIndex", 2**31 - 1),
        )
        service, sender = self.service, self.sender
        sender.fallback_oks = [bool(ok) for ok in args.get("sendBackOk") or []]
        sends, updates = len(service.send_backs), len(self.store.updates)
        self.pq.race = args.bool("dropped", False)
        try:
            service.process_consume_result(
                args.enum("status", ConsumeConcurrentlyStatus), context, tuple(msgs), self.pq, QUEUE
            )
        finally:
            if self.pq.race:
                self.pq.race, self.pq.dropped = False, False
        result = service.results[-1]
        if result.ack is None or result.plan is None:
            return {"ack": None, "cachedOffsets": list(self.pq.cached_offsets)}
        out: dict[str, Any] = {"ack": _client.value_json(result.ack)}
        if self.consumer.message_model.value == "CLUSTERING":
            out["sendBacks"] = [
                {
                    "call": {
                        "topic": r.msg.topic,
                        "delayLevel": r.delay_level,
                        "brokerName": r.broker_name,
                    },
                    "header": _client.value_json(r.plan.header),
                    "fallback": client_message_json(r.plan.fallback.message),
                    "topicAfter": r.plan.topic_after,
                }
                for r in service.send_backs[sends:]
            ]
        written = self.store.updates[updates:]
        out.update(
            removed=[m.queue_offset for m in result.plan.remove],
            retryLater=[
                {"queueOffset": m.queue_offset, "reconsumeTimes": m.reconsume_times}
                for m in result.plan.retry_later
            ],
            offsetUpdate=None
            if not written
            else {"offset": written[0][1], "increaseOnly": written[0][2]},
            cachedOffsets=list(self.pq.cached_offsets),
        )
        return out

    def op_reset_retry(self, args: _client.Args) -> dict[str, Any]:
        """resetRetryAndNamespace (CONC-12): the topics the listener sees."""
        seen: list[str] = []

        def listener(batch: Sequence[StoredMessage], context: Any) -> Any:
            seen.extend(m.topic for m in batch)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        self._scratch_run([_client.message(m) for m in args.req("msgs")], listener)
        return {"topics": seen}

    def op_update_core_pool_size(self, args: _client.Args) -> dict[str, Any]:
        """updateCorePoolSize (CONC-1)."""
        self.service.update_core_pool_size(args.int("n"))
        return {"corePoolSize": self.service.core_pool_size}

    def op_clean_expire_schedule(self, args: _client.Args) -> dict[str, Any]:
        """The consume-timeout cleaner's schedule (CONC-13; an orderly consumer has no
        concurrent service, hence no cleaner, ORDER-18), read off a started scratch service."""
        if not has_consume_timeout_cleaner(self.consumer.consume_mode):
            return {"schedule": None}  # an orderly consumer's service has no cleaner
        clock = ManualClock(0)
        scheduler = Scheduler(clock)
        service = self._service(scheduler)
        sweeps = [0]

        def queues() -> dict[MessageQueue, Any]:
            sweeps[0] += 1
            if sweeps[0] == 2:
                raise RuntimeError("the second sweep throws")
            return {}

        service.process_queues = queues
        service.start()
        return {"schedule": _client.periodic_schedule(scheduler)}

    def op_shutdown(self, args: _client.Args) -> dict[str, Any]:
        """shutdown's order (CONC-14)."""
        self.service.shutdown()
        return {"steps": [s.value for s in self.service.shutdown_steps]}

    def op_start(self, args: _client.Args) -> dict[str, Any]:
        """start: the consume-timeout cleaner is scheduled (CONC-13)."""
        self.service.start()
        return {"scheduled": self._scheduled(), "cachedOffsets": list(self.pq.cached_offsets)}

    def op_advance_clock(self, args: _client.Args) -> dict[str, Any]:
        """Let `ms` pass: due requests run (the listener consumes), the cleaner sweeps (PQ-18)."""
        rpc = len(self.sender.rpc)
        self.service.scheduler.run_for(args.int("ms"))
        return {
            "now": self.clock.now_ms(),
            "sentBack": [
                {"queueOffset": m.queue_offset, "delayLevel": level}
                for m, level, _ in self.sender.rpc[rpc:]
            ],
            "scheduled": self._scheduled(),
            "cachedOffsets": list(self.pq.cached_offsets),
        }
