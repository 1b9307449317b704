"""Cases of area `allocate` (see conformance.adapters.allocate for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Step, mq, s
from pullspec.conformance.jsontypes import JSONObject


def _queues(n: int, brokers: tuple[str, ...] = ("b",)) -> list[JSONObject]:
    return [mq(k, broker=brokers[k % len(brokers)]) for k in range(n)]


def _al(name: str, *steps: Step) -> Case:
    return Case("allocate", name, {}, steps)


def _alloc(strategy: str, cid: str, n: int, cids: list[str]) -> Step:
    return s("allocate", strategy=strategy, currentCid=cid, mqAll=_queues(n), cidAll=cids)


def allocate_edges() -> list[Case]:
    """REBAL-1 … REBAL-8 and REBAL-24."""
    three = ["c1", "c2", "c3"]
    return [
        _al(
            "rebal7-avg",
            *(_alloc("AVG", c, 8, three) for c in three),
            _alloc("AVG", "c9", 8, three),
            *(_alloc("AVG", c, 2, three) for c in three),
            _alloc("AVG", "c1", 3, three),
        ),
        _al(
            "rebal8-avg-by-circle",
            *(_alloc("AVG_BY_CIRCLE", c, 8, three) for c in three),
            *(_alloc("AVG_BY_CIRCLE", c, 2, three) for c in three),
            _alloc("AVG_BY_CIRCLE", "c9", 2, three),
        ),
        _al(
            "rebal6-arguments",
            s("allocate", strategy="AVG", currentCid="", mqAll=_queues(2), cidAll=["c1"]),
            s("allocate", strategy="AVG", currentCid="c1", mqAll=[], cidAll=["c1"]),
            s("allocate", strategy="AVG_BY_CIRCLE", currentCid="c1", mqAll=_queues(2), cidAll=[]),
            s("allocate", strategy="AVG_BY_CIRCLE", currentCid="c1", mqAll=None, cidAll=["c1"]),
        ),
        _al(
            "rebal5-clustering-sorts",
            s(
                "rebalance_by_topic",
                messageModel="CLUSTERING",
                strategy="AVG",
                currentCid="c10",
                mqSet=list(reversed(_queues(5, ("b", "a")))),
                cidAll=["c2", "c10", "c1"],
            ),
            s(
                "rebalance_by_topic",
                messageModel="CLUSTERING",
                strategy="AVG",
                currentCid="c1",
                mqSet=None,
                cidAll=["c1"],
            ),
            s(
                "rebalance_by_topic",
                messageModel="CLUSTERING",
                strategy="AVG",
                currentCid="c1",
                mqSet=_queues(2),
                cidAll=None,
            ),
            s(
                "rebalance_by_topic",
                messageModel="CLUSTERING",
                strategy="AVG",
                currentCid="",
                mqSet=_queues(2),
                cidAll=["c1"],
            ),
        ),
        _al(
            "rebal4-broadcasting",
            s(
                "rebalance_by_topic",
                messageModel="BROADCASTING",
                strategy="AVG",
                currentCid="c1",
                mqSet=_queues(3),
                cidAll=["c1", "c2"],
            ),
            s(
                "rebalance_by_topic",
                messageModel="BROADCASTING",
                strategy="AVG",
                currentCid="c1",
                mqSet=None,
                cidAll=None,
            ),
        ),
        _al(
            "rebal2-3-topics",
            s(
                "rebalance_topics",
                paused=False,
                subscribedTopics=["T", "%RETRY%G"],
                tableMqs=[mq(0), mq(0, topic="OLD"), mq(1, topic="%RETRY%G")],
            ),
            s(
                "rebalance_topics",
                paused=True,
                subscribedTopics=["T"],
                tableMqs=[mq(0, topic="OLD")],
            ),
        ),
        _al(
            "rebal1-schedule",
            s("next_rebalance_at", lastRunEnd=1000, wokenAt=None),
            s("next_rebalance_at", lastRunEnd=1000, wokenAt=5000),
            s("next_rebalance_at", lastRunEnd=1000, wokenAt=500),
            s("next_rebalance_at", lastRunEnd=1000, wokenAt=30000),
        ),
        _al(
            "rebal24-client-id",
            *(
                s(
                    "client_id",
                    clientIp="10.0.0.9",
                    instanceName=name,
                    unitName=unit,
                    messageModel=model,
                    pid=4242,
                    nanoTime=77,
                    enableStream=stream,
                )
                for name, unit, model, stream in (
                    ("DEFAULT", None, "CLUSTERING", False),
                    ("DEFAULT", None, "BROADCASTING", False),
                    ("app", "u1", "CLUSTERING", False),
                    ("app", "  ", "CLUSTERING", False),
                    ("DEFAULT", "u1", "CLUSTERING", True),
                )
            ),
        ),
    ]


def allocate_random(rng: random.Random, i: int) -> list[Case]:
    """Every consumer of random (queues, consumers) shapes, both strategies: the allocations
    must partition the queues."""
    steps = []
    for _ in range(6):
        n, c = rng.randrange(1, 13), rng.randrange(1, 6)
        cids = [f"c{k}" for k in range(c)]
        strategy = rng.choice(["AVG", "AVG_BY_CIRCLE"])
        steps += [_alloc(strategy, cid, n, cids) for cid in cids]
    return [Case("allocate", str(i), {}, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = allocate_edges
RANDOM = allocate_random
