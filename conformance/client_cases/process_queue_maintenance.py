"""Cases of area `process_queue_maintenance` (see conformance.adapters.process_queue_maintenance for its ops)."""

from __future__ import annotations

from typing import Any

from pullspec.conformance.client_cases import Case, msg, s

#: One minute in milliseconds (consumeTimeout is in minutes).
MINUTE = 60_000


def _pm(
    name: str, *steps: tuple[str, dict[str, Any]], config: dict[str, Any] | None = None
) -> Case:
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


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = process_queue_maintenance_edges
RANDOM = None
