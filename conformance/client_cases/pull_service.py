"""Cases of area `pull_service` (see conformance.adapters.pull_service for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Step, s
from pullspec.conformance.jsontypes import JSONObject


def _ps(name: str, *steps: Step) -> Case:
    return Case("pull_service", name, {}, steps)


def _pr(group: str, queue_id: int, offset: int) -> JSONObject:
    return {"group": group, "queueId": queue_id, "nextOffset": offset}


def pull_service_edges() -> list[Case]:
    """PULLQ-1, 2, 3, 5, 6, 7, 10, 11."""
    return [
        _ps(
            "pullq2-fifo-duplicates",
            s("register_consumer", group="G"),
            s("start"),
            s("execute_immediately", **_pr("G", 0, 5)),
            s("execute_immediately", **_pr("G", 1, 0)),
            s("execute_immediately", **_pr("G", 0, 9)),
            s("advance", ms=0),
        ),
        _ps(
            "pullq2-queued-before-start",
            s("register_consumer", group="G"),
            s("execute_immediately", **_pr("G", 0, 1)),
            s("advance", ms=100),
            s("start"),
            s("advance", ms=0),
        ),
        _ps(
            "pullq6-unknown-group-dies",
            s("register_consumer", group="G"),
            s("start"),
            s("execute_immediately", **_pr("OTHER", 0, 1)),
            s("execute_immediately", **_pr("G", 2, 3)),
            s("advance", ms=0),
            s("unregister_consumer", group="G"),
            s("execute_immediately", **_pr("G", 2, 4)),
            s("advance", ms=0),
        ),
        _ps(
            "pullq1-loop-survives-exception",
            s("register_consumer", group="BAD", raises=True),
            s("register_consumer", group="G"),
            s("register_consumer", group="G", raises=True),
            s("start"),
            s("execute_immediately", **_pr("BAD", 0, 0)),
            s("execute_immediately", **_pr("G", 0, 0)),
            s("advance", ms=0),
        ),
        _ps(
            "pullq4-later",
            s("register_consumer", group="G"),
            s("start"),
            s("execute_later", **_pr("G", 0, 7), delayMs=50),
            s("advance", ms=49),
            s("advance", ms=1),
            s("execute_later", **_pr("G", 1, 0), delayMs=0),
            s("advance", ms=0),
        ),
        _ps(
            "pullq5-task-shares-timer",
            s("register_consumer", group="G"),
            s("start"),
            s("execute_task_later", name="fix-up", delayMs=10000),
            s("execute_later", **_pr("G", 0, 1), delayMs=3000),
            s("advance", ms=10000),
        ),
        _ps(
            "pullq3-4-5-after-shutdown",
            s("register_consumer", group="G"),
            s("start"),
            s("execute_immediately", **_pr("G", 0, 1)),
            s("shutdown"),
            s("execute_immediately", **_pr("G", 1, 1)),
            s("execute_later", **_pr("G", 2, 1), delayMs=10),
            s("execute_task_later", name="late", delayMs=10),
            s("advance", ms=100),
        ),
        _ps(
            "pullq10-grace-period",
            s("register_consumer", group="G"),
            s("start"),
            s("execute_later", **_pr("G", 0, 1), delayMs=999),
            s("execute_later", **_pr("G", 1, 1), delayMs=1000),
            s("execute_task_later", name="early", delayMs=500),
            s("execute_task_later", name="late", delayMs=5000),
            s("advance", ms=100),
            s("shutdown"),
            s("advance", ms=10000),
        ),
        _ps(
            "pullq7-equality",
            s("same_request", a=_pr("G", 0, 1), b=_pr("G", 0, 99)),
            s("same_request", a=_pr("G", 0, 1), b=_pr("H", 0, 1)),
            s("same_request", a=_pr("G", 0, 1), b=_pr("G", 1, 1)),
        ),
        _ps(
            "pullq11-one-thread",
            s("thread_start_times", arrivals=[0, 0, 5, 100], durations=[10, 3, 1, 0]),
            s("thread_start_times", arrivals=[0, 2000], durations=[3000, 5]),
        ),
    ]


def pull_service_random(rng: random.Random, i: int) -> list[Case]:
    """Random enqueues, delays, tasks and time, with a shutdown somewhere."""
    steps = [s("register_consumer", group="G"), s("start")]
    for _ in range(20):
        r = rng.random()
        pr = _pr(rng.choice(["G", "G", "X"]), rng.randrange(0, 3), rng.randrange(0, 100))
        if r < 0.35:
            steps.append(s("execute_immediately", **pr))
        elif r < 0.6:
            steps.append(s("execute_later", **pr, delayMs=rng.choice([0, 50, 999, 1000, 3000])))
        elif r < 0.7:
            steps.append(
                s("execute_task_later", name=f"t{len(steps)}", delayMs=rng.randrange(0, 2000))
            )
        elif r < 0.95:
            steps.append(s("advance", ms=rng.choice([0, 10, 500, 1500])))
        else:
            steps.append(s("shutdown"))
    steps.append(s("advance", ms=5000))
    return [Case("pull_service", str(i), {}, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = pull_service_edges
RANDOM = pull_service_random
