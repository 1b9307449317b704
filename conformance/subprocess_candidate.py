"""`--impl cmd:"<command>"`: a candidate living in another process, spoken to in JSON Lines.

The process reads one request per line on stdin and writes one reply per line on stdout
(docs/protocol.md): `create` opens a fresh instance of an area from a vector config, every other
request is one vector op whose reply is the op's observation. `SubprocessCandidate` makes such a
process look like any Python candidate: its factories (`message_store`, `broker`,
`process_queue`, `lock_manager`, `send_back`) return objects whose methods forward each call as
the matching vector op (`conformance.subprocess_remote_store`,
`conformance.subprocess_remote_clocked`), so the area adapters — and with them `pullspec vectors
check`, the lockstep machines and the mutation bank — drive it unchanged.

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
from typing import IO, Any

import attrs

from pullspec.conformance.observe import CandidateCrashedError, CandidateTimeoutError
from pullspec.conformance.ops import error_kind
from pullspec.conformance.subprocess_remote_clocked import (
    PQ_FIELDS,
    RemoteLockManager,
    RemoteProcessQueue,
)
from pullspec.conformance.subprocess_remote_store import (
    _VERSION_NAMES,
    RemoteBroker,
    RemoteSendBack,
    RemoteSession,
    RemoteStore,
    broker_config_json,
    raise_error,
    store_config_json,
)
from pullspec.spec.clock import Clock
from pullspec.spec.config import BrokerConfig, StoreConfig, SubscriptionGroupConfig
from pullspec.spec.delay import parse_delay_levels
from pullspec.spec.errors import PullspecError, UnsupportedError
from pullspec.spec.process_queue import LOCK_MAX_LIVE_TIME_MS, PULL_MAX_IDLE_TIME_MS
from pullspec.spec.profiles import Profile
from pullspec.spec.ruleset import Ruleset

PROTOCOL_VERSION = 1


#: How much of a crashed adapter's stderr a CRASHED verdict quotes: its last lines, whole.
TAIL_LINES = 12
TAIL_CHARS = 2000


def stderr_tail(data: bytes, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last complete lines of `data` (at most `lines` of them, about `chars` characters):
    a traceback's last lines name the error, so they are kept whole rather than cut mid-line.
    A single last line longer than `chars` is kept as its end."""
    text = data.decode("utf-8", errors="replace").rstrip()
    kept: list[str] = []
    size = 0
    for line in reversed(text.splitlines()):
        if kept and (len(kept) == lines or size + len(line) + 1 > chars):
            break
        kept.append(line if len(line) <= chars else "…" + line[-chars:])
        size += len(line) + 1
    return "\n".join(reversed(kept))


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
        tail = stderr_tail(self._stderr.read())
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

    def lock_manager(
        self, clock: Clock, lock_max_live_time_ms: int = 60_000, profile: Profile = Profile.V4_9
    ) -> RemoteLockManager:
        """A forwarding lock manager (area `lock_manager`), created with the run's profile."""
        config = {
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
            "requestVersion": _VERSION_NAMES[Ruleset.of(profile).client_request_version()],
        }
        return RemoteSendBack(RemoteSession(self, "send_back", config, profile))
