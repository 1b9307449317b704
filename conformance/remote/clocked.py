"""The forwarding objects driven by the caller's clock: the process queue and the lock manager
(`SubprocessCandidate`'s `process_queue` and `lock_manager`). Before each call the clock's
progress travels as `advance_clock`, and the state of the last answer serves the reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pullspec.conformance.jsontypes import (
    JSONObject,
    JSONValue,
    as_array,
    as_given,
    as_object,
    to_int,
)
from pullspec.conformance.ops import DEFAULT_STATE_FIELDS
from pullspec.conformance.remote.session import RemoteSession, raise_observed
from pullspec.spec.clock import Clock
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.message import PROPERTY_MAX_OFFSET, MessageQueue, StoredMessage

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


def _stub(offset: int) -> StoredMessage:
    """A returned message of which the protocol only carries the queue offset."""
    return StoredMessage("T", 0, offset, 0, 0, 0, b"")


class _Clocked:
    """A forwarding object driven by the caller's clock: before each call the clock's progress
    is sent as `advance_clock`, and the state of the last answer serves the reads."""

    def __init__(self, session: RemoteSession, clock: Clock) -> None:
        self._s, self._clock = session, clock
        self._now = clock.now_ms()
        self._seen: JSONObject = {}

    def _call(self, op: str, args: JSONObject) -> JSONObject:
        self._sync()
        return self._learn(self._s.call(op, args))

    def _sync(self) -> None:
        delta = self._clock.now_ms() - self._now
        if delta < 0:
            raise UnsupportedError("a clock that moved backwards")
        if delta or not self._seen:  # advance_clock 0 is a pure read of the state
            self._learn(self._s.call("advance_clock", {"ms": delta}))
            self._now += delta

    def _learn(self, seen: JSONObject) -> JSONObject:
        self._seen.update({k: v for k, v in seen.items() if k in ("state", "table", "now")})
        return seen

    def _result(self, op: str, args: JSONObject) -> JSONValue:
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


def _pq_reader(name: str) -> property:
    return property(lambda self: self._read(name), doc=f"{name}, as last observed.")


def _pq_setter(attr: str) -> property:
    def setter(self: RemoteProcessQueue, value: JSONValue) -> None:
        self._result("set", {_PQ_SETTABLE[attr]: value})

    return property(lambda self: self._read(_PQ_SETTABLE[attr]), setter, doc=f"{attr} (set).")


class RemoteProcessQueue(_Clocked):
    """ProcessQueue forwarding to a subprocess (area `process_queue`)."""

    def _read(self, name: str) -> JSONValue:
        self._sync()
        return dict(zip(PQ_FIELDS, as_array(self._seen["state"]), strict=True))[name]

    def put_messages(self, msgs: Sequence[StoredMessage]) -> bool:
        """Forward `put_messages`."""
        return bool(self._result("put_messages", {"msgs": _pq_json(msgs)}))

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        """Forward `remove_messages`."""
        return to_int(self._result("remove_messages", {"msgs": _pq_json(msgs)}))

    def take_messages(self, batch_size: int) -> list[StoredMessage]:
        """Forward `take_messages`; the taken messages come back as their offsets."""
        taken = as_array(self._result("take_messages", {"n": batch_size}))
        return [_stub(as_given(int, o)) for o in taken]

    def commit(self) -> int:
        """Forward `commit`."""
        return to_int(self._result("commit", {}))

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
        args: JSONObject = {"group": group, "clientId": client_id, "mqs": self._ids(mqs)}
        locked = as_array(self._result("try_lock_batch", args))
        return {self._queue(as_given(int, q)) for q in locked}

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Forward `unlock_batch`."""
        self._result("unlock_batch", {"group": group, "clientId": client_id, "mqs": self._ids(mqs)})

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """Forward `is_locked`."""
        args: JSONObject = {"group": group, "clientId": client_id, "mq": self._ids([mq])[0]}
        return bool(self._result("is_locked", args))

    def table(self) -> dict[str, dict[MessageQueue, tuple[str, int]]]:
        """The lock table as last observed (after sending the clock's progress)."""
        self._sync()
        out: dict[str, dict[MessageQueue, tuple[str, int]]] = {}
        for group, locks in as_object(self._seen["table"]).items():
            row = out[group] = {}
            for q, e in as_object(locks).items():
                entry = as_array(e)
                # The subprocess's entry goes on as it gave it: the comparison judges it.
                row[self._queue(int(q))] = (as_given(str, entry[0]), as_given(int, entry[1]))
        return out
