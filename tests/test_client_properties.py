"""Hypothesis properties of wired push consumers on the fake clock, at a CI budget:

- orderly exclusivity: no two live clients are inside a listener call on one queue while both
  hold an unexpired client lease (REBAL-22), through joins, shutdowns, crashes, hangs and a
  broker outage; and calls of clients that never shut down never overlap on a queue;
- every failed message is eventually consumed or in %DLQ%G (RETRY-3/4, CONC-8), through
  send-back and fallback outages;
- a broker's committed offset never passes a message not yet consumed successfully or sent
  back (CONC-9, ORDER-11, COMMIT), through the same faults and a rebalance.

A compressed delay table (every level 1 s) keeps the retry runs short; the rules under test
do not depend on the delays' lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pullspec.reference.client_cluster import ReferenceCluster
from pullspec.reference.client_consumer import ClientConsumer
from pullspec.reference.client_instance import InstanceState
from pullspec.reference.consume_concurrently import ReferenceConsumeConcurrentlyService
from pullspec.reference.consume_orderly import ReferenceConsumeOrderlyService
from pullspec.reference.remoting import RemotingConnectError, RemotingTimeoutError
from pullspec.spec.config import StoreConfig
from pullspec.spec.consume_concurrently import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from pullspec.spec.consume_orderly import ConsumeOrderlyStatus
from pullspec.spec.consumer_config import ConsumerConfig
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.retry import ClientMessage, SendBackClient

G = "G"
FAST_DELAYS = StoreConfig(message_delay_level=" ".join(["1s"] * 18))
PROFILES = st.sampled_from([Profile.V4_7, Profile.V4_9])


# --- orderly exclusivity ---------------------------------------------------------------------------


@attrs.frozen
class Member:
    """One orderly client of a generated run: when it starts, how it leaves (if it does)."""

    start: int
    leave: str | None
    leave_after: int


members = st.builds(
    Member,
    st.integers(0, 60_000),
    st.sampled_from([None, "shutdown", "crash", "hang"]),
    st.integers(1_000, 90_000),
)


def in_lease_calls(c: ClientConsumer) -> list[MessageQueue]:
    """The queues `c` is inside a listener call on while holding an unexpired client lease."""
    service = c.consume_service
    assert isinstance(service, ReferenceConsumeOrderlyService)
    return [mq for mq, pq, _s in service.in_flight() if pq.locked and not pq.is_lock_expired()]


@settings(max_examples=25, deadline=None)
@given(
    profile=PROFILES,
    group=st.lists(members, min_size=2, max_size=3),
    duration=st.integers(0, 5_000),
    every=st.integers(500, 3_000),
    outage=st.none() | st.tuples(st.integers(0, 100_000), st.integers(1_000, 90_000)),
)
def test_no_two_clients_consume_an_orderly_queue_while_both_hold_a_lease(
    profile: Profile,
    group: list[Member],
    duration: int,
    every: int,
    outage: tuple[int, int] | None,
) -> None:
    cluster = ReferenceCluster(profile)
    cluster.add_broker("broker-a")
    cluster.create_topic("T", 2)
    clients = [
        cluster.new_consumer(
            G,
            lambda msgs, ctx: ConsumeOrderlyStatus.SUCCESS,
            client_id=f"c{i}",
            subscriptions={"T": "*"},
            orderly=True,
            consume_time=lambda msgs: duration,
        )
        for i in range(len(group))
    ]
    until = 150_000
    for k in range(until // every):
        cluster.at(300 + every * k, lambda: produce(cluster, {}))
    shut_down: set[str] = set()
    for c, m in zip(clients, group, strict=True):
        cluster.at(m.start, c.start)
        if m.leave == "shutdown":
            cluster.at(m.start + m.leave_after, c.shutdown)
            shut_down.add(c.client_id)
        elif m.leave is not None:
            cluster.at(m.start + m.leave_after, crash(c, close=m.leave == "crash"))
    if outage is not None:
        down_at, down_for = outage
        cluster.at(down_at, lambda: cluster.set_broker_down("broker-a", True))
        cluster.at(down_at + down_for, lambda: cluster.set_broker_down("broker-a", False))

    def check() -> None:
        holders: dict[MessageQueue, list[str]] = {}
        for c in clients:
            # A shut-down client's calls in progress still count (ORDER-17); a dead one's not
            if c.instance.state is not InstanceState.CRASHED:
                for mq in in_lease_calls(c):
                    holders.setdefault(mq, []).append(c.client_id)
        assert [] == [(mq, ids) for mq, ids in holders.items() if len(ids) > 1]

    broker = cluster.master()

    passed: list[tuple[int, str, int, int]] = []

    def check_commit(group: str, topic: str, queue_id: int, offset: int) -> None:
        # Every offset below a commit was consumed by some client (the listener never fails).
        # Recorded, not asserted: the broker's caller would catch and log an AssertionError.
        done = {(r.mq, o) for c in clients for r in c.consume_service.records for o in r.offsets}
        mq = MessageQueue(topic, "broker-a", queue_id)
        passed.extend(
            (cluster.clock.now_ms(), topic, queue_id, o)
            for o in range(offset)
            if (mq, o) not in done
        )

    broker.commit_listeners.append(check_commit)
    cluster.run_until(until, check)
    assert [] == passed
    event(f"members leaving: {sum(m.leave is not None for m in group)}, outage: {bool(outage)}")
    kept = [c for c in clients if c.client_id not in shut_down]
    for i, a in enumerate(kept):
        for b in kept[i + 1 :]:
            assert [] == overlaps(a, b)


def produce(
    cluster: ReferenceCluster, properties: dict[str, str], queues: Sequence[int] = (0, 1)
) -> bool:
    """One message into each queue; a producer facing a broker that is down or refuses its
    sends loses the message: answer whether every send was stored."""
    stored = True
    for q in queues:
        try:
            cluster.send("T", q, b"m", properties)
        except (RemotingConnectError, RemotingTimeoutError):
            stored = False
    return stored


def crash(c: ClientConsumer, *, close: bool) -> Callable[[], None]:
    """A step crashing `c`'s process (closing its connections or not)."""
    return lambda: c.instance.crash(close_connections=close)


def overlaps(a: ClientConsumer, b: ClientConsumer) -> list[tuple[MessageQueue, int, int]]:
    """(queue, start of a's call, start of b's call) for every pair of calls that overlap."""
    ra, rb = a.consume_service.records, b.consume_service.records
    return [
        (x.mq, x.start, y.start)
        for x in ra
        for y in rb
        if x.mq == y.mq and x.start < y.end and y.start < x.end
    ]


# --- retries: consumed or dead-lettered, and commits never pass an unsettled message ---------------


class SettlingSendBack:
    """The consumer's SendBackClient, reporting each message handed back successfully by the
    record (topic, queue, offset) it was read from."""

    def __init__(self, inner: SendBackClient, settle: Callable[[int], None]) -> None:
        self.inner, self.settle = inner, settle
        self._failed: StoredMessage | None = None

    def send_message_back(
        self, msg: StoredMessage, delay_level: int, broker_name: str | None, max_times: int
    ) -> None:
        self._failed = msg
        self.inner.send_message_back(msg, delay_level, broker_name, max_times)
        self.settle(msg.commitlog_offset)

    def send_retry_message(self, message: ClientMessage) -> None:
        # CONC-11: the fallback of the RPC that just failed, for the same message
        self.inner.send_retry_message(message)
        if self._failed is not None:
            self.settle(self._failed.commitlog_offset)


@attrs.frozen
class Outage:
    """A window in which the broker refuses the named requests."""

    at: int
    length: int
    requests: frozenset[str]


outages = st.builds(
    Outage,
    st.integers(0, 10_000),
    st.integers(1_000, 30_000),
    st.sampled_from(
        [
            frozenset({"CONSUMER_SEND_MSG_BACK"}),
            frozenset({"CONSUMER_SEND_MSG_BACK", "SEND_MESSAGE"}),
        ]
    ),
)


def send_step(
    cluster: ReferenceCluster, key: str, queue_id: int, sent: set[str]
) -> Callable[[], None]:
    """A step sending message `key` to T:queue_id, adding it to `sent` once stored."""

    def step() -> None:
        if produce(cluster, {"KEYS": key}, [queue_id]):
            sent.add(key)

    return step


def fail_step(cluster: ReferenceCluster, addr: str, requests: frozenset[str]) -> Callable[[], None]:
    """A step making `requests` to the broker at `addr` fail (none: the outage ends)."""
    return lambda: cluster.remoting.set_failing_requests(addr, requests)


@settings(max_examples=60, deadline=None)
@given(
    profile=PROFILES,
    max_times=st.integers(1, 3),
    failures=st.lists(st.integers(0, 5), min_size=1, max_size=8),
    faults=st.lists(outages, max_size=2),
    second=st.none() | st.tuples(st.integers(0, 30_000), st.integers(1_000, 60_000)),
)
def test_failed_messages_end_consumed_or_dead_lettered_and_commits_never_pass_them(
    profile: Profile,
    max_times: int,
    failures: list[int],
    faults: list[Outage],
    second: tuple[int, int] | None,
) -> None:
    cluster = ReferenceCluster(profile)
    addr = cluster.add_broker("broker-a", store_config=FAST_DELAYS)
    cluster.create_topic("T", 2)
    broker = cluster.master()
    budget = {f"m{i}": n for i, n in enumerate(failures)}
    consumed: set[str] = set()
    sent: set[str] = set()
    settled: set[tuple[str, int, int]] = set()

    def listener(
        msgs: Sequence[StoredMessage], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        key = msgs[0].get_property("KEYS") or ""
        if budget[key] > 0:
            budget[key] -= 1
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        consumed.add(key)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def settle_record(commitlog_offset: int) -> None:
        record = broker.store.look_message_by_offset(commitlog_offset)
        assert record is not None
        settled.add((record.topic, record.queue_id, record.queue_offset))

    config = ConsumerConfig(max_reconsume_times=max_times)
    clients = []
    for cid in ("c0", "c1"):
        c = cluster.new_consumer(
            G, listener, client_id=cid, subscriptions={"T": "*"}, config=config
        )
        service = c.consume_service
        assert isinstance(service, ReferenceConsumeConcurrentlyService)
        service.send_back = SettlingSendBack(c.send_back, settle_record)
        clients.append(c)
    cluster.at(0, clients[0].start)
    if second is not None:
        join, stay = second
        cluster.at(join, clients[1].start)
        cluster.at(join + stay, clients[1].shutdown)
    for i in range(len(failures)):
        cluster.at(1000 + 300 * i, send_step(cluster, f"m{i}", i % 2, sent))
    for f in faults:
        cluster.at(f.at, fail_step(cluster, addr, f.requests))
        cluster.at(f.at + f.length, fail_step(cluster, addr, frozenset()))

    passed: list[tuple[int, str, int, int]] = []

    def check_commit(group: str, topic: str, queue_id: int, offset: int) -> None:
        for c in clients:
            for r in c.consume_service.records:
                if r.status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
                    settled.update((r.mq.topic, r.mq.queue_id, o) for o in r.offsets)
        # Recorded, not asserted: the broker's caller would catch and log an AssertionError.
        passed.extend(
            (cluster.clock.now_ms(), topic, queue_id, m.queue_offset)
            for m in cluster.messages(topic, queue_id)
            if m.queue_offset < offset and (topic, queue_id, m.queue_offset) not in settled
        )

    broker.commit_listeners.append(check_commit)
    cluster.run_until(200_000)
    assert [] == passed
    dead = {m.get_property("KEYS") for m in cluster.messages("%DLQ%G", 0)}
    event(f"dead-lettered: {bool(dead)}, outages: {bool(faults)}, rebalanced: {bool(second)}")
    assert [] == [k for k in sent if k not in consumed and k not in dead]
    if not faults:
        # Without outages the count is exact: the broker dead-letters once the stored
        # reconsumeTimes reaches max_times (RETRY-4), i.e. after max_times + 1 failures.
        assert {k for k, n in enumerate(failures) if n > max_times} == {
            int(k[1:]) for k in dead if k is not None
        }
