"""The reference candidate: factories the conformance suite calls to build fresh instances.

Each factory imports its class when called, so resolving the candidate costs nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pullspec.spec.clock import Clock
from pullspec.spec.config import BrokerConfig, StoreConfig, SubscriptionGroupConfig
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageStore, ProcessQueue

if TYPE_CHECKING:
    from pullspec.reference.areas._vocab import DriverBase
    from pullspec.reference.broker import ReferenceBroker
    from pullspec.reference.lock_manager import ReferenceLockManager
    from pullspec.reference.send_back import ReferenceSendBack

NAME = "reference"


def message_store(config: StoreConfig, profile: Profile, clock: Clock) -> MessageStore:
    """A fresh ReferenceMessageStore."""
    from pullspec.reference.store import ReferenceMessageStore

    return ReferenceMessageStore(config=config, profile=profile, clock=clock)


def broker(
    store_config: StoreConfig, broker_config: BrokerConfig, profile: Profile, clock: Clock
) -> ReferenceBroker:
    """A fresh ReferenceBroker (pull processing, offsets, long polling) over a fresh store."""
    from pullspec.reference.broker import ReferenceBroker
    from pullspec.reference.store import ReferenceMessageStore

    return ReferenceBroker(
        store=ReferenceMessageStore(config=store_config, profile=profile, clock=clock),
        config=broker_config,
        profile=profile,
        clock=clock,
    )


def process_queue(clock: Clock, profile: Profile) -> ProcessQueue:
    """A fresh ReferenceProcessQueue."""
    from pullspec.reference.process_queue import ReferenceProcessQueue

    return ReferenceProcessQueue(clock=clock, profile=profile)


def lock_manager(
    clock: Clock, lock_max_live_time_ms: int = 60_000, profile: Profile = Profile.V4_9
) -> ReferenceLockManager:
    """A fresh ReferenceLockManager (the same in both profiles)."""
    from pullspec.reference.lock_manager import ReferenceLockManager

    return ReferenceLockManager(clock=clock, lock_max_live_time_ms=lock_max_live_time_ms)


def send_back(
    store_config: StoreConfig,
    group_config: SubscriptionGroupConfig,
    profile: Profile,
    clock: Clock,
) -> ReferenceSendBack:
    """A fresh ReferenceSendBack (CONSUMER_SEND_MSG_BACK) over a fresh store."""
    from pullspec.reference.send_back import ReferenceSendBack

    return ReferenceSendBack(
        store=message_store(store_config, profile, clock),
        group_config=group_config,
        profile=profile,
        clock=clock,
    )


# -- the client areas: drivers of the reference's own client classes (reference.areas) ---------


def _area(name: str) -> Callable[[Mapping[str, Any], Profile], DriverBase]:
    def factory(config: Mapping[str, Any], profile: Profile) -> DriverBase:
        module = importlib.import_module(f"pullspec.reference.areas.{name}")
        driver: DriverBase = module.Driver(dict(config), Profile.parse(profile))
        return driver

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"A fresh reference driver of the `{name}` area (reference.areas.{name})."
    return factory


pull_loop = _area("pull_loop")
pull_decision = _area("pull_decision")
pull_result = _area("pull_result")
pull_request = _area("pull_request")
pull_service = _area("pull_service")
offset_store = _area("offset_store")
allocate = _area("allocate")
rebalance = _area("rebalance")
consume_concurrently = _area("consume_concurrently")
consume_orderly = _area("consume_orderly")
process_queue_maintenance = _area("process_queue_maintenance")
