"""The reference driver of area `pull_decision` (vocabulary: conformance.adapters.pull_decision, docs/protocol.md)."""

from __future__ import annotations

from typing import Any

from pullspec.reference.areas import _vocab as _client
from pullspec.spec import consumer_config as cc
from pullspec.spec import offset_store as spec_os
from pullspec.spec import pull_actions, pull_decision, pull_from_where
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_decision"
#: The `firstLockOffset` whose broker query fails.
FAILS = "fails"
#: The request's queue (the first-lock query is about it; its name plays no part).
_QUEUE = MessageQueue("T", "b", 0)


class _FailingQueries:
    """MQAdminImpl's offset queries when the broker cannot answer (MQClientException)."""

    def max_offset(self, mq: MessageQueue) -> int:
        raise MQClientError(f"maxOffset of {mq} failed")

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        raise MQClientError(f"searchOffset of {mq} failed")


class Driver(_client.DriverBase):
    """The reference driver: `spec.pull_decision.decide_pull` over the case's request state."""

    area = AREA

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)
        self.next_offset = int(config.get("nextOffset", 0))
        self.previously_locked = False
        start = config.get("counters") or {}
        self.counters = pull_actions.FlowControlCounters(
            start.get("queueFlowControlTimes", 0), start.get("queueMaxSpanFlowControlTimes", 0)
        )

    def _state(self) -> dict[str, Any]:
        return {
            "nextOffset": self.next_offset,
            "previouslyLocked": self.previously_locked,
            "counters": {
                "queueFlowControlTimes": self.counters.queue_flow_control_times,
                "queueMaxSpanFlowControlTimes": self.counters.queue_max_span_flow_control_times,
            },
        }

    def op_attempt(self, args: _client.Args) -> dict[str, Any]:
        """One pullMessage attempt (PULLQ-9) and whether the request keeps circulating."""
        pq = args.get("processQueue") or {}
        snapshot = pull_decision.ProcessQueueSnapshot(
            dropped=pq.get("dropped", False),
            msg_count=pq.get("msgCount", 0),
            msg_size=pq.get("msgSize", 0),
            max_span=pq.get("maxSpan", 0),
            locked=pq.get("locked", False),
            msg_tree_empty=pq.get("msgTreeEmpty", False),
        )
        cs = args.get("consumer") or {}
        consumer = pull_decision.ConsumerState(
            running=cs.get("running", True),
            paused=cs.get("paused", False),
            has_subscription=cs.get("hasSubscription", True),
        )
        first_lock = args.get("firstLockOffset")

        def compute() -> int:
            if first_lock != FAILS:
                return int(first_lock)
            # Nothing stored and the broker's max-offset query throws: computePullFromWhere as
            # the profile's pullMessage calls it (REBAL-17; 4.7 answers -1, 4.9 rethrows).
            return pull_from_where.compute_pull_from_where_for(
                self.profile,
                self.consumer.consume_from_where,
                _QUEUE,
                spec_os.OFFSET_NONE,
                _FailingQueries(),
                0,
            )

        decision = pull_decision.decide_pull(
            snapshot,
            consumer,
            self.next_offset,
            self.previously_locked,
            self.consumer,
            self.profile,
            self.counters,
            compute if first_lock is not None else None,
        )
        self.next_offset = decision.next_offset
        self.previously_locked = decision.previously_locked
        self.counters = decision.counters
        log = decision.flow_control_log
        correction = decision.first_lock_correction
        stopped = args.bool("serviceStopped", False)
        return {
            "action": _client.action_json(decision.action),
            "touchLastPullTimestamp": decision.touch_last_pull_timestamp,
            "flowControlLog": None
            if log is None
            else {
                "reason": log.reason.value,
                "flowControlTimes": log.flow_control_times,
                "suppressed": log.suppressed,
            },
            "firstLockCorrection": None
            if correction is None
            else {"offset": correction.offset, "brokerBusy": correction.broker_busy},
            "circulates": pull_actions.keeps_circulating(decision.action, stopped),
            **self._state(),
        }

    def op_queue_changed(self, args: _client.Args) -> dict[str, Any]:
        """messageQueueChanged's threshold rewrite (FLOW-14); later attempts see the result."""
        count, size = cc.rewrite_queue_thresholds(self.consumer, args.int("processQueueCount"))
        self.consumer = self.consumer.with_queue_thresholds(count, size)
        return {"pullThresholdForQueue": count, "pullThresholdSizeForQueue": size}

    def op_check_config(self, args: _client.Args) -> dict[str, Any]:
        """checkConfig's range check of one numeric setting (FLOW-15)."""
        setting = str(args.req("setting"))
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in setting)
        return {"accepted": cc.in_checked_range(snake, args.int("value"))}
