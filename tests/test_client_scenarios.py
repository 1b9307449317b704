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

from collections.abc import Sequence

import pytest

from reference.client_cluster import ReferenceCluster
from reference.client_consumer import ClientConsumer
from spec.consume_types import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from spec.message import StoredMessage
from spec.profiles import Profile

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
