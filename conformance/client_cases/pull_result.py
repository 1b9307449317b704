"""Cases of area `pull_result` (see conformance.adapters.pull_result for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Config, Step, msg, s
from pullspec.conformance.jsontypes import JSONObject, JSONValue


def _res(name: str, config: Config, *steps: Step) -> Case:
    return Case("pull_result", name, config, steps)


def _found(next_begin: int, msgs: list[JSONObject], **more: JSONValue) -> JSONObject:
    return {
        "pullStatus": "FOUND",
        "nextBeginOffset": next_begin,
        "minOffset": 0,
        "maxOffset": next_begin + 3,
        "msgs": msgs,
        **more,
    }


def _ok(result: JSONObject | None, prev: int, expression: str = "*", **more: JSONValue) -> Step:
    return s(
        "on_success",
        result=result,
        prevRequestOffset=prev,
        subscription={"expression": expression},
        **more,
    )


def pull_result_edges() -> list[Case]:
    """RESULT-1 … RESULT-15, REQ-12 and CODE-13."""
    three = [msg(10, "A"), msg(11, "B"), msg(12)]
    return [
        _res("result5-found", {}, _ok(_found(13, three), 10), _ok(_found(13, three), 10, "A || C")),
        _res("result5-pull-interval", {"pullInterval": 250}, _ok(_found(13, three), 10)),
        _res("result6-all-filtered", {}, _ok(_found(13, three), 10, "Z"), _ok(_found(13, []), 13)),
        _res(
            "result7-bug-warning",
            {},
            _ok(_found(9, three), 11),
            _ok(_found(20, three), 11),
            _ok(_found(20, three), 10),
            _ok(_found(5, []), 11, "Z"),
        ),
        _res(
            "result8-no-new-and-no-matched",
            {},
            _ok({"pullStatus": "NO_NEW_MSG", "nextBeginOffset": 20}, 20, msgCount=0),
            _ok({"pullStatus": "NO_MATCHED_MSG", "nextBeginOffset": 25}, 20, msgCount=0),
            _ok({"pullStatus": "NO_MATCHED_MSG", "nextBeginOffset": 30}, 25, msgCount=4),
        ),
        _res(
            "result10-11-offset-illegal-clustering",
            {},
            _ok(
                {"pullStatus": "OFFSET_ILLEGAL", "nextBeginOffset": 100, "suggestWhichBrokerId": 1},
                7,
            ),
        ),
        _res(
            "result11-broadcasting-fix-up",
            {"messageModel": "BROADCASTING"},
            _ok({"pullStatus": "OFFSET_ILLEGAL", "nextBeginOffset": 0}, 7),
        ),
        _res(
            "result2-node-for-every-status",
            {},
            _ok(_found(13, three, suggestWhichBrokerId=1), 10),
            _ok({"pullStatus": "NO_NEW_MSG", "nextBeginOffset": 13, "suggestWhichBrokerId": 0}, 13),
        ),
        _res("result12-null", {}, _ok(None, 42)),
        _res(
            "result15-dropped-in-flight",
            {},
            _ok(_found(13, three), 10, dropped=True),
            _ok(_found(13, three), 10, "Z", dropped=True),
        ),
        _res(
            "result14-copies",
            {},
            s("on_success_throws", reenqueuedBeforeThrow=True),
            s("on_success_throws", reenqueuedBeforeThrow=False),
        ),
        _res(
            "result13-on-exception",
            {"pullTimeDelayMillsWhenException": 1000},
            s("on_exception", error={"kind": "MQBrokerException", "code": 215}, topic="T"),
            s("on_exception", error={"kind": "MQBrokerException", "code": 25}, topic="T"),
            s("on_exception", error={"kind": "RemotingTimeoutException"}, topic="%RETRY%G"),
            s("on_exception", error={"kind": "MQBrokerException", "code": 215}, topic="%RETRY%G"),
        ),
        _res(
            "req12-response-codes",
            {},
            *(s("response", code=c) for c in (0, 19, 20, 21, 1, 25, 26, 215)),
        ),
    ]


def pull_result_random(rng: random.Random, i: int) -> list[Case]:
    """Random results against random cache sizes."""
    steps = []
    for _ in range(16):
        prev = rng.randrange(0, 40)
        status = rng.choice(["FOUND", "FOUND", "NO_NEW_MSG", "NO_MATCHED_MSG", "OFFSET_ILLEGAL"])
        msgs = [msg(prev + k, rng.choice(["A", "B", None])) for k in range(rng.randrange(0, 4))]
        result: JSONObject = {
            "pullStatus": status,
            "nextBeginOffset": prev + rng.randrange(-2, 6),
            "minOffset": 0,
            "maxOffset": prev + 10,
            "msgs": msgs if status == "FOUND" else [],
            "suggestWhichBrokerId": rng.choice([0, 1]),
        }
        steps.append(
            _ok(result, prev, rng.choice(["*", "A", "A || B"]), msgCount=rng.choice([0, 0, 3]))
        )
    return [Case("pull_result", str(i), {"pullInterval": rng.choice([0, 0, 100])}, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = pull_result_edges
RANDOM = pull_result_random
