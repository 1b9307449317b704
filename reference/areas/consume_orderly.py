"""The reference driver of area `consume_orderly` (vocabulary: conformance.adapters.consume_orderly, docs/protocol.md)."""

from __future__ import annotations

from typing import Any

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas.consume_concurrently import client_message_json
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.spec import client_send_back as csb
from pullspec.spec import consume_lifecycle as life
from pullspec.spec import consume_orderly as order
from pullspec.spec.clock import ManualClock
from pullspec.spec.consume_types import ConsumeOrderlyStatus
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "consume_orderly"
#: The one queue of the case's ProcessQueue.
QUEUE = MessageQueue("T", "b", 0)


class Driver(_client.DriverBase):
    """The reference driver: spec.consume_orderly over a reference ProcessQueue."""

    area = AREA

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)
        self.group = str(config.get("consumerGroup", "G"))
        self.clock = ManualClock(0)
        self.pq = ReferenceProcessQueue(self.clock, profile)
        self.monitors: dict[MessageQueue, int] = {}
        self.taken: list[StoredMessage] = []

    def _queues(self) -> dict[str, Any]:
        return {
            "cachedOffsets": list(self.pq.cached_offsets),
            "consumingOffsets": list(self.pq.consuming_offsets),
        }

    def op_put_messages(self, args: _client.Args) -> dict[str, Any]:
        """putMessage and whether the pull callback submits a ConsumeRequest (ORDER-3)."""
        dispatch = self.pq.put_messages([_client.message(m) for m in args.req("msgs")])
        return {
            "dispatchToConsume": dispatch,
            "submitsConsumeRequest": order.submits_consume_request(dispatch),
            **self._queues(),
        }

    def op_gate(self, args: _client.Args) -> dict[str, Any]:
        """ConsumeRequest.run's entry (ORDER-2, ORDER-4)."""
        self.monitors, monitor = order.fetch_lock_object(
            self.monitors, MessageQueue("T", "b", args.int("queueId", 0))
        )
        gate = order.run_gate(
            args.bool("droppedOnEntry", False),
            self.consumer.message_model,
            args.bool("locked"),
            args.bool("lockExpired", False),
            args.bool("droppedInMonitor", False),
        )
        return {"gate": gate.value, "monitor": monitor}

    def op_loop_step(self, args: _client.Args) -> dict[str, Any]:
        """One loop iteration (ORDER-5, ORDER-6, ORDER-16)."""
        batch, stamps = order.take_size(self.consumer.consume_message_batch_max_size)
        self.clock.jump_to(args.int("now", self.clock.now_ms()))
        step = order.loop_step(
            args.bool("dropped", False),
            self.consumer.message_model,
            args.bool("locked", True),
            args.bool("lockExpired", False),
            self.clock.now_ms(),
            args.int("beginTime", self.clock.now_ms()),
            len(self.pq.cached_offsets),
            batch,
        )
        if step.exit is None or step.exit is order.LoopExit.EMPTY_TAKE:
            # An empty take is what clears the consuming flag (PQ-8).
            self.taken = self.pq.take_messages(batch)
        consuming = self.pq.consuming
        if step.exit is not None:
            consuming = order.consuming_after_exit(consuming, step.exit)
        return {
            "exit": None if step.exit is None else step.exit.value,
            "take": step.take,
            "tryLockLaterMs": step.try_lock_later_ms,
            "submitLaterMs": step.submit_later_ms,
            "taken": [m.queue_offset for m in self.taken] if step.exit is None else [],
            "consuming": consuming,
            "stampsConsumeStartTime": stamps,
            **self._queues(),
        }

    def op_listener(self, args: _client.Args) -> dict[str, Any]:
        """The listener call and processConsumeResult (ORDER-7 … ORDER-15)."""
        context = order.listener_context(QUEUE, args.bool("droppedUnderConsumeLock", False))
        if context is None:
            return {
                "context": None,
                "exit": order.LoopExit.DROPPED_UNDER_CONSUME_LOCK.value,
                **self._queues(),
            }
        context.auto_commit = args.bool("autoCommit", context.auto_commit)
        context.suspend_current_queue_time_millis = args.int(
            "suspendMs", context.suspend_current_queue_time_millis
        )
        raw = args.get("status")
        status, kind = order.normalise_orderly_status(
            None if raw is None else _client.enum_of(ConsumeOrderlyStatus, raw),
            args.bool("exception", False),
            args.int("consumeRtMs", 0),
            self.consumer.consume_timeout,
        )
        msgs: tuple[StoredMessage, ...] = tuple(self.taken)
        maximum = csb.max_reconsume_times_orderly(self.consumer.max_reconsume_times)
        suspends, dead = False, []
        if status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            at_max = [m for m in msgs if order.reaches_dead_letter(m, maximum)]
            dead = [
                client_message_json(
                    csb.orderly_dead_letter_message(
                        self.profile, m, self.group, self.consumer.max_reconsume_times
                    ).message
                )
                for m in at_max
            ]
            ok = list(args.get("sendBackOk", []))
            oks = [ok.pop(0) if order.reaches_dead_letter(m, maximum) else True for m in msgs]
            suspends, msgs = order.check_reconsume_times(msgs, maximum, oks)
        decide = (
            order.process_result_auto_commit
            if context.auto_commit
            else order.process_result_manual_commit
        )
        plan = decide(status, len(msgs), context.suspend_current_queue_time_millis, suspends)
        commit_offset = None
        if plan.action is order.ResultAction.COMMIT:
            commit_offset = self.pq.commit()
        elif plan.action is order.ResultAction.ROLLBACK:
            self.pq.rollback()
        elif plan.action is order.ResultAction.CONSUME_AGAIN:
            self.pq.make_messages_to_consume_again(list(msgs))
        update = (
            None
            if commit_offset is None
            else order.orderly_offset_update(commit_offset, args.bool("dropped", False))
        )
        later = plan.submit_later_ms
        return {
            "context": {
                "autoCommit": context.auto_commit,
                "suspendMs": context.suspend_current_queue_time_millis,
            },
            "status": status.value,
            "returnType": kind.value,
            "plan": {
                "action": plan.action.value,
                "continueConsume": plan.continue_consume,
                "okTps": plan.ok_tps,
                "failedTps": plan.failed_tps,
            },
            "deadLetters": dead,
            "submitLaterMs": None
            if later is None
            else order.suspend_delay(later, self.consumer.suspend_current_queue_time_millis),
            "commitOffset": commit_offset,
            "offsetUpdate": None
            if update is None
            else {"offset": update.offset, "increaseOnly": update.increase_only},
            "reconsumeTimes": [m.reconsume_times for m in msgs],
            **self._queues(),
        }

    def op_try_lock_later(self, args: _client.Args) -> dict[str, Any]:
        """tryLockLaterAndReconsume's resubmission delay (ORDER-13)."""
        return {
            "resubmitMs": order.resubmit_after_try_lock(args.bool("stopped"), args.bool("lockOk"))
        }

    def op_lock_schedule(self, args: _client.Args) -> dict[str, Any]:
        """The periodic lockAll of the orderly service (ORDER-1)."""
        fn = life.lock_schedule_v47 if self.profile is Profile.V4_7 else life.lock_schedule_v49
        task = fn(self.consumer.message_model)
        return {"schedule": None if task is None else _client.value_json(task)}

    def op_shutdown(self, args: _client.Args) -> dict[str, Any]:
        """shutdown's order (ORDER-17)."""
        steps = life.orderly_shutdown_steps(self.consumer.message_model)
        return {"steps": [s.value for s in steps]}
