"""ReferenceClientInstance: RocketMQ's MQClientInstance on the deterministic scheduler — one per
client id (REBAL-24), shared by the consumers registered on it.

It owns one PullMessageService (PULLQ-1), one RebalanceService (REBAL-1: every 20 s, and at
once on a consumer's start or a broker's NOTIFY_CONSUMER_IDS_CHANGED), and the instance's
scheduled tasks of MQClientInstance.startScheduledTask: the heartbeat to every broker (first after
1 s, then every 30 s) and persistAllConsumerOffset (OFFSET-8: first after 10 s, then every 5 s).
The consume services schedule their own tasks (ORDER-1 lockMQPeriodically, CONC-13 cleaner).
Every event of the instance goes through its `ClientScheduler`, so `crash()` stops the whole
process at once. The consumers themselves are `reference.client_consumer.ClientConsumer`.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.client_remoting import (
    RemotingLockClient,
    RemotingSendBackClient,
    find_consumer_id_list,
    topic_route,
)
from pullspec.reference.client_scheduler import ClientScheduler
from pullspec.reference.pull_service import PullMessageService
from pullspec.reference.rebalance_service import ReferenceRebalanceService
from pullspec.reference.remoting import ReferenceRemoting
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import allocate as al
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.consumer_config import PERSIST_CONSUMER_OFFSET_INITIAL_DELAY_MILLIS, MessageModel
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, require_int, require_str
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

#: MQClientInstance's heartbeat task: initial delay, and ClientConfig.heartbeatBrokerInterval.
HEARTBEAT_INITIAL_DELAY_MILLIS = 1_000
HEARTBEAT_BROKER_INTERVAL_MILLIS = 30_000


def _positive(name: str, value: object) -> int:
    number = require_int(name, value)
    if number <= 0:
        raise InvalidArgumentError(name, value, "must be > 0")
    return number


class InstanceState(enum.Enum):
    """The instance's ServiceState, plus CRASHED for a process that died."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    CRASHED = "CRASHED"


class InstanceConsumer(Protocol):
    """What the instance asks of a registered consumer (MQConsumerInner)."""

    @property
    def group(self) -> str:
        """groupName()."""
        ...

    @property
    def broadcasting(self) -> bool:
        """messageModel() is BROADCASTING."""
        ...

    def subscriptions(self) -> Mapping[str, SubscriptionData]:
        """subscriptions(): what a heartbeat registers for the group."""
        ...

    def do_rebalance(self) -> None:
        """doRebalance() (REBAL-2)."""
        ...

    def persist_consumer_offset(self) -> None:
        """persistConsumerOffset() (OFFSET-8)."""
        ...


class ReferenceClientInstance:
    """MQClientInstance: the pull and rebalance threads, the heartbeats, the offset persistence
    and the client's view of the cluster (routes, consumer ids, locks, send-backs)."""

    def __init__(
        self,
        scheduler: Scheduler,
        remoting: ReferenceRemoting,
        profile: Profile,
        *,
        client_id: str | None = None,
        client_ip: str = "127.0.0.1",
        instance_name: str = al.DEFAULT_INSTANCE_NAME,
        unit_name: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        pid: int = 1,
        rng: random.Random | None = None,
        persist_consumer_offset_interval: int = 5_000,
        heartbeat_broker_interval: int = HEARTBEAT_BROKER_INTERVAL_MILLIS,
    ) -> None:
        if not isinstance(scheduler, Scheduler):
            raise InvalidTypeError("scheduler", scheduler, "Scheduler")
        if not isinstance(remoting, ReferenceRemoting):
            raise InvalidTypeError("remoting", remoting, "ReferenceRemoting")
        self.profile = Profile.parse(profile)
        self.remoting = remoting
        self.clock = scheduler.clock
        if client_id is None:
            # REBAL-24; 4.9's nanoTime is the virtual time, so two starts at one ms collide
            client_id = al.AllocateRules.of(self.profile).client_id(
                client_ip,
                instance_name,
                unit_name,
                message_model,
                pid,
                self.clock.now_ms() * 1_000_000,
            )
        self.client_id = require_str("client_id", client_id)
        #: This process's threads and timers: killing it is the process dying.
        self.scheduler = ClientScheduler(scheduler, self.client_id)
        self.pull_service = PullMessageService(self.scheduler)
        self.rebalance_service = ReferenceRebalanceService(self.scheduler, [self.do_rebalance])
        self.lock_client = RemotingLockClient(remoting)
        #: The instance's random source: the broker of each consumer-id query, the internal
        #: producer's first queue. Seed it for a reproducible run.
        self.rng = rng if rng is not None else random.Random(0)
        self.persist_interval = _positive(
            "persist_consumer_offset_interval", persist_consumer_offset_interval
        )
        self.heartbeat_interval = _positive("heartbeat_broker_interval", heartbeat_broker_interval)
        self.state = InstanceState.CREATE_JUST
        self.consumers: dict[str, InstanceConsumer] = {}
        #: Times of every heartbeat round and of every NOTIFY_CONSUMER_IDS_CHANGED received.
        self.heartbeats: list[int] = []
        self.notifications: list[tuple[int, str]] = []
        #: (level, message) for what RocketMQ logs; tests read it.
        self.log: list[tuple[str, str]] = []
        self._timers: list[int] = []

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """The process runs (started or not yet started, neither shut down nor crashed)."""
        return self.state in (InstanceState.CREATE_JUST, InstanceState.RUNNING)

    def start(self) -> None:
        """MQClientInstance.start, once: connect to the network, start the pull and rebalance
        threads and the scheduled tasks; a later call does nothing."""
        if self.state is not InstanceState.CREATE_JUST:
            return
        self.remoting.register_client(self.client_id, self._on_notify)
        self.pull_service.start()
        self.rebalance_service.start()
        now = self.clock.now_ms()
        self._fixed_rate(
            now + HEARTBEAT_INITIAL_DELAY_MILLIS,
            self.heartbeat_interval,
            self.send_heartbeat_to_all_brokers,
            "heartbeat",
        )
        self._fixed_rate(
            now + PERSIST_CONSUMER_OFFSET_INITIAL_DELAY_MILLIS,
            self.persist_interval,
            self.persist_all_consumer_offset,
            "persistAllConsumerOffset",
        )
        self.state = InstanceState.RUNNING

    def _fixed_rate(self, at: int, period: int, task: Callable[[], None], name: str) -> None:
        def run() -> None:
            try:
                task()
            except Exception as exc:  # scheduleAtFixedRate bodies catch and log
                self.log.append(("error", f"{name} exception: {exc!r}"))
            self._fixed_rate(at + period, period, task, name)

        self._timers.append(self.scheduler.call_at(at, run, name))

    def shutdown(self) -> None:
        """MQClientInstance.shutdown: nothing while a consumer is registered; else stop the
        pull thread (PULLQ-10), the scheduled tasks and the rebalance thread, and close the
        connections."""
        if self.consumers or self.state is not InstanceState.RUNNING:
            return
        self.state = InstanceState.SHUTDOWN_ALREADY
        self.pull_service.shutdown()
        for handle in self._timers:
            self.scheduler.cancel(handle)
        self._timers.clear()
        self.rebalance_service.shutdown()
        self.remoting.unregister_client(self.client_id, close=True)

    def crash(self, *, close_connections: bool = True) -> None:
        """The process dies: nothing of it runs again, nothing is persisted or unlocked. With
        `close_connections` the brokers see its connections close and drop it from its groups
        at once (notifying the others); without, it is a hang or a partition and the brokers
        forget it only when their housekeeping finds it silent for 120 s."""
        if self.state in (InstanceState.CRASHED, InstanceState.SHUTDOWN_ALREADY):
            return
        self.state = InstanceState.CRASHED
        self.scheduler.kill()
        self.remoting.unregister_client(self.client_id, close=close_connections)

    # -- consumers ----------------------------------------------------------------------------

    def register_consumer(self, consumer: InstanceConsumer) -> None:
        """registerConsumer: one consumer per group; MQClientError when the group has one."""
        if consumer.group in self.consumers:
            raise MQClientError(f"The consumer group[{consumer.group}] has been created before")
        self.consumers[consumer.group] = consumer

    def unregister_consumer(self, group: str) -> None:
        """unregisterConsumer: forget the group, then UNREGISTER_CLIENT to every broker (each
        failure logged)."""
        self.consumers.pop(group, None)
        for addr in self._all_broker_addrs():
            try:
                self.remoting.invoke(
                    addr, "UNREGISTER_CLIENT", lambda b: b.unregister_client(self.client_id, group)
                )
            except Exception as exc:
                self.log.append(("error", f"unregister client exception from {addr}: {exc!r}"))

    def _all_broker_addrs(self) -> list[str]:
        return [
            addr
            for name in self.remoting.broker_names()
            for addr in self.remoting.broker_addrs(name).values()
        ]

    # -- the instance's tasks -----------------------------------------------------------------

    def do_rebalance(self) -> None:
        """MQClientInstance.doRebalance: every consumer's doRebalance, one failure sparing the
        others (REBAL-1)."""
        for consumer in list(self.consumers.values()):
            try:
                consumer.do_rebalance()
            except Exception as exc:
                self.log.append(("error", f"doRebalance exception: {exc!r}"))

    def rebalance_immediately(self) -> None:
        """rebalanceImmediately: wake the rebalance thread now."""
        self.rebalance_service.rebalance_immediately()

    def _on_notify(self, group: str) -> None:
        # ClientRemotingProcessor.notifyConsumerIdsChanged
        self.notifications.append((self.clock.now_ms(), group))
        if self.state is InstanceState.RUNNING:
            self.rebalance_immediately()

    def send_heartbeat_to_all_brokers(self) -> None:
        """sendHeartbeatToAllBrokerWithLock: one HEART_BEAT with every consumer's group, model
        and subscriptions to every broker, slaves included; each failure logged."""
        if not self.consumers or not self.alive:
            return
        self.heartbeats.append(self.clock.now_ms())
        data = [(c.group, dict(c.subscriptions()), c.broadcasting) for c in self.consumers.values()]

        def beat(broker: ReferenceBroker) -> None:
            for group, subs, broadcasting in data:
                broker.heartbeat(self.client_id, group, subs, broadcasting)

        for addr in self._all_broker_addrs():
            try:
                self.remoting.invoke(addr, "HEART_BEAT", beat)
            except Exception as exc:
                self.log.append(("warn", f"send heart beat to broker[{addr}] failed: {exc!r}"))

    def persist_all_consumer_offset(self) -> None:
        """persistAllConsumerOffset (OFFSET-8): every consumer's persistConsumerOffset."""
        for consumer in list(self.consumers.values()):
            consumer.persist_consumer_offset()

    # -- the cluster as this client sees it ---------------------------------------------------

    def route(self, topic: str) -> Collection[MessageQueue] | None:
        """topicSubscribeInfoTable[topic] (REBAL-4)."""
        return topic_route(self.remoting, topic)

    def consumer_ids(self, topic: str, group: str) -> Collection[str] | None:
        """findConsumerIdList (REBAL-5): None on failure."""
        return find_consumer_id_list(self.remoting, topic, group, self.rng)

    def send_back_client(self, group: str, *, unit_mode: bool = False) -> RemotingSendBackClient:
        """The SendBackClient of `group`: CONSUMER_SEND_MSG_BACK and the internal producer."""
        return RemotingSendBackClient(
            self.remoting, group, self.clock, self.rng, unit_mode=unit_mode
        )
