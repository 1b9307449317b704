"""Shrinking a failing trace to a minimal one by replaying literal ops.

Hypothesis's own shrinker re-draws every op after a deleted one (ops are aimed by what the
reference showed before them), which makes it slow here; instead the failing trace is replayed
as recorded: first whole runs of steps are deleted, halving the run length down to single
steps, then single elements of list arguments (messages, queue ids) are dropped. A change is
kept when the trace still fails with the same verdict. The result is 1-minimal: removing any one
step, or any one list element, makes the failure disappear.
"""

from __future__ import annotations

from collections.abc import Sequence

from pullspec.conformance.candidates import Candidate
from pullspec.conformance.jsontypes import JSONValue, is_array
from pullspec.conformance.machines.lockstep import MachineReport, replay_trace
from pullspec.conformance.ops import Op
from pullspec.conformance.vectors import Verdict
from pullspec.spec.evolve import evolve

#: Replays one minimisation may spend (a bound for slow subprocess candidates).
MAX_REPLAYS = 2000


def minimize(report: MachineReport, reference: Candidate, candidate: Candidate) -> MachineReport:
    """The smallest failing trace found from `report` (DIVERGED and CRASHED reports only)."""
    if report.verdict not in (Verdict.DIVERGED, Verdict.CRASHED) or not report.steps:
        return report
    budget = [MAX_REPLAYS]

    def still_fails(ops: list[Op]) -> MachineReport | None:
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        found = replay_trace(report, reference, candidate, ops)
        return found if found is not None and found.verdict is report.verdict else None

    best = report
    ops = [s.op for s in report.steps]
    chunk = max(len(ops) // 2, 1)
    while chunk >= 1:
        i = 0
        while i < len(ops):
            found = still_fails(ops[:i] + ops[i + chunk :])
            if found is not None:
                best, ops = found, [s.op for s in found.steps]
            else:
                i += chunk
        chunk //= 2
    for i in range(len(ops)):
        for key in [k for k, v in ops[i].args.items() if isinstance(v, list)]:
            j = 0
            while j < len(items := _items(ops[i].args[key])):
                smaller = evolve(ops[i], args={**ops[i].args, key: [*items[:j], *items[j + 1 :]]})
                found = still_fails([*ops[:i], smaller, *ops[i + 1 :]])
                if found is not None and len(found.steps) == len(ops):
                    best, ops = found, [s.op for s in found.steps]
                else:
                    j += 1
    return best


def _items(value: JSONValue) -> Sequence[JSONValue]:
    """The items of a list argument (the loop above visits only those)."""
    return value if is_array(value) else ()
