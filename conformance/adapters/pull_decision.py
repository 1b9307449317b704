"""Adapter for area `pull_decision`: the pre-pull checks of DefaultMQPushConsumerImpl.pullMessage.

One case is one PullRequest of one consumer: the cursor (`nextOffset`), the first-lock flag and
the consumer's two flow-control log counters live across steps, as they do in RocketMQ.

config: the consumer's settings by their DefaultMQPushConsumer names (`consumeMode`,
`messageModel`, `pullThresholdForQueue`, `pullThresholdSizeForQueue`, `pullThresholdForTopic`,
`pullThresholdSizeForTopic`, `consumeConcurrentlyMaxSpan`, `pullTimeDelayMillsWhenException`,
`consumeFromWhere`: which broker query a failing first-lock computation makes),
plus `nextOffset` (the request's starting cursor, default 0) and `counters` (the consumer's
flow-control log counters so far, {`queueFlowControlTimes`, `queueMaxSpanFlowControlTimes`}).

| op | args | expect |
|---|---|---|
| `attempt` | `processQueue` {`dropped`, `msgCount`, `msgSize`, `maxSpan`, `locked`, `msgTreeEmpty`}, `consumer` {`running`, `paused`, `hasSubscription`}, `firstLockOffset` (what computePullFromWhere answers, or `"fails"`: its max-offset query to the broker throws MQClientException, which 4.7's computePullFromWhere turns into −1 and 4.9's computePullFromWhereWithException rethrows), `serviceStopped` | `action` {`kind` PULL/DELAY/DROP, `requestOffset` or `delayMs` + `reason`}, `nextOffset`, `previouslyLocked`, `touchLastPullTimestamp`, `counters`, `flowControlLog`, `firstLockCorrection`, `circulates` |
| `queue_changed` | `processQueueCount` | the per-queue thresholds after FLOW-14's rewrite (later attempts use them) |
| `check_config` | `setting` (camelCase), `value` | `accepted` |
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_decision"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.pull_decision(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
