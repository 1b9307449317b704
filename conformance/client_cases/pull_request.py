"""Cases of area `pull_request` (see conformance.adapters.pull_request for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, mq, s
from pullspec.conformance.jsontypes import JSONObject, JSONValue


def _req(name: str, config: Config, *steps: Step) -> Case:
    return Case("pull_request", name, config, steps)


#: A route with only the master.
MASTER_ONLY: list[JSONValue] = [[0, "10.0.0.1:10911"]]


#: A route with the master and one slave.
MASTER_SLAVE: list[JSONValue] = [[0, "10.0.0.1:10911"], [1, "10.0.0.2:10911"]]


def _pull(**more: JSONValue) -> Step:
    args: JSONObject = {
        "mq": mq(3, broker="broker-a"),
        "nextOffset": 17,
        "now": 1000,
        "subscription": {"expression": "A || B", "subVersion": 1700000000000},
        "memoryOffset": 12,
        "brokerAddrs": MASTER_ONLY,
    }
    args.update(more)
    return s("pull", **args)


def pull_request_edges() -> list[Case]:
    """REQ-1 … REQ-11."""
    sql: JSONObject = {"expression": "a > 1", "expressionType": "SQL92", "subVersion": 5}
    filter_sub: JSONObject = {"expression": "A", "classFilterMode": True, "subVersion": 5}
    return [
        _req(
            "req2-commit-only-positive", {}, _pull(), _pull(memoryOffset=0), _pull(memoryOffset=-1)
        ),
        _req("req2-broadcasting-no-commit", {"messageModel": "BROADCASTING"}, _pull()),
        _req(
            "req3-post-subscription",
            {"postSubscriptionWhenPull": True, "pullBatchSize": 8},
            _pull(),
            _pull(lookupSubscription=None),
        ),
        _req(
            "req3-class-filter",
            {"postSubscriptionWhenPull": True},
            _pull(subscription=filter_sub, filterServers=["f1:1", "f2:2"], randomNum=5),
            _pull(subscription=filter_sub, filterServers=[], randomNum=5),
        ),
        _req(
            "req8-slave-clears-commit",
            {},
            _pull(brokerAddrs=MASTER_SLAVE, pullFromWhichNode=1),
            _pull(brokerAddrs=[[1, "10.0.0.2:10911"]], pullFromWhichNode=0),
        ),
        _req(
            "req6-missing-slave-id",
            {},
            _pull(brokerAddrs=[[0, "m:1"], [2, "s2:1"]], pullFromWhichNode=1),
            _pull(brokerAddrs=[[0, "m:1"], [2, "s2:1"]], pullFromWhichNode=1, onlyThisBroker=True),
            _pull(brokerAddrs=[[2, "s2:1"], [0, "m:1"]], pullFromWhichNode=3),
        ),
        _req(
            # The fallback is the first entry of a HashMap<Long, String>: lowest bucket first,
            # put order inside a bucket; its id decides slave-ness (REQ-8 then clears the commit).
            "req6-first-entry-hash-map-order",
            {},
            _pull(brokerAddrs=[[2, "s2:1"], [1, "s1:1"]], pullFromWhichNode=5),
            _pull(brokerAddrs=[[16, "s16:1"], [0, "m:1"]], pullFromWhichNode=3),
            _pull(brokerAddrs=[[0, "m:1"], [16, "s16:1"]], pullFromWhichNode=3),
            _pull(brokerAddrs=[[17, "s17:1"], [1, "s1:1"], [16, "s16:1"]], pullFromWhichNode=2),
            _pull(brokerAddrs=[[3, "s3:1"], [0, "m:1"]], pullFromWhichNode=1),
        ),
        _req("req11-no-broker", {"pullTimeDelayMillsWhenException": 1500}, _pull(brokerAddrs=[])),
        _req(
            "req7-sql-needs-new-broker",
            {},
            _pull(subscription=sql, brokerVersion=231),
            _pull(subscription=sql, brokerVersion=232),
            _pull(subscription={"expression": "A"}, brokerVersion=0),
        ),
        _req(
            "req4-flags",
            {},
            *(
                s(
                    "build_sys_flag",
                    commitOffset=c,
                    suspend=su,
                    subscription=sb,
                    classFilter=cf,
                    litePull=lp,
                    slave=sl,
                )
                for c, su, sb, cf, lp, sl in (
                    (False, False, False, False, False, False),
                    (True, True, False, False, False, False),
                    (True, True, True, False, False, True),
                    (False, True, True, True, False, False),
                    (True, False, False, False, True, True),
                    (True, True, True, True, True, False),
                )
            ),
        ),
    ]


def pull_request_random(rng: random.Random, i: int) -> list[Case]:
    """Pulls over random routes, subscriptions, versions and cursors."""
    config: Config = {
        "messageModel": rng.choice(["CLUSTERING", "CLUSTERING", "BROADCASTING"]),
        "postSubscriptionWhenPull": rng.random() < 0.3,
        "pullBatchSize": rng.choice([1, 32]),
    }
    routes: list[JSONValue] = [
        MASTER_ONLY,
        MASTER_SLAVE,
        [[1, "10.0.0.2:10911"]],
        [[2, "s2:1"], [0, "m:1"]],
        [],
    ]
    subs: list[JSONValue] = [
        {"expression": "*", "subVersion": 1},
        {"expression": "A || B", "subVersion": 7},
        {"expression": "a > 1", "expressionType": "SQL92", "subVersion": 5},
        {"expression": "A", "classFilterMode": True, "subVersion": 5},
    ]
    steps = []
    for _ in range(16):
        if rng.random() < 0.15:
            flags = {k: rng.random() < 0.5 for k in ("commitOffset", "suspend", "subscription")}
            flags.update(classFilter=rng.random() < 0.3, slave=rng.random() < 0.3)
            steps.append(s("build_sys_flag", **flags))
            continue
        more: JSONObject = {
            "nextOffset": rng.randrange(0, 100),
            "memoryOffset": rng.choice([-1, 0, 5, 40]),
            "brokerAddrs": rng.choice(routes),
            "subscription": rng.choice(subs),
            "brokerVersion": rng.choice([0x7FFFFFFF, 0]),
        }
        if rng.random() < 0.5:
            more["pullFromWhichNode"] = rng.choice([0, 1, 2, 3])
        if rng.random() < 0.3:
            more["filterServers"] = rng.choice([[], ["f1:1"], ["f1:1", "f2:2"]])
            more["randomNum"] = rng.randrange(0, 10)
        steps.append(_pull(**more))
    return [Case("pull_request", str(i), config, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = pull_request_edges
RANDOM = pull_request_random
