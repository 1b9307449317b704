"""ReferenceCluster: the smallest whole system to run push consumers against — one fake clock,
one scheduler, one network, brokers (masters and, if wanted, slaves) and consumers built by
`new_push_consumer`. Tests and simulators drive it by scheduling steps and running the clock.

Slaves are registered but nothing replicates into them here: a simulator that models
replication appends to them itself. Every broker's consumer-offset commits are recorded in
`commits` in the order they happen.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.client_consumer import ClientConsumer, Listener, new_push_consumer
from pullspec.reference.client_instance import ReferenceClientInstance
from pullspec.reference.client_parts import ConsumeTime
from pullspec.reference.remoting import ReferenceRemoting
from pullspec.reference.scheduler import Scheduler
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec import allocate as al
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import BrokerConfig, StoreConfig
from pullspec.spec.consumer_config import ConsumerConfig
from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.message import BrokerInnerMessage, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.results import PutMessageResult

#: (time, group, topic, queue id, offset) of one consumer-offset commit on a broker.
Commit = tuple[int, str, str, int, int]


class ReferenceCluster:
    """Brokers, a network and consumers on one fake clock; `seed` fixes every random choice."""

    def __init__(
        self,
        profile: Profile = Profile.V4_9,
        *,
        start_ms: int = 0,
        latency_ms: int = 0,
        seed: int = 0,
    ) -> None:
        self.profile = Profile.parse(profile)
        self.clock = ManualClock(start_ms)
        self.scheduler = Scheduler(self.clock)
        self.remoting = ReferenceRemoting(self.scheduler, latency_ms)
        self.seed = seed
        #: address → broker, in registration order.
        self.brokers: dict[str, ReferenceBroker] = {}
        self.commits: list[Commit] = []

    # -- brokers ------------------------------------------------------------------------------

    def add_broker(
        self,
        name: str = "broker-a",
        broker_id: int = 0,
        *,
        store_config: StoreConfig | None = None,
        broker_config: BrokerConfig | None = None,
    ) -> str:
        """A new broker over a new in-memory store, registered as (name, broker_id); its
        address. A slave needs a store config with broker_role SLAVE."""
        store = ReferenceMessageStore(
            config=store_config or StoreConfig(), profile=self.profile, clock=self.clock
        )
        broker = ReferenceBroker(
            store,
            broker_config or BrokerConfig(broker_name=name),
            self.profile,
            clock=self.clock,
        )
        addr = self.remoting.register_broker(name, broker_id, broker)
        self.brokers[addr] = broker
        broker.commit_listeners.append(
            lambda g, t, q, o: self.commits.append((self.clock.now_ms(), g, t, q, o))
        )
        return addr

    def master(self, name: str = "broker-a") -> ReferenceBroker:
        """The master registered for `name`."""
        addr = self.remoting.broker_addrs(name).get(0)
        if addr is None:
            raise InvalidArgumentError("name", name, "has no master")
        return self.brokers[addr]

    def create_topic(self, topic: str, queues: int = 4, perm: int = 6) -> None:
        """Create `topic` with `queues` queues on every broker."""
        for broker in self.brokers.values():
            broker.create_topic(topic, queues, perm)

    def set_broker_down(self, name: str, down: bool, broker_id: int = 0) -> None:
        """Take the broker (name, broker_id) off the network, or bring it back."""
        self.remoting.set_broker_down(self.remoting.broker_addrs(name)[broker_id], down)

    # -- producing ----------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        queue_id: int,
        body: bytes = b"m",
        properties: Mapping[str, str] | None = None,
        broker_name: str = "broker-a",
    ) -> PutMessageResult:
        """A producer's send to the master of `broker_name` (waking the held pulls)."""
        msg = BrokerInnerMessage(
            topic, queue_id, body, dict(properties or {}), born_timestamp=self.clock.now_ms()
        )
        return self.remoting.send_message(self.remoting.broker_addrs(broker_name)[0], msg)

    def messages(
        self, topic: str, queue_id: int, broker_name: str = "broker-a"
    ) -> list[StoredMessage]:
        """Every message still stored in one queue of the master, in queue order."""
        store = self.master(broker_name).store
        out: list[StoredMessage] = []
        offset = store.get_min_offset_in_queue(topic, queue_id)
        while True:
            found = store.get_message("reader", topic, queue_id, offset, 32).messages
            if not found:
                return out
            out.extend(found)
            offset = found[-1].queue_offset + 1

    def committed(
        self, group: str, topic: str, queue_id: int, broker_name: str = "broker-a"
    ) -> int:
        """The master's committed offset of (group, topic, queue), or -1."""
        return self.master(broker_name).query_offset(group, topic, queue_id)

    # -- consumers ----------------------------------------------------------------------------

    def new_consumer(
        self,
        group: str,
        listener: Listener,
        *,
        client_id: str,
        subscriptions: Mapping[str, str],
        config: ConsumerConfig | None = None,
        orderly: bool = False,
        instance: ReferenceClientInstance | None = None,
        strategy: al.AllocateStrategy = al.allocate_averagely,
        consume_time: ConsumeTime | None = None,
        offset_dir: str | None = None,
    ) -> ClientConsumer:
        """A wired consumer, not started, on a new instance `client_id` (or on `instance`);
        its instance's random source is seeded from the cluster's seed and the client id."""
        return new_push_consumer(
            group,
            config or ConsumerConfig(),
            self.profile,
            listener,
            scheduler=self.scheduler,
            remoting=self.remoting,
            subscriptions=subscriptions,
            orderly=orderly,
            client_id=client_id,
            instance=instance,
            rng=random.Random(f"{self.seed}:{client_id}"),
            strategy=strategy,
            offset_dir=offset_dir,
            consume_time=consume_time,
        )

    # -- time ---------------------------------------------------------------------------------

    def at(self, when: int, step: Callable[[], object], name: str = "step") -> None:
        """Run `step` at virtual time `when` (a fault, a start, a send …)."""

        def run() -> None:
            step()  # its result, if any, is not needed

        self.scheduler.call_at(when, run, name)

    def run_until(self, until: int, after_each: Callable[[], None] | None = None) -> int:
        """Run every event due up to `until` (calling `after_each` after each), then set the
        clock to `until`; answer how many events ran."""
        if after_each is None:
            return self.scheduler.run_until(until)
        ran = 0
        while (due := self.scheduler.next_time) is not None and due <= until:
            self.scheduler.run_next()
            after_each()
            ran += 1
        if self.clock.now_ms() < until:
            self.clock.jump_to(until)
        return ran
