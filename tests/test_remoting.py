"""ReferenceRemoting: asynchronous pulls as scheduled events, long polling through the brokers'
hold checks, the 30 s client timeout, latency, faults, and the synchronous offset client."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.client_remoting import RemotingAdmin, RemotingOffsetClient
from pullspec.reference.offset_store import BrokerOffsetClient, ReferenceRemoteOffsetStore
from pullspec.reference.remoting import (
    ReferenceRemoting,
    RemotingConnectError,
    SentPull,
    to_broker_request,
)
from pullspec.reference.scheduler import Scheduler
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import PullMessageRequest, PullResponse
from pullspec.spec.config import StoreConfig
from pullspec.spec.consumer_config import ReadOffsetType
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, UnsupportedError
from pullspec.spec.message import BrokerInnerMessage, MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_from_where import OffsetQueries
from pullspec.spec.pull_request import PullMessageRequestHeader
from pullspec.spec.status import ResponseCode

Q0 = MessageQueue("T", "broker-a", 0)
QX = MessageQueue("T", "broker-x", 0)
V47, V49 = Profile.V4_7, Profile.V4_9


def header(
    offset: int = 0, sys_flag: int = 2, commit: int = 0, **kw: Any
) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group="G",
        topic="T",
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=sys_flag,
        commit_offset=commit,
        suspend_timeout_millis=15_000,
        subscription=None,
        sub_version=0,
        expression_type="TAG",
        **kw,
    )


def new_broker(clock: ManualClock) -> ReferenceBroker:
    broker = ReferenceBroker(ReferenceMessageStore(clock=clock), clock=clock)
    broker.create_topic("T", 2)
    broker.register_consumer("G", {"T": "*"})
    return broker


class Calls:
    """Collects (time, kind, payload) of the callbacks."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.seen: list[tuple[int, str, Any]] = []

    def response(self, response: PullResponse) -> None:
        self.seen.append((self.clock.now_ms(), "response", (response.code, response.msg_offsets)))

    def error(self, error: BaseException) -> None:
        self.seen.append((self.clock.now_ms(), "exception", str(error)))


def world(latency: int = 0) -> tuple[ManualClock, Scheduler, ReferenceRemoting, str, Calls]:
    clock = ManualClock(0)
    scheduler = Scheduler(clock)
    remoting = ReferenceRemoting(scheduler, latency)
    addr = remoting.register_broker("broker-a", 0, new_broker(clock))
    return clock, scheduler, remoting, addr, Calls(clock)


def send(remoting: ReferenceRemoting, addr: str, n: int = 1) -> None:
    for _ in range(n):
        remoting.send_message(addr, BrokerInnerMessage("T", 0, b"body", {"TAGS": "A"}))


def pull(remoting: ReferenceRemoting, addr: str, calls: Calls, h: PullMessageRequestHeader) -> int:
    return remoting.pull_message_async(addr, h, 30_000, calls.response, calls.error)


# --- conversion and registry --------------------------------------------------------------------


def test_header_becomes_the_broker_request_field_by_field() -> None:
    h = header(offset=7, sys_flag=3, commit=5, bname="broker-a")
    expected = PullMessageRequest(
        consumer_group="G",
        topic="T",
        queue_id=0,
        queue_offset=7,
        max_msg_nums=32,
        sys_flag=3,
        commit_offset=5,
        suspend_timeout_millis=15_000,
        subscription=None,
        sub_version=0,
        expression_type="TAG",
    )
    assert expected == to_broker_request(h)


def test_registry_gives_addresses_and_the_route_in_id_order() -> None:
    clock, _, remoting, addr, _ = world()
    slave = remoting.register_broker("broker-a", 2, new_broker(clock), addr="10.0.0.2:10911")
    remoting.register_broker("broker-a", 1, new_broker(clock))
    assert "broker-a:0" == addr
    assert {0: "broker-a:0", 1: "broker-a:1", 2: slave} == remoting.broker_addrs("broker-a")
    # Registered 0, 2, 1; the map iterates as a HashMap<Long, String> does: ascending here.
    assert [0, 1, 2] == list(remoting.broker_addrs("broker-a"))
    assert {} == remoting.broker_addrs("nobody")


@pytest.mark.parametrize(
    ("args", "error", "name"),
    [
        ((7, 0), InvalidTypeError, "broker_name"),
        (("broker-a", -1), InvalidArgumentError, "broker_id"),
        (("broker-a", 0), InvalidArgumentError, "addr"),  # already registered
        (("broker-b", 0, "broker-a:0"), InvalidArgumentError, "addr"),
        (("broker-b", 0, None, "x"), InvalidTypeError, "version"),
    ],
)
def test_register_broker_rejects_bad_input(
    args: tuple[Any, ...], error: type[Exception], name: str
) -> None:
    clock, scheduler, remoting, _, _ = world()
    before = scheduler.pending()
    broker_name, broker_id, *rest = args
    with pytest.raises(error) as err:
        remoting.register_broker(broker_name, broker_id, new_broker(clock), *rest)
    assert name == err.value.name  # type: ignore[attr-defined]
    assert (before, ["broker-a:0"]) == (
        scheduler.pending(),
        list(remoting.broker_addrs("broker-a").values()),
    )


def test_register_broker_needs_a_reference_broker() -> None:
    _, _, remoting, _, _ = world()
    with pytest.raises(InvalidTypeError) as err:
        remoting.register_broker("broker-b", 0, object())  # type: ignore[arg-type]
    assert "broker" == err.value.name


# --- asynchronous pulls -------------------------------------------------------------------------


def test_an_answer_is_a_scheduled_event_not_a_synchronous_call() -> None:
    _, scheduler, remoting, addr, calls = world()
    send(remoting, addr, 2)
    handle = pull(remoting, addr, calls, header())
    assert ([], 1) == (calls.seen, remoting.in_flight())
    scheduler.run_until(0)
    assert [(0, "response", (ResponseCode.SUCCESS, [0, 1]))] == calls.seen
    assert [SentPull(0, addr, header())] == remoting.sent
    assert (1, 0, []) == (handle, remoting.in_flight(), remoting.timed_out)


def test_a_held_pull_is_answered_when_a_message_arrives() -> None:
    _, scheduler, remoting, addr, calls = world()
    pull(remoting, addr, calls, header())
    scheduler.run_until(3000)
    assert ([], 1) == (calls.seen, remoting.in_flight())
    send(remoting, addr)
    scheduler.run_until(3000)
    assert [(3000, "response", (ResponseCode.SUCCESS, [0]))] == calls.seen


def test_a_held_pull_gets_pull_not_found_at_the_first_hold_check_after_15_s() -> None:
    clock, scheduler, remoting, addr, calls = world()
    clock.advance(2000)
    pull(remoting, addr, calls, header())  # held at 2000; checks every 5 s from 5000
    scheduler.run_until(19_999)
    assert [] == calls.seen
    scheduler.run_until(20_000)
    assert [(20_000, "response", (ResponseCode.PULL_NOT_FOUND, []))] == calls.seen


def test_a_pull_unanswered_for_30_s_times_out_and_a_late_answer_is_dropped() -> None:
    _, scheduler, remoting, addr, calls = world()
    remoting.set_drop_responses(addr, True)
    send(remoting, addr)
    pull(remoting, addr, calls, header())
    scheduler.run_until(29_999)
    assert [] == calls.seen
    scheduler.run_until(30_000)
    message = f"wait response from {addr} timeout :30000ms. Request: PULL_MESSAGE T:0"
    assert [(30_000, "exception", message)] == calls.seen
    assert ([1], 0) == (remoting.timed_out, remoting.in_flight())


def test_the_answer_of_a_held_pull_after_the_timeout_is_discarded() -> None:
    _, scheduler, remoting, addr, calls = world()
    remoting.pull_message_async(addr, header(), 1000, calls.response, calls.error)
    scheduler.run_until(1000)
    send(remoting, addr)  # wakes nothing: the client forgot the request
    scheduler.run_until(20_000)
    assert [
        (1000, "exception", f"wait response from {addr} timeout :1000ms. Request: PULL_MESSAGE T:0")
    ] == calls.seen


def test_a_broker_that_is_down_refuses_the_pull_synchronously() -> None:
    _, scheduler, remoting, addr, calls = world()
    remoting.set_broker_down(addr, True)
    with pytest.raises(RemotingConnectError) as err:
        pull(remoting, addr, calls, header())
    assert (addr, [], []) == (err.value.addr, remoting.sent, scheduler.pending()[:0])
    with pytest.raises(RemotingConnectError):
        pull(remoting, "nowhere:1", calls, header())
    remoting.set_broker_down(addr, False)
    send(remoting, addr)
    pull(remoting, addr, calls, header())
    scheduler.run_until(0)
    assert [(0, "response", (ResponseCode.SUCCESS, [0]))] == calls.seen


def test_a_held_pull_whose_broker_goes_down_times_out() -> None:
    _, scheduler, remoting, addr, calls = world()
    pull(remoting, addr, calls, header())
    remoting.set_broker_down(addr, True)
    scheduler.run_until(30_000)
    assert [
        (
            30_000,
            "exception",
            f"wait response from {addr} timeout :30000ms. Request: PULL_MESSAGE T:0",
        )
    ] == calls.seen


def test_latency_delays_the_request_and_the_answer() -> None:
    _, scheduler, remoting, addr, calls = world(latency=7)
    send(remoting, addr)
    pull(remoting, addr, calls, header(offset=0, sys_flag=3, commit=1))
    broker = remoting.broker(addr)
    scheduler.run_until(6)
    assert {} == broker.offsets  # the piggy-backed commit has not arrived yet
    scheduler.run_until(13)
    assert ({"T@G": {0: 1}}, []) == (broker.offsets, calls.seen)
    scheduler.run_until(14)
    assert [(14, "response", (ResponseCode.SUCCESS, [0]))] == calls.seen
    pull(remoting, addr, calls, header(offset=1))  # reaches the broker at 21 and is held
    scheduler.run_until(100)
    send(remoting, addr)
    scheduler.run_until(200)
    assert (107, "response", (ResponseCode.SUCCESS, [1])) == calls.seen[-1]


@pytest.mark.parametrize(
    ("args", "error", "name"),
    [
        ((5, header(), 30_000), InvalidTypeError, "addr"),
        (("broker-a:0", "header", 30_000), InvalidTypeError, "header"),
        (("broker-a:0", header(), 0), InvalidArgumentError, "timeout_ms"),
        (("broker-a:0", header(), "30s"), InvalidTypeError, "timeout_ms"),
    ],
)
def test_pull_message_async_rejects_bad_input(
    args: tuple[Any, ...], error: type[Exception], name: str
) -> None:
    _, scheduler, remoting, _, calls = world()
    before = scheduler.pending()
    with pytest.raises(error) as err:
        addr, h, timeout = args
        remoting.pull_message_async(addr, h, timeout, calls.response, calls.error)
    assert name == err.value.name  # type: ignore[attr-defined]
    assert (before, [], 0) == (scheduler.pending(), remoting.sent, remoting.in_flight())


def test_pull_message_async_needs_callables() -> None:
    _, _, remoting, addr, calls = world()
    with pytest.raises(InvalidTypeError) as err:
        remoting.pull_message_async(addr, header(), 100, None, calls.error)  # type: ignore[arg-type]
    assert ("on_response", []) == (err.value.name, remoting.sent)


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda r: r.set_broker_down("nowhere", True), InvalidArgumentError, "addr"),
        (lambda r: r.set_broker_down("broker-a:0", 1), InvalidTypeError, "down"),
        (lambda r: r.set_drop_responses("broker-a:0", "yes"), InvalidTypeError, "drop"),
        (lambda r: r.send_message("broker-a:0", b"raw"), InvalidTypeError, "msg"),
        (lambda r: r.broker_addrs(None), InvalidTypeError, "broker_name"),
        (lambda r: RemotingOffsetClient(r, 3, V49), InvalidTypeError, "group"),  # type: ignore[arg-type]
        (lambda r: ReferenceRemoting(r, 0), InvalidTypeError, "scheduler"),
    ],
)
def test_switches_and_lookups_reject_bad_input(
    call: Any, error: type[Exception], name: str
) -> None:
    _, _, remoting, addr, _ = world()
    with pytest.raises(error) as err:
        call(remoting)
    assert name == err.value.name  # type: ignore[attr-defined]
    send(remoting, addr)
    assert 1 == remoting.broker(addr).store.get_max_offset_in_queue("T", 0)


def test_latency_must_be_non_negative() -> None:
    with pytest.raises(InvalidArgumentError) as err:
        ReferenceRemoting(Scheduler(ManualClock(0)), -1)
    assert "latency_ms" == err.value.name


# --- offsets ------------------------------------------------------------------------------------


def test_offset_client_queries_and_updates_the_master() -> None:
    _, _, remoting, addr, _ = world()
    client = RemotingOffsetClient(remoting, "G", V49)
    assert isinstance(client, BrokerOffsetClient)
    assert 0 == client.query_offset(Q0)  # a young queue with its head in memory answers 0
    client.update_offset(Q0, 42, True)
    assert (42, {"T@G": {0: 42}}) == (client.query_offset(Q0), remoting.broker(addr).offsets)


def test_offset_query_failures_become_the_store_sentinels() -> None:
    clock = ManualClock(0)
    remoting = ReferenceRemoting(Scheduler(clock))
    tiny = StoreConfig(
        mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
    )
    broker = ReferenceBroker(ReferenceMessageStore(tiny, clock=clock), clock=clock)
    broker.create_topic("T", 1)
    addr = remoting.register_broker("broker-a", 0, broker)
    send(remoting, addr, 25)  # 102-byte records: three commit-log files
    assert 2 == broker.store.delete_expired_files()
    assert 0 < broker.store.get_min_offset_in_queue("T", 0)
    client = RemotingOffsetClient(remoting, "G", V49)
    with pytest.raises(MQBrokerError) as err:
        client.query_offset(Q0)
    assert (ResponseCode.QUERY_NOT_FOUND, addr) == (err.value.code, err.value.addr)
    store = ReferenceRemoteOffsetStore(client, "G")
    assert -1 == store.read_offset(Q0, ReadOffsetType.READ_FROM_STORE)
    with pytest.raises(MQClientError):
        client.query_offset(QX)  # no route for broker-x
    assert -2 == store.read_offset(QX, ReadOffsetType.READ_FROM_STORE)
    remoting.set_broker_down(addr, True)
    assert -2 == store.read_offset(Q0, ReadOffsetType.READ_FROM_STORE)
    with pytest.raises(RemotingConnectError):
        client.update_offset(Q0, 1, True)
    assert {} == broker.offsets


def test_offset_broker_choice_follows_offset_7() -> None:
    clock = ManualClock(0)
    remoting = ReferenceRemoting(Scheduler(clock))
    slave = remoting.register_broker("broker-a", 1, new_broker(clock))
    # 4.9: no master, so the refreshed route's first entry; 4.7: the first entry at once.
    for profile in (V47, V49):
        RemotingOffsetClient(remoting, "G", profile).update_offset(Q0, 9, True)
        assert {"T@G": {0: 9}} == remoting.broker(slave).offsets
    master = remoting.register_broker("broker-a", 0, new_broker(clock))
    RemotingOffsetClient(remoting, "G", V49).update_offset(Q0, 11, False)
    assert {"T@G": {0: 11}} == remoting.broker(master).offsets
    # 4.7's first entry is the master's although the slave registered first: the route's map
    # is a HashMap<Long, String>, which iterates id 0 before id 1.
    RemotingOffsetClient(remoting, "G", V47).update_offset(Q0, 12, False)
    assert ({"T@G": {0: 12}}, {"T@G": {0: 9}}) == (
        remoting.broker(master).offsets,
        remoting.broker(slave).offsets,
    )


def test_admin_answers_max_offset_and_refuses_search_offset() -> None:
    _, _, remoting, addr, _ = world()
    admin = RemotingAdmin(remoting)
    assert isinstance(admin, OffsetQueries)
    send(remoting, addr, 4)
    assert 4 == admin.max_offset(Q0)
    with pytest.raises(MQClientError):
        admin.max_offset(QX)
    remoting.set_broker_down(addr, True)
    with pytest.raises(MQClientError):
        admin.max_offset(Q0)
    with pytest.raises(UnsupportedError):
        admin.search_offset(Q0, 0)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda c: c.query_offset("T"), "mq"),
        (lambda c: c.update_offset(Q0, "1", True), "offset"),
        (lambda c: c.update_offset(Q0, 1, 1), "oneway"),
    ],
)
def test_offset_client_rejects_bad_input(call: Any, name: str) -> None:
    _, _, remoting, addr, _ = world()
    with pytest.raises(InvalidTypeError) as err:
        call(RemotingOffsetClient(remoting, "G", V49))
    assert (name, {}) == (err.value.name, remoting.broker(addr).offsets)


def test_sent_pulls_are_frozen_records() -> None:
    record = SentPull(1, "a", header())
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.at = 2  # type: ignore[misc]
