"""Op generators: configs and ops of every area in the shared vectors' vocabulary.

Generators draw through a small `Draw` interface (conformance.machines.draw) so that the same
code feeds both the Hypothesis machines (`HypothesisDraw`) and the seeded random traces of
`pullspec vectors export` (`RandomDraw`, which needs no Hypothesis at run time). Choices put the
simplest value first: it is the first option a draw names. A failing trace is shortened by
`conformance.machines.minimize`, not by Hypothesis (its shrink phase is off).

A `Context` follows the reference's observations so that ops aim at interesting places: offsets
around each queue's min and max, offsets that are cached, clock steps onto lease boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence

from pullspec.conformance.jsontypes import JSONObject, JSONValue
from pullspec.conformance.machines import client_gen
from pullspec.conformance.machines.draw import Context, Draw
from pullspec.conformance.ops import (
    CLIENT_AREAS,
    DEFAULT_STATE_FIELDS,
    Op,
)

# -- configs -------------------------------------------------------------------------------------


def _store_sizes(d: Draw) -> JSONObject:
    # Small files so that a few puts roll commit-log and consume-queue files.
    return {
        "mappedFileSizeCommitLog": d.choice((1024, 512, 2048)),
        "mappedFileSizeConsumeQueue": d.choice((80, 40, 160)),
        "maxTransferCountOnMessageInMemory": d.choice((32, 3)),
        "maxTransferBytesOnMessageInMemory": d.choice((262144, 400)),
        "fileReservedTime": 0,
        "topic": "T",
        "group": "G",
    }


def config(area: str, d: Draw) -> JSONObject:
    """A fresh case config of `area`, as the shared vectors write it."""
    if area in CLIENT_AREAS and area != "offset_store":
        return client_gen.config(area, d)
    if area == "store":
        return {**_store_sizes(d), "brokerRole": "ASYNC_MASTER", "offsetCheckInSlave": False}
    if area == "pull_code":
        return {
            **_store_sizes(d),
            "brokerRole": "ASYNC_MASTER",
            "offsetCheckInSlave": False,
            "slaveReadEnable": d.boolean(),
            "topicQueueNums": 4,
        }
    if area == "process_queue":
        return {
            "clockStart": d.choice((1_000_000, 0)),
            "lockMaxLiveTimeMs": 30_000,
            "pullMaxIdleTimeMs": 120_000,
            "stateFields": list(DEFAULT_STATE_FIELDS),
        }
    if area == "lock_manager":
        return {
            "clockStart": d.choice((1_000_000, 0)),
            "lockMaxLiveTimeMs": 60_000,
            "tableEntryFields": ["clientId", "lastUpdateTimestamp", "expired"],
            "clients": ["c1", "c2", "c3"],
            "groups": ["G1", "G2"],
            "topic": "T",
            "brokerName": "b",
            "queueIds": [0, 1, 2, 3, 4],
        }
    if area == "offset_store":
        return {
            "messageModel": d.choice(("CLUSTERING", "BROADCASTING")),
            "clientId": "10.0.0.9@DEFAULT",
            "consumerGroup": "G",
        }
    return {
        "group": "G",
        "groupRetryMaxTimes": d.choice((16, 0, 1, 2)),
        "retryQueueNums": 1,
        "maxDelayLevel": 18,
        "originalTopic": "T",
        "requestVersion": d.choice(("V4_9_7", "V4_7_1", "V3_4_9")),
    }


# -- ops -------------------------------------------------------------------------------------------

TAGS: tuple[str | None, ...] = ("A", None, "B", "C", "")
SUBSCRIPTIONS: tuple[str | None, ...] = (None, "*", "A", "A || C", "B || none-such", "C", "")


def _message(d: Draw, queue_ids: Sequence[int] = (0, 1)) -> JSONObject:
    return {"queueId": d.choice(queue_ids), "tags": d.choice(TAGS), "bodySize": d.integer(0, 300)}


def _offset(d: Draw, ctx: Context, queue_id: int) -> int:
    low, high = ctx.queues.get(str(queue_id), (0, 0))
    aimed = (low, high, high - 1, high + 1, low - 1, 0, -1, high + 7)
    return d.choice(aimed) if d.boolean() else d.integer(0, high + 2)


def _store_op(d: Draw, ctx: Context, pull: bool) -> Op:
    # pull_code reads only through the broker: its vocabulary has no get_message.
    read = "pull" if pull else "get_message"
    name = d.choice(("put", read, "put", read, "delete_expired", "set_role"))
    if name == "put":
        return Op("put", {"msgs": [_message(d) for _ in range(d.integer(1, 3))]})
    if name == "delete_expired":
        return Op("delete_expired", {})
    if name == "set_role":
        return Op(
            "set_role",
            {"brokerRole": d.choice(("SLAVE", "ASYNC_MASTER")), "offsetCheckInSlave": d.boolean()},
        )
    # A pull may name a queue the topic does not have (4 queues: id 4 is refused, CODE-2).
    queue_id = d.choice((0, 1, 2, 4)) if pull else d.choice((0, 1))
    args = {
        "queueId": queue_id,
        "offset": _offset(d, ctx, queue_id),
        "maxMsgNums": d.choice((32, 1, 2, 3, 8, 0, -1)),
        "subscription": d.choice(SUBSCRIPTIONS[1:] if pull else SUBSCRIPTIONS),
    }
    return Op(name, args)


def _pq_msgs(d: Draw, ctx: Context) -> list[list[int]]:
    out: list[list[int]] = []
    for _ in range(d.integer(0, 3)):
        offset = d.choice(ctx.offsets) if ctx.offsets and d.boolean() else d.integer(0, 20)
        msg = [offset, d.integer(0, 50)]
        if d.boolean():
            msg.append(offset + d.integer(-3, 30))
        out.append(msg)
    return out


def _process_queue_op(d: Draw, ctx: Context) -> Op:
    name = d.choice(
        (
            "put_messages",
            "take_messages",
            "remove_messages",
            "commit",
            "put_messages",
            "rollback",
            "make_messages_to_consume_again",
            "advance_clock",
            "set",
        )
    )
    if name in ("put_messages", "remove_messages", "make_messages_to_consume_again"):
        return Op(name, {"msgs": _pq_msgs(d, ctx)})
    if name == "take_messages":
        return Op(name, {"n": d.integer(-1, 4)})
    if name == "advance_clock":
        return Op(name, {"ms": d.choice((1, 30_000, 30_001, 120_000, 120_001, 29_999, 0, 1000))})
    if name == "set":
        key = d.choice(("locked", "lastLockTimestamp", "lastPullTimestamp"))
        if key == "locked":
            return Op(name, {key: d.boolean()})
        return Op(name, {key: ctx.now - d.choice((0, 1, 29_999, 30_000, 119_999, 120_000))})
    return Op(name, {})


def _lock_manager_op(d: Draw) -> Op:
    name = d.choice(("try_lock_batch", "advance_clock", "is_locked", "unlock_batch"))
    if name == "advance_clock":
        return Op(name, {"ms": d.choice((60_000, 1, 60_001, 59_999, 0, 30_000))})
    who = {"group": d.choice(("G1", "G2")), "clientId": d.choice(("c1", "c2", "c3"))}
    if name == "is_locked":
        return Op(name, {**who, "mq": d.integer(0, 4)})
    mqs = list(dict.fromkeys(d.integer(0, 4) for _ in range(d.integer(0, 3))))
    return Op(name, {**who, "mqs": mqs})


def _send_back_op(d: Draw, ctx: Context) -> Op:
    if not ctx.wrote or d.choice((False, True, True)):
        msg = {**_message(d, (0,)), "reconsumeTimes": d.integer(0, 4)}
        return Op("put", {"msgs": [msg]})
    offset = d.choice(ctx.wrote) if d.choice((True, True, False)) else ctx.wrote[-1] + 1
    return Op(
        "send_back",
        {
            "originalCommitLogOffset": offset,
            "group": "G",
            "delayLevel": d.integer(-1, 4),
            "maxReconsumeTimes": d.choice((None, -1, 0, 1, 2, 3, 16)),
        },
    )


OFFSET_READ_TYPES = ("READ_FROM_MEMORY", "READ_FROM_STORE", "MEMORY_FIRST_THEN_STORE")
OFFSET_WRITERS = (
    "CONCURRENT_RESULT",
    "CORRECT_TAGS_OFFSET",
    "ORDERLY_RESULT",
    "OFFSET_ILLEGAL_FIX_UP",
    "READ_FROM_STORE",
    "UPDATE_CONSUME_OFFSET",
)
OFFSET_FILES = ("offsets.json", "offsets.json.bak")


def _mq(queue_id: int) -> JSONObject:
    return {"topic": "T", "brokerName": "b", "queueId": queue_id}


def _some_mqs(d: Draw) -> list[JSONObject]:
    return [_mq(q) for q in dict.fromkeys(d.integer(0, 2) for _ in range(d.integer(0, 3)))]


def _stored_offset(d: Draw, ctx: Context) -> int:
    # Offsets equal to, just below and just above what the table holds hit OFFSET-2's edges.
    aimed: bool = bool(ctx.offsets) and d.choice((True, True, False))
    if aimed:
        return d.choice(ctx.offsets) + d.choice((-1, 0, 1, -5))
    return d.choice((5, 0, -1, 6, 4, 20)) if d.boolean() else d.integer(-1, 30)


def _offset_store_op(d: Draw, ctx: Context) -> Op:
    # Writes come often so that later writes meet an entry (OFFSET-2's increase-only edges).
    names = [
        "update_offset",
        "read_offset",
        "update_offset",
        "persist_all",
        "update_offset",
        "read_offset",
        "update_by",
        "update_offset",
        "update_by",
        "persist",
        "remove_offset",
        "update_to_broker",
        "persist_consumer_offset",
        "rebalance_reset",
        "load",
        "broker_state",
        "broker_address",
    ]
    if ctx.local:
        names.append("write_file")
    name = d.choice(names)
    # Queue 0 most often, so that ops meet each other's entries.
    queue = _mq(d.choice((0, 1, 0, 2)))
    if name == "update_offset":
        args: JSONObject = {
            "mq": queue,
            "offset": _stored_offset(d, ctx),
            "increaseOnly": d.boolean(),
        }
        return Op(name, args)
    if name == "update_by":
        writer = d.choice(OFFSET_WRITERS)
        return Op(name, {"writer": writer, "mq": queue, "offset": _stored_offset(d, ctx)})
    if name == "read_offset":
        return Op(name, {"mq": queue, "readType": d.choice(OFFSET_READ_TYPES)})
    if name in ("persist", "remove_offset", "rebalance_reset"):
        return Op(name, {"mq": queue})
    if name == "update_to_broker":
        return Op(name, {"mq": queue, "offset": _stored_offset(d, ctx), "oneway": d.boolean()})
    if name == "persist_all":
        return Op(name, {"mqs": None if d.choice((False, True, False)) else _some_mqs(d)})
    if name == "persist_consumer_offset":
        return Op(name, {"running": d.choice((True, False)), "processQueueMqs": _some_mqs(d)})
    if name == "broker_state":
        offset = d.choice((None, 0, 5)) if d.boolean() else d.integer(0, 30)
        fails = d.choice((None, None, "MQBrokerException", "RemotingTimeoutException"))
        return Op(name, {"mq": queue, "offset": offset, "fails": fails})
    if name == "broker_address":
        addrs: list[JSONValue] = [[i, f"{'ms'[min(i, 1)]}:{i}"] for i in range(3) if d.boolean()]
        return Op(name, {"brokerAddrs": addrs, "refreshed": d.boolean()})
    if name == "write_file":
        kind = d.choice(("table", "delete", "corrupt"))
        offsets: JSONValue = None
        if kind == "table":
            offsets = [{"mq": q, "offset": _stored_offset(d, ctx)} for q in _some_mqs(d)]
        elif kind == "corrupt":
            offsets = d.choice(("{not json", "garbage", ""))
        return Op(name, {"name": d.choice(OFFSET_FILES), "offsets": offsets})
    return Op(name, {})


def op(area: str, d: Draw, ctx: Context) -> Op:
    """The next op of `area` given what the reference showed so far."""
    if area in CLIENT_AREAS and area != "offset_store":
        return client_gen.op(area, d, ctx)
    if area == "offset_store":
        return _offset_store_op(d, ctx)
    if area in ("store", "pull_code"):
        return _store_op(d, ctx, pull=area == "pull_code")
    if area == "process_queue":
        return _process_queue_op(d, ctx)
    if area == "lock_manager":
        return _lock_manager_op(d)
    return _send_back_op(d, ctx)
