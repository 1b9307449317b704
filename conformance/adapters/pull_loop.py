"""Adapter for area `pull_loop`: a push consumer's own pull loop — its process queues, offset store,
pull decision, pull callback and rebalance working together — over a scripted broker.

One case is one consumer of group `G` subscribed to topic `T` (`*`) on a virtual clock at 0, its
broker `b` (one master, `127.0.0.1:10911`) holding `config.queues` queues (default 1). config:
the consumer's settings by their DefaultMQPushConsumer names (`consumeFromWhere`,
`pullThresholdForQueue`, `pullThresholdSizeForQueue`, `consumeConcurrentlyMaxSpan`,
`pullBatchSize`, `pullInterval`, …) and `queues`.

The scripted broker: a queue's messages have offsets 0, 1, … in the order put (`tags` as put,
a body of `bodySize` zero bytes). A pull at offset o answers FOUND with the messages from o
(at most the pull's maxMsgNums, nextBeginOffset after the last); a pull at the end of the queue
is held until a message arrives in that queue (then FOUND) or 15 000 ms pass (then NO_NEW_MSG at
the same offset); a pull below 0 or past the end answers OFFSET_ILLEGAL with nextBeginOffset the
end; a pull of a queue id the topic does not have answers SYSTEM_ERROR (a `put` there is an
INVALID_ARGUMENT error). Answers arrive at once (no latency). It stores the group's consumer offsets
(QUERY_CONSUMER_OFFSET answers QUERY_NOT_FOUND until one is stored); `maxOffset` is the end of the
queue, `searchOffset` 0. The listener consumes every message at once and successfully, except the
offsets the case holds, which stay waiting (in their process queue) until released; each consumed
message is removed from its process queue and the offset removeMessage answers is committed
(increase-only), as the concurrent service does. The rebalance assigns exactly the queues the
case names (AllocateMessageQueueByConfig) out of the broker's queues.

| op | args | expect |
|---|---|---|
| `put` | `queueId`, `count`, `tags` (null: none), `bodySize` (default 1) | the observation |
| `set_offset` | `queueId`, `offset` (null: none) | the broker's stored consumer offset, then the observation |
| `start` | – | the consumer starts (offsets load, pull thread, persistConsumerOffset every 5 s after 10 s): the observation; a second start: `exception` MQClientException and the observation |
| `rebalance` | `queueIds` | one doRebalance assigning those queues: the observation |
| `hold` | `queueId`, `offsets` | the listener leaves these offsets unconsumed from now on: the observation |
| `release` | `queueId`, `offsets` (null: all held of the queue) | the listener consumes them: the observation |
| `advance` | `ms` | virtual time passes: the observation |
| `shutdown` | – | the consumer shuts down (persists once): the observation |

The observation after every op (what happened during the op, then the state): `now`; `pulls`
[{`at`, `queueId`, `offset`}] the pulls the broker received; `delays` [{`at`, `queueId`,
`delayMs`, `reason`}] every pull attempt that was delayed (reason: FLOW-6 … FLOW-13's
`CACHE_COUNT`, `CACHE_SIZE`, `MAX_SPAN`, …, RESULT's `PULL_INTERVAL`, …); `consumed`
[{`queueId`, `count`}] messages the listener consumed; `table` [{`queueId`, `cachedOffsets`,
`msgCount`, `maxSpan`, `dropped`}] the process-queue table (by queue id); `committed`
[{`queueId`, `offset`}] the offset store's memory table; `persisted` [{`queueId`, `offset`}] the
broker's stored consumer offsets.

Example (FLOW-8, the span as the process queue computes it): 2011 messages put, offsets 0 and
2001 … 2010 held, start, rebalance [0]: 63 pulls, then the cache is {0, 2001 … 2010} — 11
messages, under pullThresholdForQueue — but its span is 2010 > consumeConcurrentlyMaxSpan 2000, so
the next attempt is delayed 50 ms for `MAX_SPAN`.
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_loop"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.pull_loop(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
