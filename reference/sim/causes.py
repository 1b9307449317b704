"""What the checker remembers while it reads a history, and how it explains a duplicate, a
broker commit going backwards or an orderly overlap with the rule that allows it
(docs/narrative/anomalies.md).

The explanations are inferences from the history alone, in this order of precedence:

- a copy consumed twice by one ProcessQueue: the first-lock correction moved its cursor back
  (FLOW-12), else the copy was put into it again (PQ-13: a re-put, RESULT-14's second
  PullRequest); nothing else can hand one ProcessQueue the same copy twice;
- a copy consumed again by a new ProcessQueue: both queues were alive at once (REBAL-9, the old
  owner still consuming); else the broker's offset had gone backwards (the rule of that
  decrease); else the old consumer had progress past the copy that never reached the broker —
  it crashed (OFFSET-8) or handed the queue over late (REBAL-9) — or never had such progress,
  its commit held back by a smaller offset still in flight (PQ-7) or its ProcessQueue dropped
  before the result counted (REBAL-9);
- another copy of the key consumed again: the cleaner sent back a message still being consumed
  (PQ-18), or a send-back stored a copy the client believed failed, after which the fallback
  stored another (CONC-11) or the message was retried locally (CONC-8), or a copy already
  consumed or handed back was delivered again (for one of the reasons above) and so led to
  another copy;
- a broker commit going back: RESULT-10's fix-up, a stale writer (COMMIT-1: another client, or
  a pull that left before a higher commit and arrived after it), or the writer's own offset
  set back (ORDER-11, RESULT-10);
- two clients inside one orderly queue: a call outlasted the client lease or the lease clock
  jumped (REBAL-22), or the first client shut down mid-call and unlocked (ORDER-17).
"""

from __future__ import annotations

import attrs

Copy = tuple[str, int]  # (queue name, queue offset)
NONE = -1


@attrs.define
class PqInfo:
    """One ProcessQueue: where it started and what the group looked like then."""

    client: str
    queue: str
    assigned_at: int
    start: int
    #: The master's committed offset of the queue at creation, its highest value until then and
    #: the rule of the last decrease (None when it had not decreased).
    broker_now: int = NONE
    broker_max: int = NONE
    lowering_rule: str | None = None
    #: Other client incarnations' highest in-memory offset of the queue at creation.
    memory_high: dict[str, int] = attrs.Factory(dict)
    crashed: frozenset[str] = frozenset()
    dropped_at: int | None = None
    #: (at, new cursor, rule) of each backward cursor move.
    moves: list[tuple[int, int, str]] = attrs.Factory(list)
    #: offset → how many times a pull put it into this queue.
    puts: dict[int, int] = attrs.Factory(dict)
    in_flight: int = 0


@attrs.define
class Success:
    """One successful consumption of a copy."""

    at: int
    client: str
    pq: int


@attrs.define
class BrokerQueue:
    """The master's committed offset of one queue over time."""

    current: int = NONE
    highest: int = NONE
    writer: str = ""
    #: The position in the history of the current value's write.
    written_seq: int = 0
    lowering_rule: str | None = None


@attrs.define
class ClientQueue:
    """One client incarnation's in-memory offset of one queue over time."""

    current: int | None = None
    high: int = NONE
    #: (at, value, rule) of each non-increase-only write that lowered the offset.
    lowered: list[tuple[int, int, str]] = attrs.Factory(list)


@attrs.define
class KeyInfo:
    """Everything known about one message key."""

    successes: int = 0
    dlq: bool = False
    latest: Copy | None = None
    #: When the newest copy was stored, and where it goes when it is a delayed one.
    latest_at: int = 0
    latest_bound: str = ""
    handed_back: set[Copy] = attrs.Factory(set)
    #: (via, ok, stored topic) of every hand-back of any copy of the key.
    sent_back: list[tuple[str, bool, str | None]] = attrs.Factory(list)
    #: True when a hand-back reported OK but stored nothing.
    vanished: bool = False
    #: Why a copy of the message reached a listener again after it had been consumed or handed
    #: back (the first such time).
    redelivered: str | None = None
    #: Every listener call with it fails (Produce.poison): it must end in the DLQ (LIVE-2).
    poison: bool = False


def same_pq_cause(info: PqInfo, offset: int, since: int) -> str | None:
    """Why ProcessQueue `info` consumed the copy at `offset` again after consuming it at `since`."""
    if any(at >= since and after <= offset and rule == "FLOW-12" for at, after, rule in info.moves):
        return "FLOW-12"
    if info.puts.get(offset, 0) >= 2:
        return "PQ-13"
    return None


def new_pq_cause(info: PqInfo, offset: int, earlier: Success, pqs: dict[int, PqInfo]) -> str | None:
    """Why a new ProcessQueue `info` consumed the copy at `offset` that `earlier` consumed."""
    if any(after <= offset and rule == "FLOW-12" for _at, after, rule in info.moves) and (
        info.start > offset
    ):
        return "FLOW-12"
    if info.start > offset:
        return None
    if earlier.at >= info.assigned_at:
        return "REBAL-9"  # both ProcessQueues alive: the old owner still consumed
    if info.broker_max > offset and info.broker_now <= offset:
        return info.lowering_rule or "COMMIT-1"
    old = earlier.client
    if info.memory_high.get(old, NONE) > offset:
        return "OFFSET-8" if old in info.crashed else "REBAL-9"
    prior = pqs.get(earlier.pq)
    dropped_at = prior.dropped_at if prior is not None else None
    if dropped_at is not None and dropped_at <= info.assigned_at and old not in info.crashed:
        return "REBAL-9"  # its ProcessQueue was dropped before the result counted
    return "PQ-7"


def other_copy_cause(key: KeyInfo) -> str | None:
    """Why another copy of a key that was consumed already was consumed too."""
    vias = [(via, ok, stored) for via, ok, stored in key.sent_back]
    if any(via == "cleaner" for via, _ok, _stored in vias):
        return "PQ-18"
    if any(not ok and stored is not None for _via, ok, stored in vias):
        if any(via == "fallback" and ok for via, ok, _stored in vias):
            return "CONC-11"
        return "CONC-8"
    # A copy consumed once came back (a re-delivery), failed there and was handed back.
    return key.redelivered


def lowering_cause(
    broker: BrokerQueue,
    writer: str,
    memory: ClientQueue | None,
    value: int,
    via: str,
    pull_sent_seq: int | None,
) -> str | None:
    """Why the master's committed offset went from `broker.current` down to `value`, written by
    `writer` through `via`; `pull_sent_seq` is where the history shows the writer's pull that
    carried `value` (None: no such pull)."""
    if via == "fix-up":
        return "RESULT-10"
    if broker.writer and broker.writer != writer:
        return "COMMIT-1"  # a stale owner (or a restarted client) wrote an older offset
    if memory is not None:
        for _at, lowered_to, rule in reversed(memory.lowered):
            if lowered_to <= value:
                return rule  # the writer's own offset went back (ORDER-11, RESULT-10 …)
    if via == "pull" and pull_sent_seq is not None and pull_sent_seq < broker.written_seq:
        return "COMMIT-1"  # a pull sent before the higher commit reached the broker after it
    return None


@attrs.define
class Call:
    """An orderly listener call: who, from when to when, and who was seen overlapping it."""

    client: str
    start: int
    end: int
    reported: set[str] = attrs.Factory(set)


def overlap_cause(
    call: Call, at: int, end: int, lease_ms: int, clock_jumps: list[int], left: dict[str, int]
) -> str | None:
    """Why another client's call from `at` to `end` overlaps `call` on one orderly queue."""
    if call.end - call.start > lease_ms or end - at > lease_ms:
        return "REBAL-22"  # a call outlasted the client lease
    if any(call.start - 2 * lease_ms <= t <= at for t in clock_jumps):
        return "REBAL-22"  # the lease clock jumped
    gone = left.get(call.client)
    if gone is not None and call.start <= gone <= at:
        return "ORDER-17"  # shutdown unlocked the queues while the call still ran
    return None
