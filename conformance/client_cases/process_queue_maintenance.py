"""Cases of area `process_queue_maintenance` (see conformance.adapters.process_queue_maintenance for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, msg, s
from pullspec.conformance.jsontypes import JSONObject

#: One minute in milliseconds (consumeTimeout is in minutes).
MINUTE = 60_000


def _pm(name: str, *steps: Step, config: Config | None = None) -> Case:
    return Case("process_queue_maintenance", name, config or {}, steps)


def process_queue_maintenance_edges() -> list[Case]:
    """PQ-12, PQ-14, PQ-18, PQ-19, PQ-20."""
    fifteen = 15 * MINUTE
    return [
        _pm(
            "pq18-expiry-is-strict",
            s(
                "put_messages",
                msgs=[
                    msg(0, bodySize=3, consumeStartTime=0),
                    msg(1, bodySize=3, consumeStartTime=10),
                    msg(2, bodySize=3, consumeStartTime=fifteen),
                ],
            ),
            s("advance_clock", ms=fifteen),
            s("clean_expired_msg", consumeTimeout=15),
            s("advance_clock", ms=1),
            s("clean_expired_msg", consumeTimeout=15),
            s("advance_clock", ms=10),
            s("clean_expired_msg", consumeTimeout=15, consumeOrderly=True),
            s("clean_expired_msg", consumeTimeout=15),
        ),
        _pm(
            "pq18-head-without-start-time",
            s("put_messages", msgs=[msg(0, bodySize=1), msg(1, bodySize=1, consumeStartTime=0)]),
            s("advance_clock", ms=fifteen + 1),
            s("clean_expired_msg", consumeTimeout=15),
        ),
        _pm(
            "pq18-send-back-fails",
            s(
                "put_messages",
                msgs=[
                    msg(4, bodySize=1, consumeStartTime=0),
                    msg(5, bodySize=1, consumeStartTime=0),
                ],
            ),
            s("advance_clock", ms=MINUTE + 1),
            s("clean_expired_msg", consumeTimeout=1, sendBackFails=[4]),
        ),
        _pm(
            "pq12-14-20-admin",
            s("put_messages", msgs=[msg(0, bodySize=5), msg(1, bodySize=7)]),
            s("inc_try_unlock_times"),
            s("inc_try_unlock_times"),
            s("set_dropped", dropped=True),
            s("clear"),
            s("set_dropped", dropped=False),
            s("put_messages", msgs=[msg(9, bodySize=1)]),
        ),
        _pm(
            "pq19-interrupted",
            *(
                s("interrupted", method=m)
                for m in (
                    "putMessage",
                    "removeMessage",
                    "takeMessages",
                    "commit",
                    "getMaxSpan",
                    "hasTempMessage",
                    "rollback",
                    "makeMessageToConsumeAgain",
                )
            ),
        ),
    ]


def process_queue_maintenance_random(rng: random.Random, i: int) -> list[Case]:
    """Puts with and without CONSUME_START_TIME (around the timeout boundaries), time passing,
    sweeps, clears, drops."""
    steps: list[Step] = []
    offset = 0
    start = now = rng.choice([0, 20 * MINUTE])
    for _ in range(20):
        kind = rng.choice(["put", "put", "advance", "clean", "clean", "clear", "drop", "inc"])
        if kind == "put":
            msgs = []
            for _ in range(rng.randrange(1, 4)):
                more: JSONObject = {"bodySize": rng.randrange(0, 9)}
                if rng.random() < 0.8:
                    # Started just at, just over or well within a timeout of 1 or 15 minutes.
                    ago = rng.choice([0, MINUTE, MINUTE + 1, 15 * MINUTE, 15 * MINUTE + 1])
                    more["consumeStartTime"] = max(now - ago, 0)
                msgs.append(msg(offset, None, **more))
                offset += rng.choice([1, 1, 3])
            steps.append(s("put_messages", msgs=msgs))
        elif kind == "advance":
            ms = rng.choice([1, MINUTE, 15 * MINUTE, 15 * MINUTE + 1])
            now += ms
            steps.append(s("advance_clock", ms=ms))
        elif kind == "clean":
            fails = [o for o in range(offset) if rng.random() < 0.1]
            steps.append(
                s(
                    "clean_expired_msg",
                    consumeTimeout=rng.choice([1, 15]),
                    consumeOrderly=rng.random() < 0.1,
                    sendBackFails=fails,
                )
            )
        elif kind == "clear":
            steps.append(s("clear"))
        elif kind == "drop":
            steps.append(s("set_dropped", dropped=rng.random() < 0.5))
        else:
            steps.append(s("inc_try_unlock_times"))
    return [Case("process_queue_maintenance", str(i), {"clockStart": start}, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = process_queue_maintenance_edges
RANDOM = process_queue_maintenance_random
