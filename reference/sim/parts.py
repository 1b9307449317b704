"""The parts of a simulation another implementation can provide (`SimParts`): the master's
message store, each consumer's process queues, and the consumer parts of
`reference.client_parts.ConsumerParts` (offset store, consume services, rebalance). Each is
given as a factory typed by a small Protocol; the reference's part stands in for every factory
that is None.

The simulator observes the parts without changing what they do. A candidate's store and process
queue sit *below* the observing classes: `RecordingStore` and `ObservedProcessQueue` are
subclassed with every method of the part's interface forwarded to the candidate's object
(`candidate_part`), so the observing code runs unchanged and reference parts plugged in this way
give exactly the reference's history. The consumer parts are observed through what they are
given (the offset store is wrapped, the send-back client, the dispatch of new PullRequests and
the ProcessQueue factory are the simulator's) and through their `records`.

>>> import pullspec.reference.factories as reference
>>> SimParts(message_store=reference.message_store).provided()
('message_store',)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import attrs

from pullspec.reference.client_parts import ConsumerParts
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.sim.cluster import RecordingStore
from pullspec.reference.sim.observe import ObservedProcessQueue, PutWatcher
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.clock import Clock
from pullspec.spec.config import StoreConfig
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageStore, ProcessQueue


class MessageStoreFactory(Protocol):
    """A fresh message store (the conformance suite's `message_store` factory)."""

    def __call__(self, config: StoreConfig, profile: Profile, clock: Clock) -> MessageStore: ...


class ProcessQueueFactory(Protocol):
    """A fresh ProcessQueue (the conformance suite's `process_queue` factory); its client lease
    and pull idle time are RocketMQ's defaults (30 s, 120 s), as the simulation's are."""

    def __call__(self, clock: Clock, profile: Profile) -> ProcessQueue: ...


@attrs.frozen
class SimParts:
    """A candidate's parts for the simulation; None: the reference's."""

    message_store: MessageStoreFactory | None = None
    process_queue: ProcessQueueFactory | None = None
    consumer: ConsumerParts = attrs.Factory(ConsumerParts)

    def provided(self) -> tuple[str, ...]:
        """The names of the parts given a factory."""
        own = tuple(name for name in ("message_store", "process_queue") if getattr(self, name))
        return own + self.consumer.provided()

    def master_store(self, base: type[RecordingStore]) -> type[RecordingStore]:
        """The master's store class: `base`, or `base` over the candidate's store."""
        if self.message_store is None:
            return base
        bases = (_BuildsCandidateStore, base, _StoreDelegate)
        factory = {"factory": staticmethod(self.message_store)}
        return type(f"Candidate{base.__name__}", bases, factory)

    def process_queue_class(self, base: type[ObservedProcessQueue]) -> type[ObservedProcessQueue]:
        """The consumers' ProcessQueue class: `base`, or `base` over the candidate's."""
        if self.process_queue is None:
            return base
        bases = (_BuildsCandidateQueue, base, _QueueDelegate)
        factory = {"factory": staticmethod(self.process_queue)}
        return type(f"Candidate{base.__name__}", bases, factory)


_STORE_METHODS = (
    "put_message",
    "get_min_offset_in_queue",
    "get_max_offset_in_queue",
    "get_min_phy_offset",
    "get_max_phy_offset",
    "look_message_by_offset",
    "check_in_disk_by_consume_offset",
    "get_message",
    "set_last_modified",
    "delete_expired_files",
    "set_role",
)
_STORE_PROPERTIES = ("broker_role", "offset_check_in_slave")
_PQ_METHODS = (
    "snapshot",
    "put_messages",
    "remove_messages",
    "take_messages",
    "commit",
    "rollback",
    "make_messages_to_consume_again",
    "clear",
    "inc_try_unlock_times",
    "clean_expired_msg",
    "is_lock_expired",
    "is_pull_expired",
    "has_temp_message",
)
_PQ_PROPERTIES = (
    "profile",
    "max_span",
    "msg_count",
    "msg_size",
    "queue_offset_max",
    "msg_acc_cnt",
    "consuming",
    "cached_offsets",
    "consuming_offsets",
    "last_consume_timestamp",
    "try_unlock_times",
    "dropped",
    "locked",
    "last_lock_timestamp",
    "last_pull_timestamp",
)


def _delegate(cls: type, base: type, methods: Iterable[str], properties: Iterable[str]) -> None:
    """Give `cls` methods and properties that forward to `self.candidate_part`."""

    def method(name: str) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(self.candidate_part, name)(*args, **kwargs)

        call.__name__ = name
        return call

    def prop(name: str) -> property:
        original = getattr(base, name)
        setter = None
        if isinstance(original, property) and original.fset is not None:

            def setter(self: Any, value: Any) -> None:
                setattr(self.candidate_part, name, value)

        return property(lambda self: getattr(self.candidate_part, name), setter)

    for name in methods:
        setattr(cls, name, method(name))
    for name in properties:
        setattr(cls, name, prop(name))


class _StoreDelegate(ReferenceMessageStore):
    """ReferenceMessageStore's interface, forwarded to the candidate's store (`put_messages`
    stays the reference's loop over `put_message`, so every append is still reported)."""

    # The candidate's object behind the interface: whatever type it has, it is only called.
    candidate_part: Any


class _QueueDelegate(ReferenceProcessQueue):
    """ReferenceProcessQueue's interface, forwarded to the candidate's process queue."""

    candidate_part: Any


class _BuildsCandidateStore:
    """First in the MRO of a candidate store class: builds the candidate's store once the
    observing store is set up."""

    factory: MessageStoreFactory
    config: StoreConfig
    profile: Profile
    clock: Clock
    candidate_part: Any

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()  # type: ignore[misc]
        self.candidate_part = type(self).factory(self.config, self.profile, self.clock)


class _BuildsCandidateQueue:
    """First in the MRO of a candidate ProcessQueue class: builds the candidate's queue before
    the observing one."""

    factory: ProcessQueueFactory
    candidate_part: Any

    def __init__(self, clock: Clock, profile: Profile, owner: PutWatcher, pq_id: int) -> None:
        self.candidate_part = type(self).factory(clock, profile)
        super().__init__(clock, profile, owner, pq_id)  # type: ignore[call-arg]


_delegate(_StoreDelegate, ReferenceMessageStore, _STORE_METHODS, _STORE_PROPERTIES)
_delegate(_QueueDelegate, ReferenceProcessQueue, _PQ_METHODS, _PQ_PROPERTIES)
