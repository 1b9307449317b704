"""`--impl cmd:"<command>"`: a candidate living in another process, spoken to in JSON Lines.

The process reads one request per line on stdin and writes one reply per line on stdout
(docs/protocol.md): `create` opens a fresh instance of an area from a vector config, every other
request is one vector op whose reply is the op's observation. `SubprocessCandidate` makes such a
process look like any Python candidate: its factories (`message_store`, `broker`,
`process_queue`, `lock_manager`, `send_back`) return objects whose methods forward each call as
the matching vector op (`conformance.remote.store`, `conformance.remote.clocked`), so the area
adapters — and with them `pullspec vectors check`, the lockstep machines and the mutation bank —
drive it unchanged; the client areas' adapters send their ops as they are (it is a
`conformance.candidates.Peer`).

A reply that does not come within the timeout is a `CandidateTimeoutError` (verdict TIMEOUT; the
process is killed and restarted on the next `create`); a process that exits or writes something
that is not a reply is `CandidateCrashedError` (verdict CRASHED).
"""

from __future__ import annotations

from pullspec.conformance.candidates import CandidateCrashedError
from pullspec.conformance.jsontypes import JSONObject, is_object
from pullspec.conformance.ops import error_kind
from pullspec.conformance.remote.channel import Channel, CreateRequest, OpRequest
from pullspec.conformance.remote.clocked import PQ_FIELDS, RemoteLockManager, RemoteProcessQueue
from pullspec.conformance.remote.session import (
    VERSION_NAMES,
    RemoteSession,
    broker_config_json,
    raise_error,
    store_config_json,
)
from pullspec.conformance.remote.store import RemoteBroker, RemoteSendBack, RemoteStore
from pullspec.spec.clock import Clock
from pullspec.spec.config import BrokerConfig, StoreConfig, SubscriptionGroupConfig
from pullspec.spec.delay import parse_delay_levels
from pullspec.spec.errors import PullspecError, UnsupportedError
from pullspec.spec.evolve import evolve
from pullspec.spec.process_queue import LOCK_MAX_LIVE_TIME_MS, PULL_MAX_IDLE_TIME_MS
from pullspec.spec.profiles import Profile
from pullspec.spec.ruleset import Ruleset


class SubprocessCandidate:
    """A candidate implemented by an adapter process (see docs/protocol.md)."""

    #: Why the whole-system simulation lockstep cannot run this candidate (conform reports the
    #: `simulation` interface UNSUPPORTED with it): its parts are reached one vector op at a time.
    simulation_unsupported = (
        "a subprocess candidate's store and process queue answer vector ops: a store of one "
        "topic whose reads return offsets, not records, which the whole-system simulation needs"
    )

    def __init__(self, argv: list[str], timeout: float = 10.0) -> None:
        if not argv:
            raise UnsupportedError("cmd: needs a command")
        self.argv = argv
        self.timeout = timeout
        self._channel: Channel | None = None
        #: Instance ids are only valid in the process that made them: (process number, id).
        self._instances: set[tuple[int, int]] = set()
        self._started = 0

    def __repr__(self) -> str:
        return f"SubprocessCandidate({' '.join(self.argv)!r})"

    def _live_channel(self) -> Channel:
        if self._channel is None or not self._channel.alive:
            self._channel = Channel(self.argv, self.timeout)
            self._started += 1
        return self._channel

    def create(self, area: str, config: JSONObject, profile: Profile) -> int:
        """Open a fresh instance of `area`; answer its instance id (the create request's id)."""
        channel = self._live_channel()
        request: CreateRequest = {
            "area": area,
            "op": "create",
            "config": config,
            "profile": profile.value,
        }
        rid, reply = channel.request(request)
        self.check(reply)
        self._instances.add((self._started, rid))
        return rid

    def call(self, instance: int, area: str, op: str, args: JSONObject) -> JSONObject:
        """Run one op on `instance`; answer the raw reply (without its id)."""
        if self._channel is None or (self._started, instance) not in self._instances:
            raise CandidateCrashedError(f"instance {instance} died with its adapter process")
        request: OpRequest = {"area": area, "instance": instance, "op": op, "args": args}
        _, reply = self._channel.request(request)
        return {k: v for k, v in reply.items() if k != "id"}

    def check(self, reply: JSONObject) -> JSONObject:
        """The observation of an `ok` reply; an `error` reply raises its typed error."""
        if "error" in reply:
            error = reply["error"] if is_object(reply["error"]) else {}
            try:
                kind = error_kind(error.get("kind"))
            except PullspecError:
                raise CandidateCrashedError(f"error reply without a known kind: {reply}") from None
            raise_error(kind, str(error.get("message", "")))
        ok = reply.get("ok")
        if not is_object(ok):
            raise CandidateCrashedError(f"reply has neither ok (an object) nor error: {reply}")
        return ok

    def close(self) -> None:
        """Stop the process."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._instances.clear()

    # Factories: the interfaces the adapters ask for (conformance.candidates). ----------------

    def message_store(self, config: StoreConfig, profile: Profile, clock: object) -> RemoteStore:
        """A forwarding message store (area `store`)."""
        return RemoteStore(RemoteSession(self, "store", store_config_json(config), profile))

    def broker(
        self,
        store_config: StoreConfig,
        broker_config: BrokerConfig,
        profile: Profile,
        clock: object,
    ) -> RemoteBroker:
        """A forwarding broker (area `pull_code`); its store forwards to the same instance."""
        config = {**store_config_json(store_config), **broker_config_json(broker_config)}
        return RemoteBroker(RemoteSession(self, "pull_code", config, profile))

    def process_queue(self, clock: Clock, profile: Profile) -> RemoteProcessQueue:
        """A forwarding process queue (area `process_queue`) on RocketMQ's default timings."""
        config: JSONObject = {
            "clockStart": clock.now_ms(),
            "lockMaxLiveTimeMs": LOCK_MAX_LIVE_TIME_MS,
            "pullMaxIdleTimeMs": PULL_MAX_IDLE_TIME_MS,
            "stateFields": list(PQ_FIELDS),
        }
        return RemoteProcessQueue(RemoteSession(self, "process_queue", config, profile), clock)

    def lock_manager(
        self, clock: Clock, lock_max_live_time_ms: int = 60_000, profile: Profile = Profile.V4_9
    ) -> RemoteLockManager:
        """A forwarding lock manager (area `lock_manager`), created with the run's profile."""
        config: JSONObject = {
            "clockStart": clock.now_ms(),
            "lockMaxLiveTimeMs": lock_max_live_time_ms,
            "topic": "T",
            "brokerName": "b",
        }
        return RemoteLockManager(RemoteSession(self, "lock_manager", config, profile), clock)

    def send_back(
        self,
        store_config: StoreConfig,
        group_config: SubscriptionGroupConfig,
        profile: Profile,
        clock: object,
    ) -> RemoteSendBack:
        """A forwarding send-back processor (area `send_back`)."""
        if evolve(group_config, retry_max_times=0, retry_queue_nums=1) != (
            SubscriptionGroupConfig(group_name=group_config.group_name, retry_max_times=0)
        ):
            raise UnsupportedError("a subscription group config beyond the vectors' keys")
        levels = len(parse_delay_levels(store_config.message_delay_level))
        config = {
            **store_config_json(store_config),
            "group": group_config.group_name,
            "groupRetryMaxTimes": group_config.retry_max_times,
            "retryQueueNums": group_config.retry_queue_nums,
            "maxDelayLevel": levels,
            "originalTopic": "T",
            "requestVersion": VERSION_NAMES[Ruleset.of(profile).client_request_version()],
        }
        return RemoteSendBack(RemoteSession(self, "send_back", config, profile))
