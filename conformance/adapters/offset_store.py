"""Adapter for area `offset_store`: the consumer's OffsetStore, remote or local file.

config: `messageModel` (CLUSTERING → RemoteBrokerOffsetStore, BROADCASTING →
LocalFileOffsetStore, OFFSET-1), `clientId`, `consumerGroup`. The remote store talks to a fake
broker whose offsets the case sets with `broker_state`; an unknown queue answers
QUERY_NOT_FOUND (MQBrokerException). The local store lives in a fresh temporary directory.

| op | args | expect |
|---|---|---|
| `update_offset` | `mq`, `offset`, `increaseOnly` | the state |
| `update_by` | `writer` (CONCURRENT_RESULT, CORRECT_TAGS_OFFSET, ORDERLY_RESULT, OFFSET_ILLEGAL_FIX_UP, READ_FROM_STORE, UPDATE_CONSUME_OFFSET), `mq`, `offset` | `increaseOnly`, the state |
| `read_offset` | `mq`, `readType` | `result`, the state |
| `persist` / `remove_offset` | `mq` | `noOp`, the state |
| `update_to_broker` | `mq`, `offset`, `oneway` | `noOp`, the state |
| `persist_all` | `mqs` (null allowed) | the state |
| `persist_consumer_offset` | `running`, `processQueueMqs` | `targets` (null: nothing persisted), the state |
| `rebalance_reset` | `mq` | removeOffset then READ_FROM_STORE: `result`, `memory`, the state |
| `broker_state` | `mq`, `offset` (null: none), `fails` (null, `MQBrokerException` or another exception name) | the state |
| `write_file` | `name` (`offsets.json`, `offsets.json.bak`), `offsets` ([{`mq`, `offset`}] or a string written as is, null deletes) | the state |
| `load` | – | `exception` (MQClientException on a corrupt backup) or the state |
| `broker_address` | `brokerAddrs` ([[id, addr], …]: the broker's BrokerData.brokerAddrs, put in this order into a HashMap<Long, String>, which iterates in its own bucket order), `refreshed` (false: the client's table already holds this map and the NameServer route refresh between the two lookups leaves the table as it was; true: the table had no map for the broker and the refresh installs this one) | `address` (null: both lookups found nothing, the RPC throws MQClientException) |

The state: `kind`, `table` ([{`mq`, `offset`}] sorted), `sent` (remote: the broker updates of
the op, [{`mq`, `offset`, `oneway`}]: a set — persistAll walks a ConcurrentHashMap — written in
MessageQueue order), `files` (local: `main` and `bak` as offset lists, null when absent,
`"corrupt"` when unreadable; `tmp` whether it exists), `persistSteps` (local).
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "offset_store"


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh driver of the candidate's (`candidate.offset_store(config, profile)`, or a cmd: peer)."""
    return _client.open_driver(candidate, AREA, config, profile)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
