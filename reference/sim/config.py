"""The inputs and the output of a simulation run (`reference.sim.simulator`): `SimConfig` (what
determines a run) and `SimResult` (the checker's verdict with the run's counts); the replaceable
parts are `reference.sim.hooks.SimHooks`."""

from __future__ import annotations

import attrs

from pullspec.reference.sim.checker import CheckResult
from pullspec.reference.sim.faults import FAULT_KINDS, FaultStep
from pullspec.spec.profiles import Profile


@attrs.frozen(kw_only=True)
class SimConfig:
    """Everything that determines a run (with `steps`)."""

    seed: int = 1
    consumers: int = 3
    orderly: bool = False
    profile: Profile = Profile.V4_9
    queues: int = 4
    slave: bool = True
    slave_lag_ms: int = 1_000
    #: Fault kinds the seed's schedule draws from; ignored when `schedule` is given.
    faults: tuple[str, ...] = tuple(FAULT_KINDS)
    schedule: tuple[FaultStep, ...] | None = None
    mean_fault_gap_ms: int = 20_000
    #: Mean gap between two produced messages (the producer sends one at a time).
    produce_gap_ms: int = 40
    #: Probability that a listener call fails on its own (RECONSUME_LATER / SUSPEND).
    fail_rate: float = 0.02
    #: Mean milliseconds a listener call lasts (uniform in 1 … 2·mean − 1; 0: no time at all).
    consume_ms: int = 5
    #: Probability that a message is poison: every call with it fails, so it ends in the DLQ.
    poison_rate: float = 0.002
    latency_ms: int = 0
    pull_threshold_for_queue: int = 64
    pull_batch_size: int = 16
    consume_batch_size: int = 1
    max_reconsume_times: int = 3
    #: consumeTimeout in minutes (CONC-13, PQ-18): 1, not 15, so that a run reaches the sweep.
    consume_timeout_min: int = 1
    #: consumeConcurrentlyMaxSpan (FLOW-8), scaled down like the count threshold.
    max_span: int = 200
    #: The quiet tail (`Simulator.quiet`): at most this long after the last timed fault ended;
    #: 0 runs none (and judges no liveness).
    quiet_tail_ms: int = 600_000
    #: At most this many steps of quiet tail.
    quiet_tail_steps: int = 50_000
    retry_queue_nums: int = 1
    commit_log_file_size: int = 64 * 1024
    #: The broker's RAM as the slave suggestion sees it (40 % of it counts as in memory).
    memory_bytes: int = 64 * 1024


@attrs.frozen
class SimResult:
    """What a run produced: the checker's verdict and the run's counts."""

    check: CheckResult
    steps: int
    virtual_ms: int
    elapsed_s: float
    history: dict[str, int]
    schedule: str
    #: Steps of the quiet tail, after `steps`.
    tail_steps: int = 0

    def to_json(self) -> dict[str, object]:
        """The `pullspec simulate --json` object."""
        stats = self.check.stats
        return {
            "violations": dict(sorted(self.check.violations.items())),
            "allowed": dict(sorted(self.check.allowed.items())),
            "allowedByKind": self.check.to_json()["allowedByKind"],
            "steps": self.steps,
            "produced": stats.get("produced", 0),
            "consumed": stats.get("consumed", 0),
            "dlq": stats.get("dlq", 0),
            "pending": stats.get("pending", 0),
            "virtual_ms": self.virtual_ms,
            "elapsed_s": round(self.elapsed_s, 2),
            "history": self.history,
            "faults": self.schedule,
            "liveness": {**self.check.liveness, "tailSteps": self.tail_steps},
            "coverage": self.check.coverage,
        }
