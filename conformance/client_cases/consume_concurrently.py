"""Cases of area `consume_concurrently` (see conformance.adapters.consume_concurrently for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, msg, s
from pullspec.conformance.jsontypes import JSONObject, JSONValue

#: One minute in milliseconds (consumeTimeout is in minutes).
MINUTE = 60_000


def _cc(name: str, config: Config, *steps: Step) -> Case:
    return Case("consume_concurrently", name, config, steps)


def _put(*offsets: int, **more: JSONValue) -> Step:
    return s("put_messages", msgs=[msg(o, "A", bodySize=10, **more) for o in offsets])


def _result(offsets: list[int], status: str, **more: JSONValue) -> Step:
    return s("process_result", offsets=offsets, status=status, **more)


def consume_concurrently_edges() -> list[Case]:
    return [*_cleaner_edges(), *_edges()]


def _cleaner_edges() -> list[Case]:
    """CONC-13 and PQ-18 as a started service schedules and runs them."""
    stuck: JSONObject = {"queueOffset": 0, "tags": "A", "consumeStartTime": 0}
    fresh: JSONObject = {"queueOffset": 1, "tags": "A", "consumeStartTime": 1_000_000}
    return [
        _cc(
            # consumeTimeout 15: the sweep is due every 15 minutes; the message stuck since 0 is
            # not expired at 900 000 (not more than 15 min) and is sent back (delay level 3) and
            # uncached at 1 800 000; the one started at 1 000 000 stays.
            "conc13-pq18-clean-expire-schedule",
            {"consumeTimeout": 15},
            s("start"),
            s("put_messages", msgs=[stuck, fresh]),
            s("advance_clock", ms=900_000),
            s("advance_clock", ms=900_000),
        ),
        _cc(
            "conc13-consume-timeout-1",
            {"consumeTimeout": 1},
            s("start"),
            s("put_messages", msgs=[stuck]),
            s("advance_clock", ms=120_001),
        ),
    ]


def _edges() -> list[Case]:
    """CONC-1 … CONC-14 (and ORDER-18's cleaner check)."""
    return [
        _cc(
            "conc2-split",
            {},
            _put(0, 1, 2, 3, 4),
            s("submit", offsets=[0, 1, 2, 3, 4], batchMaxSize=1),
            s("submit", offsets=[0, 1, 2, 3, 4], batchMaxSize=2),
            s("submit", offsets=[0, 1, 2, 3, 4], batchMaxSize=5),
            s("submit", offsets=[0, 1, 2, 3, 4], batchMaxSize=2, rejectedAt=1),
            s("submit", offsets=[0, 1, 2, 3, 4], batchMaxSize=5, rejectedAt=0),
            s("submit", offsets=[0, 1], batchMaxSize=1, rejectedAt=2),
        ),
        _cc(
            "conc3-4-request",
            {},
            s("resubmit", kind="SEND_BACK_FAILED"),
            s("resubmit", kind="REJECTED"),
            s("run_request", droppedOnEntry=True, hasHook=True, droppedAfterListener=False),
            s("run_request", droppedOnEntry=False, hasHook=False, droppedAfterListener=False),
            s("run_request", droppedOnEntry=False, hasHook=True, droppedAfterListener=True),
        ),
        _cc(
            "conc5-status",
            {"consumeTimeout": 1},
            s("listener_returned", status=None, exception=True, consumeRtMs=5),
            s("listener_returned", status=None, exception=False, consumeRtMs=5),
            s("listener_returned", status="CONSUME_SUCCESS", consumeRtMs=MINUTE),
            s("listener_returned", status="RECONSUME_LATER", consumeRtMs=MINUTE - 1),
            s("listener_returned", status="CONSUME_SUCCESS", consumeRtMs=MINUTE - 1),
            s("listener_returned", status=None, exception=False, consumeRtMs=2 * MINUTE),
        ),
        _cc(
            "conc6-8-9-clustering",
            {"maxReconsumeTimes": -1},
            _put(0, 1, 2, 3),
            _result(
                [0, 1, 2, 3],
                "CONSUME_SUCCESS",
                ackIndex=1,
                sendBackOk=[True, False],
                delayLevelWhenNextConsume=0,
            ),
        ),
        _cc(
            "conc6-ack-clamped",
            {},
            _put(5, 6, 7),
            _result([5, 6, 7], "CONSUME_SUCCESS", sendBackOk=[]),
            _result([], "CONSUME_SUCCESS", sendBackOk=[]),
        ),
        _cc(
            "conc6-reconsume-later",
            {"maxReconsumeTimes": 3, "consumerGroup": "GX"},
            _put(0, 1, 2),
            _result(
                [1, 2],
                "RECONSUME_LATER",
                ackIndex=1,
                sendBackOk=[True, True],
                delayLevelWhenNextConsume=5,
            ),
            _result([0], "RECONSUME_LATER", sendBackOk=[False]),
        ),
        _cc(
            "conc6-ack-below-minus-one",
            {},
            _put(0, 1),
            _result([0, 1], "CONSUME_SUCCESS", ackIndex=-2, sendBackOk=[True, True]),
            _result([0, 1], "CONSUME_SUCCESS", ackIndex=-1, sendBackOk=[True, True]),
        ),
        _cc(
            "conc7-broadcasting",
            {"messageModel": "BROADCASTING"},
            _put(0, 1, 2),
            _result([0, 1, 2], "RECONSUME_LATER", sendBackOk=[]),
        ),
        _cc(
            "conc9-dropped",
            {},
            _put(0, 1),
            _result([0, 1], "CONSUME_SUCCESS", dropped=True, sendBackOk=[]),
        ),
        _cc(
            "conc10-11-namespace-and-ids",
            {"namespace": "ns", "consumerGroup": "ns%G"},
            s(
                "put_messages",
                msgs=[
                    msg(
                        0,
                        "A",
                        topic="ns%T",
                        reconsumeTimes=2,
                        properties={"UNIQ_KEY": "ABC", "TRAN_MSG": "true"},
                    )
                ],
            ),
            _result([0], "RECONSUME_LATER", sendBackOk=[True]),
        ),
        _cc(
            "conc12-reset-retry",
            {"namespace": "ns", "consumerGroup": "G"},
            s(
                "reset_retry",
                msgs=[
                    msg(0, topic="%RETRY%G", properties={"RETRY_TOPIC": "ns%T"}),
                    msg(1, topic="%RETRY%G"),
                    msg(2, topic="%RETRY%H", properties={"RETRY_TOPIC": "T"}),
                    msg(3, topic="ns%T2"),
                    msg(4, topic="T3"),
                ],
            ),
        ),
        _cc(
            "conc1-core-pool",
            {"consumeThreadMin": 20, "consumeThreadMax": 64},
            *(s("update_core_pool_size", n=n) for n in (0, 10, 64, 63, 40000, -1)),
        ),
        _cc(
            "conc13-14-lifecycle", {"consumeTimeout": 15}, s("clean_expire_schedule"), s("shutdown")
        ),
        _cc("order18-no-cleaner-orderly", {"consumeMode": "ORDERLY"}, s("clean_expire_schedule")),
    ]


def consume_concurrently_random(rng: random.Random, i: int) -> list[Case]:
    """Random batches, statuses, ack indexes and send-back outcomes."""
    timeout = rng.choice([1, 15])
    config: Config = {
        "messageModel": rng.choice(["CLUSTERING", "CLUSTERING", "BROADCASTING"]),
        "consumeTimeout": timeout,
    }
    steps = []
    next_offset = 0
    if rng.random() < 0.5:
        # The consume-timeout sweep (CONC-13, PQ-18) over messages stuck since around 0.
        steps.append(s("start"))
        stuck = [
            {"queueOffset": o, "consumeStartTime": rng.choice([0, 1, 60_000])} for o in range(3)
        ]
        steps.append(s("put_messages", msgs=stuck))
        next_offset = 3
        for _ in range(2):
            steps.append(s("advance_clock", ms=rng.choice([timeout * 60_000, 1, 60_000])))
    for _ in range(8):
        size = rng.randrange(1, 5)
        offsets = list(range(next_offset, next_offset + size))
        next_offset += size
        steps.append(_put(*offsets, reconsumeTimes=rng.randrange(0, 3)))
        status = rng.choice(["CONSUME_SUCCESS", "RECONSUME_LATER"])
        ack = rng.randrange(-1, size + 2)
        failed = size if status == "RECONSUME_LATER" else size - (min(ack, size - 1) + 1)
        steps.append(
            _result(
                offsets,
                status,
                ackIndex=ack,
                sendBackOk=[rng.random() < 0.7 for _ in range(failed)],
                dropped=rng.random() < 0.1,
            )
        )
    return [Case("consume_concurrently", str(i), config, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = consume_concurrently_edges
RANDOM = consume_concurrently_random
