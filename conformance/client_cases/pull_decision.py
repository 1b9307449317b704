"""Cases of area `pull_decision` (see conformance.adapters.pull_decision for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, s
from pullspec.conformance.jsontypes import JSONValue

#: One MiB (the size thresholds are in MiB).
MIB = 1024 * 1024


#: An orderly consumer.
ORDERLY = {"consumeMode": "ORDERLY"}


def _attempt(**pq: JSONValue) -> Step:
    """An attempt on a process queue with the given snapshot fields (consumer running)."""
    return s("attempt", processQueue=pq)


def _pd(name: str, config: Config, *steps: Step) -> Case:
    return Case("pull_decision", name, config, steps)


def pull_decision_edges() -> list[Case]:
    """FLOW-1 … FLOW-15 and PULLQ-4, PULLQ-8, PULLQ-9 at their boundaries."""
    return [
        _pd(
            "flow1-dropped-dies",
            {},
            _attempt(dropped=True, msgCount=5000),
            s("attempt", processQueue={"dropped": True}, consumer={"paused": True}),
        ),
        _pd(
            "flow2-touch-even-when-paused",
            {},
            s("attempt", consumer={"paused": True}),
            s("attempt", consumer={"running": False}),
        ),
        _pd(
            "flow3-not-running-delay-e",
            {"pullTimeDelayMillsWhenException": 3000},
            s(
                "attempt",
                consumer={"running": False, "paused": True},
                processQueue={"msgCount": 5000},
            ),
        ),
        _pd(
            "flow4-paused-1000",
            {"pullTimeDelayMillsWhenException": 3000},
            s("attempt", consumer={"paused": True}, processQueue={"msgCount": 5000}),
        ),
        _pd(
            "flow6-count-boundary",
            {"pullThresholdForQueue": 1000, "nextOffset": 42},
            _attempt(msgCount=1000),
            _attempt(msgCount=1001),
            _attempt(msgCount=1001),
            _attempt(msgCount=999),
        ),
        _pd(
            "flow6-orderly-too",
            {**ORDERLY, "pullThresholdForQueue": 10},
            _attempt(msgCount=11, locked=True),
        ),
        _pd(
            "flow5-7-size-mib-floor",
            {"pullThresholdSizeForQueue": 100},
            _attempt(msgSize=100 * MIB + MIB - 1),
            _attempt(msgSize=101 * MIB),
            _attempt(msgSize=101 * MIB - 1),
        ),
        _pd(
            "flow7-orderly-too",
            {**ORDERLY, "pullThresholdSizeForQueue": 1},
            _attempt(msgSize=2 * MIB, locked=True),
        ),
        _pd(
            "flow8-span-boundary",
            {"consumeConcurrentlyMaxSpan": 2000},
            _attempt(maxSpan=2000),
            _attempt(maxSpan=2001),
            _attempt(maxSpan=2001, msgCount=2000),
        ),
        _pd(
            "flow8-orderly-skips-span",
            {**ORDERLY, "consumeConcurrentlyMaxSpan": 1},
            s("attempt", processQueue={"maxSpan": 5000, "locked": True}, firstLockOffset=0),
        ),
        _pd(
            "flow9-log-every-1000th",
            {"counters": {"queueFlowControlTimes": 999, "queueMaxSpanFlowControlTimes": 2000}},
            _attempt(msgCount=5000),
            _attempt(msgCount=5000),
            _attempt(maxSpan=9000),
        ),
        _pd(
            "flow10-empty-tree-log-lost",
            {"pullThresholdForQueue": 1},
            _attempt(msgCount=2, msgTreeEmpty=True),
            _attempt(msgCount=2),
        ),
        _pd(
            "flow11-orderly-unlocked",
            {**ORDERLY, "pullTimeDelayMillsWhenException": 2000},
            _attempt(locked=False),
            _attempt(locked=False, msgCount=5000),
        ),
        _pd(
            "flow12-first-lock-moves-cursor",
            {**ORDERLY, "nextOffset": 10},
            s("attempt", processQueue={"locked": True}, firstLockOffset=4),
            s("attempt", processQueue={"locked": True}, firstLockOffset=99),
        ),
        _pd(
            "flow12-first-lock-forward",
            {**ORDERLY, "nextOffset": 10},
            s("attempt", processQueue={"locked": True}, firstLockOffset=25),
        ),
        _pd(
            "flow12-first-lock-fails",
            {**ORDERLY, "nextOffset": 10},
            s("attempt", processQueue={"locked": True}, firstLockOffset="fails"),
            s("attempt", processQueue={"locked": True}, firstLockOffset=7),
        ),
        _pd(
            # 4.7's computePullFromWhere answers -1 for a failed query: the request pulls at -1
            # from then on; 4.9 delays by E and tries again.
            "flow12-first-lock-fails-from-zero",
            {**ORDERLY, "nextOffset": 0, "pullTimeDelayMillsWhenException": 2500},
            s("attempt", processQueue={"locked": True}, firstLockOffset="fails"),
            s("attempt", processQueue={"locked": True}, firstLockOffset="fails"),
        ),
        _pd(
            "flow12-first-lock-fails-by-timestamp",
            {**ORDERLY, "nextOffset": 3, "consumeFromWhere": "CONSUME_FROM_TIMESTAMP"},
            s("attempt", processQueue={"locked": True}, firstLockOffset="fails"),
        ),
        _pd(
            # CONSUME_FROM_FIRST_OFFSET asks the broker nothing when no offset is stored: 0.
            "flow12-first-lock-first-offset-asks-nothing",
            {**ORDERLY, "nextOffset": 3, "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET"},
            s("attempt", processQueue={"locked": True}, firstLockOffset="fails"),
        ),
        _pd(
            "flow12-then-no-subscription",
            {**ORDERLY, "nextOffset": 10},
            s(
                "attempt",
                processQueue={"locked": True},
                consumer={"hasSubscription": False},
                firstLockOffset=3,
            ),
        ),
        _pd(
            "flow13-no-subscription",
            {},
            s("attempt", consumer={"hasSubscription": False}),
            s("attempt", consumer={"hasSubscription": False}, serviceStopped=True),
        ),
        _pd(
            "flow14-topic-thresholds",
            {"pullThresholdForTopic": 10, "pullThresholdSizeForTopic": 3},
            s("queue_changed", processQueueCount=4),
            _attempt(msgCount=3),
            _attempt(msgCount=2, msgSize=2 * MIB),
            s("queue_changed", processQueueCount=0),
            s("queue_changed", processQueueCount=40),
        ),
        _pd(
            "flow14-minus-one-keeps",
            {"pullThresholdForQueue": 7},
            s("queue_changed", processQueueCount=3),
            _attempt(msgCount=8),
        ),
        _pd(
            "flow14-past-checked-range",
            {"pullThresholdForTopic": 6553500},
            s("queue_changed", processQueueCount=1),
            _attempt(msgCount=70000),
        ),
        _pd(
            "flow15-ranges",
            {},
            *(
                s("check_config", setting=k, value=v)
                for k, v in (
                    ("pullThresholdForQueue", 0),
                    ("pullThresholdForQueue", 1),
                    ("pullThresholdForQueue", 65535),
                    ("pullThresholdForQueue", 65536),
                    ("pullThresholdForTopic", -1),
                    ("pullThresholdForQueue", -1),
                    ("pullThresholdSizeForTopic", -1),
                    ("pullThresholdSizeForQueue", 1025),
                    ("consumeConcurrentlyMaxSpan", 65535),
                    ("pullInterval", 0),
                    ("pullBatchSize", 1025),
                    ("consumeMessageBatchMaxSize", 1024),
                    ("consumeThreadMin", 1000),
                    ("consumeThreadMax", 1001),
                )
            ),
        ),
        _pd(
            "pullq8-circulation",
            {},
            _attempt(),
            s("attempt", processQueue={"msgCount": 5000}, serviceStopped=True),
            s("attempt", processQueue={"dropped": True}, serviceStopped=False),
        ),
        _pd(
            "pullq9-order-of-checks",
            {**ORDERLY, "pullThresholdForQueue": 1},
            s(
                "attempt",
                processQueue={"dropped": True, "msgCount": 9},
                consumer={"running": False},
            ),
            s("attempt", processQueue={"msgCount": 9}, consumer={"running": False, "paused": True}),
            s("attempt", processQueue={"msgCount": 9}, consumer={"hasSubscription": False}),
            s("attempt", processQueue={"msgCount": 1}, consumer={"hasSubscription": False}),
        ),
    ]


def pull_decision_random(rng: random.Random, i: int) -> list[Case]:
    """Random snapshots against a random configuration."""
    config: Config = {
        "consumeMode": rng.choice(["CONCURRENTLY", "ORDERLY"]),
        "pullThresholdForQueue": rng.choice([1, 5, 1000]),
        "pullThresholdSizeForQueue": rng.choice([1, 2, 100]),
        "consumeConcurrentlyMaxSpan": rng.choice([1, 10, 2000]),
        "nextOffset": rng.randrange(0, 50),
    }
    steps = []
    for _ in range(24):
        pq = {
            "dropped": rng.random() < 0.05,
            "msgCount": rng.randrange(0, 1200),
            "msgSize": rng.randrange(0, 3 * MIB),
            "maxSpan": rng.randrange(0, 2200),
            "locked": rng.random() < 0.7,
            "msgTreeEmpty": rng.random() < 0.1,
        }
        consumer = {
            "running": rng.random() < 0.9,
            "paused": rng.random() < 0.1,
            "hasSubscription": rng.random() < 0.9,
        }
        first: int | str = 0
        if rng.random() < 0.9:
            lock_offsets: list[int | str] = [rng.randrange(0, 60), "fails"]
            first = rng.choice(lock_offsets)
        steps.append(s("attempt", processQueue=pq, consumer=consumer, firstLockOffset=first))
        if rng.random() < 0.1:
            steps.append(s("queue_changed", processQueueCount=rng.randrange(0, 8)))
    return [Case("pull_decision", str(i), config, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = pull_decision_edges
RANDOM = pull_decision_random
