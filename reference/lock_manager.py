"""The reference RebalanceLockManager: one immutable `spec.lease.LockTable` swapped per call.

Every decision is a LEASE rule of `spec.lease`; this class only reads the injected clock,
validates input and keeps the current table. Java's broker-wide lock and its unlocked fast path
(LEASE-2) collapse into plain sequential calls: there are no threads here.
"""

from __future__ import annotations

from collections.abc import Iterable

from pullspec.spec import lease
from pullspec.spec.clock import Clock
from pullspec.spec.errors import InvalidTypeError, conforms, require_non_negative, require_str
from pullspec.spec.message import MessageQueue


def _require_queue(name: str, value: object) -> MessageQueue:
    if not isinstance(value, MessageQueue):
        raise InvalidTypeError(name, value, "MessageQueue")
    return value


def _require_queues(value: object) -> tuple[MessageQueue, ...]:
    # Java receives a Set<MessageQueue>: duplicates collapse, first occurrence keeps its place.
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidTypeError("mqs", value, "an iterable of MessageQueue")
    items = list(value)
    return tuple(dict.fromkeys(_require_queue(f"mqs[{i}]", v) for i, v in enumerate(items)))


class ReferenceLockManager:
    """The broker's queue-lock manager (spec.lease.LockManager) over an injected clock."""

    def __init__(
        self, clock: Clock, lock_max_live_time_ms: int = lease.REBALANCE_LOCK_MAX_LIVE_TIME_MS
    ) -> None:
        if not conforms(clock, Clock):
            raise InvalidTypeError("clock", clock, "Clock")
        self._max_live = require_non_negative("lock_max_live_time_ms", lock_max_live_time_ms)
        self._clock = clock
        self._table = lease.EMPTY_TABLE

    @property
    def lock_max_live_time_ms(self) -> int:
        """The lease length this manager was built with (LEASE-1), in milliseconds."""
        return self._max_live

    @property
    def state(self) -> lease.LockTable:
        """The current immutable lock table."""
        return self._table

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> set[MessageQueue]:
        """Lock what can be locked for `client_id` in `group` (LEASE-6); return those queues."""
        group = require_str("group", group)
        client_id = require_str("client_id", client_id)
        queues = _require_queues(mqs)
        self._table, granted = lease.try_lock_batch(
            self._table, group, queues, client_id, self._clock.now_ms(), self._max_live
        )
        return set(granted)

    def try_lock(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """Lock one queue (LEASE-5); the broker's request codes never reach it in 4.x."""
        group = require_str("group", group)
        client_id = require_str("client_id", client_id)
        mq = _require_queue("mq", mq)
        now = self._clock.now_ms()
        if self.is_locked(group, mq, client_id):
            return True
        table = self._table
        if group not in table.groups:
            table = lease.LockTable({**table.groups, group: {}})
        ok, entry = lease.try_lock(now, table.entry(group, mq), client_id, self._max_live)
        self._table = table.with_entry(group, mq, entry) if ok else table
        return ok

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the listed queues `client_id` owns in `group` (LEASE-7)."""
        group = require_str("group", group)
        client_id = require_str("client_id", client_id)
        queues = _require_queues(mqs)
        self._table = lease.unlock_batch(self._table, group, queues, client_id)

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """True iff `client_id` holds a live lease on `mq`; true refreshes it (LEASE-4)."""
        group = require_str("group", group)
        client_id = require_str("client_id", client_id)
        mq = _require_queue("mq", mq)
        locked, entry = lease.is_locked(
            self._clock.now_ms(), self._table.entry(group, mq), client_id, self._max_live
        )
        if locked:
            assert entry is not None
            self._table = self._table.with_entry(group, mq, entry)
        return locked

    def table(self) -> dict[str, dict[MessageQueue, tuple[str, int]]]:
        """A snapshot: group → queue → (client_id, last_update_timestamp); mutating it is moot."""
        return {
            group: {mq: (e.client_id, e.last_update_timestamp) for mq, e in locks.items()}
            for group, locks in self._table.groups.items()
        }
