"""ReferenceRemoting: the in-process "network" between clients and reference brokers, on the
deterministic scheduler.

- An asynchronous pull (`pull_message_async`, NettyRemotingClient.invokeAsync) reaches its
  broker `latency_ms` after it is sent (at once when the latency is 0) and its answer comes back
  as a scheduled event `latency_ms` after the broker gives it: at once, or when the broker
  answers a held pull (long polling). A pull not answered within its timeout gets `on_exception`
  with the timeout MQClientError of REQ-12; a later answer is discarded, as Netty discards a
  response whose future is gone. Java's response-table scan adds up to 2 s to the timeout; the
  model fires exactly at send + timeout.
- The brokers' hold services run as scheduled events at each broker's `next_hold_check_at`;
  answered held pulls are drained after every broker call and check. A registered broker's
  hold checks recur for ever, so drive the scheduler with `run_until`, not `run_next` to idle.
- Every other request is synchronous and takes no virtual time (`invoke`): offset queries and
  updates (`reference.client_remoting.RemotingOffsetClient`), heartbeats, locks, send-backs.
  After each, the answers to held pulls it caused are delivered, the broker's
  NOTIFY_CONSUMER_IDS_CHANGED messages go to the registered clients (scheduled events), and the
  broker's schedule-delivery timer (RETRY-9) is re-armed for its earliest due delayed message.
  From its first consumer client on, a broker also runs ClientHousekeepingService's 10 s scan.
- Faults are explicit switches: a broker that is down refuses connections (RemotingConnectError,
  thrown synchronously as invokeAsync throws it) and its answers never arrive; a broker whose
  responses are dropped processes requests but its answers never arrive; named synchronous
  requests can time out (RemotingTimeoutError) while the rest still work. A down broker's own
  timers (hold checks, delayed delivery, housekeeping) still run: down means unreachable.

PullMessageRequestHeader (client) becomes PullMessageRequest (broker) here and only here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TypeVar

import attrs

from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.broker_clients import HOUSEKEEPING_INTERVAL_MILLIS as HOUSEKEEPING_MS
from pullspec.reference.scheduler import Scheduler
from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.code import PullMessageRequest, PullResponse
from pullspec.spec.errors import (
    InvalidArgumentError,
    InvalidTypeError,
    require_int,
    require_non_negative,
    require_str,
)
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.offset_store import OffsetStoreRules
from pullspec.spec.pull_request import PullMessageRequestHeader
from pullspec.spec.pull_route import V4_1_0_SNAPSHOT
from pullspec.spec.results import PutMessageResult

T = TypeVar("T")

#: The callbacks of an asynchronous pull (InvokeCallback.operationComplete's two outcomes).
OnResponse = Callable[[PullResponse], None]
OnException = Callable[[BaseException], None]


class RemotingTimeoutError(MQClientError):
    """Java's RemotingTimeoutException for a synchronous request the broker never answered
    (a request fault of `ReferenceRemoting.set_failing_requests`)."""

    java_exception = "RemotingTimeoutException"


class RemotingConnectError(Exception):
    """Java's RemotingConnectException: no channel to the address (broker down or unknown)."""

    java_exception = "RemotingConnectException"

    def __init__(self, addr: str) -> None:
        self.addr = addr
        super().__init__(f"connect to {addr} failed")


def to_broker_request(header: PullMessageRequestHeader) -> PullMessageRequest:
    """The broker's view of a client pull header (the wire decoding of PULL_MESSAGE); `bname`
    (4.9) only names the queue's broker and the reference broker does not read it."""
    return PullMessageRequest(
        consumer_group=header.consumer_group,
        topic=header.topic,
        queue_id=header.queue_id,
        queue_offset=header.queue_offset,
        max_msg_nums=header.max_msg_nums,
        sys_flag=header.sys_flag,
        commit_offset=header.commit_offset,
        suspend_timeout_millis=header.suspend_timeout_millis,
        subscription=header.subscription,
        sub_version=header.sub_version,
        expression_type=header.expression_type,
    )


@attrs.define
class _Endpoint:
    broker_name: str
    broker_id: int
    broker: ReferenceBroker
    version: int
    down: bool = False
    drop_responses: bool = False
    #: broker request id → the pull waiting for its answer.
    waiting: dict[int, _PendingPull] = attrs.Factory(dict)
    #: Request names (e.g. "CONSUMER_SEND_MSG_BACK") that fail as if timed out.
    failing: frozenset[str] = frozenset()
    #: (due time, scheduler handle) of the armed schedule-delivery timer, if any.
    schedule_timer: tuple[int, int] | None = None
    housekeeping: bool = False


@attrs.define
class _PendingPull:
    handle: int
    addr: str
    header: PullMessageRequestHeader
    timeout_ms: int
    on_response: OnResponse
    on_exception: OnException
    done: bool = False
    timeout_event: int | None = None


@attrs.frozen
class SentPull:
    """One pull put on the wire: when, to whom, and its header."""

    at: int
    addr: str
    header: PullMessageRequestHeader


def _callable(name: str, value: object) -> None:
    if not callable(value):
        raise InvalidTypeError(name, value, "a callable")


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(name, value, "bool")
    return value


class ReferenceRemoting:
    """The network of one simulation: registered brokers by (broker_name, broker_id) → address."""

    def __init__(self, scheduler: Scheduler, latency_ms: int = 0) -> None:
        if not isinstance(scheduler, Scheduler):
            raise InvalidTypeError("scheduler", scheduler, "Scheduler")
        self._scheduler = scheduler
        self._latency = require_non_negative("latency_ms", latency_ms)
        self._endpoints: dict[str, _Endpoint] = {}
        self._clients: dict[str, Callable[[str], None]] = {}
        self._next_handle = 1
        self._pending: dict[int, _PendingPull] = {}
        #: Every pull sent, in order (tests read the send times from here).
        self.sent: list[SentPull] = []
        #: Handles of pulls answered by a timeout.
        self.timed_out: list[int] = []

    @property
    def latency_ms(self) -> int:
        """The one-way delay of an asynchronous pull (request and response each)."""
        return self._latency

    # -- brokers -----------------------------------------------------------------------------

    def register_broker(
        self,
        broker_name: str,
        broker_id: int,
        broker: ReferenceBroker,
        addr: str | None = None,
        version: int = V4_1_0_SNAPSHOT,
    ) -> str:
        """Make `broker` reachable as (broker_name, broker_id) and return its address (default
        "<broker_name>:<broker_id>"); `version` is the MQVersion ordinal REQ-7 compares."""
        name = require_str("broker_name", broker_name)
        bid = require_non_negative("broker_id", broker_id)
        if not isinstance(broker, ReferenceBroker):
            raise InvalidTypeError("broker", broker, "ReferenceBroker")
        address = f"{name}:{bid}" if addr is None else require_str("addr", addr)
        ver = require_int("version", version)
        if address in self._endpoints:
            raise InvalidArgumentError("addr", address, "is already registered")
        if any(e.broker_name == name and e.broker_id == bid for e in self._endpoints.values()):
            raise InvalidArgumentError("broker_id", bid, f"is already registered for {name}")
        self._endpoints[address] = _Endpoint(name, bid, broker, ver)
        self._schedule_hold_check(address)
        self._arm_schedule(address)
        return address

    def broker_names(self) -> list[str]:
        """Every registered broker name, sorted (the cluster the name server would route)."""
        return sorted({e.broker_name for e in self._endpoints.values()})

    def broker_addrs(self, broker_name: str) -> BrokerAddrs:
        """The route's broker map of `broker_name` (BrokerData.brokerAddrs): id → address, put
        in registration order into a HashMap<Long, String> and iterated in its order."""
        name = require_str("broker_name", broker_name)
        return BrokerAddrs(
            (e.broker_id, a) for a, e in self._endpoints.items() if e.broker_name == name
        )

    def broker(self, addr: str) -> ReferenceBroker:
        """The broker registered at `addr`."""
        return self._endpoint(addr).broker

    def broker_version(self, addr: str) -> int:
        """The MQVersion ordinal the broker at `addr` reports (REQ-7)."""
        return self._endpoint(addr).version

    def filter_servers(self, topic: str, broker_addr: str) -> list[str] | None:
        """The route's filter servers of `broker_addr` (REQ-10): class filtering is not modelled,
        so there are none."""
        return None

    def set_broker_down(self, addr: str, down: bool) -> None:
        """Take the broker at `addr` off the network (True) or bring it back (False)."""
        self._endpoint(addr).down = _bool("down", down)

    def set_drop_responses(self, addr: str, drop: bool) -> None:
        """Lose (True) or deliver (False) every pull answer the broker at `addr` gives."""
        self._endpoint(addr).drop_responses = _bool("drop", drop)

    def set_failing_requests(self, addr: str, requests: Collection[str]) -> None:
        """Make the named synchronous requests to `addr` time out (RemotingTimeoutError) while
        the broker stays up for everything else; an empty collection clears the fault."""
        names = frozenset(requests)
        for name in names:
            require_str("request", name)
        self._endpoint(addr).failing = names

    def _endpoint(self, addr: object) -> _Endpoint:
        address = require_str("addr", addr)
        if address not in self._endpoints:
            raise InvalidArgumentError("addr", address, "no broker registered there")
        return self._endpoints[address]

    def connect(self, addr: str, request: str | None = None) -> ReferenceBroker:
        """The broker at `addr` for a synchronous call; RemotingConnectError when it is down or
        unknown (getAndCreateChannel fails), RemotingTimeoutError when `request` is one of its
        failing requests."""
        address = require_str("addr", addr)
        endpoint = self._endpoints.get(address)
        if endpoint is None or endpoint.down:
            raise RemotingConnectError(address)
        if request is not None and request in endpoint.failing:
            raise RemotingTimeoutError(f"wait response on {address} timeout, request {request}")
        return endpoint.broker

    def invoke(self, addr: str, request: str, call: Callable[[ReferenceBroker], T]) -> T:
        """A synchronous request: `call` on the broker at `addr` (taking no virtual time), then
        deliver what it caused: answers to held pulls, NOTIFY_CONSUMER_IDS_CHANGED messages and
        the re-armed schedule timer. Raises as `connect` does."""
        broker = self.connect(addr, require_str("request", request))
        appended_before = broker.store.get_max_phy_offset()
        try:
            return call(broker)
        finally:
            # Only a request that stored something can have brought a delayed message
            self._after_call(addr, broker.store.get_max_phy_offset() != appended_before)

    # -- clients (NOTIFY_CONSUMER_IDS_CHANGED) -----------------------------------------------

    def register_client(self, client_id: str, on_notify: Callable[[str], None]) -> None:
        """Connect a client instance: `on_notify(group)` receives its NOTIFY_CONSUMER_IDS_CHANGED
        messages (as scheduled events, `latency_ms` after the broker sends them)."""
        _callable("on_notify", on_notify)
        self._clients[require_str("client_id", client_id)] = on_notify

    def unregister_client(self, client_id: str, *, close: bool = False) -> None:
        """Disconnect a client: its notifications are lost from now on. With `close`, every
        reachable broker sees the connection close (a crashed process): the client leaves its
        groups at once and their other members are notified."""
        self._clients.pop(require_str("client_id", client_id), None)
        if close:
            for addr, endpoint in self._endpoints.items():
                if not endpoint.down:
                    endpoint.broker.client_channel_closed(client_id)
                    self._after_call(addr, False)

    def _after_call(self, addr: str, stored: bool) -> None:
        endpoint = self._endpoints[addr]
        self._drain(addr)
        for client_id, group in endpoint.broker.drain_notifications():
            on_notify = self._clients.get(client_id)
            if on_notify is not None and not endpoint.down:
                self._notify_later(on_notify, group)
        if endpoint.broker.consumer_manager.groups and not endpoint.housekeeping:
            endpoint.housekeeping = True
            self._schedule_housekeeping(addr, self._scheduler.clock.now_ms() + HOUSEKEEPING_MS)
        if stored:
            self._arm_schedule(addr)

    def _notify_later(self, on_notify: Callable[[str], None], group: str) -> None:
        self._scheduler.call_later(self._latency, lambda: on_notify(group), "notify-consumer-ids")

    def _schedule_housekeeping(self, addr: str, at: int) -> None:
        def scan() -> None:
            # ClientHousekeepingService: a fixed-rate scan from the first client on
            self._endpoints[addr].broker.scan_not_active_clients()
            self._schedule_housekeeping(addr, at + HOUSEKEEPING_MS)

        self._scheduler.call_at(at, scan, "client-housekeeping")

    def _arm_schedule(self, addr: str) -> None:
        """Arm the broker's ScheduleMessageService for its earliest due delayed message, unless
        an earlier or equal timer is armed already."""
        endpoint = self._endpoints[addr]
        due = endpoint.broker.next_schedule_delivery_at
        if due is None:
            return
        due = max(due, self._scheduler.clock.now_ms())
        if endpoint.schedule_timer is not None:
            if endpoint.schedule_timer[0] <= due:
                return
            self._scheduler.cancel(endpoint.schedule_timer[1])
        handle = self._scheduler.call_at(due, lambda: self._deliver_due(addr), "schedule-delivery")
        endpoint.schedule_timer = (due, handle)

    def _deliver_due(self, addr: str) -> None:
        # The broker's own timer: it runs whether or not clients can reach the broker
        self._endpoints[addr].schedule_timer = None
        self._endpoints[addr].broker.deliver_due_messages()
        self._after_call(addr, True)

    # -- producing ---------------------------------------------------------------------------

    def send_message(self, addr: str, msg: BrokerInnerMessage) -> PutMessageResult:
        """A producer's send: store `msg` on the broker at `addr`, then deliver the held pulls it
        answered (HOLD-5). Send through here, not to the broker, so those answers leave."""
        if not isinstance(msg, BrokerInnerMessage):
            raise InvalidTypeError("msg", msg, "BrokerInnerMessage")
        return self.invoke(addr, "SEND_MESSAGE", lambda broker: broker.send_message(msg))

    # -- asynchronous pulls ------------------------------------------------------------------

    def pull_message_async(
        self,
        addr: str,
        header: PullMessageRequestHeader,
        timeout_ms: int,
        on_response: OnResponse,
        on_exception: OnException,
    ) -> int:
        """invokeAsync of a PULL_MESSAGE: returns a handle; exactly one of the callbacks runs
        later as a scheduled event. Raises RemotingConnectError at once when `addr` is down."""
        address = require_str("addr", addr)
        if not isinstance(header, PullMessageRequestHeader):
            raise InvalidTypeError("header", header, "PullMessageRequestHeader")
        timeout = require_int("timeout_ms", timeout_ms)
        if timeout <= 0:
            raise InvalidArgumentError("timeout_ms", timeout, "must be > 0")
        _callable("on_response", on_response)
        _callable("on_exception", on_exception)
        self.connect(address)
        pending = _PendingPull(
            self._next_handle, address, header, timeout, on_response, on_exception
        )
        self._next_handle += 1
        self._pending[pending.handle] = pending
        self.sent.append(SentPull(self._scheduler.clock.now_ms(), address, header))
        pending.timeout_event = self._scheduler.call_later(
            timeout, lambda: self._time_out(pending), "pull-timeout"
        )
        if self._latency == 0:
            self._arrive(pending)
        else:
            self._scheduler.call_later(self._latency, lambda: self._arrive(pending), "pull-arrive")
        return pending.handle

    def in_flight(self) -> int:
        """Pulls sent whose callback has not run yet."""
        return len(self._pending)

    def _arrive(self, pending: _PendingPull) -> None:
        endpoint = self._endpoints[pending.addr]
        if endpoint.down or pending.done:
            return  # the request is lost on the way: the client times out
        request_id, response = endpoint.broker.pull_message(to_broker_request(pending.header))
        if response is None:
            endpoint.waiting[request_id] = pending
        else:
            self._respond(endpoint, pending, response)
        self._drain(pending.addr)

    def _respond(self, endpoint: _Endpoint, pending: _PendingPull, response: PullResponse) -> None:
        if endpoint.down or endpoint.drop_responses:
            return
        self._scheduler.call_later(
            self._latency, lambda: self._complete(pending, response), "pull-response"
        )

    def _complete(self, pending: _PendingPull, response: PullResponse) -> None:
        if pending.done:
            return  # answered after its timeout: Netty logs and drops it
        pending.done = True
        del self._pending[pending.handle]
        if pending.timeout_event is not None:
            self._scheduler.cancel(pending.timeout_event)
        pending.on_response(response)

    def _time_out(self, pending: _PendingPull) -> None:
        if pending.done:
            return
        pending.done = True
        del self._pending[pending.handle]
        endpoint = self._endpoints[pending.addr]
        for request_id, waiting in list(endpoint.waiting.items()):
            if waiting is pending:
                del endpoint.waiting[request_id]
        self.timed_out.append(pending.handle)
        pending.on_exception(
            MQClientError(
                f"wait response from {pending.addr} timeout :{pending.timeout_ms}ms. "
                f"Request: PULL_MESSAGE {pending.header.topic}:{pending.header.queue_id}"
            )
        )

    def _drain(self, addr: str) -> None:
        endpoint = self._endpoints[addr]
        for request_id, response in endpoint.broker.drain_responses():
            pending = endpoint.waiting.pop(request_id, None)
            if pending is not None:
                self._respond(endpoint, pending, response)

    def _schedule_hold_check(self, addr: str) -> None:
        broker = self._endpoints[addr].broker
        at = max(self._scheduler.clock.now_ms(), broker.next_hold_check_at)
        self._scheduler.call_at(at, lambda: self._hold_check(addr), "hold-check")

    def _hold_check(self, addr: str) -> None:
        # PullRequestHoldService runs for the broker's whole life, so the event never stops.
        self._endpoints[addr].broker.run_hold_checks()
        self._drain(addr)
        self._schedule_hold_check(addr)

    # -- offsets -----------------------------------------------------------------------------

    def offset_broker_addr(self, broker_name: str, rules: OffsetStoreRules) -> str:
        """OFFSET-7 of `rules` (the client's profile) for `broker_name`, the route refresh giving
        the same route; raises MQClientError("The broker[…] not exist") when there is none."""
        addrs = self.broker_addrs(broker_name)
        addr = rules.offset_broker_address(addrs, addrs)
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        return addr
