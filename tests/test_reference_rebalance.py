"""The reference RebalancePushImpl with the orderly service: two clients sharing one broker lock
manager, on the fake clock. Each client has its own scheduler on the shared clock, so a crash
is simply a scheduler that no longer runs. A small stand-in for the broker and PullMessageService
(long polling, no flow control) feeds the ProcessQueues; offsets are persisted as OFFSET-8 does
(first after 10 s, then every 5 s). Expected offsets and times are worked out by hand."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from attrs import evolve as attrs_evolve
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.reference.consume_orderly import OrderlyConsumeRecord, ReferenceConsumeOrderlyService
from pullspec.reference.lock_manager import ReferenceLockManager
from pullspec.reference.offset_store import ReferenceRemoteOffsetStore
from pullspec.reference.rebalance import NewPullRequest, ReferenceRebalancePushImpl
from pullspec.reference.rebalance_service import LockManagerClient, ReferenceRebalanceService
from pullspec.reference.scheduler import Scheduler
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.clock import ManualClock
from pullspec.spec.consume_orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from pullspec.spec.consumer_config import ConsumeFromWhere, ConsumeMode, ConsumerConfig
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.retry import ClientMessage

G = "G"
CONFIG = ConsumerConfig(
    consume_mode=ConsumeMode.ORDERLY,
    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
)


class Broker:
    """Consumer offsets on the broker, plus maxOffset / searchOffset for REBAL-17."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.offsets: dict[MessageQueue, int] = {}
        self.fail_admin = False

    def query_offset(self, mq: MessageQueue) -> int:
        if mq not in self.offsets:
            raise MQBrokerError(22, "QUERY_NOT_FOUND")
        return self.offsets[mq]

    def update_offset(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        self.offsets[mq] = offset

    def max_offset(self, mq: MessageQueue) -> int:
        if self.fail_admin:
            raise MQClientError("maxOffset failed")
        return len(self.env.messages[mq])

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return 0


class NoSendBack:
    """The orderly default never reaches the maximum, so nothing is sent back."""

    def send_message_back(
        self, msg: StoredMessage, delay: int, broker: str | None, mx: int
    ) -> None:
        raise AssertionError("no send-back expected")

    def send_retry_message(self, message: ClientMessage) -> None:
        raise AssertionError("no send-back expected")


class Env:
    """The broker side: queues of topic T on broker b, a producer, long polling, the lock
    manager, the consumer list and its change notifications."""

    def __init__(self, queues: int = 2) -> None:
        self.clock = ManualClock(0)
        self.sched = Scheduler(self.clock)
        self.locks = ReferenceLockManager(self.clock)
        self.broker = Broker(self)
        self.mqs = [MessageQueue("T", "b", i) for i in range(queues)]
        self.messages: dict[MessageQueue, list[StoredMessage]] = {mq: [] for mq in self.mqs}
        self.parked: dict[MessageQueue, list[Callable[[], None]]] = {mq: [] for mq in self.mqs}
        self.members: list[Client] = []
        self.clients: list[Client] = []

    def produce(self, count: int, first: int, every: int) -> None:
        """One message into every queue at first, first + every, … (count of them)."""
        for k in range(count):
            self.sched.call_at(first + every * k, self._produce, "produce")

    def _produce(self) -> None:
        for mq in self.mqs:
            n = len(self.messages[mq])
            self.messages[mq].append(StoredMessage("T", mq.queue_id, n, n, 0, 0, b"x"))
            waiting, self.parked[mq] = self.parked[mq], []
            for wake in waiting:
                wake()

    def route(self, topic: str) -> set[MessageQueue] | None:
        return set(self.mqs) if topic == "T" else None

    def consumer_ids(self, topic: str, group: str) -> list[str]:
        return [c.cid for c in self.members]

    def join(self, client: Client, at: int) -> None:
        self.clients.append(client)
        self.sched.call_at(at, client.start, f"start {client.cid}")

    def crash(self, client: Client, at: int) -> None:
        def crash() -> None:
            client.alive = False
            self.members.remove(client)
            self.notify()

        self.sched.call_at(at, crash, f"crash {client.cid}")

    def notify(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED to every member, in registration order."""
        for c in self.members:
            c.rebalance_service.rebalance_immediately()

    def run_until(self, until: int, check: Callable[[], None] | None = None) -> None:
        """Run every scheduler's events in (time, scheduler) order; a crashed client's never."""
        while True:
            due = [
                (s.next_time, i, s)
                for i, s in enumerate([self.sched] + [c.sched for c in self.clients if c.alive])
                if s.next_time is not None and s.next_time <= until
            ]
            if not due:
                break
            min(due, key=lambda d: (d[0], d[1]))[2].run_next()
            if check is not None:
                check()
        self.clock.jump_to(max(until, self.clock.now_ms()))


class Client:
    """One push consumer: rebalance, orderly service, offset store, rebalance thread, persist."""

    def __init__(
        self,
        env: Env,
        cid: str,
        profile: Profile,
        durations: Sequence[int] = (0,),
        config: ConsumerConfig = CONFIG,
    ) -> None:
        self.env, self.cid, self.alive = env, cid, True
        self.sched = Scheduler(env.clock)
        self.store = ReferenceRemoteOffsetStore(env.broker, G)
        self.lock_client = LockManagerClient({"b": env.locks})
        self.rebalance = ReferenceRebalancePushImpl(
            self.sched,
            group=G,
            client_id=cid,
            config=config,
            profile=profile,
            lock_client=self.lock_client,
            offset_store=self.store,
            admin=env.broker,
            route=env.route,
            consumer_ids=env.consumer_ids,
            dispatch=self.pull,
        )
        self.service = ReferenceConsumeOrderlyService(
            self.sched,
            group=G,
            config=config,
            profile=profile,
            listener=self.listen,
            offset_store=self.store,
            send_back=NoSendBack(),
            rebalance=self.rebalance,
            consume_time=lambda msgs: durations[msgs[0].queue_offset % len(durations)],
        )
        self.rebalance.consume_lock_free = self.service.consume_lock_free
        self.rebalance.subscribe(SubscriptionData("T", "*"))
        self.rebalance_service = ReferenceRebalanceService(
            self.sched, [self.rebalance.do_rebalance]
        )

    def listen(
        self, msgs: Sequence[StoredMessage], ctx: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        return ConsumeOrderlyStatus.SUCCESS

    def start(self) -> None:
        self.service.start()
        self.rebalance_service.start()
        self.rebalance_service.rebalance_immediately()
        self.sched.call_later(10_000, self._persist, "persist")
        self.env.members.append(self)
        self.env.notify()

    def _persist(self) -> None:
        self.store.persist_all(set(self.rebalance.process_queues()))
        self.sched.call_later(5_000, self._persist, "persist")

    def pull(self, request: NewPullRequest) -> None:
        self._deliver(request.message_queue, request.process_queue, [request.next_offset])

    def _deliver(self, mq: MessageQueue, pq: ProcessQueue, cursor: list[int]) -> None:
        if pq.dropped:
            return  # FLOW-1: the PullRequest dies with its ProcessQueue
        found = self.env.messages[mq][cursor[0] :]
        if found:
            cursor[0] += len(found)
            self.service.submit_consume_request(found, pq, mq, pq.put_messages(found))

        def wake() -> None:
            self.sched.call_soon(lambda: self._deliver(mq, pq, cursor), "pull")

        self.env.parked[mq].append(wake)

    def consumed(self, queue_id: int) -> list[tuple[int, int]]:
        """(offset, start time) of every listener call on queue `queue_id`."""
        return [(r.offsets[0], r.start) for r in self.service.records if r.mq.queue_id == queue_id]


def exclusive(env: Env) -> Callable[[], None]:
    """The property: no two live clients are inside a listener call on one queue while both
    hold an unexpired client lease on it."""

    def check() -> None:
        for mq in env.mqs:
            holders = [
                c.cid
                for c in env.clients
                if c.alive
                for q, pq, _start in c.service.in_flight()
                if q == mq and pq.locked and not pq.is_lock_expired()
            ]
            assert len(holders) <= 1, (env.clock.now_ms(), mq, holders)

    return check


def records_overlap(a: Sequence[OrderlyConsumeRecord], b: Sequence[OrderlyConsumeRecord]) -> bool:
    """Some call of `a` and some call of `b` on the same queue overlap in time."""
    return any(x.mq == y.mq and x.start < y.end and y.start < x.end for x in a for y in b)


# --- scenarios -------------------------------------------------------------------------------------


def test_one_consumer_per_queue_across_a_rebalance_and_a_lease_expiry() -> None:
    env = Env()
    a, b = Client(env, "c0", Profile.V4_9), Client(env, "c1", Profile.V4_9)
    env.produce(count=100, first=300, every=1000)
    env.join(a, 0)
    env.join(b, 5200)
    env.crash(a, 30_500)
    env.run_until(95_000, exclusive(env))
    at = [300 + 1000 * k for k in range(100)]
    # q1: A until B joins (A releases it at once: nothing cached), then B from offset 5.
    assert [(k, at[k]) for k in range(5)] == a.consumed(1)
    assert [(k, at[k]) for k in range(5, 95)] == b.consumed(1)
    # q0: A until it crashes at 30500 (its last renewal was lockAll at 21000). B fails at
    # 30500 (woken by the broker), 50500 and 70500 and takes the lock at 90500, after the 60 s broker lease; it
    # resumes from A's last persisted offset (30, at 30000), so offset 30 is consumed twice.
    assert [(k, at[k]) for k in range(31)] == a.consumed(0)
    assert [(k, 90_500) for k in range(30, 91)] + [(k, at[k]) for k in range(91, 95)] == b.consumed(
        0
    )
    assert [5200, 25_200, 30_500, 50_500, 70_500, 90_500] == b.rebalance_service.runs
    q0, q1 = env.mqs
    assert {q0: 30, q1: 90} == env.broker.offsets  # B's last persist was at 90200
    assert {G: {q0: ("c1", 90_500), q1: ("c1", 86_200)}} == env.locks.table()
    assert not records_overlap(a.service.records, b.service.records)


def test_removal_waits_for_the_consume_lock_and_unlocks_20_s_later() -> None:
    env = Env()
    a = Client(env, "c0", Profile.V4_9, durations=(3000,))
    b = Client(env, "c1", Profile.V4_9, durations=(3000,))
    env.produce(count=10, first=0, every=0)
    env.join(a, 100)
    env.join(b, 4000)
    check = exclusive(env)
    env.run_until(23_999, check)
    q0, q1 = env.mqs
    # At 4000 A is inside the call on q1 offset 1: q1 is dropped but stays (one failed try),
    # the commit at 6100 is not written (dropped) and the loop stops with 2…9 still cached.
    stuck = a.rebalance.process_queues()[q1]
    assert (True, 1, list(range(2, 10))) == (
        stuck.dropped,
        stuck.try_unlock_times,
        stuck.cached_offsets,
    )
    env.run_until(43_999, check)
    # A removed q1 at its rebalance at 24000; with messages cached the unlock waits 20 s, so
    # the broker entry is still A's, last renewed by lockAll at 21100.
    assert ("c0", 21_100) == env.locks.table()[G][q1]
    env.run_until(80_000, check)
    assert [(k, 100 + 3000 * k) for k in range(10)] == a.consumed(0)
    assert [(0, 100), (1, 3100)] == a.consumed(1)
    # B's rebalance at 44000 locks q1 and resumes at the persisted offset 1 (1 runs twice).
    assert [(k, 44_000 + 3000 * (k - 1)) for k in range(1, 10)] == b.consumed(1)
    assert {q0: 10, q1: 10} == env.broker.offsets
    assert {G: {q0: ("c0", 61_100), q1: ("c1", 65_000)}} == env.locks.table()


def test_4_7_new_queues_wait_for_lock_all() -> None:
    env = Env(queues=1)
    a = Client(env, "c0", Profile.V4_7)
    env.produce(count=3, first=0, every=0)
    env.join(a, 0)
    env.run_until(5_000)
    # REBAL-11: the new ProcessQueue is unlocked; the gate retries the lock after 100 ms
    # (lock(mq) now marks it), resubmits 10 ms later, so consumption starts at 110.
    assert [(0, 110), (1, 110), (2, 110)] == a.consumed(0)
    env = Env(queues=1)
    a = Client(env, "c0", Profile.V4_9)
    env.produce(count=3, first=0, every=0)
    env.join(a, 0)
    env.run_until(5_000)
    assert [(0, 0), (1, 0), (2, 0)] == a.consumed(0)


# --- the rebalance impl, call by call ---------------------------------------------------------------


def alone(profile: Profile = Profile.V4_9, config: ConsumerConfig = CONFIG) -> tuple[Env, Client]:
    """One member, c0, that has run one rebalance at t=0 over queues q0 and q1."""
    env = Env()
    a = Client(env, "c0", profile, config=config)
    env.members.append(a)
    a.rebalance.do_rebalance()
    return env, a


def test_lock_all_marks_what_the_broker_grants_and_an_rpc_failure_changes_nothing() -> None:
    env, a = alone()
    q0, q1 = env.mqs
    table = a.rebalance.process_queues()
    env.clock.jump_to(5_000)
    a.lock_client.unreachable.add("b")
    a.rebalance.lock_all()
    assert [(True, 0), (True, 0)] == [
        (table[q].locked, table[q].last_lock_timestamp) for q in env.mqs
    ]
    a.lock_client.unreachable.clear()
    env.locks.unlock_batch(G, [q1], "c0")
    env.locks.try_lock_batch(G, [q1], "c9")
    a.rebalance.lock_all()
    assert [(True, 5_000), (False, 0)] == [
        (table[q].locked, table[q].last_lock_timestamp) for q in env.mqs
    ]
    a.rebalance.unlock_all(False)
    assert [False, False] == [table[q].locked for q in env.mqs]
    assert {G: {q1: ("c9", 5_000)}} == env.locks.table()
    a.lock_client.no_master.add("b")
    assert False is a.rebalance.lock(q0)


@pytest.mark.parametrize(
    ("profile", "outcome"), [(Profile.V4_7, "OFFSET_NEGATIVE"), (Profile.V4_9, "OFFSET_FAILED")]
)
def test_a_failed_offset_query_skips_the_queue(profile: Profile, outcome: str) -> None:
    env = Env()
    config = ConsumerConfig(consume_mode=ConsumeMode.ORDERLY)  # CONSUME_FROM_LAST_OFFSET
    a = Client(env, "c0", profile, config=config)
    env.members.append(a)
    env.broker.fail_admin = True
    a.rebalance.do_rebalance()
    assert {} == dict(a.rebalance.process_queues())
    assert 2 == sum(outcome in text for _level, text in a.rebalance.log)
    env.broker.fail_admin = False
    a.rebalance.do_rebalance()
    assert set(env.mqs) == set(a.rebalance.process_queues())


def test_a_pull_expired_queue_is_dropped_and_recreated_in_the_same_rebalance() -> None:
    env, a = alone()
    q0, q1 = env.mqs
    old = a.rebalance.process_queues()[q0]
    a.rebalance.process_queues()[q1].last_pull_timestamp = 100_000
    env.clock.jump_to(120_001)
    a.rebalance.do_rebalance()
    # Pass 1 drops and removes it (idle for more than 120 s); pass 2 finds it missing and
    # re-creates it at once (the rulebook says "at the next rebalance"; the source loops say now).
    new = a.rebalance.process_queues()[q0]
    assert (True, False, False) == (old.dropped, new.dropped, new is old)
    assert any("[BUG]" in text or "PULL_EXPIRED" in text for _level, text in a.rebalance.log)
    assert 2 == sum(f"add a new mq, {q0}" in text for _level, text in a.rebalance.log)


def test_truncation_drops_without_unlocking_and_changes_bump_the_sub_version() -> None:
    env, a = alone()
    assert (0, 1) == (a.rebalance.subscription("T").sub_version, a.rebalance.heartbeats)  # type: ignore[union-attr]
    pqs = list(a.rebalance.process_queues().values())
    del a.rebalance.subscription_inner["T"]
    a.rebalance.do_rebalance()
    assert ({}, [True, True]) == (dict(a.rebalance.process_queues()), [pq.dropped for pq in pqs])
    assert {"c0"} == {owner for owner, _ts in env.locks.table()[G].values()}
    env, a = alone(config=attrs_evolve(CONFIG, pull_threshold_for_topic=10))
    assert (5, 100) == (
        a.rebalance.config.pull_threshold_for_queue,
        a.rebalance.config.pull_threshold_size_for_queue,
    )
    a.rebalance.destroy()
    assert {} == dict(a.rebalance.process_queues())


def test_rebalance_service_cadence_and_failure_isolation() -> None:
    clock = ManualClock(0)
    sched = Scheduler(clock)
    calls: list[tuple[str, int]] = []

    def boom() -> None:
        raise RuntimeError("consumer failed")

    svc = ReferenceRebalanceService(sched, [boom, lambda: calls.append(("ok", clock.now_ms()))])
    svc.start()
    sched.run_until(30_000)
    svc.rebalance_immediately()
    sched.run_until(55_000)
    assert [20_000, 30_000, 50_000] == svc.runs
    assert [("ok", 20_000), ("ok", 30_000), ("ok", 50_000)] == calls
    assert 3 == len(svc.log)


# --- the Hypothesis property -------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    profile=st.sampled_from([Profile.V4_7, Profile.V4_9]),
    durations_a=st.lists(st.integers(0, 40_000), min_size=1, max_size=4),
    durations_b=st.lists(st.integers(0, 40_000), min_size=1, max_size=4),
    join_b=st.integers(0, 60_000),
    crash_a=st.none() | st.integers(1, 100_000),
    outage=st.none() | st.tuples(st.integers(0, 80_000), st.integers(1_000, 60_000)),
    queues=st.integers(1, 2),
)
def test_no_two_clients_consume_one_queue_while_both_hold_unexpired_leases(
    profile: Profile,
    durations_a: list[int],
    durations_b: list[int],
    join_b: int,
    crash_a: int | None,
    outage: tuple[int, int] | None,
    queues: int,
) -> None:
    env = Env(queues)
    a = Client(env, "c0", profile, durations_a)
    b = Client(env, "c1", profile, durations_b)
    env.produce(count=60, first=500, every=2_000)
    env.join(a, 0)
    env.join(b, join_b)
    if crash_a is not None:
        env.crash(a, crash_a)
    if outage is not None:
        # A cannot reach the broker for a while: its lockAll fails, its lease runs out.
        start, length = outage
        env.sched.call_at(start, lambda: a.lock_client.unreachable.add("b"), "outage")
        env.sched.call_at(start + length, lambda: a.lock_client.unreachable.discard("b"), "back")
    env.run_until(150_000, exclusive(env))


def test_the_property_catches_a_client_that_ignores_its_lease() -> None:
    env = Env(queues=1)
    a = Client(env, "c0", Profile.V4_9, durations=(30_000,))
    b = Client(env, "c1", Profile.V4_9, durations=(30_000,))
    env.produce(count=20, first=0, every=0)
    env.join(a, 0)
    env.join(b, 1_000)
    env.crash(a, 200_000)
    # A broken B that never asks the broker: it believes every lock attempt succeeded.
    b.rebalance.lock = lambda mq: True  # type: ignore[method-assign]
    b.rebalance.consumer_ids = lambda topic, group: ["c1"]
    with pytest.raises(AssertionError):
        env.run_until(60_000, exclusive(env))
