"""The replaceable parts of a simulation run (`SimHooks`): the observing classes, which tests
subclass for deliberately broken configurations, and another implementation's parts underneath
them (`reference.sim.parts`)."""

from __future__ import annotations

import attrs

from pullspec.reference.sim.cluster import RecordingStore
from pullspec.reference.sim.observe import ObservedOffsetStore, ObservedProcessQueue, PutWatcher
from pullspec.reference.sim.parts import SimParts
from pullspec.spec.clock import Clock
from pullspec.spec.profiles import Profile


@attrs.define
class SimHooks:
    """Replaceable parts: the observing classes (subclassed by tests for deliberately broken
    configurations) and another implementation's parts underneath them (`parts`)."""

    process_queue: type[ObservedProcessQueue] = ObservedProcessQueue
    offset_store: type[ObservedOffsetStore] = ObservedOffsetStore
    master_store: type[RecordingStore] = RecordingStore
    #: The client lease (PQ-15) and the broker lease (LEASE-1).
    client_lock_ms: int = 30_000
    broker_lock_ms: int = 60_000
    #: A candidate's parts (reference.sim.parts); the reference's where it has none.
    parts: SimParts = attrs.Factory(SimParts)

    def store_class(self) -> type[RecordingStore]:
        """The master's store class, over the candidate's store if it has one."""
        return self.parts.master_store(self.master_store)

    def new_process_queue(
        self, clock: Clock, profile: Profile, owner: PutWatcher, pq_id: int
    ) -> ObservedProcessQueue:
        """A consumer's new ProcessQueue, over the candidate's if it has one."""
        return self.parts.process_queue_class(self.process_queue)(clock, profile, owner, pq_id)
