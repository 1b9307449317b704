"""Adapter for area `process_queue_maintenance`: the ProcessQueue operations other components run
on it — cleanExpiredMsg, clear, setDropped, incTryUnlockTimes — and its interrupted-lock
fallbacks. The recorded `process_queue` area covers the consumer's own put/take/remove calls.

One case is one ProcessQueue (topic `T`, queue 0) on a virtual clock starting at
`config.clockStart` (default 0). Messages may carry `consumeStartTime` (the CONSUME_START_TIME
property the concurrent service stamps).

| op | args | expect |
|---|---|---|
| `put_messages` | `msgs` ({`queueOffset`, `bodySize`, `consumeStartTime`}) | the state |
| `advance_clock` | `ms` | the state |
| `clean_expired_msg` | `consumeTimeout` (minutes), `consumeOrderly`, `sendBackFails` (offsets whose send-back throws) | `sentBack` ([{`queueOffset`, `delayLevel`}] in order), the state; or `error` (NumberFormatException: a head without the property, 4.7) |
| `clear` | – | the state |
| `set_dropped` | `dropped` | the state |
| `inc_try_unlock_times` | – | the state |
| `interrupted` | `method` (putMessage, removeMessage, takeMessages, commit, getMaxSpan, hasTempMessage, …) | `result` (the fallback; null for a void method) |

The state: `now`, `msgCount`, `msgSize`, `queueOffsetMax`, `cachedOffsets`, `dropped`,
`tryUnlockTimes`.
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "process_queue_maintenance"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.process_queue_maintenance(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
