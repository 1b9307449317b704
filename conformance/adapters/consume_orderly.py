"""Adapter for area `consume_orderly`: ConsumeMessageOrderlyService over one ProcessQueue.

One case is the orderly service of a consumer group with one ProcessQueue (topic `T`, broker
`b`, queue 0) on a virtual clock at 0: `loop_step` runs one iteration of ConsumeRequest.run
(taking messages), and `listener` hands the taken batch to the listener and processes the
result. config: `consumerGroup`, `messageModel`, `consumeMessageBatchMaxSize`,
`maxReconsumeTimes`, `suspendCurrentQueueTimeMillis`, `consumeTimeout` (minutes).

| op | args | expect |
|---|---|---|
| `put_messages` | `msgs` | `dispatchToConsume`, `submitsConsumeRequest`, `cachedOffsets` |
| `gate` | `queueId`, `droppedOnEntry`, `locked`, `lockExpired`, `droppedInMonitor` | `gate`, `monitor` (the queue's lock object, numbered in first-use order) |
| `loop_step` | `dropped`, `locked`, `lockExpired`, `now`, `beginTime` | `exit`, `take`, `tryLockLaterMs`, `submitLaterMs`, `taken`, `consuming`, `stampsConsumeStartTime` |
| `listener` | `droppedUnderConsumeLock`, `status` (null: null or threw), `exception`, `consumeRtMs`, `autoCommit`, `suspendMs` (what the listener sets in its context), `sendBackOk` (per taken message at the maximum), `dropped` | `context`, `status`, `returnType`, `plan`, `deadLetters`, `submitLaterMs`, `commitOffset`, `offsetUpdate`, `reconsumeTimes`, `cachedOffsets`, `consumingOffsets` |
| `try_lock_later` | `stopped`, `lockOk` | `resubmitMs` |
| `lock_schedule` | – | `schedule` (null in BROADCASTING) |
| `shutdown` | – | `steps` |
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "consume_orderly"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.consume_orderly(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
