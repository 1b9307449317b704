"""Adapter for area `allocate`: queue allocation and the rebalance schedule (RebalanceImpl,
AllocateMessageQueueAveragely / AveragelyByCircle, RebalanceService, ClientConfig).

Queues are {`topic`, `brokerName`, `queueId`}; strategies are named `AVG` and `AVG_BY_CIRCLE`.

| op | args | expect |
|---|---|---|
| `allocate` | `strategy`, `consumerGroup`, `currentCid`, `mqAll`, `cidAll` (as given, not sorted) | `result` (in the strategy's order) or `error` (IllegalArgumentException) |
| `rebalance_by_topic` | `messageModel`, `strategy`, `consumerGroup`, `currentCid`, `mqSet` (null: route unknown), `cidAll` (null: list unknown) | `allocated` (sorted; null: the table is left alone) |
| `rebalance_topics` | `paused`, `subscribedTopics`, `tableMqs` | `topics` (rebalanced in order), `truncated` (queues of unsubscribed topics) |
| `next_rebalance_at` | `lastRunEnd`, `wokenAt` (null: not woken) | `at` |
| `client_id` | `clientIp`, `instanceName`, `unitName`, `messageModel`, `pid`, `nanoTime`, `enableStream` | `clientId` |
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "allocate"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.allocate(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
