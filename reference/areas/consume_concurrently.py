"""The reference driver of area `consume_concurrently` (vocabulary: conformance.adapters.consume_concurrently, docs/protocol.md)."""

from __future__ import annotations

from typing import Any

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.spec import client_send_back as csb
from pullspec.spec import consume_concurrently as conc
from pullspec.spec import consume_lifecycle as life
from pullspec.spec.clock import ManualClock
from pullspec.spec.consume_types import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from pullspec.spec.consumer_config import MessageModel
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "consume_concurrently"
#: The one queue of the case's ProcessQueue.
QUEUE = MessageQueue("T", "b", 0)


def client_message_json(msg: csb.ClientMessage) -> dict[str, Any]:
    """A client-built message: topic, flag and properties (the body is the consumed one's)."""
    return {"topic": msg.topic, "flag": msg.flag, "properties": dict(sorted(msg.properties))}


class Driver(_client.DriverBase):
    """The reference driver: spec.consume_concurrently over a reference ProcessQueue."""

    area = AREA

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)
        self.group = str(config.get("consumerGroup", "G"))
        self.namespace: str | None = config.get("namespace")
        self.clock = ManualClock(0)
        self.pq = ReferenceProcessQueue(self.clock, profile)
        self.cache: dict[int, StoredMessage] = {}
        self.core_pool_size = self.consumer.consume_thread_min

    def _msgs(self, offsets: list[int]) -> list[StoredMessage]:
        return [self.cache[o] for o in offsets]

    def op_put_messages(self, args: _client.Args) -> dict[str, Any]:
        """ProcessQueue.putMessage of a pulled list."""
        msgs = [_client.message(m) for m in args.req("msgs")]
        self.cache.update({m.queue_offset: m for m in msgs})
        self.pq.put_messages(msgs)
        return {"cachedOffsets": list(self.pq.cached_offsets)}

    def op_submit(self, args: _client.Args) -> dict[str, Any]:
        """submitConsumeRequest's split (CONC-2)."""
        plan = conc.split_for_submit(
            self._msgs(args.req("offsets")), args.int("batchMaxSize"), args.get("rejectedAt")
        )
        later = plan.later
        return {
            "requests": [[m.queue_offset for m in batch] for batch in plan.submitted],
            "later": None if later is None else [m.queue_offset for m in later],
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

    def op_listener_returned(self, args: _client.Args) -> dict[str, Any]:
        """The listener's answer as the service classifies it (CONC-5)."""
        raw = args.get("status")
        status = None if raw is None else _client.enum_of(ConsumeConcurrentlyStatus, raw)
        out, kind = conc.normalise_status(
            status,
            args.bool("exception", False),
            args.int("consumeRtMs"),
            self.consumer.consume_timeout,
        )
        return {"status": out.value, "returnType": kind.value}

    def op_process_result(self, args: _client.Args) -> dict[str, Any]:
        """processConsumeResult (CONC-6 … CONC-11) on the case's ProcessQueue."""
        msgs = self._msgs(args.req("offsets"))
        status = args.enum("status", ConsumeConcurrentlyStatus)
        context = ConsumeConcurrentlyContext(
            QUEUE,
            delay_level_when_next_consume=args.int("delayLevelWhenNextConsume", 0),
            ack_index=args.int("ackIndex", 2**31 - 1),
        )
        ack = conc.ack_result(status, context.ack_index, len(msgs))
        if ack is None:
            return {"ack": None, "cachedOffsets": list(self.pq.cached_offsets)}
        out: dict[str, Any] = {"ack": _client.value_json(ack)}
        if self.consumer.message_model is MessageModel.BROADCASTING:
            plan = conc.broadcasting_result(msgs, ack.failed)
        else:
            sends = []
            for i in ack.failed:
                call = csb.service_send_back_call(msgs[i], context, self.namespace)
                back = csb.send_back_plan(
                    self.profile,
                    call.msg,
                    self.group,
                    call.delay_level,
                    call.broker_name,
                    self.consumer.max_reconsume_times,
                    self.namespace,
                )
                sends.append(
                    {
                        "call": {
                            "topic": call.msg.topic,
                            "delayLevel": call.delay_level,
                            "brokerName": call.broker_name,
                        },
                        "header": _client.value_json(back.header),
                        "fallback": client_message_json(back.fallback.message),
                        "topicAfter": back.topic_after,
                    }
                )
            out["sendBacks"] = sends
            plan = conc.clustering_result(msgs, ack.failed, args.req("sendBackOk"))
        offset = self.pq.remove_messages(list(plan.remove))
        update = conc.offset_after_remove(offset, args.bool("dropped", False))
        out.update(
            removed=[m.queue_offset for m in plan.remove],
            retryLater=[
                {"queueOffset": m.queue_offset, "reconsumeTimes": m.reconsume_times}
                for m in plan.retry_later
            ],
            offsetUpdate=None
            if update is None
            else {"offset": update.offset, "increaseOnly": update.increase_only},
            cachedOffsets=list(self.pq.cached_offsets),
        )
        return out

    def op_reset_retry(self, args: _client.Args) -> dict[str, Any]:
        """resetRetryAndNamespace (CONC-12)."""
        msgs = [_client.message(m) for m in args.req("msgs")]
        batch = conc.reset_retry_and_namespace(msgs, self.group, self.namespace)
        return {"topics": [m.topic for m in batch]}

    def op_update_core_pool_size(self, args: _client.Args) -> dict[str, Any]:
        """updateCorePoolSize (CONC-1)."""
        self.core_pool_size = life.core_pool_size_after_update(
            self.core_pool_size, args.int("n"), self.consumer.consume_thread_max
        )
        return {"corePoolSize": self.core_pool_size}

    def op_clean_expire_schedule(self, args: _client.Args) -> dict[str, Any]:
        """The consume-timeout cleaner's schedule (CONC-13; none in orderly mode, ORDER-18)."""
        if not life.has_consume_timeout_cleaner(self.consumer.consume_mode):
            return {"schedule": None}
        task = (
            life.clean_expire_schedule_v47
            if self.profile is Profile.V4_7
            else life.clean_expire_schedule_v49
        )(self.consumer.consume_timeout)
        return {"schedule": _client.value_json(task)}

    def op_shutdown(self, args: _client.Args) -> dict[str, Any]:
        """shutdown's order (CONC-14)."""
        return {"steps": [s.value for s in life.concurrent_shutdown_steps()]}
