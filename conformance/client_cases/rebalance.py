"""Cases of area `rebalance` (see conformance.adapters.rebalance for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, mq, s
from pullspec.conformance.jsontypes import JSONValue


def _rb(name: str, config: Config, *steps: Step) -> Case:
    return Case("rebalance", name, config, steps)


def _update(queues: list[int], **more: JSONValue) -> Step:
    return s("update_table", topic="T", mqSet=[mq(q) for q in queues], **more)


#: An orderly consumer.
ORDERLY = {"consumeMode": "ORDERLY"}


def rebalance_edges() -> list[Case]:
    """REBAL-9 … REBAL-23, REBAL-17, REBAL-18."""
    return [
        _rb(
            # lockAll at 20 000 stamps lastLockTimestamp 20 000 on the granted queue: it is not
            # lock-expired 30 000 ms later, and is 30 001 ms later (REBAL-20, PQ-15).
            "rebal20-lock-timestamp",
            ORDERLY,
            _update([0, 1], now=0),
            s("lock_all", requested=[mq(0), mq(1)], granted=[mq(0)], now=20_000),
            s("advance_clock", ms=30_000),
            s("advance_clock", ms=1),
        ),
        _rb(
            # A pull-expired queue is dropped and removed, its committed offset persisted, and —
            # still assigned — re-created in the same update at that offset (REBAL-9, REBAL-14).
            "rebal9-pull-expired-recreated",
            {},
            _update([0, 1], now=0),
            s("set_queue", mq=mq(0), committedOffset=5, pullExpired=True),
            s("set_queue", mq=mq(1), committedOffset=7),
            _update([0, 1], now=1000),
        ),
        _rb(
            "rebal9-13-assign-and-shrink",
            {"pullThresholdForTopic": 100, "pullThresholdSizeForTopic": 50},
            _update([0, 1, 2, 3], now=1000, offsets=[{"mq": mq(2), "offset": 40}]),
            _update([0, 1, 2, 3], now=2000),
            _update([0, 1], now=3000),
            _update([], now=4000),
        ),
        _rb(
            "rebal9-pull-expired",
            {},
            _update([0, 1], now=10),
            s("set_queue", mq=mq(1), pullExpired=True),
            s("set_queue", mq=mq(5, topic="OTHER"), pullExpired=True),
            _update([0, 1], now=20),
        ),
        _rb(
            "rebal9-passive-false-keeps-expired",
            {"consumePassively": False},
            _update([0]),
            s("set_queue", mq=mq(0), pullExpired=True),
            _update([0]),
        ),
        _rb(
            "rebal14-15-orderly-removal",
            ORDERLY,
            _update([0, 1, 2]),
            s("set_queue", mq=mq(0), consumeLockFree=False),
            s("set_queue", mq=mq(1), hasTempMessage=True),
            _update([]),
            _update([]),
            s("set_queue", mq=mq(0), consumeLockFree=True),
            _update([]),
        ),
        _rb(
            "rebal14-orderly-broadcasting",
            {**ORDERLY, "messageModel": "BROADCASTING"},
            _update([0]),
            s("set_queue", mq=mq(0), consumeLockFree=False),
            _update([]),
        ),
        _rb(
            "rebal10-11-new-queues",
            ORDERLY,
            _update(
                [0, 1, 2, 3],
                lockRefused=[mq(1)],
                offsets=[{"mq": mq(2), "offset": -1}, {"mq": mq(3), "offset": None}],
            ),
        ),
        _rb(
            "rebal10-blocked-by-dropped",
            {},
            _update([0]),
            s("set_queue", mq=mq(0), dropped=True),
            _update([0]),
        ),
        _rb(
            "rebal16-remove-process-queue",
            {},
            _update([0]),
            s("remove_process_queue", mq=mq(0)),
            s("remove_process_queue", mq=mq(0)),
        ),
        _rb(
            "rebal19-21-lock-marks",
            ORDERLY,
            _update([0, 1, 2]),
            s("lock", mq=mq(0), granted=[mq(0), mq(1), mq(7)]),
            s("lock", mq=mq(2), granted=[mq(0)]),
            s("lock", mq=mq(2), granted=None),
            s("lock_all", requested=[mq(0), mq(1), mq(2)], granted=[mq(2)]),
            s("lock_all", requested=[mq(0), mq(1), mq(2)], granted=None),
            s("unlock", all=False, requested=[mq(2)], raised=False),
            s("unlock", all=True, requested=[mq(2)], raised=True),
            s("unlock", all=True, requested=[mq(2)], raised=False),
        ),
        _rb(
            "rebal22-lease-timeline",
            {},
            s("lease_timeline", lastLock=0),
            s("lease_timeline", lastLock=123456),
        ),
        _rb("rebal23-destroy", {}, _update([0, 1]), s("destroy")),
        _rb(
            "rebal17-18-pull-from-where",
            {},
            *(
                s(
                    "compute_pull_from_where",
                    consumeFromWhere=how,
                    mq=q,
                    lastOffset=last,
                    maxOffset=mx,
                    searchOffset=search,
                    consumeTimestamp=stamp,
                    constructionMs=1_700_000_000_000,
                )
                for how, q, last, mx, search, stamp in (
                    ("CONSUME_FROM_LAST_OFFSET", mq(0), 5, 90, 30, None),
                    ("CONSUME_FROM_LAST_OFFSET", mq(0), -2, 90, 30, None),
                    ("CONSUME_FROM_LAST_OFFSET", mq(0), -1, 90, 30, None),
                    ("CONSUME_FROM_LAST_OFFSET", mq(0, topic="%RETRY%G"), -1, 90, 30, None),
                    ("CONSUME_FROM_MAX_OFFSET", mq(0), -1, 90, 30, None),
                    ("CONSUME_FROM_FIRST_OFFSET", mq(0), -1, 90, 30, None),
                    ("CONSUME_FROM_TIMESTAMP", mq(0), -1, 90, 30, None),
                    ("CONSUME_FROM_TIMESTAMP", mq(0), -1, 90, 30, "20240102030405"),
                    ("CONSUME_FROM_TIMESTAMP", mq(0, topic="%RETRY%G"), -1, 90, 30, None),
                    ("CONSUME_FROM_LAST_OFFSET", mq(0), -1, None, 30, None),
                    ("CONSUME_FROM_TIMESTAMP", mq(0), -1, 90, None, None),
                )
            ),
        ),
    ]


def rebalance_random(rng: random.Random, i: int) -> list[Case]:
    """Random assignments over a random consumer, with queues expiring and losing their lock."""
    config: Config = {
        "consumeMode": rng.choice(["CONCURRENTLY", "ORDERLY"]),
        "messageModel": rng.choice(["CLUSTERING", "CLUSTERING", "BROADCASTING"]),
        "pullThresholdForTopic": rng.choice([-1, 64]),
    }
    steps = []
    for t in range(12):
        if rng.random() < 0.3:
            steps.append(
                s(
                    "set_queue",
                    mq=mq(rng.randrange(0, 6)),
                    pullExpired=rng.random() < 0.5,
                    consumeLockFree=rng.random() < 0.7,
                    hasTempMessage=rng.random() < 0.5,
                )
            )
        if rng.random() < 0.2:
            steps.append(
                s("set_queue", mq=mq(rng.randrange(0, 6)), committedOffset=rng.randrange(0, 9))
            )
        queues = sorted(rng.sample(range(6), rng.randrange(0, 7)))
        steps.append(
            _update(
                queues,
                now=t * 20000,
                lockRefused=[mq(q) for q in queues if rng.random() < 0.2],
                offsets=[{"mq": mq(q), "offset": rng.choice((0, 5, -1, None))} for q in queues],
            )
        )
        if rng.random() < 0.4:
            granted = [mq(q) for q in queues if rng.random() < 0.6]
            steps.append(
                s(
                    "lock_all",
                    requested=[mq(q) for q in queues],
                    granted=granted,
                    now=t * 20000 + 10000,
                )
            )
            steps.append(s("advance_clock", ms=rng.choice([1, 5000, 9999])))
    return [Case("rebalance", str(i), config, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = rebalance_edges
RANDOM = rebalance_random
