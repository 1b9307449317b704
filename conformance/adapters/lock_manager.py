"""The `lock_manager` area adapter: replays RebalanceLockManager vectors on a candidate.

A queue is named by its id in the vectors; the topic and broker come from the case config.
The `expired` flag of each table entry is computed here with LEASE-3 at the current clock, the
way the recorder evaluated it, so a candidate only has to expose its raw table.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

import attrs

from pullspec.conformance.candidates import (
    Candidate,
    LockManager,
    LockManagerFactory,
    factory,
)
from pullspec.conformance.jsontypes import JSONObject, JSONValue, as_array, as_given
from pullspec.spec import lease
from pullspec.spec.clock import ManualClock
from pullspec.spec.errors import UnsupportedError, require_int, require_str
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

OPS = ("try_lock_batch", "unlock_batch", "is_locked", "advance_clock")


@attrs.define
class LockManagerHarness:
    """One case's candidate lock manager with the clock that drives it and the case config."""

    manager: LockManager
    clock: ManualClock
    config: Mapping[str, JSONValue]

    @property
    def max_live(self) -> int:
        """The case's lease length in milliseconds."""
        return require_int("lockMaxLiveTimeMs", self.config["lockMaxLiveTimeMs"])

    def queue(self, queue_id: object) -> MessageQueue:
        """The MessageQueue a vector names by its id."""
        return MessageQueue(
            as_given(str, self.config["topic"]),
            as_given(str, self.config["brokerName"]),
            require_int("queueId", queue_id),
        )


def create(
    candidate: Candidate, config: Mapping[str, JSONValue], profile: Profile, base: Path
) -> LockManagerHarness:
    """A fresh harness around `candidate.lock_manager(clock, lockMaxLiveTimeMs, profile=…)`
    (a factory without a `profile` parameter is called without it: the lock manager behaves the
    same in both profiles)."""
    new_manager = factory(candidate, "lock_manager")
    clock = ManualClock(require_int("clockStart", config["clockStart"]))
    live = require_int("lockMaxLiveTimeMs", config["lockMaxLiveTimeMs"])
    if _takes_profile(new_manager):
        manager = new_manager(clock, live, profile=profile)
    else:  # the two-argument form LockManagerFactory allows
        manager = cast(Callable[[ManualClock, int], LockManager], new_manager)(clock, live)
    return LockManagerHarness(manager, clock, config)


def _takes_profile(new_manager: LockManagerFactory) -> bool:
    try:
        params = inspect.signature(new_manager).parameters.values()
    except (TypeError, ValueError):  # a builtin or a C callable: call it the old way
        return False
    return any(p.name == "profile" or p.kind is p.VAR_KEYWORD for p in params)


def observe_table(h: LockManagerHarness) -> dict[str, dict[str, list[str | int | bool]]]:
    """The candidate's table as the vectors write it, `expired` evaluated at the current clock."""
    now = h.clock.now_ms()
    out: dict[str, dict[str, list[str | int | bool]]] = {}
    for group, locks in h.manager.table().items():
        row: dict[str, list[str | int | bool]] = {}
        for mq, (client_id, ts) in sorted(locks.items()):
            expired = lease.is_expired(now, lease.LockEntry(client_id, ts), h.max_live)
            row[str(mq.queue_id)] = [client_id, ts, expired]
        out[group] = row
    return out


def apply(h: LockManagerHarness, op: str, args: JSONObject) -> JSONObject:
    """Run one vector step on the harness and return the observation (`result`, `now`, `table`)."""
    if op == "advance_clock":
        return {"now": h.clock.advance(as_given(int, args["ms"])), "table": observe_table(h)}
    if op not in OPS:
        raise UnsupportedError(f"lock_manager op {op!r}")
    group = require_str("group", args["group"])
    client_id = require_str("clientId", args["clientId"])
    if op == "is_locked":
        locked = h.manager.is_locked(group, h.queue(args["mq"]), client_id)
        return {"result": locked, "table": observe_table(h)}
    mqs = [h.queue(q) for q in as_array(args["mqs"])]
    if op == "unlock_batch":
        h.manager.unlock_batch(group, mqs, client_id)
        return {"table": observe_table(h)}
    granted = h.manager.try_lock_batch(group, mqs, client_id)
    return {"result": sorted(mq.queue_id for mq in granted), "table": observe_table(h)}
