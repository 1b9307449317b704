"""Mutants of the broker's RebalanceLockManager (ReferenceLockManager); seen by the
lock_manager area."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pullspec.conformance.mutants._patch import Candidate, mutate, wrap
from pullspec.conformance.mutants.base import Mutant
from pullspec.spec import lease
from pullspec.spec.clock import Clock
from pullspec.spec.lease import LockEntry, LockTable
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

if TYPE_CHECKING:
    from pullspec.reference.lock_manager import ReferenceLockManager

_LEASE = "pullspec.spec.lease"


def _lease_mutant(name: str, rule: str, doc: str, replace: Mapping[str, object]) -> Mutant:
    def build() -> Candidate:
        from pullspec.reference.lock_manager import ReferenceLockManager

        manager_class = mutate(ReferenceLockManager, {_LEASE: replace})

        def lock_manager(
            clock: Clock, lock_max_live_time_ms: int = 60_000, profile: Profile = Profile.V4_9
        ) -> ReferenceLockManager:
            return manager_class(clock, lock_max_live_time_ms)

        return Candidate(name, lock_manager=lock_manager)

    return Mutant(name, rule, ("lock_manager",), doc, build)


def _no_refresh(
    f: Callable[[int, LockEntry | None, str, int], tuple[bool, LockEntry | None]],
    now: int,
    entry: LockEntry | None,
    client_id: str,
    max_live: int,
    /,
) -> tuple[bool, LockEntry | None]:
    locked, _ = f(now, entry, client_id, max_live)
    return locked, entry


def _takeover_keeps_timestamp(
    f: Callable[[int, LockEntry | None, str, int], tuple[bool, LockEntry]],
    now: int,
    entry: LockEntry | None,
    client_id: str,
    max_live: int,
    /,
) -> tuple[bool, LockEntry]:
    from pullspec.spec.lease import holds

    ok, new = f(now, entry, client_id, max_live)
    if ok and entry is not None and not holds(now, entry, client_id, max_live):
        return ok, LockEntry(client_id, entry.last_update_timestamp)
    return ok, new


def _unlock_any_owner(
    f: Callable[[LockTable, str, tuple[MessageQueue, ...], str], LockTable],
    table: LockTable,
    group: str,
    mqs: tuple[MessageQueue, ...],
    client_id: str,
    /,
) -> LockTable:
    for mq in mqs:
        entry = table.entry(group, mq)
        if entry is not None:
            table = table.without_entry(group, mq)
    return table


def _empty_batch_creates_group(
    f: Callable[
        [LockTable, str, tuple[MessageQueue, ...], str, int, int],
        tuple[LockTable, frozenset[MessageQueue]],
    ],
    table: LockTable,
    group: str,
    mqs: tuple[MessageQueue, ...],
    client_id: str,
    now: int,
    max_live: int,
    /,
) -> tuple[LockTable, frozenset[MessageQueue]]:
    if group not in table.groups:
        table = LockTable({**table.groups, group: {}})
    return f(table, group, mqs, client_id, now, max_live)


MUTANTS: tuple[Mutant, ...] = (
    _lease_mutant(
        "lease-inclusive",
        "LEASE-3",
        "A lease is expired already at exactly lockMaxLiveTime (>= instead of >).",
        {"is_expired": lambda now, entry, max_live: now - entry.last_update_timestamp >= max_live},
    ),
    _lease_mutant(
        "is-locked-no-refresh",
        "LEASE-4",
        "A true isLocked answer does not refresh the entry's timestamp.",
        {"is_locked": wrap(lease.is_locked, _no_refresh)},
    ),
    _lease_mutant(
        "takeover-keeps-timestamp",
        "LEASE-5",
        "Taking over an expired entry keeps its old timestamp, so it stays expired.",
        {"try_lock": wrap(lease.try_lock, _takeover_keeps_timestamp)},
    ),
    _lease_mutant(
        "empty-batch-creates-group",
        "LEASE-6",
        "A batch lock creates an absent group map even when it has nothing to lock.",
        {"try_lock_batch": wrap(lease.try_lock_batch, _empty_batch_creates_group)},
    ),
    _lease_mutant(
        "unlock-ignores-owner",
        "LEASE-7",
        "A batch unlock removes the listed entries of every client, not only the caller's.",
        {"unlock_batch": wrap(lease.unlock_batch, _unlock_any_owner)},
    ),
)
