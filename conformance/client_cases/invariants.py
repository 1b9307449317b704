"""Cases of area `invariants` (see conformance.adapters.invariants for its ops)."""

from __future__ import annotations

from pullspec.conformance.client_cases.base import Case, Step, s


def _inv(name: str, *steps: Step) -> Case:
    return Case("invariants", name, {}, steps)


def invariants_edges() -> list[Case]:
    """INV-1 … INV-8 on both sides of their boundaries."""
    return [
        _inv(
            "inv1-copy-not-lost",
            *(
                s("copy_not_lost", consumed=c, handedBack=h, committed=k, queueOffset=5)
                for c, h, k in (
                    (False, False, 5),
                    (False, False, 6),
                    (True, False, 9),
                    (False, True, 9),
                )
            ),
        ),
        _inv("inv2-at-most-once", *(s("consumed_at_most_once", successes=n) for n in (0, 1, 2))),
        _inv(
            "inv3-client-offset",
            s("client_offset_monotone", before=None, after=0, increaseOnly=True),
            s("client_offset_monotone", before=5, after=4, increaseOnly=True),
            s("client_offset_monotone", before=5, after=4, increaseOnly=False),
            s("client_offset_monotone", before=5, after=5, increaseOnly=True),
        ),
        _inv(
            "inv4-broker-commit",
            s("broker_commit_monotone", before=None, after=3),
            s("broker_commit_monotone", before=3, after=3),
            s("broker_commit_monotone", before=3, after=2),
        ),
        _inv(
            "inv5-one-owner",
            *(s("one_orderly_owner", owners=o) for o in ([], ["c1"], ["c1", "c2"])),
        ),
        _inv(
            "inv6-in-order",
            s("orderly_in_order", highestConsumed=5, firstOffset=6, sameBatchAgain=False),
            s("orderly_in_order", highestConsumed=5, firstOffset=5, sameBatchAgain=False),
            s("orderly_in_order", highestConsumed=5, firstOffset=3, sameBatchAgain=True),
        ),
        _inv(
            "inv7-flow-bound",
            *(s("within_flow_bound", cached=c, threshold=10, batch=32) for c in (42, 43, 0)),
        ),
        _inv(
            "inv8-dlq-accounted",
            *(
                s("dlq_accounted", consumed=a, inDlq=b, pending=c)
                for a, b, c in (
                    (False, False, False),
                    (True, False, False),
                    (False, True, False),
                    (False, False, True),
                )
            ),
        ),
    ]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = invariants_edges
RANDOM = None
