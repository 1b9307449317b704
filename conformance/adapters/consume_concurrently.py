"""Adapter for area `consume_concurrently`: ConsumeMessageConcurrentlyService.

One case is one service of a consumer group over one ProcessQueue (topic `T`, broker `b`,
queue 0) on a virtual clock at 0. config: `consumerGroup` (default `G`), `messageModel`,
`consumeMode`, `consumeThreadMin`, `consumeThreadMax`, `consumeTimeout` (minutes),
`maxReconsumeTimes`, `namespace`, `consumeMessageBatchMaxSize`.

The service's neighbours: its listener consumes every message successfully; its
CONSUMER_SEND_MSG_BACK RPC always fails, so every send-back builds and sends the fallback retry
message, which succeeds unless `sendBackOk` says otherwise; its process-queue table is the case's
one queue. Submitted requests and every scheduled task run only when the clock advances
(`advance_clock`).

| op | args | expect |
|---|---|---|
| `put_messages` | `msgs` (each may carry `consumeStartTime`: the CONSUME_START_TIME a consume thread stamped) | `cachedOffsets` |
| `submit` | `offsets` (the pulled list, by queue offset of cached messages), `batchMaxSize`, `rejectedAt` (index of the first request the pool rejects, or null) | `requests` (offset lists), `later` (the rejected request with the rest, resubmitted 5 s later) |
| `resubmit` | `kind` (SEND_BACK_FAILED, REJECTED) | `delayMs`, `resplit` |
| `run_request` | `droppedOnEntry`, `hasHook`, `droppedAfterListener` | `steps` |
| `listener_returned` | `status` (null: returned null or threw), `exception`, `consumeRtMs` | `status`, `returnType` |
| `process_result` | `offsets`, `status`, `ackIndex`, `sendBackOk` (one per failed message), `delayLevelWhenNextConsume`, `dropped` | `ack` ({`ackIndex`, `okTps`, `failedTps`, `failed`} or null), `sendBacks` (per failed message in CLUSTERING: `call` and `plan`), `removed`, `retryLater` ([{`queueOffset`, `reconsumeTimes`}]), `offsetUpdate`, `cachedOffsets`; or `error` (ackIndex below −1) |
| `reset_retry` | `msgs` (with `topic`, `properties`) | `topics` |
| `update_core_pool_size` | `n` | `corePoolSize` |
| `clean_expire_schedule` | – | `schedule` ({`initialDelayMs`, `periodMs`, `survivesException`}; null for an orderly consumer) |
| `shutdown` | – | `steps` |
| `start` | – | `scheduled` [{`task`, `dueAt`}] (`cleanExpireMsg`, `consumeRequest`, `submitConsumeRequestLater`), `cachedOffsets` |
| `advance_clock` | `ms` | `now`, `sentBack` [{`queueOffset`, `delayLevel`}] (the cleaner's send-backs, PQ-18), `scheduled`, `cachedOffsets` |

Example (CONC-13, PQ-18): with `consumeTimeout` 15 a started service has `cleanExpireMsg` due at
900 000 ms and every 15 minutes after; a message put with `consumeStartTime` 0 is sent back with
delay level 3 and uncached by the sweep at 1 800 000 ms (the first sweep, at exactly 15 minutes,
finds it not yet expired).
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "consume_concurrently"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.consume_concurrently(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
