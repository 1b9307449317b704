"""Whole-system lockstep (issue 7): reference vs reference, fast vs reference, a broken
candidate caught."""

from __future__ import annotations

import types
from collections.abc import Sequence

import pullspec.reference.factories as reference_factories
from pullspec.conformance.machines.simulation import candidate_hooks, lockstep, run_simulation
from pullspec.conformance.resolve import resolve
from pullspec.conformance.vectors import Verdict
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.sim_config import SimConfig
from pullspec.reference.sim_faults import parse_schedule
from pullspec.spec.clock import Clock
from pullspec.spec.message import StoredMessage
from pullspec.spec.profiles import Profile

STEPS = 2_000


def test_reference_wrapped_is_identical_to_reference() -> None:
    verdict, events, divergence, detail = lockstep(
        reference_factories, SimConfig(seed=1), STEPS, impl="reference"
    )
    assert (verdict, divergence, detail) == (Verdict.PASS, None, None)
    assert events > 1_000


def test_fast_matches_reference_on_two_seeds() -> None:
    report = run_simulation(resolve("fast"), impl="fast", seeds=(1, 2), steps=STEPS)
    assert report.verdict is Verdict.PASS, report.to_json()
    assert report.seeds == (1, 2)


def test_candidate_without_parts_is_unsupported() -> None:
    empty = types.SimpleNamespace()
    assert candidate_hooks(empty) is None
    assert run_simulation(empty, steps=10).verdict is Verdict.UNSUPPORTED


class _MaxOffsetQueue(ReferenceProcessQueue):
    """Broken: removeMessage answers the cache's max offset (not the next offset to consume)."""

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        super().remove_messages(msgs)
        return self.queue_offset_max


def _broken_pq(clock: Clock, profile: Profile) -> ReferenceProcessQueue:
    return _MaxOffsetQueue(clock, profile)


def test_broken_process_queue_is_caught() -> None:
    broken = types.SimpleNamespace(process_queue=_broken_pq)
    report = run_simulation(broken, impl="broken", seeds=(1,), steps=STEPS)
    assert report.verdict is Verdict.DIVERGED
    d = report.divergence
    assert d is not None and d.seed == 1 and d.index >= 0
    assert d.expected != d.actual
    assert "--impl broken" in d.replay and "--seed 1" in d.replay


def test_a_divergence_is_shrunk_to_a_minimal_replay() -> None:
    broken = types.SimpleNamespace(process_queue=_broken_pq)
    report = run_simulation(broken, impl="broken", seeds=(1,), steps=STEPS)
    d = report.divergence
    assert d is not None
    # The shrunk run is no longer than the original and still diverges at the reported event…
    assert report.steps <= STEPS
    config = SimConfig(seed=1, schedule=parse_schedule(d.schedule), mean_fault_gap_ms=2_000)
    verdict, _events, again, _detail = lockstep(broken, config, report.steps, impl="broken")
    assert (Verdict.DIVERGED, d.index) == (verdict, again.index if again else None)
    # …and one step fewer no longer does: the bisection found the boundary.
    fewer = lockstep(broken, config, report.steps - 1, impl="broken")[0]
    assert Verdict.PASS == fewer
