"""LEASE — the broker's RebalanceLockManager: queue locks that orderly consumers lease per group.

State is group → MessageQueue → `LockEntry` (owner, last refresh). Every rule here is a pure
function over one entry or over an immutable `LockTable`; the clock reading `now` and the lease
length `max_live` are arguments, so the same rule serves the reference model, the fast
implementation and the tests. RebalanceLockManager is byte-identical at rocketmq-all-4.7.1 and
rocketmq-all-4.9.7, so every rule has one variant.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

import attrs

from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.evolve import evolve
from pullspec.spec.message import MessageQueue
from pullspec.spec.rules import rule
from pullspec.spec.status import ResponseCode

#: The system property LEASE-1 reads, once, when the class is first used.
LOCK_MAX_LIVE_TIME_PROPERTY = "rocketmq.broker.rebalance.lockMaxLiveTime"
#: The default broker lease length (LEASE-1), in milliseconds.
REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000
#: RequestCode.LOCK_BATCH_MQ and RequestCode.UNLOCK_BATCH_MQ (LEASE-8).
LOCK_BATCH_MQ = 41
UNLOCK_BATCH_MQ = 42

_JAVA_LONG_MIN = -(2**63)
_JAVA_LONG_MAX = 2**63 - 1
# Long.parseLong: an optional sign, then digits (Character.digit accepts any Unicode digit).
_JAVA_LONG = re.compile(r"[+-]?\d+")


@attrs.frozen
class LockEntry:
    """One lease (RebalanceLockManager.LockEntry): the owning client and its last refresh time."""

    client_id: str
    last_update_timestamp: int


GroupLocks = Mapping[MessageQueue, LockEntry]


def _freeze(groups: Mapping[str, Mapping[MessageQueue, LockEntry]]) -> Mapping[str, GroupLocks]:
    return types.MappingProxyType(
        {g: types.MappingProxyType(dict(locks)) for g, locks in groups.items()}
    )


@attrs.frozen
class LockTable:
    """The whole lock table, immutable: group → MessageQueue → LockEntry (LEASE-2)."""

    groups: Mapping[str, GroupLocks] = attrs.field(factory=dict, converter=_freeze, hash=False)

    def entry(self, group: str, mq: MessageQueue) -> LockEntry | None:
        """The entry of `mq` in `group`, or None when the group or the queue has none."""
        locks = self.groups.get(group)
        return None if locks is None else locks.get(mq)

    def with_entry(self, group: str, mq: MessageQueue, entry: LockEntry) -> LockTable:
        """A copy with `entry` stored for `mq`, creating the group map when it is absent."""
        groups = dict(self.groups)
        groups[group] = {**groups.get(group, {}), mq: entry}
        return LockTable(groups)

    def without_entry(self, group: str, mq: MessageQueue) -> LockTable:
        """A copy with `mq` removed from `group`; the group map stays even when it empties."""
        groups = dict(self.groups)
        groups[group] = {q: e for q, e in groups.get(group, {}).items() if q != mq}
        return LockTable(groups)


EMPTY_TABLE = LockTable()


@rule("LEASE-1", source="RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME", seeds=())
def lock_max_live_time(system_property: str | None) -> int:
    """The broker lease length is the system property rocketmq.broker.rebalance.lockMaxLiveTime
    parsed as a Java long, 60000 ms when the property is unset, read once per broker process.

    post: system_property is not None or __return__ == 60000
    post: -(2**63) <= __return__ < 2**63
    raises: InvalidArgumentError
    """
    # Check that the property is set at all.
    if system_property is None:
        return REBALANCE_LOCK_MAX_LIVE_TIME_MS
    # Check that Long.parseLong accepts the text (otherwise the class fails to initialise).
    if not _JAVA_LONG.fullmatch(system_property):
        raise InvalidArgumentError(LOCK_MAX_LIVE_TIME_PROPERTY, system_property, "not a long")
    value = int(system_property)
    # Check that the value fits a Java long.
    if not _JAVA_LONG_MIN <= value <= _JAVA_LONG_MAX:
        raise InvalidArgumentError(LOCK_MAX_LIVE_TIME_PROPERTY, system_property, "out of range")
    return value


@rule("LEASE-2", source="RebalanceLockManager.LockEntry.<init>", seeds=())
def new_lock_entry(client_id: str, now: int) -> LockEntry:
    """A new lock entry belongs to the client that created it and carries its creation time as
    its last update timestamp.

    post: __return__.client_id == client_id
    post: __return__.last_update_timestamp == now
    """
    return LockEntry(client_id, now)


@rule("LEASE-3", source="RebalanceLockManager.LockEntry.isExpired", seeds=())
def is_expired(now: int, entry: LockEntry, max_live: int) -> bool:
    """An entry is expired exactly when strictly more than the lease length has passed since its
    last update, so it is still live at +max_live ms and expired from +max_live+1 ms.

    post: __return__ == (now > entry.last_update_timestamp + max_live)
    post: __return__ or now - entry.last_update_timestamp <= max_live
    """
    # The lease outlived its length; equality is still live.
    return now - entry.last_update_timestamp > max_live


def holds(now: int, entry: LockEntry, client_id: str, max_live: int) -> bool:
    """LockEntry.isLocked (LEASE-3): `client_id` owns `entry` and the entry is not expired."""
    return entry.client_id == client_id and not is_expired(now, entry, max_live)


def free_for(now: int, entry: LockEntry | None, client_id: str, max_live: int) -> bool:
    """The LEASE-5 grant condition: no entry, the caller's own entry, or an expired one."""
    return entry is None or entry.client_id == client_id or is_expired(now, entry, max_live)


def changed_queues(before: LockTable, after: LockTable, group: str) -> frozenset[MessageQueue]:
    """The queues of `group` whose entries differ between two tables (added, removed, changed)."""
    old, new = before.groups.get(group, {}), after.groups.get(group, {})
    return frozenset(q for q in {*old, *new} if old.get(q) != new.get(q))


@rule("LEASE-4", source="RebalanceLockManager.isLocked", seeds=())
def is_locked(
    now: int, entry: LockEntry | None, client_id: str, max_live: int
) -> tuple[bool, LockEntry | None]:
    """A queue is locked by a client iff its entry exists, is owned by that client and is not
    expired, and a true answer refreshes the entry's timestamp to now while false changes nothing.

    post: __return__[0] == (entry is not None and holds(now, entry, client_id, max_live))
    post: __return__[1] == (LockEntry(client_id, now) if __return__[0] else entry)
    """
    # Check that there is an entry for the queue (an absent group or queue is simply unlocked).
    if entry is None:
        return False, None
    # Check that the caller owns the entry and its lease is live.
    if not holds(now, entry, client_id, max_live):
        return False, entry
    return True, evolve(entry, last_update_timestamp=now)


@rule("LEASE-5", source="RebalanceLockManager.tryLock", seeds=())
def try_lock(
    now: int, entry: LockEntry | None, client_id: str, max_live: int
) -> tuple[bool, LockEntry]:
    """A client's lock attempt succeeds, leaving an entry it owns stamped now, iff the queue has
    no entry, its entry is the client's own, or its entry is expired, and otherwise leaves the
    other client's live entry untouched.

    post: __return__[0] == free_for(now, entry, client_id, max_live)
    post: __return__[1] == (LockEntry(client_id, now) if __return__[0] else entry)
    """
    # The queue has an entry at all; a free queue is created for the caller.
    if entry is None:
        return True, new_lock_entry(client_id, now)
    # Whether the caller already holds the live lease (then it is only refreshed).
    if holds(now, entry, client_id, max_live):
        return True, evolve(entry, last_update_timestamp=now)
    # The entry has expired: whoever owned it, the caller takes it over.
    if is_expired(now, entry, max_live):
        return True, LockEntry(client_id, now)
    return False, entry


@rule("LEASE-6", source="RebalanceLockManager.tryLockBatch", seeds=())
def try_lock_batch(
    table: LockTable,
    group: str,
    mqs: tuple[MessageQueue, ...],
    client_id: str,
    now: int,
    max_live: int,
) -> tuple[LockTable, frozenset[MessageQueue]]:
    """A batch lock first grants and refreshes every queue the client already holds live, then
    applies the single-queue lock rule to the others (creating the group map only when some
    remain), and returns the granted subset without ever failing as a whole.

    The rulebook's LEASE-5 wording ("create the group map if absent") is refined here, as the
    recorded vectors confirm: an empty batch, or one the client already holds entirely, does
    not create an absent group.

    pre: len(set(mqs)) == len(mqs)
    post: __return__[1] <= frozenset(mqs)
    post: all(__return__[0].entry(group, q) == LockEntry(client_id, now) for q in __return__[1])
    post: changed_queues(table, __return__[0], group) <= __return__[1]
    post: (group in __return__[0].groups) == (group in table.groups or len(mqs) > 0)
    """
    granted: set[MessageQueue] = set()
    pending: list[MessageQueue] = []
    # Phase 1 (no broker lock in Java): leases the caller already holds are refreshed
    for mq in mqs:
        locked, entry = is_locked(now, table.entry(group, mq), client_id, max_live)
        # Check that the caller holds this queue already.
        if locked:
            assert entry is not None
            table = table.with_entry(group, mq, entry)
            granted.add(mq)
        else:
            pending.append(mq)
    # Anything is left for phase 2; only phase 2 creates an absent group map, so an
    # empty batch leaves an unknown group absent (as the vectors show)
    if not pending:
        return table, frozenset(granted)
    if group not in table.groups:
        table = LockTable({**table.groups, group: {}})
    # Phase 2 (under the broker lock): the single-queue rule, failures are left out
    for mq in pending:
        ok, entry = try_lock(now, table.entry(group, mq), client_id, max_live)
        # This queue was granted; a refused queue keeps the other client's entry.
        if ok:
            table = table.with_entry(group, mq, entry)
            granted.add(mq)
    return table, frozenset(granted)


@rule("LEASE-7", source="RebalanceLockManager.unlockBatch", seeds=())
def unlock_batch(
    table: LockTable, group: str, mqs: tuple[MessageQueue, ...], client_id: str
) -> LockTable:
    """A batch unlock removes every listed entry the client owns whether or not it has expired,
    keeps entries of other clients, ignores queues without an entry, leaves an unknown group
    absent and keeps a group map that it empties.

    post: set(__return__.groups) == set(table.groups)
    post: changed_queues(table, __return__, group) <= frozenset(mqs)
    post: all(__return__.entry(group, q) is None for q in changed_queues(table, __return__, group))
    post: all(getattr(__return__.entry(group, q), "client_id", None) != client_id for q in mqs)
    """
    # The group exists; an unknown group is only logged.
    if group not in table.groups:
        return table
    for mq in mqs:
        entry = table.entry(group, mq)
        # The caller owns the entry; expiry does not matter here, unlike LEASE-5.
        if entry is not None and entry.client_id == client_id:
            table = table.without_entry(group, mq)
    return table


@rule("LEASE-8", source="AdminBrokerProcessor.lockBatchMQ; unlockBatchMQ", seeds=())
def lease_response_code(request_code: int, broker_is_slave: bool) -> int:
    """LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) always answer SUCCESS, on a master and a slave
    alike, with the granted queues as lockOKMQSet for a lock request.

    pre: request_code in (41, 42)
    post: __return__ == 0
    """
    # The request is one of the two lock requests; the broker role is never consulted.
    if request_code not in (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ):
        raise InvalidArgumentError("request_code", request_code, "not a lock request code")
    return int(ResponseCode.SUCCESS)


@rule("LEASE-9", source="RebalanceLockManager; ClientHousekeepingService", seeds=())
def on_client_gone(table: LockTable, client_id: str) -> LockTable:
    """A client whose connection closes or that unregisters keeps its entries, and no sweep ever
    removes an expired one; only a takeover (LEASE-5) or its owner's unlock (LEASE-7) does.

    post: __return__ == table
    """
    return table


@runtime_checkable
class LockManager(Protocol):
    """The broker's queue-lock manager (RebalanceLockManager) as consumers and tests see it."""

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> set[MessageQueue]:
        """Lock what can be locked for `client_id` in `group` (LEASE-6); return those queues."""
        ...

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the listed queues `client_id` owns in `group` (LEASE-7)."""
        ...

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """True iff `client_id` holds a live lease on `mq`; true refreshes it (LEASE-4)."""
        ...

    def table(self) -> Mapping[str, Mapping[MessageQueue, tuple[str, int]]]:
        """A read-only snapshot: group → queue → (client_id, last_update_timestamp)."""
        ...
