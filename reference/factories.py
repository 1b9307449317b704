"""The reference candidate: factories the conformance suite calls to build fresh instances."""

from __future__ import annotations

from typing import Any

from pullspec.spec.clock import Clock
from pullspec.spec.config import BrokerConfig, StoreConfig
from pullspec.spec.profiles import Profile

NAME = "reference"


def message_store(config: StoreConfig, profile: Profile, clock: Clock) -> Any:
    """A fresh ReferenceMessageStore."""
    from pullspec.reference.store import ReferenceMessageStore

    return ReferenceMessageStore(config=config, profile=profile, clock=clock)


def broker(
    store_config: StoreConfig, broker_config: BrokerConfig, profile: Profile, clock: Clock
) -> Any:
    """A fresh ReferenceBroker (pull processing, offsets, long polling) over a fresh store."""
    from pullspec.reference.broker import ReferenceBroker

    return ReferenceBroker(
        store=message_store(store_config, profile, clock),
        config=broker_config,
        profile=profile,
        clock=clock,
    )


def process_queue(clock: Clock, profile: Profile) -> Any:
    """A fresh ReferenceProcessQueue."""
    from pullspec.reference.process_queue import ReferenceProcessQueue

    return ReferenceProcessQueue(clock=clock, profile=profile)


def lock_manager(clock: Clock, lock_max_live_time_ms: int = 60_000) -> Any:
    """A fresh ReferenceLockManager."""
    from pullspec.reference.lock_manager import ReferenceLockManager

    return ReferenceLockManager(clock=clock, lock_max_live_time_ms=lock_max_live_time_ms)


def send_back(store_config: StoreConfig, group_config: Any, profile: Profile, clock: Clock) -> Any:
    """A fresh ReferenceSendBack (CONSUMER_SEND_MSG_BACK) over a fresh store."""
    from pullspec.reference.send_back import ReferenceSendBack

    return ReferenceSendBack(
        store=message_store(store_config, profile, clock),
        group_config=group_config,
        profile=profile,
        clock=clock,
    )
