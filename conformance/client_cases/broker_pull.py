"""Cases of area `broker_pull` (see conformance.adapters.broker_pull for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, s
from pullspec.conformance.jsontypes import JSONValue


def _bp(name: str, config: Config, *steps: Step) -> Case:
    return Case("broker_pull", name, config, steps)


def _put(queue_id: int, *tags: str | None, body: int = 8) -> Step:
    return s("put", msgs=[{"queueId": queue_id, "tags": t, "bodySize": body} for t in tags])


def _pull(offset: int, queue_id: int = 0, sub: str | None = "*", **more: JSONValue) -> Step:
    return s("pull", queueId=queue_id, offset=offset, maxMsgNums=32, subscription=sub, **more)


#: A broker with long polling off: holds of shortPollingTimeMills, checks as often.
SHORT = {"longPollingEnable": False, "shortPollingTimeMills": 1000}


def broker_pull_edges() -> list[Case]:
    """HOLD-1 … HOLD-10, COMMIT-1 … COMMIT-5, CODE-1/3/12, FILTER-7/9, LEASE-1/8/9, STORE-15."""
    return [
        _bp(
            "hold7-timeout-at-first-check",
            {},
            _pull(0),
            s("advance_clock", ms=14999),
            s("advance_clock", ms=1),
        ),
        _bp(
            "hold7-late-hold-waits-for-check",
            {},
            s("advance_clock", ms=1000),
            _pull(0),
            s("advance_clock", ms=15000),
            s("advance_clock", ms=4000),
        ),
        _bp(
            "hold1-request-timeout",
            {},
            _pull(0, suspendTimeoutMillis=3000),
            s("advance_clock", ms=5000),
        ),
        _bp(
            "hold4-5-arrival-wakes",
            {},
            _pull(0),
            _pull(0, queue_id=1),
            s("advance_clock", ms=3000),
            _put(0, "A"),
            s("advance_clock", ms=20000),
        ),
        _bp(
            "hold4-filter-keeps-held",
            {},
            _pull(0, sub="A"),
            _put(0, "B"),
            _put(0, None),
            _put(0, "A"),
        ),
        _bp(
            "hold4-timeout-after-unmatched",
            {},
            _pull(0, sub="A"),
            _put(0, "B"),
            s("advance_clock", ms=15000),
        ),
        _bp(
            "hold4-wakes-past-offset-only",
            {},
            _put(0, "A", "A"),
            _pull(2),
            _pull(5),
            _put(0, "A"),
            s("advance_clock", ms=5000),
            s("advance_clock", ms=10000),
        ),
        _bp(
            "hold2-8-short-polling",
            SHORT,
            _pull(0),
            _put(0, "A"),
            s("advance_clock", ms=999),
            s("advance_clock", ms=1),
        ),
        _bp(
            "hold9-slave-no-notifications",
            {},
            _put(0, "A"),
            s("set_role", brokerRole="SLAVE", offsetCheckInSlave=False),
            _pull(1),
            _put(0, "A"),
            s("advance_clock", ms=15000),
        ),
        _bp("hold10-store-status", {}, _put(0, "A"), _pull(1), _pull(0, queue_id=3)),
        _bp(
            "code1-no-suspend-flag-answers",
            {},
            _pull(0, suspend=False),
            _pull(0, suspend=False, commitOffset=4),
        ),
        _bp(
            "commit2-piggy-back",
            {},
            _pull(0, commitOffset=5),
            _put(0, "A"),
            _pull(1, commitOffset=0),
            _pull(1, commitOffset=7, suspend=False),
            s("update_offset", queueId=0, offset=9),
            _put(0, "A"),
            _pull(2, commitOffset=3),
        ),
        _bp(
            "commit2-slave-never-commits",
            {},
            _put(0, "A"),
            s("set_role", brokerRole="SLAVE", offsetCheckInSlave=False),
            _pull(0, commitOffset=5),
            s("query_offset", queueId=0),
        ),
        _bp(
            "commit1-3-4-offsets",
            {},
            s("query_offset", queueId=0),
            s("update_offset", queueId=0, offset=10),
            s("query_offset", queueId=0),
            s("update_offset", queueId=0, offset=3),
            s("update_offset", queueId=0, offset=-5),
            s("query_offset", queueId=0),
            s("set_role", brokerRole="SLAVE", offsetCheckInSlave=False),
            s("update_offset", queueId=1, offset=2),
        ),
        _bp(
            "commit5-flush-schedule",
            {"flushConsumerOffsetInterval": 5000},
            s("advance_clock", ms=9999),
            s("advance_clock", ms=1),
            s("advance_clock", ms=11000),
        ),
        _bp(
            "code3-registry-subscription",
            {},
            _put(0, "A"),
            _pull(0, sub=None),
            s("register_consumer", subscriptions={"OTHER": "*"}),
            _pull(0, sub=None),
            s("register_consumer", subscriptions={"T": "A"}),
            _pull(0, sub=None),
            _pull(0, sub=None, subVersion=5),
            s("register_consumer", subscriptions={"T": "*"}, broadcasting=True),
            _pull(0, sub=None),
        ),
        _bp(
            "filter7-9-retry-filter",
            {"filterSupportRetry": True},
            _put(0, "A"),
            _pull(0, sub="A || B"),
        ),
        _bp(
            "lease1-8-9-locks",
            {},
            s("set_lock_max_live_time_property", value="abc"),
            s("set_lock_max_live_time_property", value="30000"),
            s("lock_batch", clientId="c1", queueIds=[0, 1]),
            s("lock_batch", clientId="c2", queueIds=[1, 2]),
            s("client_gone", clientId="c1"),
            s("advance_clock", ms=30000),
            s("lock_batch", clientId="c2", queueIds=[1]),
            s("advance_clock", ms=1),
            s("lock_batch", clientId="c2", queueIds=[0, 1]),
            s("unlock_batch", clientId="c2", queueIds=[0, 2]),
            s("set_role", brokerRole="SLAVE", offsetCheckInSlave=False),
            s("lock_batch", clientId="c3", queueIds=[0]),
        ),
        _bp(
            "lease1-default",
            {},
            s("set_lock_max_live_time_property", value=None),
            s("lock_batch", clientId="c1", queueIds=[3]),
        ),
        _bp(
            "store15-eof-blank-notify",
            {"mappedFileSizeCommitLog": 1024},
            _pull(0),
            _pull(1, queue_id=1),
            _put(1, "A", body=300),
            _put(0, "A", body=300),
            _put(1, "A", body=300),
            s("advance_clock", ms=5000),
        ),
    ]


def broker_pull_random(rng: random.Random, i: int) -> list[Case]:
    """Random puts, pulls (held or not), commits and time on a two-queue broker."""
    config = rng.choice([{}, {}, SHORT])
    steps = []
    for _ in range(20):
        r = rng.random()
        q = rng.randrange(0, 2)
        if r < 0.3:
            steps.append(
                _put(q, *(rng.choice(["A", "B", None]) for _ in range(rng.randrange(1, 3))))
            )
        elif r < 0.65:
            steps.append(
                _pull(
                    rng.randrange(0, 5),
                    queue_id=q,
                    sub=rng.choice(["*", "A", "B"]),
                    commitOffset=rng.choice([None, rng.randrange(0, 5)]),
                    suspend=rng.random() < 0.8,
                )
            )
        elif r < 0.9:
            steps.append(s("advance_clock", ms=rng.choice([500, 1000, 4999, 5000, 15000])))
        else:
            steps.append(s("query_offset", queueId=q))
    return [Case("broker_pull", str(i), config, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = broker_pull_edges
RANDOM = broker_pull_random
