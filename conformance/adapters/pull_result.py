"""Adapter for area `pull_result`: the push consumer's PullCallback and processPullResponse.

config: the consumer's settings (`messageModel`, `pullInterval`,
`pullTimeDelayMillsWhenException`). Messages are written as in every client area:
{`queueOffset`, `tags`, `reconsumeTimes`, `properties`} (topic `T`, queue 0 by default).

| op | args | expect |
|---|---|---|
| `on_success` | `result` (null, or {`pullStatus`, `nextBeginOffset`, `minOffset`, `maxOffset`, `suggestWhichBrokerId`, `msgs`}), `prevRequestOffset`, `subscription` {`expression`, …}, `msgCount` (the process queue's cached count), `dropped` (the process queue was dropped in flight) | `nextOffset`, `messages` (put and submitted, stamped), `putDespiteDrop`, `correctTagsOffset`, `offsetUpdate`, `reenqueue`, `dropProcessQueue`, `fixUp` (with `reachesStorage`), `bugWarning`, `pullFromWhichNode` |
| `on_success_throws` | `reenqueuedBeforeThrow` | `copies` (PullRequests circulating afterwards) |
| `on_exception` | `error` {`kind` (Java exception), `code` for MQBrokerException}, `topic` | `reenqueue`, `logWarning` |
| `response` | `code` (the response code number) | `pullStatus`, or `exception` MQBrokerException with `code` |
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_result"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.pull_result(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
