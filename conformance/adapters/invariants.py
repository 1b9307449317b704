"""Adapter for area `invariants`: the per-event predicates a simulation checker applies
(spec.invariants, INV-1 … INV-8). A simulator of another implementation judges its histories
with the same predicates; these cases pin each one's boundary.

Stateless; every op answers `holds`.

| op | args |
|---|---|
| `copy_not_lost` | `consumed`, `handedBack`, `committed`, `queueOffset` |
| `consumed_at_most_once` | `successes` |
| `client_offset_monotone` | `before` (null: first write), `after`, `increaseOnly` |
| `broker_commit_monotone` | `before` (null), `after` |
| `one_orderly_owner` | `owners` (client ids inside the listener) |
| `orderly_in_order` | `highestConsumed`, `firstOffset`, `sameBatchAgain` |
| `within_flow_bound` | `cached`, `threshold`, `batch` |
| `dlq_accounted` | `consumed`, `inDlq`, `pending` |
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec import invariants as inv
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "invariants"


class Reference(_client.ReferenceDriver):
    """The reference driver: spec.invariants."""

    area = AREA

    def op_copy_not_lost(self, a: _client.Args) -> JSONObject:
        """INV-1."""
        holds = inv.copy_not_lost(
            a.bool("consumed"), a.bool("handedBack"), a.int("committed"), a.int("queueOffset")
        )
        return {"holds": holds}

    def op_consumed_at_most_once(self, a: _client.Args) -> JSONObject:
        """INV-2."""
        return {"holds": inv.consumed_at_most_once(a.int("successes"))}

    def op_client_offset_monotone(self, a: _client.Args) -> JSONObject:
        """INV-3."""
        holds = inv.client_offset_monotone(a.get("before"), a.int("after"), a.bool("increaseOnly"))
        return {"holds": holds}

    def op_broker_commit_monotone(self, a: _client.Args) -> JSONObject:
        """INV-4."""
        return {"holds": inv.broker_commit_monotone(a.get("before"), a.int("after"))}

    def op_one_orderly_owner(self, a: _client.Args) -> JSONObject:
        """INV-5."""
        return {"holds": inv.one_orderly_owner(frozenset(a.req("owners")))}

    def op_orderly_in_order(self, a: _client.Args) -> JSONObject:
        """INV-6."""
        holds = inv.orderly_in_order(
            a.int("highestConsumed"), a.int("firstOffset"), a.bool("sameBatchAgain")
        )
        return {"holds": holds}

    def op_within_flow_bound(self, a: _client.Args) -> JSONObject:
        """INV-7."""
        holds = inv.within_flow_bound(a.int("cached"), a.int("threshold"), a.int("batch"))
        return {"holds": holds}

    def op_dlq_accounted(self, a: _client.Args) -> JSONObject:
        """INV-8."""
        holds = inv.dlq_accounted(a.bool("consumed"), a.bool("inDlq"), a.bool("pending"))
        return {"holds": holds}


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A stateless driver."""
    return _client.open_driver(candidate, AREA, config, profile, Reference)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
