"""Adapter for area `pull_request`: what a push consumer sends once the pre-pull checks pass.

config: the consumer's settings (`messageModel`, `postSubscriptionWhenPull`, `pullBatchSize`,
`pullTimeDelayMillsWhenException`) and `consumerGroup` (default `G`).

| op | args | expect |
|---|---|---|
| `pull` | `mq`, `nextOffset`, `now`, `subscription` (FLOW-13's {`expression`, `expressionType`, `classFilterMode`, `subVersion`}), `lookupSubscription` (the second lookup; absent = the same, null = none), `memoryOffset` (readOffset READ_FROM_MEMORY), `brokerAddrs` ([[brokerId, addr], …]: BrokerData.brokerAddrs, put in this order into a HashMap<Long, String>, which iterates in its own bucket order — for small ids ascending, id 0 first — whatever the order listed), `pullFromWhichNode`, `onlyThisBroker`, `brokerVersion`, `filterServers`, `randomNum` | `beginTimestamp`, `brokerAddr`, `slave`, `header` {`consumerGroup`, `topic`, `queueId`, `queueOffset`, `maxMsgNums`, `sysFlag`, `commitOffset`, `suspendTimeoutMillis`, `subscription`, `subVersion`, `expressionType`, `bname`}, `targetAddr`; when pullKernelImpl throws: `exception` and the re-enqueue `action` |
| `build_sys_flag` | `commitOffset`, `suspend`, `subscription`, `classFilter`, `litePull`, `slave` | `sysFlag`, `sysFlagForBroker` |
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_request"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.pull_request(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
