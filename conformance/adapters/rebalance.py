"""Adapter for area `rebalance`: RebalanceImpl's ProcessQueue table of one push consumer.

config: `consumeMode`, `messageModel`, `pullThresholdForTopic`, `pullThresholdSizeForTopic`
(and the per-queue thresholds), `consumePassively` (push consumer: true). The table maps queues
to what rebalance reads of their ProcessQueue: `dropped`, `locked`, `pullExpired`,
`consumeLockFree` (the orderly consume lock can be taken within 1000 ms), `hasTempMessage`, and
`tryUnlockTimes`.

Nothing pulls in this area: a queue is pull-expired only when `set_queue` marks it so. The
offset store is the remote one; the broker's stored offsets are observed (`persisted`).
computePullFromWhere answers what `offsets` says for a queue it lists (null: it throws) and
otherwise reads the store (CONSUME_FROM_LAST_OFFSET over a broker whose queues are empty: the
stored offset, else 0). A lock RPC grants what the op says; in `update_table` every queue asked
but `lockRefused`.

`removed`, `kept` and `pullRequests` are sets: RocketMQ walks the processQueueTable (a
ConcurrentHashMap) for the first two and the assigned queues (a HashSet) for the third, so
their order is not part of the behaviour; they are written in MessageQueue order (topic,
brokerName, queueId — MessageQueue.compareTo), as are `added` and `skipped`.

| op | args | expect |
|---|---|---|
| `update_table` | `topic`, `mqSet`, `now` (the clock moves there first), `lockRefused` (queues the broker refuses to lock, default none), `offsets` ([{`mq`, `offset`}], computePullFromWhere's answer per new queue, null = it threw) | `removed` [{`mq`, `reason`, `unlockDelayMs`}], `kept` [{`mq`, `reason`}], `added` / `skipped` [{`mq`, `outcome`, `pullRequestOffset`}], `pullRequests` [{`mq`, `nextOffset`}] (dispatched), `changed`, `queueChanged` ({`subVersion`, `queueThresholds`, `sendHeartbeat`} or null), `table`, `locks`, `persisted` |
| `set_queue` | `mq` and any view field; `committedOffset` (the consumer's offset in memory) | `table`, `locks` |
| `remove_process_queue` | `mq` | `steps`, `table`, `locks`, `persisted` |
| `lock` | `mq`, `granted` (the broker's answer; null: no master or an exception), `now` | `result`, `table`, `locks` |
| `lock_all` | `requested` (the table's queues), `granted`, `now` (the clock first moves there) | `table`, `locks` |
| `unlock` | `all`, `requested`, `raised` | `table`, `locks` |
| `advance_clock` | `ms` | `now`, `table`, `locks`, `persisted` |
| `lease_timeline` | `lastLock` | `renewAt`, `clientExpiredFrom`, `brokerExpiredFrom` |
| `destroy` | – | `dropped`, `table` |
| `compute_pull_from_where` | `consumeFromWhere`, `mq`, `lastOffset`, `maxOffset`, `searchOffset` (null: the query throws), `consumeTimestamp` (null: RocketMQ's default), `constructionMs` | `offset` or `exception`; `consumeTimestamp` used |

`locks` [{`mq`, `locked`, `lastLockTimestamp`, `lockExpired`}] (expiry at the current clock,
PQ-15) and `persisted` [{`mq`, `offset`}] (the broker's stored consumer offsets) are written in
MessageQueue order.

Examples: after `lock_all` at `now` 20 000 granting a queue, its `lastLockTimestamp` is 20 000 and
it is not lock-expired at 50 000 (REBAL-20, PQ-15). A queue marked pull-expired whose consumer
offset is 5 in memory is removed by the next `update_table` (dropped, offset 5 persisted) and,
still assigned, re-created in the same update with a PullRequest at the persisted 5 (REBAL-9).
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "rebalance"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.rebalance(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
