"""Intentional differences from RocketMQ: where the spec knowingly answers otherwise than the real
RocketMQ, the rule that says so and why.

`docs/using/differences.md` lists every entry; the vector runner names the entry when a case
diverges where one applies (conformance.vectors.run_case), so such a divergence reads as the known
difference it is rather than as a bug of the candidate or of the spec.

>>> [d.rule_id for d in KNOWN_DIFFERENCES]
['STORE-22']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pullspec.conformance.jsontypes import JSONValue

#: A step's arguments, expect or observation.
Step = Mapping[str, JSONValue]

#: (area, op, args, expect, observed) of a diverging step → whether the difference applies.
Matcher = Callable[[str, str, Step, Step, Step], bool]

LOOKUP_FAILED = "look message by offset failed"


@attrs.frozen
class KnownDifference:
    """One intentional difference: its rule ID, what differs and why, and where it shows."""

    rule_id: str
    summary: str
    reason: str
    matches: Matcher

    def describe(self) -> str:
        """The line the vector runner reports."""
        return f"known difference from RocketMQ, {self.rule_id}: {self.summary}"


def _lookup_inside_a_record(
    area: str,
    op: str,
    args: Step,
    expect: Step,
    observed: Step,
) -> bool:
    """A send-back the spec answered as a failed lookup where RocketMQ answered otherwise."""
    remark = observed.get("remark")
    return (
        area == "send_back"
        and op == "send_back"
        and observed.get("code") == "SYSTEM_ERROR"
        and isinstance(remark, str)
        and remark.startswith(LOOKUP_FAILED)
        and (expect.get("code") != "SYSTEM_ERROR" or expect.get("remark", remark) != remark)
    )


KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "STORE-22",
        "a send-back of an offset where no record starts always finds nothing "
        "(SYSTEM_ERROR, 'look message by offset failed, <offset>')",
        "RocketMQ reads the four bytes there as a record size: a negative one throws (SYSTEM_ERROR "
        "whose remark is the exception's text) and a positive one that fits the file has "
        "MessageDecoder.decode, which checks no magic code, turn the bytes that follow into a "
        "message that may be sent back. Which happens depends on bytes the spec does not fix "
        "(timestamps, hosts, bodies), so no implementation could be held to it.",
        _lookup_inside_a_record,
    ),
)


def explain(
    area: str,
    op: str,
    args: Step,
    expect: Step,
    observed: Step,
) -> str | None:
    """The known difference a diverging step shows, described, or None."""
    for difference in KNOWN_DIFFERENCES:
        if difference.matches(area, op, args, expect, observed):
            return difference.describe()
    return None
