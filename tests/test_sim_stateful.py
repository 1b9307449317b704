"""Stateful Hypothesis tests: generated fault schedules drive the simulator, interleaved with
runs of its steps, and no step may produce a violation. A failure shrinks to a minimal schedule
and prints the `pullspec simulate` command that replays it (`make fuzz` runs many more)."""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from pullspec.reference.sim.faults import FAULT_KINDS, FaultStep
from pullspec.reference.sim.simulator import SimConfig, Simulator

CLIENT_KINDS = sorted(k for k, (on_client, _) in FAULT_KINDS.items() if on_client)
BROKER_KINDS = sorted(k for k, (on_client, _) in FAULT_KINDS.items() if not on_client)
#: A fault's amount: milliseconds for the timed kinds, a count for the others.
VALUES = st.sampled_from([0, 1, 3, 2_000, 10_000, 35_000, 61_000])


class SimulationMachine(RuleBasedStateMachine):
    """A simulated consumer group; rules inject faults and run steps."""

    def __init__(self) -> None:
        super().__init__()
        self.sim: Simulator | None = None

    @initialize(seed=st.integers(0, 10_000), orderly=st.booleans(), consumers=st.integers(1, 3))
    def start(self, seed: int, orderly: bool, consumers: int) -> None:
        config = SimConfig(seed=seed, orderly=orderly, consumers=consumers, schedule=())
        self.sim = Simulator(config, keep_history=False)

    def _inject(self, kind: str, target: str, delay: int, value: int) -> None:
        assert self.sim is not None
        # Strictly after now: a replay applies it at the same point of the run (see
        # Simulator.step: a fault runs before every event due at or after its time).
        at = self.sim.clock.now_ms() + 1 + delay
        self.sim.inject(FaultStep(at, kind, target, value))

    @rule(
        kind=st.sampled_from(CLIENT_KINDS),
        consumer=st.integers(0, 3),
        delay=st.integers(0, 20_000),
        value=VALUES,
    )
    def client_fault(self, kind: str, consumer: int, delay: int, value: int) -> None:
        self._inject(kind, f"c{consumer}", delay, value)

    @rule(kind=st.sampled_from(BROKER_KINDS), delay=st.integers(0, 20_000), value=VALUES)
    def broker_fault(self, kind: str, delay: int, value: int) -> None:
        self._inject(kind, "", delay, value)

    @rule(steps=st.integers(1, 8).map(lambda k: 250 * k))
    def advance(self, steps: int) -> None:
        assert self.sim is not None
        self.sim.run(steps)

    @invariant()
    def no_violation_so_far(self) -> None:
        if self.sim is not None:
            found = self.sim.checker.result.violations
            assert {} == found, f"replay: {self.sim.replay_command()}"

    def teardown(self) -> None:
        if self.sim is not None:
            replay = self.sim.replay_command()
            assert {} == self.sim.finish().violations, f"replay: {replay}"


#: CI-sized: a few schedules per run (HYPOTHESIS_PROFILE=fuzz explores many more).
EXAMPLES = 300 if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else 10
SimulationMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=8, deadline=None
)
TestSimulation = SimulationMachine.TestCase
