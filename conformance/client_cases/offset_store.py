"""Cases of area `offset_store` (see conformance.adapters.offset_store for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, mq, s

#: Three queues of topic T on broker b.
Q0, Q1, Q2 = mq(0), mq(1), mq(2)


#: A BROADCASTING consumer: its offsets live in a local file.
LOCAL = {"messageModel": "BROADCASTING", "clientId": "10.0.0.9@DEFAULT", "consumerGroup": "G"}


#: The local store's file and its backup.
MAIN, BAK = "offsets.json", "offsets.json.bak"


def _os(name: str, config: Config, *steps: Step) -> Case:
    return Case("offset_store", name, config, steps)


def offset_store_edges() -> list[Case]:
    """OFFSET-1 … OFFSET-13."""
    writers = (
        "CONCURRENT_RESULT",
        "CORRECT_TAGS_OFFSET",
        "ORDERLY_RESULT",
        "OFFSET_ILLEGAL_FIX_UP",
        "READ_FROM_STORE",
        "UPDATE_CONSUME_OFFSET",
    )
    return [
        _os(
            "offset2-update",
            {},
            s("update_offset", mq=Q0, offset=10, increaseOnly=True),
            s("update_offset", mq=Q0, offset=9, increaseOnly=True),
            s("update_offset", mq=Q0, offset=10, increaseOnly=True),
            s("update_offset", mq=Q0, offset=11, increaseOnly=True),
            s("update_offset", mq=Q0, offset=3, increaseOnly=False),
            s("update_offset", mq=Q1, offset=-1, increaseOnly=True),
        ),
        _os(
            "offset3-writers",
            {},
            *(
                step
                for w in writers
                for step in (
                    s("update_offset", mq=Q0, offset=50, increaseOnly=False),
                    s("update_by", writer=w, mq=Q0, offset=40),
                )
            ),
        ),
        _os(
            "offset4-5-reads",
            {},
            s("read_offset", mq=Q0, readType="READ_FROM_MEMORY"),
            s("broker_state", mq=Q0, offset=7),
            s("read_offset", mq=Q0, readType="MEMORY_FIRST_THEN_STORE"),
            s("update_offset", mq=Q0, offset=20, increaseOnly=False),
            s("read_offset", mq=Q0, readType="MEMORY_FIRST_THEN_STORE"),
            s("read_offset", mq=Q0, readType="READ_FROM_STORE"),
            s("read_offset", mq=Q1, readType="READ_FROM_STORE"),
            s("broker_state", mq=Q1, offset=None, fails="MQBrokerException"),
            s("read_offset", mq=Q1, readType="READ_FROM_STORE"),
            s("broker_state", mq=Q1, offset=None, fails="RemotingTimeoutException"),
            s("read_offset", mq=Q1, readType="READ_FROM_STORE"),
            s("read_offset", mq=Q1, readType="READ_FROM_MEMORY"),
        ),
        _os(
            "offset6-persist",
            {},
            s("update_offset", mq=Q0, offset=5, increaseOnly=False),
            s("update_offset", mq=Q1, offset=6, increaseOnly=False),
            s("update_offset", mq=Q2, offset=7, increaseOnly=False),
            s("persist", mq=Q0),
            s("persist", mq=mq(9)),
            s("persist_all", mqs=None),
            s("persist_all", mqs=[]),
            s("persist_all", mqs=[Q1, Q2]),
            s("remove_offset", mq=Q1),
            s("update_to_broker", mq=Q2, offset=70, oneway=False),
        ),
        _os(
            "offset8-persist-targets",
            {},
            s("update_offset", mq=Q0, offset=5, increaseOnly=False),
            s("update_offset", mq=Q1, offset=6, increaseOnly=False),
            s("persist_consumer_offset", running=False, processQueueMqs=[Q0]),
            s("persist_consumer_offset", running=True, processQueueMqs=[Q0]),
        ),
        _os(
            "offset13-rebalance-reset",
            {},
            s("update_offset", mq=Q0, offset=9, increaseOnly=False),
            s("broker_state", mq=Q0, offset=4),
            s("rebalance_reset", mq=Q0),
            s("update_offset", mq=Q1, offset=9, increaseOnly=False),
            s("rebalance_reset", mq=Q1),
        ),
        _os(
            "offset7-broker-address",
            {},
            s("broker_address", brokerAddrs=[[0, "m:1"], [1, "s:1"]], refreshed=False),
            s("broker_address", brokerAddrs=[[1, "s:1"], [0, "m:1"]], refreshed=False),
            s("broker_address", brokerAddrs=[[1, "s:1"]], refreshed=False),
            s("broker_address", brokerAddrs=[[1, "s:1"]], refreshed=True),
            s("broker_address", brokerAddrs=[], refreshed=True),
        ),
        _os(
            # BrokerData.brokerAddrs is a HashMap<Long, String>: its first entry is the one in
            # the lowest bucket (put order inside a bucket), not the first listed.
            "offset7-hash-map-order",
            {},
            s("broker_address", brokerAddrs=[[2, "s2:1"], [1, "s1:1"]], refreshed=False),
            s("broker_address", brokerAddrs=[[16, "s16:1"], [0, "m:1"]], refreshed=False),
            s("broker_address", brokerAddrs=[[0, "m:1"], [16, "s16:1"]], refreshed=False),
            s(
                "broker_address",
                brokerAddrs=[[17, "s17:1"], [1, "s1:1"], [16, "s16:1"]],
                refreshed=False,
            ),
            s("broker_address", brokerAddrs=[[-1, "n1:1"], [0, "m:1"]], refreshed=True),
            # 12 entries: 16 shares bucket 0 of 16; 13: the table has doubled and 16 is last.
            s(
                "broker_address",
                brokerAddrs=[[16, "s16:1"], *([i, f"s{i}:1"] for i in range(1, 12))],
                refreshed=False,
            ),
            s(
                "broker_address",
                brokerAddrs=[[16, "s16:1"], *([i, f"s{i}:1"] for i in range(1, 13))],
                refreshed=False,
            ),
        ),
        _os(
            "offset1-9-11-local-persist",
            LOCAL,
            s("update_offset", mq=Q0, offset=5, increaseOnly=False),
            s("update_offset", mq=Q1, offset=6, increaseOnly=False),
            s("persist_all", mqs=None),
            s("persist_all", mqs=[]),
            s("persist_all", mqs=[Q0]),
            s("persist_all", mqs=[Q0, Q1]),
        ),
        _os(
            "offset10-local-load",
            LOCAL,
            s("write_file", name=MAIN, offsets=[{"mq": Q0, "offset": 3}]),
            s("write_file", name=BAK, offsets=[{"mq": Q0, "offset": 1}, {"mq": Q1, "offset": 2}]),
            s("load"),
            s("write_file", name=MAIN, offsets="{not json"),
            s("read_offset", mq=Q1, readType="READ_FROM_STORE"),
            s("write_file", name=MAIN, offsets=None),
            s("read_offset", mq=Q0, readType="READ_FROM_STORE"),
            s("write_file", name=BAK, offsets="garbage"),
            s("load"),
            s("read_offset", mq=Q0, readType="READ_FROM_STORE"),
            s("write_file", name=BAK, offsets=None),
            s("load"),
            s("read_offset", mq=Q2, readType="MEMORY_FIRST_THEN_STORE"),
        ),
        _os(
            "offset12-local-no-ops",
            LOCAL,
            s("update_offset", mq=Q0, offset=5, increaseOnly=False),
            s("persist", mq=Q0),
            s("remove_offset", mq=Q0),
            s("update_to_broker", mq=Q0, offset=9, oneway=True),
        ),
    ]


def offset_store_random(rng: random.Random, i: int) -> list[Case]:
    """Random writes, reads and persists on a remote store."""
    steps = []
    queues = [Q0, Q1, Q2]
    for _ in range(24):
        q = rng.choice(queues)
        r = rng.random()
        if r < 0.35:
            steps.append(
                s(
                    "update_offset",
                    mq=q,
                    offset=rng.randrange(-1, 30),
                    increaseOnly=rng.random() < 0.5,
                )
            )
        elif r < 0.55:
            steps.append(
                s(
                    "read_offset",
                    mq=q,
                    readType=rng.choice(
                        ["READ_FROM_MEMORY", "READ_FROM_STORE", "MEMORY_FIRST_THEN_STORE"]
                    ),
                )
            )
        elif r < 0.7:
            steps.append(
                s(
                    "broker_state",
                    mq=q,
                    offset=rng.choice([None, rng.randrange(0, 30)]),
                    fails=rng.choice([None, None, "MQBrokerException", "RemotingTimeoutException"]),
                )
            )
        elif r < 0.85:
            steps.append(s("persist_all", mqs=rng.sample(queues, rng.randrange(0, 4))))
        else:
            steps.append(s("remove_offset", mq=q))
    return [Case("offset_store", str(i), {}, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = offset_store_edges
RANDOM = offset_store_random
