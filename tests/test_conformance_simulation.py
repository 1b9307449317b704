"""Whole-system lockstep (issue 7): reference vs reference, fast vs reference, a broken
candidate caught."""

from __future__ import annotations

import types
from collections.abc import Collection, Sequence
from typing import Any

import pytest

import pullspec.reference.factories as reference_factories
from pullspec.conformance.machines.simulation import (
    PARTS,
    candidate_hooks,
    candidate_parts,
    compare,
    lockstep,
    run_simulation,
)
from pullspec.conformance.resolve import resolve
from pullspec.conformance.vectors import Verdict
from pullspec.reference.consume_concurrently import ReferenceConsumeConcurrentlyService
from pullspec.reference.consume_orderly import ReferenceConsumeOrderlyService
from pullspec.reference.offset_store import ReferenceRemoteOffsetStore
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.rebalance import ReferenceRebalancePushImpl
from pullspec.reference.scheduler import Scheduler
from pullspec.reference.sim.config import SimConfig
from pullspec.reference.sim.faults import parse_schedule
from pullspec.spec.clock import Clock
from pullspec.spec.message import MessageQueue, StoredMessage
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


# --- the consumer parts ----------------------------------------------------------------------------

#: Every part, each the reference's own, given through its factory.
ALL_REFERENCE_PARTS = types.SimpleNamespace(
    message_store=reference_factories.message_store,
    process_queue=reference_factories.process_queue,
    remote_offset_store=ReferenceRemoteOffsetStore,
    consume_concurrently_service=ReferenceConsumeConcurrentlyService,
    consume_orderly_service=ReferenceConsumeOrderlyService,
    rebalance_push_impl=ReferenceRebalancePushImpl,
)


@pytest.mark.parametrize("orderly", [False, True])
def test_the_reference_s_parts_given_through_every_factory_give_its_history(orderly: bool) -> None:
    assert tuple(PARTS.values()) == candidate_parts(ALL_REFERENCE_PARTS).provided()
    found = compare(ALL_REFERENCE_PARTS, SimConfig(seed=2, orderly=orderly), STEPS)
    assert (Verdict.PASS, None) == (found.verdict, found.divergence)
    assert found.candidate is not None and found.reference is not None
    # Identical histories: identical verdicts, liveness judged after the quiet tail.
    assert found.candidate.check.to_json() == found.reference.check.to_json()
    assert found.candidate.check.liveness["judged"] is True


class _ForgetfulStore(ReferenceRemoteOffsetStore):
    """Broken (OFFSET-6): persistAll sends nothing to the broker."""

    def persist_all(self, mqs: Collection[MessageQueue] | None) -> None:
        return None


def _everyone_owns_every_queue(scheduler: Scheduler, **kwargs: Any) -> ReferenceRebalancePushImpl:
    """Broken (REBAL-5): every consumer is given every queue."""

    def everything(
        group: str, cid: str, mqs: Sequence[MessageQueue], cids: Sequence[str]
    ) -> list[MessageQueue]:
        return list(mqs)

    return ReferenceRebalancePushImpl(scheduler, **{**kwargs, "strategy": everything})


def test_an_offset_store_that_never_persists_diverges_at_the_first_persist() -> None:
    broken = types.SimpleNamespace(remote_offset_store=_ForgetfulStore)
    verdict, _events, divergence, _detail = lockstep(broken, SimConfig(seed=1), STEPS)
    assert (Verdict.DIVERGED, True) == (verdict, divergence is not None)
    assert divergence is not None and divergence.expected is not None
    # The first persistAllConsumerOffset, 10 s after the start (OFFSET-8), wrote nothing.
    expected = {k: divergence.expected[k] for k in ("type", "at", "via")}
    assert {"type": "BrokerCommit", "at": 10_000, "via": "persist"} == expected


def test_a_rebalance_that_hands_out_every_queue_diverges_at_its_first_rebalance() -> None:
    broken = types.SimpleNamespace(rebalance_push_impl=_everyone_owns_every_queue)
    verdict, _events, divergence, _detail = lockstep(broken, SimConfig(seed=1), STEPS)
    assert (Verdict.DIVERGED, True) == (verdict, divergence is not None)
    assert divergence is not None and divergence.expected and divergence.actual
    # c0 of three reads the offsets of its share (REBAL-7, REBAL-17), then creates T:0's
    # ProcessQueue; the broken rebalance reads the offset of T:2, which is not c0's, first.
    assert ("Assigned", "T:0") == (divergence.expected["type"], divergence.expected["queue"])
    assert ("ClientCommit", "T:2") == (divergence.actual["type"], divergence.actual["queue"])
