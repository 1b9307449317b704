"""What a consumer of a run sees of the simulator (`Run`): its config and hooks, its clock,
scheduler and network, the history it reports events to and the little shared state the
observers keep on it. `reference.sim.simulator.Simulator` is the one `Run`; SimClient and its
ClientWatch (`reference.sim.client`, `reference.sim.watch`) are written against this protocol,
so that the simulator may import them without them importing it back.
"""

from __future__ import annotations

from typing import Protocol

from pullspec.reference.scheduler import Scheduler
from pullspec.reference.sim import history as h
from pullspec.reference.sim.cluster import DelayingRemoting
from pullspec.reference.sim.config import SimConfig
from pullspec.reference.sim.hooks import SimHooks
from pullspec.spec.clock import ManualClock
from pullspec.spec.consumer_config import ConsumerConfig


class Run(Protocol):
    """One run of the simulator, as its consumers see it."""

    config: SimConfig
    hooks: SimHooks
    clock: ManualClock
    scheduler: Scheduler
    remoting: DelayingRemoting
    #: The group's consumer config and its one topic.
    consumer_config: ConsumerConfig
    group: str
    topic: str
    #: (client, via) of the broker commits being made, None for a pull's commit.
    writer: tuple[str, str] | None
    #: The topics the master stores records of, while a client captures them.
    capture: list[str] | None
    #: queue → queue offset → client of each commit a pull carries.
    pull_commits: dict[str, dict[int, str]]
    #: Keys of the poison messages.
    poison: set[str]

    def emit(self, event: h.Event) -> None:
        """Record one event and check it."""
        ...

    def key_of(self, queue: str, offset: int) -> str:
        """The key of the message stored at (queue, offset) ("" when unknown)."""
        ...

    def next_pq_id(self) -> int:
        """A ProcessQueue number unique in the run."""
        ...
