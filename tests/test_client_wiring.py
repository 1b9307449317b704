"""The parts that wire push consumers together, one at a time: the broker's consumer table and
SEND_MESSAGE path, the remoting's synchronous requests, notifications and timers, the client
adapters (routes, consumer ids, locks, send-backs), the killable client scheduler, and the
client instance's identity and cadences. Expected values are worked out by hand."""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs
import pytest

from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.client_cluster import ReferenceCluster
from pullspec.reference.client_consumer import ClientConsumer
from pullspec.reference.client_instance import InstanceState, ReferenceClientInstance
from pullspec.reference.client_remoting import (
    RemotingLockClient,
    RemotingSendBackClient,
    find_consumer_id_list,
    topic_route,
)
from pullspec.reference.client_scheduler import DEAD_HANDLE, ClientScheduler
from pullspec.reference.remoting import RemotingConnectError, RemotingTimeoutError
from pullspec.reference.scheduler import Scheduler
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig, SubscriptionGroupConfig
from pullspec.spec.consume_concurrently import ConsumeConcurrentlyStatus
from pullspec.spec.consumer_config import ConsumerConfig, MessageModel
from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import BrokerInnerMessage, MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.retry import ClientMessage, SendBackResponse
from pullspec.spec.status import BrokerRole, ResponseCode

G = "G"
V47, V49 = Profile.V4_7, Profile.V4_9
SUCCESS = SendBackResponse(ResponseCode.SUCCESS)


def world(profile: Profile = V49) -> ReferenceCluster:
    cluster = ReferenceCluster(profile)
    cluster.add_broker("broker-a")
    cluster.create_topic("T", 2)
    return cluster


def sub(topic: str, version: int = 0) -> SubscriptionData:
    return SubscriptionData(topic, "*", sub_version=version)


def ok(msgs: object, ctx: object) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


# --- the broker's consumer table -------------------------------------------------------------------


def test_heartbeats_register_clients_create_the_retry_topic_and_notify_on_membership_changes() -> (
    None
):
    broker = world().master()
    assert (ResponseCode.SYSTEM_ERROR, None) == broker.get_consumer_list_by_group(G)
    assert True is broker.heartbeat("c0", G, {"T": sub("T")})
    assert ["%RETRY%G"] == [t for t in broker.topics if t.startswith("%")]
    # A second heartbeat with a newer subVersion is no change; a new client and a new topic are
    assert False is broker.heartbeat("c0", G, {"T": sub("T", 5)})
    assert 5 == broker.consumers[G].subscriptions["T"].sub_version
    assert True is broker.heartbeat("c1", G, {"T": sub("T", 3)})
    assert 5 == broker.consumers[G].subscriptions["T"].sub_version
    assert [("c0", G), ("c0", G), ("c1", G)] == broker.drain_notifications()
    assert (ResponseCode.SUCCESS, ["c0", "c1"]) == broker.get_consumer_list_by_group(G)
    # One heartbeat's topics replace the group's (a dropped topic is a change)
    assert True is broker.heartbeat("c1", G, {"U": sub("U")})
    assert ["U"] == list(broker.consumers[G].subscriptions)
    broker.drain_notifications()
    broker.unregister_client("c1", G)
    assert [("c0", G)] == broker.drain_notifications()
    broker.client_channel_closed("c0")
    assert ([], {}, (ResponseCode.SYSTEM_ERROR, None)) == (
        broker.drain_notifications(),
        broker.consumers,
        broker.get_consumer_list_by_group(G),
    )


def test_the_housekeeping_scan_drops_clients_silent_for_more_than_120_s_without_notice() -> None:
    cluster = world()
    broker = cluster.master()
    broker.heartbeat("c0", G, {"T": sub("T")})
    cluster.clock.jump_to(120_000)
    assert [] == broker.scan_not_active_clients()  # strictly more than 120 s
    cluster.clock.jump_to(120_001)
    assert [(G, "c0")] == broker.scan_not_active_clients()
    assert ({}, []) == (broker.consumers, broker.drain_notifications()[1:])


@pytest.mark.parametrize(("profile", "perm"), [(V47, 2), (V49, 6)])
def test_a_send_to_the_retry_topic_at_the_maximum_goes_to_the_dlq(
    profile: Profile, perm: int
) -> None:
    broker = world(profile).master()
    msg = BrokerInnerMessage("%RETRY%G", 0, b"x", {"KEYS": "k"})
    # RETRY-11: the header's reconsumeTimes against its maxReconsumeTimes
    assert SUCCESS == broker.send_message_request(msg, reconsume_times=2, max_reconsume_times=3)
    assert SUCCESS == broker.send_message_request(msg, reconsume_times=3, max_reconsume_times=3)
    retry = broker.store.get_message("r", "%RETRY%G", 0, 0, 32).messages
    dlq = broker.store.get_message("r", "%DLQ%G", 0, 0, 32).messages
    assert ([2], [3], perm) == (
        [m.reconsume_times for m in retry],
        [m.reconsume_times for m in dlq],
        broker.topics["%DLQ%G"].perm,
    )
    assert 1 == broker.topics["%RETRY%G"].write_queue_nums  # created by msgCheck, one queue


def test_send_message_request_refusals() -> None:
    cluster = world()
    broker = cluster.master()
    broker.config = type(broker.config)(auto_create_subscription_group=False)
    assert (
        ResponseCode.TOPIC_NOT_EXIST
        == broker.send_message_request(BrokerInnerMessage("X", 0, b"x")).code
    )
    assert (
        ResponseCode.SYSTEM_ERROR
        == broker.send_message_request(BrokerInnerMessage("T", 7, b"x")).code
    )
    no_group = broker.send_message_request(BrokerInnerMessage("%RETRY%H", 0, b"x"))
    assert ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST == no_group.code
    broker.groups["H"] = SubscriptionGroupConfig(group_name="H")
    assert SUCCESS == broker.send_message_request(BrokerInnerMessage("T", 1, b"x"))


# --- the remoting: requests, faults, notifications, timers -------------------------------------------


def test_named_requests_time_out_while_the_rest_of_the_broker_answers() -> None:
    cluster = world()
    addr = cluster.remoting.broker_addrs("broker-a")[0]
    cluster.remoting.set_failing_requests(addr, {"LOCK_BATCH_MQ"})
    with pytest.raises(RemotingTimeoutError):
        RemotingLockClient(cluster.remoting).lock_batch("broker-a", G, "c0", [])
    assert (ResponseCode.SYSTEM_ERROR, None) == cluster.remoting.invoke(
        addr, "GET_CONSUMER_LIST_BY_GROUP", lambda b: b.get_consumer_list_by_group(G)
    )
    cluster.remoting.set_broker_down(addr, True)
    with pytest.raises(RemotingConnectError):
        cluster.remoting.invoke(addr, "HEART_BEAT", lambda b: None)


def recorder(
    cluster: ReferenceCluster, cid: str, got: list[tuple[str, int, str]]
) -> Callable[[str], None]:
    """A client's NOTIFY_CONSUMER_IDS_CHANGED handler that records (client, time, group)."""
    return lambda group: got.append((cid, cluster.clock.now_ms(), group))


def beat(cid: str) -> Callable[[ReferenceBroker], bool]:
    """A HEART_BEAT of client `cid` in G without subscriptions."""
    return lambda broker: broker.heartbeat(cid, G, {})


def test_notifications_reach_registered_clients_as_events_and_a_closed_connection_notifies() -> (
    None
):
    cluster = world()
    addr = cluster.remoting.broker_addrs("broker-a")[0]
    got: list[tuple[str, int, str]] = []
    for cid in ("c0", "c1"):
        cluster.remoting.register_client(cid, recorder(cluster, cid, got))
        cluster.remoting.invoke(addr, "HEART_BEAT", beat(cid))
    assert [] == got  # delivered as events
    cluster.run_until(10)
    assert [("c0", 0, G), ("c0", 0, G), ("c1", 0, G)] == got
    cluster.clock.jump_to(100)
    cluster.remoting.unregister_client("c0", close=True)
    cluster.run_until(200)
    assert ("c1", 100, G) == got[-1]
    # From the first client on, the broker scans every 10 s from then (0 + 10000, …)
    assert ["client-housekeeping"] == [n for n in cluster.scheduler.pending() if "house" in n]


def test_the_schedule_timer_delivers_each_delayed_message_at_its_due_time() -> None:
    cluster = ReferenceCluster()
    cluster.add_broker("broker-a", store_config=StoreConfig())
    cluster.create_topic("T", 1)
    cluster.clock.jump_to(500)
    cluster.send("T", 0, b"x", {"DELAY": "2"})  # level 2: 5 s (RETRY-7, RETRY-8)
    cluster.clock.jump_to(1000)
    cluster.send("T", 0, b"y", {"DELAY": "1"})  # level 1: 1 s, due before the first
    cluster.run_until(5_499)
    assert [b"y"] == [m.body for m in cluster.messages("T", 0)]
    cluster.run_until(5_500)
    assert ([b"y", b"x"], [2000, 5500]) == (
        [m.body for m in cluster.messages("T", 0)],
        [m.store_timestamp for m in cluster.messages("T", 0)],
    )


# --- routes, consumer ids, locks, send-backs ---------------------------------------------------------


def test_routes_read_the_masters_topic_configs_and_slave_only_brokers() -> None:
    cluster = world()
    cluster.add_broker("broker-b", 1, store_config=StoreConfig(broker_role=BrokerRole.SLAVE))
    cluster.brokers["broker-b:1"].create_topic("T", 1)
    cluster.master().create_topic("W", 2, perm=2)  # write only: no queue to subscribe
    route = topic_route(cluster.remoting, "T")
    assert [("broker-a", 0), ("broker-a", 1), ("broker-b", 0)] == sorted(
        (q.broker_name, q.queue_id) for q in route or ()
    )
    assert (frozenset(), None) == (
        topic_route(cluster.remoting, "W"),
        topic_route(cluster.remoting, "X"),
    )
    lock = RemotingLockClient(cluster.remoting)
    assert (True, False) == (lock.has_master("broker-a"), lock.has_master("broker-b"))
    with pytest.raises(MQClientError):
        lock.lock_batch("broker-b", G, "c0", [])


def test_consumer_ids_come_from_a_broker_of_the_route_or_are_none() -> None:
    cluster = world()
    broker = cluster.master()
    broker.heartbeat("c1", G, {})
    broker.heartbeat("c0", G, {})
    rng = random.Random(0)
    assert ["c1", "c0"] == find_consumer_id_list(cluster.remoting, "T", G, rng)
    assert None is find_consumer_id_list(cluster.remoting, "T", "H", rng)
    assert None is find_consumer_id_list(cluster.remoting, "X", G, rng)
    cluster.set_broker_down("broker-a", True)
    assert None is find_consumer_id_list(cluster.remoting, "T", G, rng)


def test_the_send_back_client_raises_on_failures_and_the_producer_tries_three_times() -> None:
    cluster = world()
    broker = cluster.master()
    cluster.send("T", 0, b"x", {"KEYS": "k"})
    msg = broker.store.get_message("r", "T", 0, 0, 1).messages[0]
    client = RemotingSendBackClient(cluster.remoting, G, cluster.clock, random.Random(0))
    with pytest.raises(MQClientError):
        client.send_message_back(msg, 0, "broker-x", 16)
    client.send_message_back(msg, 0, "broker-a", 16)
    client.send_message_back(msg, 0, None, 16)  # found by its record: the store host
    assert 2 == len(client.sent_back)
    with pytest.raises(MQBrokerError):  # no record there: SYSTEM_ERROR (RETRY-1 step 6)
        client.send_message_back(attrs.evolve(msg, commitlog_offset=10**6), 0, "broker-a", 16)
    broker.config = type(broker.config)(broker_permission=4)  # read only: NO_PERMISSION
    retry = ClientMessage(
        "%RETRY%G", b"x", 0, {"RECONSUME_TIME": "1", "MAX_RECONSUME_TIMES": "16", "DELAY": "3"}
    )
    with pytest.raises(MQClientError, match="Send \\[3\\] times"):
        client.send_retry_message(retry)
    broker.config = type(broker.config)()
    client.send_retry_message(retry)
    (_at, mq, sent) = client.sent[-1]
    assert (MessageQueue("%RETRY%G", "broker-a", 0), {"DELAY": "3"}) == (mq, dict(sent.properties))


# --- the client scheduler and the instance -----------------------------------------------------------


def test_a_killed_client_scheduler_cancels_its_events_and_refuses_new_ones() -> None:
    clock = ManualClock(0)
    world_scheduler = Scheduler(clock)
    client = ClientScheduler(world_scheduler, "c0")
    ran: list[str] = []
    client.call_later(10, lambda: ran.append("client"))
    world_scheduler.call_later(10, lambda: ran.append("world"))
    handle = client.call_later(5, lambda: ran.append("cancelled"))
    client.cancel(handle)
    assert 1 == client.live_events
    client.kill()
    assert DEAD_HANDLE == client.call_soon(lambda: ran.append("refused"))
    client.run_until(20)
    assert (["world"], 20, 0) == (ran, clock.now_ms(), client.live_events)


@pytest.mark.parametrize(("profile", "cid"), [(V47, "127.0.0.1@1"), (V49, "127.0.0.1@1#7000000")])
def test_the_client_id_follows_rebal_24(profile: Profile, cid: str) -> None:
    cluster = world(profile)
    cluster.clock.jump_to(7)
    instance = ReferenceClientInstance(cluster.scheduler, cluster.remoting, profile)
    assert cid == instance.client_id
    named = ReferenceClientInstance(
        cluster.scheduler, cluster.remoting, profile, message_model=MessageModel.BROADCASTING
    )
    assert "127.0.0.1@DEFAULT" == named.client_id


def test_the_instance_cadences_and_its_shutdown_after_the_last_consumer() -> None:
    cluster = world()
    c0 = cluster.new_consumer(G, ok, client_id="c0", subscriptions={"T": "*"})
    other = cluster.new_consumer(
        "H", ok, client_id="c0", subscriptions={"T": "*"}, instance=c0.instance
    )
    cluster.at(1000, c0.start)
    cluster.at(1000, other.start)
    cluster.run_until(40_000)
    instance = c0.instance
    # Heartbeats: the two starts, the four messageQueueChanged of the one rebalance at 1000
    # (T and the retry topic of each group, REBAL-13), then the task at start + 1000 and
    # + 31000; rebalances at 1000 (woken by both starts) and 21000.
    assert [1000] * 6 + [2000, 32_000] == instance.heartbeats
    assert [1000, 21_000] == instance.rebalance_service.runs
    assert {"%RETRY%G", "%RETRY%H", "T"} == {
        mq.topic for c in (c0, other) for mq in c.process_queues()
    }
    with pytest.raises(MQClientError):
        cluster.new_consumer(G, ok, client_id="c0", subscriptions={}, instance=instance).start()
    c0.shutdown()
    assert InstanceState.RUNNING == instance.state  # H still runs on it
    other.shutdown()
    assert (InstanceState.SHUTDOWN_ALREADY, {}) == (instance.state, cluster.master().consumers)


def test_a_crashed_instance_stops_everything_and_the_broker_forgets_it() -> None:
    cluster = world()
    c0 = cluster.new_consumer(G, ok, client_id="c0", subscriptions={"T": "*"})
    c1 = cluster.new_consumer(G, ok, client_id="c1", subscriptions={"T": "*"})
    cluster.at(0, c0.start)
    cluster.at(0, c1.start)
    cluster.at(5000, c1.instance.crash)
    cluster.run_until(6000)
    assert (False, 0) == (c1.running, c1.instance.scheduler.live_events)
    assert (ResponseCode.SUCCESS, ["c0"]) == cluster.master().get_consumer_list_by_group(G)
    assert [0, 0, 5000] == [t for t, _g in c0.instance.notifications][-3:]


def test_consumer_options() -> None:
    cluster = world()
    broadcast = ConsumerConfig(message_model=MessageModel.BROADCASTING)
    with pytest.raises(InvalidArgumentError):
        cluster.new_consumer(G, ok, client_id="c0", subscriptions={"T": "*"}, config=broadcast)
    c = cluster.new_consumer(G, ok, client_id="c1", subscriptions={"T": "*"}, orderly=True)
    assert (True, True) == (c.config.orderly, isinstance(c, ClientConsumer))
    # FLOW-14: a per-topic threshold is split over the queues and reaches the pull path
    limited = ConsumerConfig(pull_threshold_for_topic=10)
    d = cluster.new_consumer("H", ok, client_id="c2", subscriptions={"T": "*"}, config=limited)
    cluster.at(0, d.start)
    cluster.run_until(100)
    assert (3, 3) == (d.push.config.pull_threshold_for_queue, d.config.pull_threshold_for_queue)
    d.suspend()
    assert (True, True) == (d.push.paused, d.rebalance.paused)
    d.resume()
    assert (False, False) == (d.push.paused, d.rebalance.paused)


def test_the_internal_producer_moves_to_another_broker_after_a_failed_attempt() -> None:
    cluster = world()
    cluster.add_broker("broker-b")
    for broker in cluster.brokers.values():
        broker.heartbeat("c0", G, {})  # creates %RETRY%G with one queue on each master
    cluster.set_broker_down("broker-a", True)
    client = RemotingSendBackClient(cluster.remoting, G, cluster.clock, random.Random(0))
    client.send_retry_message(ClientMessage("%RETRY%G", b"x", 0, {"RECONSUME_TIME": "1"}))
    assert ["broker-b"] == [mq.broker_name for _at, mq, _m in client.sent]


def test_the_consume_services_schedule_their_own_tasks_on_the_client() -> None:
    cluster = world()
    c0 = cluster.new_consumer(G, ok, client_id="c0", subscriptions={"T": "*"})
    c1 = cluster.new_consumer("H", ok, client_id="c1", subscriptions={"T": "*"}, orderly=True)
    cluster.at(0, c0.start)
    cluster.at(0, c1.start)
    cluster.run_until(0)
    pending = [n for n in cluster.scheduler.pending() if n.startswith("c")]
    # CONC-13: the cleaner after consumeTimeout (15 min); ORDER-1: lockAll after 1 s; the
    # instance: heartbeat after 1 s, persistAllConsumerOffset after 10 s, rebalance after 20 s.
    assert {"c0: clean-expire", "c1: lockMQPeriodically"} <= set(pending)
    assert {f"{c}: {t}" for c in ("c0", "c1") for t in ("heartbeat", "rebalance")} <= set(pending)
