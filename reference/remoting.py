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
- Offset queries and updates are synchronous and take no virtual time (`RemotingOffsetClient`,
  the `BrokerOffsetClient` of `reference.offset_store`).
- Faults are explicit switches: a broker that is down refuses connections (RemotingConnectError,
  thrown synchronously as invokeAsync throws it) and its answers never arrive; a broker whose
  responses are dropped processes requests but its answers never arrive.

PullMessageRequestHeader (client) becomes PullMessageRequest (broker) here and only here.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from reference.broker import ReferenceBroker
from reference.scheduler import Scheduler
from spec.client_errors import MQBrokerError, MQClientError
from spec.code import PullMessageRequest, PullResponse
from spec.errors import (
    InvalidArgumentError,
    InvalidTypeError,
    UnsupportedError,
    require_int,
    require_non_negative,
    require_str,
)
from spec.message import BrokerInnerMessage, MessageQueue
from spec.offset_store import offset_broker_address
from spec.profiles import Profile
from spec.pull_request import PullMessageRequestHeader
from spec.pull_route import V4_1_0_SNAPSHOT
from spec.results import PutMessageResult
from spec.status import ResponseCode

#: The callbacks of an asynchronous pull (InvokeCallback.operationComplete's two outcomes).
OnResponse = Callable[[PullResponse], None]
OnException = Callable[[BaseException], None]


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
        return address

    def broker_addrs(self, broker_name: str) -> dict[int, str]:
        """The route's broker map of `broker_name` (BrokerData.brokerAddrs): id → address, in
        ascending id order, which is a small HashMap<Long, String>'s iteration order."""
        name = require_str("broker_name", broker_name)
        found = {e.broker_id: a for a, e in self._endpoints.items() if e.broker_name == name}
        return dict(sorted(found.items()))

    def broker(self, addr: str) -> ReferenceBroker:
        """The broker registered at `addr`."""
        return self._endpoint(addr).broker

    def broker_version(self, addr: str) -> int:
        """The MQVersion ordinal the broker at `addr` reports (REQ-7)."""
        return self._endpoint(addr).version

    def set_broker_down(self, addr: str, down: bool) -> None:
        """Take the broker at `addr` off the network (True) or bring it back (False)."""
        self._endpoint(addr).down = _bool("down", down)

    def set_drop_responses(self, addr: str, drop: bool) -> None:
        """Lose (True) or deliver (False) every pull answer the broker at `addr` gives."""
        self._endpoint(addr).drop_responses = _bool("drop", drop)

    def _endpoint(self, addr: object) -> _Endpoint:
        address = require_str("addr", addr)
        if address not in self._endpoints:
            raise InvalidArgumentError("addr", address, "no broker registered there")
        return self._endpoints[address]

    def connect(self, addr: str) -> ReferenceBroker:
        """The broker at `addr` for a synchronous call; RemotingConnectError when it is down or
        unknown (getAndCreateChannel fails)."""
        address = require_str("addr", addr)
        endpoint = self._endpoints.get(address)
        if endpoint is None or endpoint.down:
            raise RemotingConnectError(address)
        return endpoint.broker

    # -- producing ---------------------------------------------------------------------------

    def send_message(self, addr: str, msg: BrokerInnerMessage) -> PutMessageResult:
        """A producer's send: store `msg` on the broker at `addr`, then deliver the held pulls it
        answered (HOLD-5). Send through here, not to the broker, so those answers leave."""
        if not isinstance(msg, BrokerInnerMessage):
            raise InvalidTypeError("msg", msg, "BrokerInnerMessage")
        result = self.connect(addr).send_message(msg)
        self._drain(addr)
        return result

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

    def offset_client(self, group: str, profile: Profile) -> RemotingOffsetClient:
        """The BrokerOffsetClient of `group` (QUERY/UPDATE_CONSUMER_OFFSET, OFFSET-7 routing)."""
        return RemotingOffsetClient(self, group, profile)

    def admin(self) -> RemotingAdmin:
        """The MQAdminImpl queries of REBAL-17 (maxOffset, searchOffset)."""
        return RemotingAdmin(self)

    def offset_broker_addr(self, broker_name: str, profile: Profile) -> str:
        """OFFSET-7's address for `broker_name`, the route refresh giving the same route; raises
        MQClientError("The broker[…] not exist") when there is none."""
        addrs = self.broker_addrs(broker_name)
        addr = offset_broker_address(addrs, False, profile)
        if addr is None:
            addr = offset_broker_address(addrs, True, profile)
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        return addr


class RemotingOffsetClient:
    """RemoteBrokerOffsetStore's broker side over the remoting, for one consumer group."""

    def __init__(self, remoting: ReferenceRemoting, group: str, profile: Profile) -> None:
        if not isinstance(remoting, ReferenceRemoting):
            raise InvalidTypeError("remoting", remoting, "ReferenceRemoting")
        self.remoting = remoting
        self.group = require_str("group", group)
        self.profile = Profile.parse(profile)

    def query_offset(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET: the stored offset; MQBrokerError on a non-SUCCESS code,
        MQClientError / RemotingConnectError when there is no reachable broker."""
        queue = _message_queue(mq)
        addr = self.remoting.offset_broker_addr(queue.broker_name, self.profile)
        broker = self.remoting.connect(addr)
        code, offset = broker.query_consumer_offset(self.group, queue.topic, queue.queue_id)
        if code is not ResponseCode.SUCCESS or offset is None:
            raise MQBrokerError(int(code), code.name, addr)
        return offset

    def update_offset(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET (one-way or synchronous); the broker commits it on any role."""
        queue = _message_queue(mq)
        value = require_int("offset", offset)
        _bool("oneway", oneway)
        addr = self.remoting.offset_broker_addr(queue.broker_name, self.profile)
        code = self.remoting.connect(addr).update_consumer_offset(
            self.group, queue.topic, queue.queue_id, value
        )
        if code is not ResponseCode.SUCCESS and not oneway:
            raise MQBrokerError(int(code), code.name, addr)


class RemotingAdmin:
    """MQAdminImpl.maxOffset / searchOffset over the remoting (the OffsetQueries of REBAL-17)."""

    def __init__(self, remoting: ReferenceRemoting) -> None:
        if not isinstance(remoting, ReferenceRemoting):
            raise InvalidTypeError("remoting", remoting, "ReferenceRemoting")
        self.remoting = remoting

    def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET from the master; MQClientError when it is missing or unreachable."""
        queue = _message_queue(mq)
        addr = self.remoting.broker_addrs(queue.broker_name).get(0)
        if addr is None:
            raise MQClientError(f"The broker[{queue.broker_name}] not exist")
        try:
            broker = self.remoting.connect(addr)
        except RemotingConnectError as exc:
            raise MQClientError(f"Invoke Broker[{addr}] exception") from exc
        return broker.store.get_max_offset_in_queue(queue.topic, queue.queue_id)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: not modelled (the reference store keeps no time index)."""
        _message_queue(mq)
        require_int("timestamp_ms", timestamp_ms)
        raise UnsupportedError("searchOffset (CONSUME_FROM_TIMESTAMP) in the reference remoting")


def _message_queue(value: object) -> MessageQueue:
    if not isinstance(value, MessageQueue):
        raise InvalidTypeError("mq", value, "MessageQueue")
    return value
