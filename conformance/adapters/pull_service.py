"""Adapter for area `pull_service`: PullMessageService — the pull queue, its one thread and timer.

One case is one client instance's pull service on a virtual clock starting at 0. PullRequests
are named by `group` and `queueId` (topic `T`, broker `b`) and carry `nextOffset`; a registered
consumer records every request handed to its pullMessage, and one registered with
`raises: true` throws from pullMessage after recording it.

| op | args | expect |
|---|---|---|
| `register_consumer` | `group`, `raises` | `registered` (false when the group already has one) |
| `unregister_consumer` | `group` | the state |
| `start` | – | the state |
| `execute_immediately` | `group`, `queueId`, `nextOffset` | the state |
| `execute_later` | `group`, `queueId`, `nextOffset`, `delayMs` | the state |
| `execute_task_later` | `name`, `delayMs` | the state |
| `shutdown` | – | the state |
| `advance` | `ms` | `dispatched` [{`at`, `group`, `queueId`, `nextOffset`}], `tasksRun` [{`at`, `name`}], the state |
| `same_request` | `a`, `b` (each {`group`, `queueId`, `nextOffset`}) | `equal` (PullRequest.equals) |
| `thread_start_times` | `arrivals`, `durations` | `startTimes` |

The state after every op: `now`, `queued` (head first), `pendingTimers`, `stopped`.
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_service"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.pull_service(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
