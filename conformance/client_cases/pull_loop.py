"""Cases of area `pull_loop` (see conformance.adapters.pull_loop for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, s

#: Start from offset 0 whatever the broker holds (the default, LAST_OFFSET, starts at the end).
FIRST = {"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET"}


def _pl(name: str, config: Config, *steps: Step) -> Case:
    return Case("pull_loop", name, config, steps)


def _go(*queue_ids: int) -> tuple[Step, ...]:
    return (s("start"), s("rebalance", queueIds=list(queue_ids)))


def pull_loop_edges() -> list[Case]:
    """FLOW-6/7/8 as the process queue computes them, OFFSET-13 and REBAL-14's persist of the
    committed offset, RESULT-3/4/10, REBAL-17 and PULLQ-1 through the whole loop."""
    return [
        _pl(
            # FLOW-8: 11 cached messages, far under the count limit, but a span of 2010.
            "flow8-span-from-the-process-queue",
            FIRST,
            s("put", queueId=0, count=2011),
            s("hold", queueId=0, offsets=[0, *range(2001, 2011)]),
            *_go(0),
            s("advance", ms=120),
            s("release", queueId=0, offsets=[0]),
            s("advance", ms=60),
        ),
        _pl(
            # FLOW-8 at the boundary: a span of exactly 2000 still pulls.
            "flow8-span-boundary",
            FIRST,
            s("put", queueId=0, count=2002),
            s("hold", queueId=0, offsets=[0, 2000]),
            *_go(0),
            s("advance", ms=60),
        ),
        _pl(
            # FLOW-6: the count limit counts the cache, not the pulled batch.
            "flow6-count-from-the-process-queue",
            {**FIRST, "pullThresholdForQueue": 40, "pullBatchSize": 32},
            s("put", queueId=0, count=100),
            s("hold", queueId=0, offsets=list(range(0, 100))),
            *_go(0),
            s("advance", ms=120),
        ),
        _pl(
            # FLOW-7: the size limit in MiB of the cached bodies.
            "flow7-size-from-the-process-queue",
            {**FIRST, "pullThresholdSizeForQueue": 1, "pullBatchSize": 2},
            s("put", queueId=0, count=6, bodySize=700_000),
            s("hold", queueId=0, offsets=list(range(6))),
            *_go(0),
            s("advance", ms=60),
        ),
        _pl(
            # removeMessage commits the smallest cached offset; a removal by rebalance
            # persists that committed offset (5), not the highest seen (REBAL-14, OFFSET-6).
            "rebal14-removal-persists-the-committed-offset",
            FIRST,
            s("put", queueId=0, count=10),
            s("hold", queueId=0, offsets=[5, 6, 7, 8, 9]),
            *_go(0),
            s("rebalance", queueIds=[]),
            s("advance", ms=20_000),
        ),
        _pl(
            # The stored offset wins over CONSUME_FROM_FIRST_OFFSET (REBAL-17), the periodic
            # persist writes the committed offset, shutdown persists once more.
            "rebal17-stored-offset-and-persist",
            FIRST,
            s("put", queueId=0, count=8),
            s("set_offset", queueId=0, offset=3),
            *_go(0),
            s("advance", ms=10_001),
            s("put", queueId=0, count=2),
            s("shutdown"),
        ),
        _pl(
            # LAST_OFFSET without a stored offset starts at the end; a held pull is answered
            # by the next put, and NO_NEW_MSG after 15 s re-pulls at once (RESULT-8).
            "result8-held-pull-and-last-offset",
            {},
            s("put", queueId=0, count=5),
            *_go(0),
            s("advance", ms=1000),
            s("put", queueId=0, count=2),
            s("advance", ms=16_000),
        ),
        _pl(
            # An offset past the end is illegal: the queue is dropped and, 10 s later, the
            # fix-up writes the broker's nextBeginOffset and removes the queue (RESULT-10).
            "result10-offset-illegal",
            FIRST,
            s("put", queueId=0, count=3),
            s("set_offset", queueId=0, offset=9),
            *_go(0),
            s("advance", ms=10_001),
            s("rebalance", queueIds=[0]),
            s("advance", ms=10),
        ),
        _pl(
            # pullInterval delays every re-pull after a found batch (RESULT-4, PULLQ-4).
            "result4-pull-interval",
            {**FIRST, "pullInterval": 100, "pullBatchSize": 2},
            s("put", queueId=0, count=5),
            *_go(0),
            s("advance", ms=250),
        ),
        _pl(
            # Two queues pulled by the one pull thread in turn (PULLQ-1).
            "pullq1-two-queues",
            {**FIRST, "queues": 2, "pullBatchSize": 3},
            s("put", queueId=0, count=4),
            s("put", queueId=1, count=4),
            *_go(0, 1),
            s("rebalance", queueIds=[1]),
            s("advance", ms=100),
        ),
    ]


def pull_loop_random(rng: random.Random, i: int) -> list[Case]:
    """A consumer over 1–2 queues with small limits, puts, holds, releases and rebalances."""
    queues = rng.choice([1, 2])
    config: Config = {
        "queues": queues,
        "consumeFromWhere": rng.choice(
            ["CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET"]
        ),
        "pullBatchSize": rng.choice([1, 4, 32]),
        "pullThresholdForQueue": rng.choice([3, 10, 1000]),
        "consumeConcurrentlyMaxSpan": rng.choice([5, 50, 2000]),
        "pullInterval": rng.choice([0, 0, 20]),
    }
    steps = [s("put", queueId=0, count=rng.randrange(0, 12)), s("start")]
    for _ in range(18):
        queue = rng.randrange(queues)
        kind = rng.choice(
            ["put", "hold", "release", "advance", "advance", "rebalance", "set_offset"]
        )
        if kind == "put":
            steps.append(s("put", queueId=queue, count=rng.randrange(1, 15)))
        elif kind == "hold":
            first = rng.randrange(0, 20)
            steps.append(
                s("hold", queueId=queue, offsets=list(range(first, first + rng.randrange(1, 4))))
            )
        elif kind == "release":
            steps.append(s("release", queueId=queue, offsets=None))
        elif kind == "advance":
            steps.append(s("advance", ms=rng.choice([10, 60, 1000, 5000, 16_000])))
        elif kind == "rebalance":
            chosen = [q for q in range(queues) if rng.random() < 0.7]
            steps.append(s("rebalance", queueIds=chosen))
        else:
            steps.append(s("set_offset", queueId=queue, offset=rng.choice([None, 0, 3, 50])))
    return [Case("pull_loop", str(i), config, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = pull_loop_edges
RANDOM = pull_loop_random
