"""Cases of area `schedule` (see conformance.adapters.schedule for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, s


def _sc(name: str, config: Config, *steps: Step) -> Case:
    return Case("schedule", name, config, steps)


def _orig(reconsume: int = 0, queue_id: int = 1) -> Step:
    return s(
        "put",
        msgs=[{"queueId": queue_id, "tags": "A", "bodySize": 16, "reconsumeTimes": reconsume}],
    )


def _back(offset: int, level: int, max_times: int | None = 16, queue_id: int = 1) -> Step:
    return s(
        "send_back",
        queueId=queue_id,
        queueOffset=offset,
        delayLevel=level,
        maxReconsumeTimes=max_times,
    )


def schedule_edges() -> list[Case]:
    """RETRY-9, RETRY-10, RETRY-11 (and the send-back rules they build on)."""
    return [
        _sc(
            "retry9-delivery-after-level-3",
            {},
            _orig(),
            _back(0, 0),
            s("advance_clock", ms=9999),
            s("advance_clock", ms=1),
        ),
        _sc(
            "retry9-levels-interleave",
            {},
            _orig(),
            _orig(),
            _orig(3),
            _back(0, 2),
            _back(1, 1),
            _back(2, 0),
            s("advance_clock", ms=60000),
        ),
        _sc(
            "retry9-redelivered-message-retries-again",
            {},
            _orig(),
            _back(0, 1),
            s("advance_clock", ms=1000),
            s(
                "send_back",
                topic="%RETRY%G",
                queueId=0,
                queueOffset=0,
                delayLevel=0,
                maxReconsumeTimes=16,
            ),
            s("advance_clock", ms=30000),
        ),
        _sc(
            "retry4-dead-letter",
            {"groupRetryMaxTimes": 2},
            _orig(2),
            _orig(0),
            _back(0, 0, max_times=None),
            _back(1, -1),
            _back(1, 0, max_times=1),
            s("advance_clock", ms=3_600_000),
        ),
        _sc(
            "retry10-timetable",
            {},
            s("retry_timetable", maxReconsumeTimes=16),
            s("retry_timetable", maxReconsumeTimes=3),
            s("retry_timetable", maxReconsumeTimes=0),
        ),
        _sc(
            "retry10-custom-levels",
            {"messageDelayLevel": "1s 2s 3s 4s"},
            s("retry_timetable", maxReconsumeTimes=5),
            _orig(5),
            _back(0, 0),
            s("advance_clock", ms=4000),
        ),
        _sc(
            "retry11-plain-send-to-retry",
            {"groupRetryMaxTimes": 3},
            s(
                "send_message",
                topic="%RETRY%G",
                queueId=0,
                tags="A",
                reconsumeTimes=1,
                maxReconsumeTimes=3,
            ),
            s(
                "send_message",
                topic="%RETRY%G",
                queueId=0,
                tags="A",
                reconsumeTimes=3,
                maxReconsumeTimes=3,
            ),
            s(
                "send_message",
                topic="%RETRY%G",
                queueId=0,
                tags="A",
                reconsumeTimes=1,
                maxReconsumeTimes=None,
            ),
            s(
                "send_message",
                topic="%RETRY%G",
                queueId=0,
                reconsumeTimes=None,
                maxReconsumeTimes=None,
            ),
            s(
                "send_message",
                topic="%RETRY%G",
                queueId=0,
                reconsumeTimes=0,
                maxReconsumeTimes=16,
                delayLevel=2,
            ),
            s(
                "send_message",
                topic="%RETRY%NOGROUP",
                queueId=0,
                reconsumeTimes=0,
                maxReconsumeTimes=16,
            ),
            s("send_message", topic="T", queueId=7),
            s("send_message", topic="MISSING", queueId=0),
            s("advance_clock", ms=5000),
        ),
    ]


def schedule_random(rng: random.Random, i: int) -> list[Case]:
    """Random send-backs of random messages, then time for every delivery."""
    steps: list[Step] = []
    count = rng.randrange(2, 6)
    for _ in range(count):
        steps.append(_orig(rng.randrange(0, 4), queue_id=2))
    for k in range(count):
        steps.append(
            _back(k, rng.choice([0, 0, 1, 3, -1]), max_times=rng.choice([3, 16]), queue_id=2)
        )
        steps.append(s("advance_clock", ms=rng.choice([0, 1000, 5000, 10000])))
    steps.append(s("advance_clock", ms=200_000))
    return [Case("schedule", str(i), {"groupRetryMaxTimes": rng.choice([2, 16])}, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = schedule_edges
RANDOM = schedule_random
