"""Cases of area `consume_orderly` (see conformance.adapters.consume_orderly for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, msg, s
from pullspec.conformance.jsontypes import JSONValue

#: One minute in milliseconds (consumeTimeout is in minutes).
MINUTE = 60_000


def _put(*offsets: int, **more: JSONValue) -> Step:
    return s("put_messages", msgs=[msg(o, "A", bodySize=10, **more) for o in offsets])


def _co(name: str, config: Config, *steps: Step) -> Case:
    return Case("consume_orderly", name, config, steps)


def _listener(status: str | None, **more: JSONValue) -> Step:
    return s("listener", status=status, **more)


#: An orderly consumer taking two messages per loop iteration.
BATCH2 = {"consumeMessageBatchMaxSize": 2}


def consume_orderly_edges() -> list[Case]:
    """ORDER-1 … ORDER-17."""
    loop = s("loop_step", now=0, beginTime=0)
    return [
        _co(
            "order3-dispatch",
            {},
            _put(0, 1),
            _put(2),
            s("loop_step"),
            s("loop_step"),
            s("loop_step"),
            _put(3),
        ),
        _co(
            "order2-4-gate",
            {"messageModel": "CLUSTERING"},
            s("gate", queueId=0, droppedOnEntry=True, locked=True),
            s("gate", queueId=1, locked=True),
            s("gate", queueId=0, locked=True, lockExpired=True),
            s("gate", queueId=2, locked=False, droppedInMonitor=True),
            s("gate", queueId=1, locked=False),
        ),
        _co(
            "order4-broadcasting-gate",
            {"messageModel": "BROADCASTING"},
            s("gate", queueId=0, locked=False, lockExpired=True),
        ),
        _co(
            "order5-6-9-11-auto-commit",
            BATCH2,
            _put(0, 1, 2),
            loop,
            _listener("SUCCESS"),
            loop,
            _listener("SUCCESS"),
            loop,
        ),
        _co(
            "order5-exits",
            {},
            _put(0),
            s("loop_step", dropped=True),
            s("loop_step", locked=False),
            s("loop_step", lockExpired=True),
            s("loop_step", now=60001, beginTime=0),
            s("loop_step", now=60000, beginTime=0),
        ),
        _co(
            "order5-broadcasting-ignores-lock",
            {"messageModel": "BROADCASTING"},
            _put(0),
            s("loop_step", locked=False, lockExpired=True),
        ),
        _co(
            "order9-12-14-suspend",
            {"suspendCurrentQueueTimeMillis": 1000, "maxReconsumeTimes": 5},
            _put(0, 1),
            loop,
            _listener("SUSPEND_CURRENT_QUEUE_A_MOMENT"),
            loop,
            _listener("SUSPEND_CURRENT_QUEUE_A_MOMENT", suspendMs=5),
            loop,
            _listener("SUSPEND_CURRENT_QUEUE_A_MOMENT", suspendMs=40000),
            loop,
            _listener(None, exception=True),
        ),
        _co(
            "order14-15-at-maximum",
            {"maxReconsumeTimes": 2, "consumerGroup": "G"},
            s(
                "put_messages",
                msgs=[
                    msg(0, "A", reconsumeTimes=2, properties={"UNIQ_KEY": "U0"}),
                    msg(1, "A", reconsumeTimes=1),
                ],
            ),
            s("loop_step"),
            _listener("SUSPEND_CURRENT_QUEUE_A_MOMENT", sendBackOk=[False]),
            s("loop_step"),
            _listener("SUSPEND_CURRENT_QUEUE_A_MOMENT", sendBackOk=[True]),
        ),
        _co(
            "order14-all-sent-back-commits",
            {"maxReconsumeTimes": 0},
            _put(0),
            s("loop_step"),
            _listener("SUSPEND_CURRENT_QUEUE_A_MOMENT", sendBackOk=[True]),
        ),
        _co(
            "order10-manual-commit",
            BATCH2,
            _put(0, 1, 2, 3),
            loop,
            _listener("SUCCESS", autoCommit=False),
            loop,
            _listener("COMMIT", autoCommit=False),
            loop,
            _listener("ROLLBACK", autoCommit=False),
            loop,
            _listener("SUSPEND_CURRENT_QUEUE_A_MOMENT", autoCommit=False, suspendMs=-1),
            loop,
            _listener("COMMIT", autoCommit=False),
        ),
        _co("order10-manual-commit-empty", {}, _listener("COMMIT", autoCommit=False)),
        _co(
            "order9-commit-rollback-in-auto",
            {},
            _put(0, 1),
            loop,
            _listener("COMMIT"),
            loop,
            _listener("ROLLBACK"),
        ),
        _co(
            "order8-status",
            {"consumeTimeout": 1},
            _put(0, 1, 2, 3),
            loop,
            _listener(None, exception=False),
            loop,
            _listener("SUCCESS", consumeRtMs=MINUTE),
            loop,
            _listener("SUCCESS", consumeRtMs=MINUTE - 1),
        ),
        _co(
            "order7-11-dropped",
            {},
            _put(0, 1),
            loop,
            _listener("SUCCESS", droppedUnderConsumeLock=True),
            _listener("SUCCESS", dropped=True),
        ),
        _co(
            "order13-try-lock-later",
            {},
            *(
                s("try_lock_later", stopped=a, lockOk=b)
                for a in (False, True)
                for b in (False, True)
            ),
        ),
        _co("order1-17-lifecycle-clustering", {}, s("lock_schedule"), s("shutdown")),
        _co(
            "order1-17-lifecycle-broadcasting",
            {"messageModel": "BROADCASTING"},
            s("lock_schedule"),
            s("shutdown"),
        ),
    ]


def consume_orderly_random(rng: random.Random, i: int) -> list[Case]:
    """Random loops and listener answers on one queue."""
    config: Config = {
        "consumeMessageBatchMaxSize": rng.choice([1, 2, 3]),
        "maxReconsumeTimes": rng.choice([-1, 1, 3]),
    }
    steps = [_put(*range(6))]
    statuses = [None, "SUCCESS", "SUSPEND_CURRENT_QUEUE_A_MOMENT", "COMMIT", "ROLLBACK"]
    for _ in range(10):
        steps.append(s("loop_step"))
        steps.append(
            _listener(
                rng.choice(statuses),
                autoCommit=rng.random() < 0.7,
                sendBackOk=[rng.random() < 0.5 for _ in range(3)],
            )
        )
    return [Case("consume_orderly", str(i), config, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = consume_orderly_edges
RANDOM = consume_orderly_random
