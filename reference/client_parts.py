"""The replaceable parts of a push consumer (`reference.client_consumer.ClientConsumer`) as small
typed Protocols — its offset store, its consume service (concurrent or orderly) and its rebalance
— and `ConsumerParts`, the factories a consumer builds them with; a missing factory means the
reference's class. The whole-system simulator plugs a candidate's parts in through them
(`reference.sim.config.SimHooks.parts`).

Each factory takes exactly what the reference class's constructor takes, so the reference's
classes are factories themselves:

>>> from pullspec.reference.consume_concurrently import ReferenceConsumeConcurrentlyService
>>> from pullspec.reference.rebalance import ReferenceRebalancePushImpl
>>> parts = ConsumerParts(
...     consume_concurrently=ReferenceConsumeConcurrentlyService,
...     rebalance=ReferenceRebalancePushImpl,
... )
>>> parts.provided()
('consume_concurrently', 'rebalance')
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from pullspec.reference.consume_orderly import RebalanceLocking
from pullspec.reference.offset_store import BrokerOffsetClient
from pullspec.reference.push_consumer import RebalanceHooks
from pullspec.reference.rebalance import NewPullRequest
from pullspec.reference.records import Records
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import allocate as al
from pullspec.spec.consume_concurrently import ConcurrentListener
from pullspec.spec.consume_orderly import OrderlyListener
from pullspec.spec.consumer_config import ConsumerConfig
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import BrokerLockClient, ConsumeMessageService, ProcessQueue
from pullspec.spec.pull_from_where import OffsetQueries
from pullspec.spec.retry import SendBackClient

#: How long a listener call lasts, in virtual milliseconds.
ConsumeTime = Callable[[Sequence[StoredMessage]], int]


@runtime_checkable
class ConsumeService(ConsumeMessageService, Protocol):
    """A consume service a consumer starts and stops. `records` receives one record per
    listener call, appended when the call returns and before its result is processed; a
    record has `mq`, `offsets`, `status` (a ConsumeConcurrentlyStatus or ConsumeOrderlyStatus),
    `end` and the call's start as `at` (concurrent) or `start` (orderly), as
    `reference.consume_concurrently.ConsumeRecord` and `OrderlyConsumeRecord` have."""

    # A record type per implementation; the simulator listens to the records and keeps none.
    records: Records[Any]

    def start(self) -> None:
        """Start the service's own tasks (CONC-13's cleaner, ORDER-1's lockAll)."""
        ...

    def shutdown(self, await_terminate_millis: int = 0) -> None:
        """Stop the service (CONC-14, ORDER-17)."""
        ...


@runtime_checkable
class OrderlyConsumeService(ConsumeService, Protocol):
    """An orderly consume service: the rebalance asks whether a ProcessQueue's consume lock is
    free before removing it (REBAL-14)."""

    def consume_lock_free(self, pq: ProcessQueue) -> bool:
        """No listener call of `pq` is in progress."""
        ...


@runtime_checkable
class ClientRebalance(RebalanceHooks, RebalanceLocking, Protocol):
    """RebalancePushImpl as the consumer, its pull path and its orderly service use it. The
    consumer sets the three callables once the other parts exist."""

    paused: bool
    consume_lock_free: Callable[[ProcessQueue], bool]
    send_heartbeat: Callable[[], None]
    config_changed: Callable[[ConsumerConfig], None]

    @property
    def subscription_inner(self) -> Mapping[str, SubscriptionData]:
        """subscriptionInner."""
        ...

    def subscribe(self, subscription: SubscriptionData) -> None:
        """Put a subscription into subscriptionInner."""
        ...

    def destroy(self) -> None:
        """destroy (REBAL-23)."""
        ...


class OffsetStoreFactory(Protocol):
    """A CLUSTERING consumer's RemoteBrokerOffsetStore over `client` (OFFSET-1)."""

    def __call__(self, client: BrokerOffsetClient, group: str) -> OffsetStore: ...


class ConcurrentServiceFactory(Protocol):
    """ConsumeMessageConcurrentlyService's constructor."""

    def __call__(
        self,
        scheduler: Scheduler,
        *,
        group: str,
        config: ConsumerConfig,
        profile: Profile,
        listener: ConcurrentListener,
        offset_store: OffsetStore,
        send_back: SendBackClient,
        process_queues: Callable[[], Mapping[MessageQueue, ProcessQueue]],
        consume_time: ConsumeTime | None = None,
    ) -> ConsumeService: ...


class OrderlyServiceFactory(Protocol):
    """ConsumeMessageOrderlyService's constructor."""

    def __call__(
        self,
        scheduler: Scheduler,
        *,
        group: str,
        config: ConsumerConfig,
        profile: Profile,
        listener: OrderlyListener,
        offset_store: OffsetStore,
        send_back: SendBackClient,
        rebalance: RebalanceLocking,
        consume_time: ConsumeTime | None = None,
    ) -> OrderlyConsumeService: ...


class RebalanceFactory(Protocol):
    """RebalancePushImpl's constructor: new PullRequests go to `dispatch`, new ProcessQueues
    come from `process_queue_factory`."""

    def __call__(
        self,
        scheduler: Scheduler,
        *,
        group: str,
        client_id: str,
        config: ConsumerConfig,
        profile: Profile,
        lock_client: BrokerLockClient,
        offset_store: OffsetStore,
        admin: OffsetQueries,
        route: Callable[[str], Collection[MessageQueue] | None],
        consumer_ids: Callable[[str, str], Collection[str] | None],
        strategy: al.AllocateStrategy = al.allocate_averagely,
        dispatch: Callable[[NewPullRequest], None] | None = None,
        process_queue_factory: Callable[[], ProcessQueue] | None = None,
    ) -> ClientRebalance: ...


@attrs.frozen
class ConsumerParts:
    """The factories a consumer builds its parts with; None: the reference's class."""

    offset_store: OffsetStoreFactory | None = None
    consume_concurrently: ConcurrentServiceFactory | None = None
    consume_orderly: OrderlyServiceFactory | None = None
    rebalance: RebalanceFactory | None = None

    def provided(self) -> tuple[str, ...]:
        """The names of the parts given a factory."""
        return tuple(f.name for f in attrs.fields(ConsumerParts) if getattr(self, f.name))
