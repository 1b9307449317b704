"""Adapter for area `rebalance`: RebalanceImpl's ProcessQueue table of one push consumer.

config: `consumeMode`, `messageModel`, `pullThresholdForTopic`, `pullThresholdSizeForTopic`
(and the per-queue thresholds), `consumePassively` (push consumer: true). The table maps queues
to what rebalance reads of their ProcessQueue: `dropped`, `locked`, `pullExpired`,
`consumeLockFree` (the orderly consume lock can be taken within 1000 ms), `hasTempMessage`, and
`tryUnlockTimes`.

`removed`, `kept` and `pullRequests` are sets: RocketMQ walks the processQueueTable (a
ConcurrentHashMap) for the first two and the assigned queues (a HashSet) for the third, so
their order is not part of the behaviour; they are written in MessageQueue order (topic,
brokerName, queueId — MessageQueue.compareTo), as are `added` and `skipped`.

| op | args | expect |
|---|---|---|
| `update_table` | `topic`, `mqSet`, `now`, `lockRefused` (queues the broker refuses to lock, default none), `offsets` ([{`mq`, `offset`}], computePullFromWhere's answer per new queue, null = it threw; default 0) | `removed` [{`mq`, `reason`, `unlockDelayMs`}], `kept` [{`mq`, `reason`}], `added` / `skipped` [{`mq`, `outcome`, `pullRequestOffset`}], `pullRequests` [{`mq`, `nextOffset`}] (dispatched), `changed`, `queueChanged` ({`subVersion`, `queueThresholds`} or null), `table` |
| `set_queue` | `mq` and any view field | `table` |
| `remove_process_queue` | `mq` | `steps`, `table` |
| `lock` | `mq`, `granted` (the broker's answer; null: no master or an exception) | `result`, `table` |
| `lock_all` | `requested`, `granted` | `table` |
| `unlock` | `all`, `requested`, `raised` | `table` |
| `lease_timeline` | `lastLock` | `renewAt`, `clientExpiredFrom`, `brokerExpiredFrom` |
| `destroy` | – | `dropped`, `table` |
| `compute_pull_from_where` | `consumeFromWhere`, `mq`, `lastOffset`, `maxOffset`, `searchOffset` (null: the query throws), `consumeTimestamp` (null: RocketMQ's default), `constructionMs` | `offset` or `exception`; `consumeTimestamp` used |
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pullspec.conformance.adapters import _client
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "rebalance"


def create(candidate: Any, config: dict[str, Any], profile: Profile, base: Path) -> Any:
    """A fresh driver of the candidate's (`candidate.rebalance(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: Any, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run one step."""
    observation: dict[str, Any] = instance.apply(op, args)
    return observation
