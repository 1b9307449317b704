"""Candidates: what the conformance suite asks of an implementation it runs (`--impl`).

A candidate is any object with factory attributes named after the interfaces it implements; an
absent factory means the candidate does not implement that interface: its cases are UNSUPPORTED.
`factory(candidate, name)` and `driver_factory(candidate, area)` are where the suite looks a
factory up, and answer it typed.

The broker side hands the suite objects, which the area adapters drive:

- ``message_store(config, profile, clock) -> spec.protocols.MessageStore`` (`MessageStoreFactory`),
  and optionally ``open_store(path, config, profile, clock)`` for a store directory (`StoreOpener`)
- ``broker(store_config, broker_config, profile, clock) -> Broker`` (area `pull_code`)
- ``process_queue(clock, profile) -> spec.protocols.ProcessQueue`` (`ProcessQueueFactory`)
- ``lock_manager(clock, lock_max_live_time_ms, profile=…) -> LockManager`` (`profile` may be left
  out: the lock manager behaves the same in both profiles)
- ``send_back(store_config, group_config, profile, clock) -> SendBack``

Every client area — `pull_loop`, `pull_decision`, `pull_result`, `pull_request`,
`pull_service`, `offset_store`, `allocate`, `rebalance`, `consume_concurrently`,
`consume_orderly`, `process_queue_maintenance` (and `schedule`) — is a factory of the same name
answering an `AreaDriver`: ``candidate.pull_loop(config, profile).apply(op, args)`` runs one op
of the area's vocabulary (docs/protocol.md) on the candidate's own client classes and answers the
observation, exactly as a `cmd:` adapter answers the same op over the subprocess protocol
(`AreaDriverFactory`). The reference's drivers (`reference.areas`) are the worked example:
each wires the reference's own consumer classes to stand-ins for what lies outside the area.
A `cmd:` candidate (`conformance.remote`) is a `Peer`: it answers every area by name, over its
process, and may fail by timing out or crashing (`CandidateTimeoutError`, `CandidateCrashedError`).

`conformance.resolve` turns an `--impl` string into a candidate.

Example::

    class MyClient:
        def pull_loop(self, config, profile):
            return MyPullLoopDriver(config, profile)   # .apply(op, args) -> dict

    pullspec conform --impl mypackage:MyClient --area pull_loop
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Literal, Protocol, overload, runtime_checkable

from pullspec.conformance.jsontypes import JSONObject, JSONValue
from pullspec.spec.clock import Clock
from pullspec.spec.code import PullMessageRequest, PullResponse
from pullspec.spec.config import BrokerConfig, StoreConfig, SubscriptionGroupConfig
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageStore, ProcessQueue
from pullspec.spec.retry import SendBackRequest, SendBackResponse


class Candidate(Protocol):
    """An implementation under test: any object (a module, a class instance, a subprocess). Its
    interfaces are the factory attributes it has, which only `factory` reads, so that every
    factory the suite calls is typed."""


class MessageStoreFactory(Protocol):
    """``candidate.message_store``: a fresh, empty message store (areas `store`, `pull_code`)."""

    def __call__(self, config: StoreConfig, profile: Profile, clock: Clock) -> MessageStore:
        """A fresh store on `clock`."""
        ...


class Broker(Protocol):
    """PullMessageProcessor over a store (area `pull_code`): pulls without long polling."""

    @property
    def store(self) -> MessageStore:
        """The store the broker reads (the setup steps write through it)."""
        ...

    def create_topic(self, topic: str, queue_nums: int = 4, perm: int = 6) -> object:
        """Create (or replace) the topic's config."""
        ...

    def pull_message(self, request: PullMessageRequest) -> tuple[int, PullResponse | None]:
        """(request id, response); the response is None when the pull is held."""
        ...


class StoreOpener(Protocol):
    """``candidate.open_store``: an existing store directory (one a RocketMQ broker wrote, the
    shared `stores/`), opened read-only; without it a case naming a directory is replayed into a
    fresh `message_store`."""

    def __call__(
        self, path: Path, config: StoreConfig, profile: Profile, clock: Clock
    ) -> MessageStore:
        """The store in `path` on `clock`."""
        ...


class BrokerFactory(Protocol):
    """``candidate.broker``: a fresh broker over a fresh store."""

    def __call__(
        self,
        store_config: StoreConfig,
        broker_config: BrokerConfig,
        profile: Profile,
        clock: Clock,
    ) -> Broker:
        """A fresh broker on `clock`."""
        ...


class ProcessQueueFactory(Protocol):
    """``candidate.process_queue``: a fresh, empty ProcessQueue (area `process_queue`)."""

    def __call__(self, clock: Clock, profile: Profile) -> ProcessQueue:
        """A fresh process queue on `clock`."""
        ...


class LockManager(Protocol):
    """RebalanceLockManager (area `lock_manager`)."""

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> Collection[MessageQueue]:
        """Lock what can be locked for `client_id` (LEASE-6); answer those queues."""
        ...

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the listed queues `client_id` owns (LEASE-7)."""
        ...

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """Whether `client_id` holds a live lease on `mq` (LEASE-4)."""
        ...

    def table(self) -> Mapping[str, Mapping[MessageQueue, tuple[str, int]]]:
        """group → queue → (client id, last update timestamp)."""
        ...


class LockManagerFactory(Protocol):
    """``candidate.lock_manager``: a fresh lock manager with a lease of the given length (a
    factory without the `profile` parameter is called without it)."""

    def __call__(
        self, clock: Clock, lock_max_live_time_ms: int, profile: Profile = ...
    ) -> LockManager:
        """A fresh lock manager on `clock`."""
        ...


class SendBack(Protocol):
    """SendMessageProcessor's CONSUMER_SEND_MSG_BACK over a store (area `send_back`)."""

    @property
    def store(self) -> MessageStore:
        """The store the send-backs write to."""
        ...

    @property
    def last_stored(self) -> StoredMessage | None:
        """The record the last send-back appended, or None."""
        ...

    def send_back(
        self, request: SendBackRequest, *, request_version: int | None = None
    ) -> SendBackResponse:
        """Process one send-back (`request_version` defaults to the profile's client)."""
        ...


class SendBackFactory(Protocol):
    """``candidate.send_back``: a fresh processor over a fresh store with one group."""

    def __call__(
        self,
        store_config: StoreConfig,
        group_config: SubscriptionGroupConfig,
        profile: Profile,
        clock: Clock,
    ) -> SendBack:
        """A fresh send-back processor on `clock`."""
        ...


@runtime_checkable
class AreaDriver(Protocol):
    """One fresh instance of a client area: runs its ops (docs/protocol.md, the area's
    vocabulary) and answers each observation as the flat JSON object a vector step expects; a
    RocketMQ failure raises a typed `spec.errors` error, an op it does not implement
    `UnsupportedError`."""

    def apply(self, op: str, args: JSONObject) -> JSONObject:
        """Run `op` with `args`; answer its observation."""
        ...


class AreaDriverFactory(Protocol):
    """``candidate.<area>``: a fresh AreaDriver from a case's config and the profile."""

    def __call__(self, config: Mapping[str, JSONValue], profile: Profile) -> AreaDriver:
        """A fresh instance of the area."""
        ...


@runtime_checkable
class Peer(Protocol):
    """A candidate in another process (`cmd:`, `conformance.remote`): every area by name."""

    def create(self, area: str, config: JSONObject, profile: Profile) -> int:
        """Open a fresh instance of `area`; answer its id."""
        ...

    def call(self, instance: int, area: str, op: str, args: JSONObject) -> JSONObject:
        """Run one op on `instance`; answer the raw reply."""
        ...

    def check(self, reply: JSONObject) -> JSONObject:
        """The observation of an `ok` reply; an `error` reply raises its typed error."""
        ...


class CandidateTimeoutError(TimeoutError):
    """A candidate did not answer within its timeout (verdict TIMEOUT)."""


class CandidateCrashedError(RuntimeError):
    """A candidate's process exited, closed its output or answered something unparseable."""


#: The broker-side interfaces, by factory name.
Interface = Literal[
    "message_store", "open_store", "broker", "process_queue", "lock_manager", "send_back"
]


@overload
def factory(candidate: Candidate, name: Literal["message_store"]) -> MessageStoreFactory: ...
@overload
def factory(candidate: Candidate, name: Literal["open_store"]) -> StoreOpener: ...
@overload
def factory(candidate: Candidate, name: Literal["broker"]) -> BrokerFactory: ...
@overload
def factory(candidate: Candidate, name: Literal["process_queue"]) -> ProcessQueueFactory: ...
@overload
def factory(candidate: Candidate, name: Literal["lock_manager"]) -> LockManagerFactory: ...
@overload
def factory(candidate: Candidate, name: Literal["send_back"]) -> SendBackFactory: ...
def factory(candidate: Candidate, name: Interface) -> object:
    """The candidate's factory of the broker-side interface `name`; UnsupportedError when it
    has none."""
    return _factory(candidate, name)


def has_factory(candidate: Candidate, name: Interface) -> bool:
    """Whether the candidate implements the broker-side interface `name`."""
    return callable(getattr(candidate, name, None))


def driver_factory(candidate: Candidate, area: str) -> AreaDriverFactory | None:
    """The candidate's driver factory of client area `area`, or None when it has none."""
    found = getattr(candidate, area, None)
    return found if callable(found) else None


def _factory(candidate: Candidate, name: str) -> object:
    found = getattr(candidate, name, None)
    if not callable(found):
        raise UnsupportedError(f"the candidate has no {name} factory")
    return found


def name_of(candidate: Candidate) -> str | None:
    """The candidate's NAME (``reference``, ``fast``, a mutant's), when it gives one."""
    name = getattr(candidate, "NAME", None)
    return name if isinstance(name, str) else None


def close(candidate: Candidate) -> None:
    """Stop a candidate's process (a `cmd:` candidate's; the others have none)."""
    stop = getattr(candidate, "close", None)
    if callable(stop):
        stop()
