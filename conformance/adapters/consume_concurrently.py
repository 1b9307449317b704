"""Adapter for area `consume_concurrently`: ConsumeMessageConcurrentlyService.

One case is one service of a consumer group over one ProcessQueue (topic `T`, broker `b`,
queue 0) on a virtual clock at 0. config: `consumerGroup` (default `G`), `messageModel`,
`consumeMode`, `consumeThreadMin`, `consumeThreadMax`, `consumeTimeout` (minutes),
`maxReconsumeTimes`, `namespace`.

| op | args | expect |
|---|---|---|
| `put_messages` | `msgs` | `cachedOffsets` |
| `submit` | `offsets` (the pulled list, by queue offset of cached messages), `batchMaxSize`, `rejectedAt` (index of the first request the pool rejects, or null) | `requests` (offset lists), `later` |
| `resubmit` | `kind` (SEND_BACK_FAILED, REJECTED) | `delayMs`, `resplit` |
| `run_request` | `droppedOnEntry`, `hasHook`, `droppedAfterListener` | `steps` |
| `listener_returned` | `status` (null: returned null or threw), `exception`, `consumeRtMs` | `status`, `returnType` |
| `process_result` | `offsets`, `status`, `ackIndex`, `sendBackOk` (one per failed message), `delayLevelWhenNextConsume`, `dropped` | `ack` ({`ackIndex`, `okTps`, `failedTps`, `failed`} or null), `sendBacks` (per failed message in CLUSTERING: `call` and `plan`), `removed`, `retryLater` ([{`queueOffset`, `reconsumeTimes`}]), `offsetUpdate`, `cachedOffsets`; or `error` (ackIndex below −1) |
| `reset_retry` | `msgs` (with `topic`, `properties`) | `topics` |
| `update_core_pool_size` | `n` | `corePoolSize` |
| `clean_expire_schedule` | – | `schedule` ({`initialDelayMs`, `periodMs`, `survivesException`}; null for an orderly consumer) |
| `shutdown` | – | `steps` |
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pullspec.conformance.adapters import _client
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "consume_concurrently"


def create(candidate: Any, config: dict[str, Any], profile: Profile, base: Path) -> Any:
    """A fresh driver of the candidate's (`candidate.consume_concurrently(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: Any, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run one step."""
    observation: dict[str, Any] = instance.apply(op, args)
    return observation
