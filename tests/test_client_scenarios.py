"""End-to-end scenarios of wired push consumers (ReferenceClientInstance, real rebalance, real
consume services, remote offset store) against a ReferenceBroker, on the fake clock. Every
expected time and offset is worked out by hand from the rulebooks; the derivations are in the
comments.

Common facts. The broker is registered at 0, so its hold checks run at 5000, 10000, …
(HOLD-2). A consumer started at s sends a heartbeat at s (the broker registers it, creates
%RETRY%G and notifies the group), rebalances at s (REBAL-1: rebalanceImmediately), then every
20 s after its last run, heartbeats at s + 1000 + 30000·k and persists its offsets at
s + 10000 + 5000·k (OFFSET-8). A new group on a young queue starts at offset 0 (COMMIT-4, and
REBAL-17 gives 0 for the retry topic). Pulls are answered at once or held (long polling) and
woken when a message arrives, so a message sent at t is consumed at t. After a FOUND the next
pull leaves at once and piggy-backs the memory offset when it is > 0 (REQ-2), which the broker
commits (COMMIT-2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from pullspec.reference.client_cluster import ReferenceCluster
from pullspec.reference.client_consumer import ClientConsumer
from pullspec.reference.client_instance import InstanceState
from pullspec.reference.consume_orderly import ReferenceConsumeOrderlyService as OrderlyService
from pullspec.spec.consume_concurrently import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from pullspec.spec.consume_orderly import ConsumeOrderlyStatus
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile

G = "G"
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
SEC, MIN, HOUR = 1000, 60_000, 3_600_000
#: RETRY-7 levels 3 … 18, the delays of reconsumeTimes 0 … 15 (RETRY-10).
RETRY_DELAYS = [10 * SEC, 30 * SEC] + [m * MIN for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30)]
RETRY_DELAYS += [HOUR, 2 * HOUR]

Call = tuple[int, str, str | None, int]


class Recorder:
    """A concurrent listener that records (time, context queue topic, KEYS, reconsumeTimes)
    of every message it gets and fails the keys in `failing` (all of them by default)."""

    def __init__(self, cluster: ReferenceCluster, failing: dict[str, int] | None = None) -> None:
        self.cluster = cluster
        #: KEYS → how many more times it fails; a key absent here fails for ever.
        self.failing = failing
        self.calls: list[Call] = []

    def __call__(
        self, msgs: Sequence[StoredMessage], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        status = OK
        for m in msgs:
            key = m.get_property("KEYS")
            self.calls.append(
                (self.cluster.clock.now_ms(), ctx.message_queue.topic, key, m.reconsume_times)
            )
            if self.failing is None:
                status = LATER
            elif self.failing.get(key or "", 0) > 0:
                self.failing[key or ""] -= 1
                status = LATER
        return status


def one_queue(profile: Profile = Profile.V4_9) -> ReferenceCluster:
    """One broker, topic T with one queue."""
    cluster = ReferenceCluster(profile)
    cluster.add_broker("broker-a")
    cluster.create_topic("T", 1)
    return cluster


def consumer(cluster: ReferenceCluster, listener: Recorder, cid: str = "c0") -> ClientConsumer:
    return cluster.new_consumer(G, listener, client_id=cid, subscriptions={"T": "*"})


# --- CONC-9, RETRY-1…10, RETRY-4: sixteen retries, then the DLQ ------------------------------------


@pytest.mark.parametrize("profile", [Profile.V4_9, Profile.V4_7])
def test_a_message_failing_every_time_is_retried_on_the_timetable_then_dead_lettered(
    profile: Profile,
) -> None:
    cluster = one_queue(profile)
    listener = Recorder(cluster)
    c0 = consumer(cluster, listener)
    cluster.at(0, c0.start)
    cluster.at(1000, lambda: cluster.send("T", 0, b"body", {"KEYS": "m1"}))
    cluster.run_until(17_141_000 + (2 * HOUR if profile is Profile.V4_7 else 0) + 1000)
    # Delivery k + 1 comes RETRY_DELAYS[k] after failure k (stored reconsumeTimes k, level
    # 3 + k, RETRY-5), through the schedule topic and %RETRY%G (RETRY-8, RETRY-9), the topic
    # restored for the listener (CONC-12).
    times = [1000]
    for delay in RETRY_DELAYS:
        times.append(times[-1] + delay)
    assert 17_141_000 == times[-1]
    expected = [(times[0], "T", "m1", 0)] + [(times[k], "%RETRY%G", "m1", k) for k in range(1, 17)]
    assert expected == listener.calls
    # The 17th failure finds stored reconsumeTimes 16 ≥ 16 (RETRY-3, RETRY-4): the DLQ, with
    # reconsumeTimes 17 (RETRY-6). 4.9 stores it at once; 4.7 keeps the DELAY 18 the last
    # redelivered record carried (RETRY-9), so the DLQ copy is parked for another 2 h, and its
    # DLQ topic is WRITE only.
    dlq = cluster.messages("%DLQ%G", 0)
    arrival, perm = (times[-1], 6) if profile is Profile.V4_9 else (times[-1] + 2 * HOUR, 2)
    assert [("m1", 17, arrival)] == [
        (m.get_property("KEYS"), m.reconsume_times, m.store_timestamp) for m in dlq
    ]
    assert perm == cluster.master().topics["%DLQ%G"].perm
    # CONC-9: the first send-back succeeded at 1000, so T:0 was removed and the next pull,
    # leaving at 1000, piggy-backed offset 1: the broker's first commit of T:0.
    t_commits = [(t, q, o) for t, g, topic, q, o in cluster.commits if topic == "T"]
    assert (1000, 0, 1) == t_commits[0]
    assert {1} == {o for _t, _q, o in t_commits}
    # The 16 retry records are %RETRY%G:0 offsets 0…15, each removed once sent back.
    assert 16 == cluster.committed(G, "%RETRY%G", 0)
    assert [k + 1 for k in range(16)] == [
        m.reconsume_times for m in cluster.messages("%RETRY%G", 0)
    ]


# --- CONC-8, CONC-3(a), CONC-11: send-back failures --------------------------------------------------


def test_a_failed_send_back_and_fallback_retry_locally_after_5_s_and_hold_the_offset() -> None:
    cluster = one_queue()
    listener = Recorder(cluster, {"m0": 1})
    c0 = consumer(cluster, listener)
    addr = cluster.remoting.broker_addrs("broker-a")[0]
    cluster.at(0, c0.start)
    cluster.at(12_000, lambda: cluster.send("T", 0, b"a", {"KEYS": "m0"}))
    cluster.at(12_000, lambda: cluster.send("T", 0, b"b", {"KEYS": "m1"}))
    # Right after the two sends, still at 12000 and before the pull answers are handled, the
    # broker becomes unreachable for the send-back RPC and for the internal producer's sends.
    cluster.at(
        12_000,
        lambda: cluster.remoting.set_failing_requests(
            addr, {"CONSUMER_SEND_MSG_BACK", "SEND_MESSAGE"}
        ),
    )
    cluster.run_until(29_000)
    # m0 fails at 12000; the RPC and all three producer attempts fail, so CONC-8 bumps its
    # reconsumeTimes in memory and consumes it again locally at 17000 (CONC-3(a)); m1 is
    # consumed once. Nothing reached the broker's retry or schedule topics.
    assert [
        (12_000, "T", "m0", 0),
        (12_000, "T", "m1", 0),
        (17_000, "T", "m0", 1),
    ] == listener.calls
    assert [] == cluster.messages("%RETRY%G", 0)
    assert [] == [m for q in range(18) for m in cluster.messages("SCHEDULE_TOPIC_XXXX", q)]
    # m0 stays cached until 17000, so offset 0 is all T:0 may commit (CONC-9): persistAll
    # sends 0 at 10000 and 15000, and 2 once m0 is gone (20000, then 25000 …).
    t_commits = [(t, o) for t, g, topic, q, o in cluster.commits if topic == "T"]
    assert [(10_000, 0), (15_000, 0), (20_000, 2), (25_000, 2)] == t_commits


def test_when_only_the_rpc_fails_the_fallback_message_comes_back_through_the_retry_topic() -> None:
    cluster = one_queue()
    listener = Recorder(cluster, {"m0": 1})
    c0 = consumer(cluster, listener)
    addr = cluster.remoting.broker_addrs("broker-a")[0]
    cluster.at(0, c0.start)
    cluster.at(
        11_000, lambda: cluster.remoting.set_failing_requests(addr, {"CONSUMER_SEND_MSG_BACK"})
    )
    cluster.at(12_000, lambda: cluster.send("T", 0, b"a", {"KEYS": "m0"}))
    cluster.run_until(29_000)
    # CONC-11 fallback: a new message to %RETRY%G with RECONSUME_TIME 1 (sent in the header,
    # stored as reconsumeTimes, RETRY-11) and delay level 3 + 0 → 10 s (RETRY-7).
    assert [(12_000, "T", "m0", 0), (22_000, "%RETRY%G", "m0", 1)] == listener.calls
    retry = cluster.messages("%RETRY%G", 0)
    assert [("m0", 1, "T", None)] == [
        (
            m.get_property("KEYS"),
            m.reconsume_times,
            m.get_property("RETRY_TOPIC"),
            m.get_property("RECONSUME_TIME"),
        )
        for m in retry
    ]
    # The send-back counted as done (CONC-9): after persistAll's 0 at 10000, T:0 offset 1 is
    # piggy-backed by the pull leaving at 12000, then persisted every 5 s.
    t_commits = [(t, o) for t, g, topic, q, o in cluster.commits if topic == "T"]
    assert [(10_000, 0), (12_000, 1), (15_000, 1), (20_000, 1), (25_000, 1)] == t_commits


# --- ORDER, REBAL-14/15, REBAL-22, LEASE: one consumer per orderly queue --------------------------


def orderly_pair(duration: int) -> tuple[ReferenceCluster, ClientConsumer, ClientConsumer]:
    """Topic T with two queues and two orderly consumers c0 (A) and c1 (B) of G whose
    listener calls last `duration` ms each."""
    cluster = ReferenceCluster()
    cluster.add_broker("broker-a")
    cluster.create_topic("T", 2)
    a, b = (
        cluster.new_consumer(
            G,
            lambda msgs, ctx: ConsumeOrderlyStatus.SUCCESS,
            client_id=cid,
            subscriptions={"T": "*"},
            orderly=True,
            consume_time=lambda msgs: duration,
        )
        for cid in ("c0", "c1")
    )
    return cluster, a, b


def calls(c: ClientConsumer, queue_id: int) -> list[tuple[int, int, int]]:
    """(offset, start, end) of every listener call of `c` on T:queue_id."""
    records = c.consume_service.records
    return [
        (r.offsets[0], r.start, r.end)
        for r in records
        if r.mq == MessageQueue("T", "broker-a", queue_id)
    ]


def exclusive(cluster: ReferenceCluster, clients: Sequence[ClientConsumer]) -> Callable[[], None]:
    """After every event: no queue has two live clients inside a listener call while both
    hold an unexpired client lease on it."""

    def check() -> None:
        holders: dict[MessageQueue, list[str]] = {}
        for c in clients:
            dead = c.instance.state is InstanceState.CRASHED
            if dead or not isinstance(c.consume_service, OrderlyService):
                continue
            for mq, pq, _start in c.consume_service.in_flight():
                if pq.locked and not pq.is_lock_expired():
                    holders.setdefault(mq, []).append(c.client_id)
        assert [] == [(mq, cids) for mq, cids in holders.items() if len(cids) > 1]

    return check


def disjoint(x: list[tuple[int, int, int]], y: list[tuple[int, int, int]]) -> bool:
    """No call of `x` overlaps a call of `y` in time."""
    return all(xe <= ys or ye <= xs for _o, xs, xe in x for _p, ys, ye in y)


def test_an_orderly_queue_moves_to_the_new_member_after_the_20_s_delayed_unlock() -> None:
    cluster, a, b = orderly_pair(3000)
    cluster.at(0, a.start)
    cluster.at(300, lambda: [cluster.send("T", q) for q in (0, 1) for _ in range(10)])
    cluster.at(5000, b.start)
    check = exclusive(cluster, [a, b])
    cluster.run_until(44_999, check)
    # A locked T:0 and T:1 at 0 and, 4.9, consumes at once (REBAL-11): 3 s per call from 300.
    # B's start at 5000 notifies both; A rebalances first: T:1 goes to B, but A is inside the
    # call on offset 1 (3300–6300), so the removal fails (REBAL-14), T:1 stays dropped in A's
    # table and A's lockAll at 21000 still renews it (REBAL-20). B's lock fails at 5000 and
    # 25000. At 25000 A's call is long over: A removes T:1 with offsets 2…9 still cached, so
    # the unlock waits 20 s (REBAL-15) and the broker entry is A's of 21000 until then.
    t1 = MessageQueue("T", "broker-a", 1)
    assert ("c0", 21_000) == cluster.master().lock_manager.table()[G][t1]
    cluster.run_until(80_000, check)
    assert [5000, 25_000, 45_000, 65_000] == b.instance.rebalance_service.runs
    assert [(k, 300 + 3000 * k, 3300 + 3000 * k) for k in range(10)] == calls(a, 0)
    assert [(0, 300, 3300), (1, 3300, 6300)] == calls(a, 1)
    # A's commit of offset 2 at 6300 was not written (dropped, ORDER-11): it persisted 1 at
    # 5000 (REBAL-14), so B, locking at 45000 after the unlock, consumes offset 1 again.
    assert [(k, 45_000 + 3000 * (k - 1), 48_000 + 3000 * (k - 1)) for k in range(1, 10)] == calls(
        b, 1
    )
    assert [] == calls(b, 0)
    assert disjoint(calls(a, 1), calls(b, 1))
    assert {0: 10, 1: 10} == {q: cluster.committed(G, "T", q) for q in (0, 1)}
    table = cluster.master().lock_manager.table()[G]
    assert ("c0", 61_000) == table[MessageQueue("T", "broker-a", 0)]
    assert ("c1", 66_000) == table[t1]  # B's lockAll runs at 6000 + 20000·k


def test_an_orderly_queue_of_a_crashed_member_waits_for_the_60_s_broker_lease() -> None:
    cluster, a, b = orderly_pair(500)
    cluster.at(0, a.start)
    for k in range(95):
        cluster.at(300 + 1000 * k, lambda: [cluster.send("T", q) for q in (0, 1)])
    cluster.at(5200, b.start)
    cluster.at(30_500, a.instance.crash)
    cluster.run_until(95_000, exclusive(cluster, [a, b]))
    at = [300 + 1000 * k for k in range(95)]
    # Message k of each queue arrives at at[k] and takes 500 ms. B joins at 5200: A's call
    # on T:1 offset 4 ended at 4800 and nothing is cached, so A unlocks T:1 at once and B,
    # rebalancing right after A, locks it and resumes at 5 (A persisted 5 at the removal).
    assert [(k, at[k], at[k] + 500) for k in range(5)] == calls(a, 1)
    assert [(k, at[k], at[k] + 500) for k in range(5, 95)] == calls(b, 1)
    # A dies at 30500 inside the call on T:0 offset 30 (never finished); the broker commit is
    # 30 (piggy-backed at 30300). A's last lockAll was at 21000, so its broker lease lives
    # until 81000 (LEASE-3): B, notified at 30500 of A's closed connection, fails at 30500,
    # 50500 and 70500 and takes T:0 at 90500, from offset 30, 500 ms per call.
    assert [(k, at[k], at[k] + 500) for k in range(30)] == calls(a, 0)
    assert [5200, 25_200, 30_500, 50_500, 70_500, 90_500] == b.instance.rebalance_service.runs
    assert [(k, 90_500 + 500 * (k - 30), 91_000 + 500 * (k - 30)) for k in range(30, 39)] == (
        calls(b, 0)
    )
    assert disjoint(calls(a, 0), calls(b, 0))
    table = cluster.master().lock_manager.table()[G]
    assert ("c1", 90_500) == table[MessageQueue("T", "broker-a", 0)]


# --- REBAL-5, REBAL-7, REBAL-9/10, REBAL-17: clustering with two members ----------------------------


@pytest.mark.parametrize("leave", ["shutdown", "crash", "hang"])
def test_two_members_split_four_queues_and_the_survivor_resumes_at_the_committed_offsets(
    leave: str,
) -> None:
    cluster = ReferenceCluster()
    cluster.add_broker("broker-a")
    cluster.create_topic("T", 4)
    seen: dict[str, list[tuple[int, int, int]]] = {"c0": [], "c1": []}

    def listener_of(
        cid: str,
    ) -> Callable[[Sequence[StoredMessage], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus]:
        def listener(
            msgs: Sequence[StoredMessage], ctx: ConsumeConcurrentlyContext
        ) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                seen[cid].append(
                    (ctx.message_queue.queue_id, m.queue_offset, cluster.clock.now_ms())
                )
            return OK

        return listener

    c0, c1 = (
        cluster.new_consumer(G, listener_of(cid), client_id=cid, subscriptions={"T": "*"})
        for cid in seen
    )
    until = 150_000 if leave == "hang" else 15_000
    for k in range(until // 1000):
        cluster.at(300 + 1000 * k, lambda: [cluster.send("T", q) for q in range(4)])
    cluster.at(0, c0.start)
    cluster.at(2000, c1.start)
    steps = {
        "shutdown": c1.shutdown,
        "crash": c1.instance.crash,
        "hang": lambda: c1.instance.crash(close_connections=False),
    }
    cluster.at(10_500, steps[leave])
    cluster.run_until(until)
    at = [300 + 1000 * k for k in range(until // 1000)]

    def of(cid: str, q: int) -> list[tuple[int, int]]:
        return [(o, t) for qq, o, t in seen[cid] if qq == q]

    # AVG over [q0…q3] and [c0, c1] (REBAL-7): c0 gets q0, q1 (and %RETRY%G:0), c1 q2, q3.
    # At 2000 c0 rebalances first: it persists q2, q3 at 2 and drops them (REBAL-14); c1
    # starts there. Each queue's next pull piggy-backs the offset of what was consumed.
    for q in (0, 1):
        assert [(k, at[k]) for k in range(len(at))] == of("c0", q)
    # c1 consumed 2…10. A shutdown persists 11 and unregisters, a crash closes the connection:
    # c0 is notified and takes q2, q3 at 10500. A hang is noticed only by the broker's scan at
    # 130000 (last heartbeat 3000, > 120 s, no notification), c0 at its rebalance of 142000.
    takeover = 142_000 if leave == "hang" else 10_500
    for q in (2, 3):
        assert [(k, at[k]) for k in range(2, 11)] == of("c1", q)
        assert 11 == max(o for t, g, topic, qq, o in cluster.commits if qq == q and t < takeover)
        resumed = [(k, max(at[k], takeover)) for k in range(11, len(at))]
        assert [(0, at[0]), (1, at[1]), *resumed] == of("c0", q)
    # No message was consumed twice: every commit followed the consumption it covers.
    everything = [(q, o) for cid in seen for q, o, _t in seen[cid]]
    assert len(everything) == len(set(everything))
