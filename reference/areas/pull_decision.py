"""The reference driver of area `pull_decision` (vocabulary: conformance.adapters.pull_decision, docs/protocol.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.offset_store import ReferenceRemoteOffsetStore
from pullspec.reference.push_consumer import ServiceState
from pullspec.spec import consumer_config as cc
from pullspec.spec import pull_actions
from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.filter import build_subscription_data
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_decision"
#: The `firstLockOffset` whose broker query fails.
FAILS = "fails"
#: The broker the request's pulls go to.
_BROKER_ADDR = "127.0.0.1:10911"
#: lastPullTimestamp before an attempt, so that FLOW-2's touch shows.
_UNTOUCHED = -1


class Driver(_client.DriverBase):
    """One PullRequest of a running ReferencePushConsumer; each `attempt` is its pullMessage."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.rig = _wiring.PushConsumerRig(
            _client.consumer_config(config), profile, classes=self.classes
        )
        # The broker of the request's queue is known, so a pull that passes the checks is sent.
        self.rig.remoting.addrs[_wiring.QUEUE.broker_name] = BrokerAddrs([(0, _BROKER_ADDR)])
        self.rig.request.next_offset = int(config.get("nextOffset", 0))
        start = config.get("counters") or {}
        self.rig.consumer.counters = pull_actions.FlowControlCounters(
            start.get("queueFlowControlTimes", 0), start.get("queueMaxSpanFlowControlTimes", 0)
        )
        # The rebalance's computePullFromWhere(WithException) when the broker query fails: the
        # offset store holds nothing and the max-offset query throws (REBAL-17).
        self.failing = self.classes.rebalance(
            self.rig.scheduler,
            group=_wiring.GROUP,
            client_id="c",
            config=self.rig.consumer.config,
            profile=profile,
            lock_client=_wiring.ScriptedLocks(),
            offset_store=ReferenceRemoteOffsetStore(_wiring.OffsetBroker()),
            admin=_wiring.ScriptedAdmin(None, None),
            route=lambda _topic: None,
            consumer_ids=lambda _topic, _group: None,
        )

    def _state(self) -> dict[str, Any]:
        counters = self.rig.consumer.counters
        return {
            "nextOffset": self.rig.request.next_offset,
            "previouslyLocked": self.rig.request.previously_locked,
            "counters": {
                "queueFlowControlTimes": counters.queue_flow_control_times,
                "queueMaxSpanFlowControlTimes": counters.queue_max_span_flow_control_times,
            },
        }

    def _compute(self, first_lock: object) -> Callable[[MessageQueue], int]:
        if first_lock is None:

            def unscripted(mq: MessageQueue) -> int:
                raise InvalidArgumentError("firstLockOffset", None, "the op gives none")

            return unscripted
        if first_lock == FAILS:
            return self.failing.compute_pull_from_where
        return lambda _mq: int(first_lock)  # type: ignore[call-overload]

    def op_attempt(self, args: _client.Args) -> dict[str, Any]:
        """One pullMessage of the request (PULLQ-9) and whether it keeps circulating."""
        rig = self.rig
        # A fresh pull service per attempt: `circulates` is about this attempt only.
        rig.pull_service = rig.consumer.pull_service = self.classes.pull_service(rig.scheduler)
        rig.remoting.pulls.clear()
        if args.bool("serviceStopped", False):
            rig.pull_service.shutdown()
        rig.pq.read(args.get("processQueue") or {})
        rig.pq.last_pull_timestamp = _UNTOUCHED
        cs = args.get("consumer") or {}
        rig.consumer.service_state = (
            ServiceState.RUNNING if cs.get("running", True) else ServiceState.CREATE_JUST
        )
        rig.consumer.paused = bool(cs.get("paused", False))
        rig.hooks.subscriptions.clear()
        if cs.get("hasSubscription", True):
            sub = build_subscription_data(_wiring.QUEUE.topic, "*")
            rig.hooks.subscriptions[_wiring.QUEUE.topic] = sub
        rig.hooks.compute = self._compute(args.get("firstLockOffset"))
        before = len(rig.consumer.attempts)
        rig.consumer.pull_message(rig.request)
        attempt = rig.consumer.attempts[before]
        decision = attempt.decision
        assert decision is not None
        log = decision.flow_control_log
        correction = decision.first_lock_correction
        return {
            "action": _client.action_json(attempt.action),
            "touchLastPullTimestamp": rig.pq.last_pull_timestamp != _UNTOUCHED,
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
            "circulates": rig.circulating(),
            **self._state(),
        }

    def op_queue_changed(self, args: _client.Args) -> dict[str, Any]:
        """messageQueueChanged's threshold rewrite (FLOW-14); later attempts see the result."""
        consumer = self.rig.consumer
        count, size = cc.rewrite_queue_thresholds(consumer.config, args.int("processQueueCount"))
        consumer.config = consumer.config.with_queue_thresholds(count, size)
        return {"pullThresholdForQueue": count, "pullThresholdSizeForQueue": size}

    def op_check_config(self, args: _client.Args) -> dict[str, Any]:
        """checkConfig's range check of one numeric setting (FLOW-15)."""
        setting = str(args.req("setting"))
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in setting)
        return {"accepted": cc.in_checked_range(snake, args.int("value"))}
