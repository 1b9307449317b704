"""The broker side of a simulation: a master whose store reports every record it appends, an
optional slave that replays the master's records `lag_ms` behind (HA replication, which copies
commit-log bytes and so bypasses the slave's refusal of puts), the lease clock a clock-jump fault
moves (only the broker's RebalanceLockManager reads it, LEASE-3), commit-log expiry (STORE-19),
a lock manager that reports grants and refusals, a network that can delay pull answers, and
`build_brokers`, which wires the brokers up."""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Iterable

import attrs

from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.lock_manager import ReferenceLockManager
from pullspec.reference.remoting import OnException, OnResponse, ReferenceRemoting
from pullspec.reference.scheduler import Scheduler
from pullspec.reference.sim.config import SimConfig
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.clock import Clock, ManualClock
from pullspec.spec.code import PullMessageRequest, PullResponse
from pullspec.spec.config import HOUR_MS, BrokerConfig, StoreConfig, SubscriptionGroupConfig
from pullspec.spec.evolve import evolve
from pullspec.spec.message import BrokerInnerMessage, MessageQueue, StoredMessage
from pullspec.spec.pull_request import PullMessageRequestHeader
from pullspec.spec.results import PutMessageResult
from pullspec.spec.status import BrokerRole

#: Called with each record the master appends.
OnAppend = Callable[[StoredMessage], None]
#: Called with (client id, queue, action) for each lease decision.
OnLease = Callable[[str, MessageQueue, str], None]


class SkewedClock:
    """A clock `skew` milliseconds ahead of `base` (a wall clock that jumped forward)."""

    def __init__(self, base: Clock, skew: int = 0) -> None:
        self.base = base
        self.skew = skew

    def now_ms(self) -> int:
        """The base clock's time plus the skew."""
        return self.base.now_ms() + self.skew


@attrs.define
class RecordingStore(ReferenceMessageStore):
    """The master's store: reports each appended record and keeps what the slave has not
    replicated yet."""

    on_append: OnAppend | None = attrs.field(default=None, kw_only=True)
    #: (store time, message) of every append not yet replicated.
    unreplicated: collections.deque[tuple[int, BrokerInnerMessage]] = attrs.field(
        factory=collections.deque, kw_only=True
    )
    replicating: bool = attrs.field(default=False, kw_only=True)

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """putMessage, then report the stored record."""
        result = super().put_message(msg)
        if result.ok:
            if self.replicating:
                self.unreplicated.append((self.clock.now_ms(), msg))
            if self.on_append is not None:
                record = self.look_message_by_offset(result.wrote_offset)
                if record is not None:
                    self.on_append(record)
        return result


@attrs.define
class ReplicaStore(ReferenceMessageStore):
    """A slave's store: it refuses producers' puts (SLAVE role) but takes replicated records."""

    def replicate(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """Append a record copied from the master, whatever the role says."""
        role, check = self.broker_role, self.offset_check_in_slave
        self.set_role(BrokerRole.ASYNC_MASTER, check)
        try:
            return self.put_message(msg)
        finally:
            self.set_role(role, check)


@attrs.define
class LaggingSlave(ReferenceBroker):
    """A slave broker that, whenever it is read, first replays the master's appends older than
    `lag_ms` (the slave is only observed through pulls and its hold checks)."""

    source: RecordingStore | None = attrs.field(default=None, kw_only=True)
    lag_ms: int = attrs.field(default=0, kw_only=True)

    def catch_up(self) -> int:
        """Replicate every master append made at or before now − lag; return how many."""
        if self.source is None or not isinstance(self.store, ReplicaStore):
            return 0
        horizon = self.clock.now_ms() - self.lag_ms
        pending, count = self.source.unreplicated, 0
        while pending and pending[0][0] <= horizon:
            self.store.replicate(pending.popleft()[1])
            count += 1
        return count

    def pull_message(self, request: PullMessageRequest) -> tuple[int, PullResponse | None]:
        """Catch up, then process the pull."""
        self.catch_up()
        return super().pull_message(request)

    def run_hold_checks(self) -> int:
        """Catch up, then run the due hold checks (a slave does not notify on arrival, HOLD-5)."""
        self.catch_up()
        return super().run_hold_checks()


class DelayingRemoting(ReferenceRemoting):
    """The network, with a fault window during which each pull answer reaches its callback a
    random extra delay late (answers of different queues then arrive reordered). The answer has
    reached the client: its timeout no longer fires, only the callback's run is delayed."""

    def __init__(self, scheduler: Scheduler, latency_ms: int, rng: random.Random) -> None:
        super().__init__(scheduler, latency_ms)
        self.world = scheduler
        self.rng = rng
        self.delay_until = -1
        self.max_delay_ms = 0

    def delay_answers(self, max_delay_ms: int, window_ms: int) -> None:
        """From now on for `window_ms`, delay each answer by up to `max_delay_ms`."""
        self.max_delay_ms = max_delay_ms
        self.delay_until = self.world.clock.now_ms() + window_ms

    def pull_message_async(
        self,
        addr: str,
        header: PullMessageRequestHeader,
        timeout_ms: int,
        on_response: OnResponse,
        on_exception: OnException,
    ) -> int:
        """invokeAsync of a PULL_MESSAGE, its answer possibly delayed."""

        def answered(response: PullResponse) -> None:
            if self.world.clock.now_ms() >= self.delay_until or self.max_delay_ms <= 0:
                on_response(response)
                return
            extra = self.rng.randrange(self.max_delay_ms + 1)
            self.world.call_later(extra, lambda: on_response(response), "pull-response-delayed")

        return super().pull_message_async(addr, header, timeout_ms, answered, on_exception)


class ObservedLockManager(ReferenceLockManager):
    """The broker's RebalanceLockManager, reporting each grant, refusal and release."""

    def __init__(
        self, clock: Clock, on_lease: OnLease, lock_max_live_time_ms: int = 60_000
    ) -> None:
        super().__init__(clock, lock_max_live_time_ms)
        self.on_lease = on_lease

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> set[MessageQueue]:
        """tryLockBatch (LEASE-6); a queue taken over from another client is reported as that
        lease's expiry, then a grant."""
        queues = list(mqs)
        before = self.table().get(group, {})
        granted = super().try_lock_batch(group, queues, client_id)
        for mq in queues:
            owner = before.get(mq)
            if mq not in granted:
                self.on_lease(client_id, mq, "refuse")
            elif owner is None or owner[0] != client_id:
                if owner is not None:
                    self.on_lease(owner[0], mq, "expire")
                self.on_lease(client_id, mq, "grant")
        return granted

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """unlockBatch (LEASE-7): the caller's own entries are released."""
        queues = list(mqs)
        before = self.table().get(group, {})
        super().unlock_batch(group, queues, client_id)
        for mq in queues:
            if before.get(mq, ("",))[0] == client_id:
                self.on_lease(client_id, mq, "release")


def expire_oldest_files(store: ReferenceMessageStore, files: int) -> int:
    """Age the `files` oldest commit-log files past fileReservedTime (never the one being
    written) and run one clean round (STORE-19); return how many were deleted."""
    size = store.config.mapped_file_size_commit_log
    first = store.get_min_phy_offset()
    last_start = (store.get_max_phy_offset() // size) * size
    aged = 0
    start = first
    while aged < files and start + size <= last_start:
        store.set_last_modified(
            start, store.clock.now_ms() - store.config.file_reserved_time * HOUR_MS
        )
        start += size
        aged += 1
    return store.delete_expired_files() if aged else 0


@attrs.frozen
class Brokers:
    """The broker side of a run: the master, its slave (None without one), the lease clock."""

    master: ReferenceBroker
    slave: LaggingSlave | None
    lease_clock: SkewedClock
    master_addr: str


def build_brokers(
    config: SimConfig,
    store_class: type[RecordingStore],
    broker_lock_ms: int,
    clock: ManualClock,
    remoting: ReferenceRemoting,
    group: str,
    topic: str,
    *,
    on_append: OnAppend,
    on_lease: OnLease,
    on_commit: Callable[[str, str, int, int], None],
) -> Brokers:
    """The master "broker-a:0" (reporting appends, leases and commits) and, if the config has
    one, its slave "broker-a:1"; both know the topic and the group, the master's store counts
    `memory_bytes` of RAM (the slave suggestion, CODE-6) and its slave may be read."""
    profile = config.profile
    store_config = StoreConfig(
        mapped_file_size_commit_log=config.commit_log_file_size,
        total_physical_memory_size=config.memory_bytes,
    )
    master_store = store_class(
        config=store_config,
        profile=profile,
        clock=clock,
        on_append=on_append,
        replicating=config.slave,
    )
    master = ReferenceBroker(
        master_store, BrokerConfig(slave_read_enable=config.slave), profile, clock=clock
    )
    lease_clock = SkewedClock(clock)
    master.lock_manager = ObservedLockManager(lease_clock, on_lease, broker_lock_ms)
    master.commit_listeners.append(on_commit)
    brokers: list[ReferenceBroker] = [master]
    slave: LaggingSlave | None = None
    if config.slave:
        slave_store = ReplicaStore(
            config=evolve(store_config, broker_role=BrokerRole.SLAVE),
            profile=profile,
            clock=clock,
        )
        slave = LaggingSlave(
            slave_store,
            BrokerConfig(slave_read_enable=True),
            profile,
            clock=clock,
            source=master_store,
            lag_ms=config.slave_lag_ms,
        )
        brokers.append(slave)
    group_config = SubscriptionGroupConfig(
        group_name=group, retry_queue_nums=config.retry_queue_nums
    )
    for broker_id, broker in enumerate(brokers):
        broker.create_topic(topic, config.queues)
        broker.groups[group] = group_config
        remoting.register_broker("broker-a", broker_id, broker)
    return Brokers(master, slave, lease_clock, remoting.broker_addrs("broker-a")[0])
