"""`--impl cmd:"<command>"`: a candidate living in another process, spoken to in JSON Lines.

The process reads one request per line on stdin and writes one reply per line on stdout
(docs/protocol.md): `create` opens a fresh instance of an area from a vector config, every other
request is one vector op whose reply is the op's observation. `SubprocessCandidate` makes such a
process look like any Python candidate: its factories (`message_store`, `broker`,
`process_queue`, `lock_manager`, `send_back`) return objects whose methods forward each call as
the matching vector op, so the area adapters — and with them `pullspec vectors check`, the
lockstep machines and the mutation bank — drive it unchanged.

A reply that does not come within the timeout is a `CandidateTimeoutError` (verdict TIMEOUT; the
process is killed and restarted on the next `create`); a process that exits or writes something
that is not a reply is `CandidateCrashedError` (verdict CRASHED).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from typing import IO, Any

import attrs

from conformance.adapters._config import STORE_KEYS
from conformance.adapters.process_queue import DEFAULT_STATE_FIELDS
from conformance.observe import CandidateCrashedError, CandidateTimeoutError
from conformance.ops import error_kind
from spec.clock import Clock
from spec.code import FLAG_SUBSCRIPTION, PullMessageRequest, PullResponse
from spec.config import BrokerConfig, StoreConfig, SubscriptionGroupConfig
from spec.delay import parse_delay_levels
from spec.errors import ErrorKind, PullspecError, UnsupportedError
from spec.filter import ExpressionMessageFilter
from spec.message import PROPERTY_MAX_OFFSET, BrokerInnerMessage, MessageQueue, StoredMessage
from spec.process_queue import LOCK_MAX_LIVE_TIME_MS, PULL_MAX_IDLE_TIME_MS
from spec.profiles import Profile
from spec.results import GetMessageResult, PutMessageResult
from spec.retry import (
    MQ_VERSION_ORDINALS,
    SendBackRequest,
    SendBackResponse,
    profile_request_version,
)
from spec.status import BrokerRole, GetMessageStatus, PutMessageStatus, ResponseCode

PROTOCOL_VERSION = 1


class RemoteError(PullspecError):
    """A typed error the subprocess reported: only its kind travels, never its text."""

    def __init__(self, kind: ErrorKind, message: str = "") -> None:
        self.kind = kind
        super().__init__(f"{kind.value}: {message}" if message else kind.value)


def raise_error(kind: ErrorKind, message: str = "") -> None:
    """Raise the spec error of `kind` (UnsupportedError for UNSUPPORTED, so verdicts match)."""
    if kind is ErrorKind.UNSUPPORTED:
        raise UnsupportedError(message or "the subprocess does not support this")
    raise RemoteError(kind, message)


class Channel:
    """One running adapter process and its line-by-line conversation."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        self.argv = argv
        self.timeout = timeout
        # Kept open for the life of the process (its tail explains a crash); closed in close().
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
        except OSError as exc:
            raise CandidateCrashedError(f"cannot start {argv}: {exc}") from exc
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self._buffer = b""
        self._next_id = 1

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self._proc.poll() is None

    def request(self, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Send one request (an id is added) and return (id, reply)."""
        rid, self._next_id = self._next_id, self._next_id + 1
        line = json.dumps({"id": rid, **payload}, separators=(",", ":")) + "\n"
        try:
            self._stdin.write(line.encode("utf-8"))
            self._stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crashed("its stdin is closed") from None
        raw = self._read_line()
        try:
            reply = json.loads(raw)
        except json.JSONDecodeError:
            raise self._crashed(f"answered a line that is not JSON: {raw[:200]!r}") from None
        if not isinstance(reply, dict) or reply.get("id") != rid:
            raise self._crashed(f"answered {raw[:200]!r} to request {rid}")
        return rid, reply

    def _read_line(self) -> str:
        deadline = time.monotonic() + self.timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self._stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.close()
                    raise CandidateTimeoutError(
                        f"no reply within {self.timeout} s from {self.argv}"
                    )
                chunk = os.read(self._stdout.fileno(), 1 << 16)
                if not chunk:
                    raise self._crashed("closed its stdout")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace")

    def _crashed(self, what: str) -> CandidateCrashedError:
        code = self._stop()
        self._stderr.seek(0)
        tail = self._stderr.read()[-400:].decode("utf-8", errors="replace").strip()
        self._stderr.close()
        return CandidateCrashedError(f"{self.argv} {what} (exit code {code}); stderr: {tail}")

    def _stop(self) -> int:
        """Close stdin, so a well-behaved adapter exits by itself; kill it if it does not."""
        if self._proc.poll() is None:
            try:
                self._stdin.close()
                self._proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        return self._proc.returncode

    def close(self) -> None:
        """Stop the process."""
        self._stop()
        self._stderr.close()


class SubprocessCandidate:
    """A candidate implemented by an adapter process (see docs/protocol.md)."""

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

    def create(self, area: str, config: dict[str, Any], profile: Profile) -> int:
        """Open a fresh instance of `area`; answer its instance id (the create request's id)."""
        channel = self._live_channel()
        rid, reply = channel.request(
            {"area": area, "op": "create", "config": config, "profile": profile.value}
        )
        self.check(reply)
        self._instances.add((self._started, rid))
        return rid

    def call(self, instance: int, area: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run one op on `instance`; answer the raw reply (without its id)."""
        if self._channel is None or (self._started, instance) not in self._instances:
            raise CandidateCrashedError(f"instance {instance} died with its adapter process")
        _, reply = self._channel.request(
            {"area": area, "instance": instance, "op": op, "args": args}
        )
        return {k: v for k, v in reply.items() if k != "id"}

    def check(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The observation of an `ok` reply; an `error` reply raises its typed error."""
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            try:
                kind = error_kind(error.get("kind"))
            except PullspecError:
                raise CandidateCrashedError(f"error reply without a known kind: {reply}") from None
            raise_error(kind, str(error.get("message", "")))
        ok = reply.get("ok")
        if not isinstance(ok, dict):
            raise CandidateCrashedError(f"reply has neither ok (an object) nor error: {reply}")
        return ok

    def close(self) -> None:
        """Stop the process."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._instances.clear()

    # Factories: the interfaces the adapters ask for (conformance.candidates). ------------------

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
        config = {
            "clockStart": clock.now_ms(),
            "lockMaxLiveTimeMs": LOCK_MAX_LIVE_TIME_MS,
            "pullMaxIdleTimeMs": PULL_MAX_IDLE_TIME_MS,
            "stateFields": list(PQ_FIELDS),
        }
        return RemoteProcessQueue(RemoteSession(self, "process_queue", config, profile), clock)

    def lock_manager(self, clock: Clock, lock_max_live_time_ms: int = 60_000) -> RemoteLockManager:
        """A forwarding lock manager (area `lock_manager`)."""
        config = {
            "clockStart": clock.now_ms(),
            "lockMaxLiveTimeMs": lock_max_live_time_ms,
            "topic": "T",
            "brokerName": "b",
        }
        # The lock manager behaves the same in both profiles (the vectors' README).
        return RemoteLockManager(RemoteSession(self, "lock_manager", config, Profile.V4_9), clock)

    def send_back(
        self,
        store_config: StoreConfig,
        group_config: SubscriptionGroupConfig,
        profile: Profile,
        clock: object,
    ) -> RemoteSendBack:
        """A forwarding send-back processor (area `send_back`)."""
        if attrs.evolve(group_config, retry_max_times=0, retry_queue_nums=1) != (
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
            "requestVersion": _VERSION_NAMES[profile_request_version(profile)],
        }
        return RemoteSendBack(RemoteSession(self, "send_back", config, profile))


# -- forwarding objects ------------------------------------------------------------------------

PQ_FIELDS: tuple[str, ...] = (
    *DEFAULT_STATE_FIELDS,
    *("dropped", "locked", "lastLockTimestamp", "lastPullTimestamp", "lastConsumeTimestamp"),
)
_PQ_SETTABLE = {
    "locked": "locked",
    "dropped": "dropped",
    "last_lock_timestamp": "lastLockTimestamp",
    "last_pull_timestamp": "lastPullTimestamp",
}
_FIELD_KEYS = {field: key for key, field in STORE_KEYS.items()}
_VERSION_NAMES = {ordinal: name for name, ordinal in MQ_VERSION_ORDINALS.items()}


def store_config_json(config: StoreConfig) -> dict[str, Any]:
    """A StoreConfig in the vectors' MessageStoreConfig keys (UnsupportedError if inexpressible)."""
    out: dict[str, Any] = {"brokerRole": config.broker_role.value}
    default = StoreConfig()
    for field in attrs.fields(StoreConfig):
        value = getattr(config, field.name)
        if field.name in _FIELD_KEYS:
            out[_FIELD_KEYS[field.name]] = value
        elif field.name != "broker_role" and value != getattr(default, field.name):
            raise UnsupportedError(f"StoreConfig.{field.name} has no vector key")
    return out


def broker_config_json(config: BrokerConfig) -> dict[str, Any]:
    """A BrokerConfig in the vectors' keys (only slaveReadEnable may differ from the default)."""
    if attrs.evolve(config, slave_read_enable=False) != BrokerConfig():
        raise UnsupportedError("a BrokerConfig beyond slaveReadEnable")
    return {"slaveReadEnable": config.slave_read_enable}


def raise_observed(observation: dict[str, Any]) -> None:
    """Raise the typed error an observation carries (after its state was taken in)."""
    if observation.get("error") is not None:
        raise_error(error_kind(observation["error"]))


class RemoteSession:
    """One remote instance, created at its first op so that config learnt late still goes into
    `create`; a config change after that recreates it and replays its ops, which must answer
    exactly as before (a candidate that does not is not deterministic: CRASHED)."""

    def __init__(
        self, peer: SubprocessCandidate, area: str, config: dict[str, Any], profile: Profile
    ) -> None:
        self.peer, self.area, self.config, self.profile = peer, area, config, profile
        self._instance: int | None = None
        self._history: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def configure(self, **changes: Any) -> None:
        """Set create-config keys; recreate and replay when they change a live instance."""
        if all(self.config.get(k) == v for k, v in changes.items()):
            return
        self.config.update(changes)
        if self._instance is None:
            return
        history, self._history, self._instance = self._history, [], None
        for op, args, reply in history:
            if self._raw(op, args) != reply:
                raise CandidateCrashedError(f"replaying {op} {args} answered differently")

    def _raw(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        if self._instance is None:
            self._instance = self.peer.create(self.area, self.config, self.profile)
        reply = self.peer.call(self._instance, self.area, op, args)
        self._history.append((op, args, reply))
        return reply

    def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run one op and answer its observation (a top-level error reply raises)."""
        return self.peer.check(self._raw(op, args))


def _stub(offset: int) -> StoredMessage:
    """A returned message of which the protocol only carries the queue offset."""
    return StoredMessage("T", 0, offset, 0, 0, 0, b"")


def _message_json(msg: BrokerInnerMessage) -> dict[str, Any]:
    plain = BrokerInnerMessage(
        msg.topic, msg.queue_id, bytes(len(msg.body)), reconsume_times=msg.reconsume_times
    )
    if attrs.evolve(msg, properties=()) != plain or set(dict(msg.properties)) - {"TAGS"}:
        raise UnsupportedError("a message beyond {queueId, tags, bodySize, reconsumeTimes}")
    out: dict[str, Any] = {"queueId": msg.queue_id, "tags": msg.tags, "bodySize": len(msg.body)}
    if msg.reconsume_times:
        out["reconsumeTimes"] = msg.reconsume_times
    return out


@attrs.frozen
class RemoteGetMessageResult(GetMessageResult):
    """A getMessage answer whose records stayed in the subprocess: offsets and total size only."""

    offsets: tuple[int, ...] = ()
    total_size: int = 0

    @property
    def buffer_total_size(self) -> int:
        """The total size the subprocess reported."""
        return self.total_size

    @property
    def msg_offsets(self) -> list[int]:
        """The queue offsets the subprocess reported."""
        return list(self.offsets)


class RemoteStore:
    """MessageStore forwarding to a subprocess (area `store`, or the store of a broker or
    send-back session). Offsets are those of the last put, delete or role switch."""

    def __init__(self, session: RemoteSession) -> None:
        self._s = session
        self._seen: dict[str, Any] = {}
        self._role = BrokerRole(session.config.get("brokerRole", "ASYNC_MASTER"))
        self._check = bool(session.config.get("offsetCheckInSlave", False))

    @property
    def broker_role(self) -> BrokerRole:
        """The role last set."""
        return self._role

    @property
    def offset_check_in_slave(self) -> bool:
        """offsetCheckInSlave last set."""
        return self._check

    def _learn(self, observation: dict[str, Any]) -> dict[str, Any]:
        self._seen.update({k: v for k, v in observation.items() if k not in ("results", "error")})
        return observation

    def set_role(self, broker_role: BrokerRole, offset_check_in_slave: bool) -> None:
        """Forward `set_role`."""
        args = {"brokerRole": broker_role.value, "offsetCheckInSlave": offset_check_in_slave}
        raise_observed(self._learn(self._s.call("set_role", args)))
        self._role, self._check = broker_role, offset_check_in_slave

    def put_messages(self, msgs: list[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Forward `put`."""
        key = "originalTopic" if self._s.area == "send_back" else "topic"
        for m in msgs:
            self._s.configure(**{key: m.topic})
        seen = self._learn(self._s.call("put", {"msgs": [_message_json(m) for m in msgs]}))
        raise_observed(seen)
        return [
            PutMessageResult(
                PutMessageStatus(r["status"]),
                r.get("queueOffset", -1),
                r.get("wroteOffset", -1),
                r.get("wroteBytes", 0),
            )
            for r in seen["results"]
        ]

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """Forward a one-message `put`."""
        return self.put_messages([msg])[0]

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: object = None,
    ) -> GetMessageResult:
        """Forward `get_message` (a TAG ExpressionMessageFilter or none)."""
        if message_filter is not None and not isinstance(message_filter, ExpressionMessageFilter):
            raise UnsupportedError("a filter other than a TAG expression")
        sub = message_filter.subscription if message_filter else None
        args = {
            "queueId": queue_id,
            "offset": offset,
            "maxMsgNums": max_msg_nums,
            "subscription": sub.sub_string if sub else None,
            "group": group,
            "topic": topic,
        }
        seen = self._s.call("get_message", args)
        raise_observed(seen)
        return RemoteGetMessageResult(
            GetMessageStatus(seen["status"]),
            seen["nextBeginOffset"],
            seen["minOffset"],
            seen["maxOffset"],
            suggest_pulling_from_slave=seen["suggestPullingFromSlave"],
            offsets=tuple(seen["msgOffsets"]),
            total_size=seen["bufferTotalSize"],
        )

    def delete_expired_files(self) -> int:
        """Forward `delete_expired` (the count of deleted files does not travel: 0)."""
        raise_observed(self._learn(self._s.call("delete_expired", {})))
        return 0

    def _cached(self, key: str, *path: str) -> int:
        value: Any = self._seen.get(key)
        for p in path:
            value = value.get(p) if isinstance(value, dict) else None
        if not isinstance(value, int):
            raise UnsupportedError(f"{key} {'.'.join(path)} was not observed yet")
        return value

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's min offset as last observed."""
        return self._cached("queues", str(queue_id), "minOffset")

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's max offset as last observed."""
        return self._cached("queues", str(queue_id), "maxOffset")

    def get_min_phy_offset(self) -> int:
        """The commit-log min offset as last observed."""
        return self._cached("commitLogMinOffset")

    def get_max_phy_offset(self) -> int:
        """The commit-log max offset as last observed."""
        return self._cached("commitLogMaxOffset")


@attrs.frozen(kw_only=True)
class RemotePullResponse(PullResponse):
    """A pull answer whose records stayed in the subprocess: their queue offsets only."""

    offsets: tuple[int, ...] = ()

    @property
    def msg_offsets(self) -> list[int]:
        """The queue offsets the subprocess reported."""
        return list(self.offsets)


class RemoteBroker:
    """The broker's pull path forwarding to a subprocess (area `pull_code`)."""

    def __init__(self, session: RemoteSession) -> None:
        self._s = session
        #: The same remote instance, for the setup steps.
        self.store = RemoteStore(session)

    def create_topic(self, topic: str, queue_nums: int = 4, perm: int = 6) -> None:
        """Record the topic for `create` (config `topic`, `topicQueueNums`)."""
        if perm != 6:
            raise UnsupportedError("a topic permission other than read-write")
        self._s.configure(topic=topic, topicQueueNums=queue_nums)

    def pull_message(self, request: PullMessageRequest) -> tuple[int, PullResponse]:
        """Forward `pull` (no suspend flag, no piggy-backed commit)."""
        wanted = FLAG_SUBSCRIPTION if request.subscription is not None else 0
        if request.sys_flag != wanted or request.expression_type not in (None, "TAG"):
            raise UnsupportedError("a pull beyond {queueId, offset, maxMsgNums, subscription}")
        self._s.configure(group=request.consumer_group, topic=request.topic)
        args = {
            "queueId": request.queue_id,
            "offset": request.queue_offset,
            "maxMsgNums": request.max_msg_nums,
            "subscription": request.subscription,
        }
        seen = self._s.call("pull", args)
        raise_observed(seen)
        status = seen.get("status")
        return 0, RemotePullResponse(
            code=ResponseCode[seen["code"]],
            status=GetMessageStatus(status) if status is not None else None,
            next_begin_offset=seen.get("nextBeginOffset"),
            min_offset=seen.get("minOffset"),
            max_offset=seen.get("maxOffset"),
            suggest_which_broker_id=seen.get("suggestWhichBrokerId", 0),
            offsets=tuple(seen.get("msgOffsets") or ()),
        )


class _Clocked:
    """A forwarding object driven by the caller's clock: before each call the clock's progress
    is sent as `advance_clock`, and the state of the last answer serves the reads."""

    def __init__(self, session: RemoteSession, clock: Clock) -> None:
        self._s, self._clock = session, clock
        self._now = clock.now_ms()
        self._seen: dict[str, Any] = {}

    def _call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        self._sync()
        return self._learn(self._s.call(op, args))

    def _sync(self) -> None:
        delta = self._clock.now_ms() - self._now
        if delta < 0:
            raise UnsupportedError("a clock that moved backwards")
        if delta or not self._seen:  # advance_clock 0 is a pure read of the state
            self._learn(self._s.call("advance_clock", {"ms": delta}))
            self._now += delta

    def _learn(self, seen: dict[str, Any]) -> dict[str, Any]:
        self._seen.update({k: v for k, v in seen.items() if k in ("state", "table", "now")})
        return seen

    def _result(self, op: str, args: dict[str, Any]) -> Any:
        seen = self._call(op, args)
        raise_observed(seen)
        return seen.get("result")


def _pq_json(msgs: Sequence[StoredMessage]) -> list[list[int]]:
    out: list[list[int]] = []
    for m in msgs:
        if set(dict(m.properties)) - {PROPERTY_MAX_OFFSET}:
            raise UnsupportedError("a cached message property other than MAX_OFFSET")
        max_offset = m.get_property(PROPERTY_MAX_OFFSET)
        out.append([m.queue_offset, len(m.body)] + ([int(max_offset)] if max_offset else []))
    return out


def _pq_reader(name: str) -> Any:
    return property(lambda self: self._read(name), doc=f"{name}, as last observed.")


def _pq_setter(attr: str) -> Any:
    def setter(self: RemoteProcessQueue, value: Any) -> None:
        self._result("set", {_PQ_SETTABLE[attr]: value})

    return property(lambda self: self._read(_PQ_SETTABLE[attr]), setter, doc=f"{attr} (set).")


class RemoteProcessQueue(_Clocked):
    """ProcessQueue forwarding to a subprocess (area `process_queue`)."""

    def _read(self, name: str) -> Any:
        self._sync()
        return dict(zip(PQ_FIELDS, self._seen["state"], strict=True))[name]

    def put_messages(self, msgs: Sequence[StoredMessage]) -> bool:
        """Forward `put_messages`."""
        return bool(self._result("put_messages", {"msgs": _pq_json(msgs)}))

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        """Forward `remove_messages`."""
        return int(self._result("remove_messages", {"msgs": _pq_json(msgs)}))

    def take_messages(self, batch_size: int) -> list[StoredMessage]:
        """Forward `take_messages`; the taken messages come back as their offsets."""
        return [_stub(o) for o in self._result("take_messages", {"n": batch_size})]

    def commit(self) -> int:
        """Forward `commit`."""
        return int(self._result("commit", {}))

    def rollback(self) -> None:
        """Forward `rollback`."""
        self._result("rollback", {})

    def make_messages_to_consume_again(self, msgs: Sequence[StoredMessage]) -> None:
        """Forward `make_messages_to_consume_again`."""
        self._result("make_messages_to_consume_again", {"msgs": _pq_json(msgs)})

    def is_lock_expired(self) -> bool:
        """isLockExpired at the clock's now."""
        return bool(self._read("isLockExpired"))

    def is_pull_expired(self) -> bool:
        """isPullExpired at the clock's now."""
        return bool(self._read("isPullExpired"))

    msg_count = _pq_reader("msgCount")
    msg_size = _pq_reader("msgSize")
    max_span = _pq_reader("maxSpan")
    queue_offset_max = _pq_reader("queueOffsetMax")
    msg_acc_cnt = _pq_reader("msgAccCnt")
    consuming = _pq_reader("consuming")
    cached_offsets = _pq_reader("cachedOffsets")
    consuming_offsets = _pq_reader("consumingOffsets")
    last_consume_timestamp = _pq_reader("lastConsumeTimestamp")
    locked = _pq_setter("locked")
    dropped = _pq_setter("dropped")
    last_lock_timestamp = _pq_setter("last_lock_timestamp")
    last_pull_timestamp = _pq_setter("last_pull_timestamp")


class RemoteLockManager(_Clocked):
    """RebalanceLockManager forwarding to a subprocess (area `lock_manager`); queues travel as
    their ids and come back as the MessageQueue objects the caller used."""

    def __init__(self, session: RemoteSession, clock: Clock) -> None:
        super().__init__(session, clock)
        self._queues: dict[int, MessageQueue] = {}

    def _ids(self, mqs: Iterable[MessageQueue]) -> list[int]:
        ids = []
        for mq in mqs:
            if self._queues.setdefault(mq.queue_id, mq) != mq:
                raise UnsupportedError("two queues with the same id (ids name queues)")
            ids.append(mq.queue_id)
        return ids

    def _queue(self, queue_id: int) -> MessageQueue:
        return self._queues.get(queue_id) or MessageQueue("T", "b", queue_id)

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> set[MessageQueue]:
        """Forward `try_lock_batch`."""
        args = {"group": group, "clientId": client_id, "mqs": self._ids(mqs)}
        return {self._queue(q) for q in self._result("try_lock_batch", args)}

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Forward `unlock_batch`."""
        self._result("unlock_batch", {"group": group, "clientId": client_id, "mqs": self._ids(mqs)})

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """Forward `is_locked`."""
        args = {"group": group, "clientId": client_id, "mq": self._ids([mq])[0]}
        return bool(self._result("is_locked", args))

    def table(self) -> dict[str, dict[MessageQueue, tuple[str, int]]]:
        """The lock table as last observed (after sending the clock's progress)."""
        self._sync()
        return {
            group: {self._queue(int(q)): (e[0], e[1]) for q, e in locks.items()}
            for group, locks in self._seen["table"].items()
        }


class RemoteSendBack:
    """CONSUMER_SEND_MSG_BACK forwarding to a subprocess (area `send_back`)."""

    def __init__(self, session: RemoteSession) -> None:
        self._s = session
        #: The same remote instance, for the `put` steps.
        self.store = RemoteStore(session)
        self._last: StoredMessage | None = None

    @property
    def last_stored(self) -> StoredMessage | None:
        """The record the last send-back appended, as the subprocess described it."""
        return self._last

    def send_back(
        self, request: SendBackRequest, *, request_version: int | None = None
    ) -> SendBackResponse:
        """Forward `send_back` (the request version travels in the create config)."""
        if request.origin_msg_id is not None or request.unit_mode:
            raise UnsupportedError("a send-back beyond the vectors' header fields")
        version = (
            profile_request_version(self._s.profile) if request_version is None else request_version
        )
        if version not in _VERSION_NAMES:
            raise UnsupportedError(f"request version {version} has no name")
        self._s.configure(
            requestVersion=_VERSION_NAMES[version],
            originalTopic=request.origin_topic or self._s.config["originalTopic"],
        )
        args = {
            "originalCommitLogOffset": request.offset,
            "group": request.group,
            "delayLevel": request.delay_level,
            "maxReconsumeTimes": request.max_reconsume_times,
        }
        seen = self._s.call("send_back", args)
        raise_observed(seen)
        stored = seen.get("stored")
        self._last = None
        if stored is not None:
            self._last = StoredMessage(
                stored["topic"], stored["queueId"], 0, 0, 0, 0, b"",
                properties=stored.get("properties") or {},
                reconsume_times=stored["reconsumeTimes"],
            )  # fmt: skip
        return SendBackResponse(ResponseCode[seen["code"]], seen.get("remark"))
