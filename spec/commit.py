"""COMMIT — broker consumer offsets (ConsumerOffsetManager) and how pulls commit them."""

from __future__ import annotations

from pullspec.spec.code import FLAG_COMMIT_OFFSET
from pullspec.spec.rules import rule
from pullspec.spec.status import BrokerRole, ResponseCode

SEED_002 = ("002_c88c8921902728c1.txt",)
FIRST_PERSIST_DELAY_MS = 10_000


@rule("COMMIT-1", source="ConsumerOffsetManager.commitOffset", seeds=SEED_002)
def commit_offset(stored: int | None, offset: int) -> int:
    """commitOffset replaces the stored offset unconditionally: it is not increase-only and checks
    neither sign nor bounds.

    post: __return__ == offset
    """
    return offset


def offset_table_key(topic: str, group: str) -> str:
    """The ConsumerOffsetManager key "<topic>@<group>"."""
    return f"{topic}@{group}"


@rule(
    "COMMIT-2",
    source="PullMessageProcessor.processRequest",
    seeds=(*SEED_002, "004_60fc00b6c6a023ff.txt"),
)
def commits_piggy_backed_offset(
    broker_allow_suspend: bool, sys_flag: int, broker_role: BrokerRole, passed_checks: bool
) -> bool:
    """A pull commits its piggy-backed offset iff it passed the pre-store checks, is not a re-run,
    has the commit-offset flag and reached a master.

    post: not __return__ or broker_role is not BrokerRole.SLAVE
    """
    return (
        passed_checks
        and broker_allow_suspend
        and bool(sys_flag & FLAG_COMMIT_OFFSET)
        and broker_role is not BrokerRole.SLAVE
    )


@rule("COMMIT-3", source="ConsumerManageProcessor.updateConsumerOffset", seeds=SEED_002)
def update_consumer_offset_code() -> ResponseCode:
    """UPDATE_CONSUMER_OFFSET commits the header's offset and always answers SUCCESS, on any role.

    post: __return__ is ResponseCode.SUCCESS
    """
    return ResponseCode.SUCCESS


@rule(
    "COMMIT-4",
    source="ConsumerOffsetManager.queryOffset; ConsumerManageProcessor.queryConsumerOffset",
    seeds=(),
)
def query_consumer_offset(
    stored: int, min_offset: int, first_entry_in_disk: bool
) -> tuple[ResponseCode, int | None]:
    """A query answers a stored offset ≥ 0, else 0 when the queue starts at 0 with its first entry
    in memory (a new group on a young queue), else QUERY_NOT_FOUND.

    post: __return__[0] is ResponseCode.QUERY_NOT_FOUND or __return__[1] is not None
    """
    # Check that an offset is stored.
    if stored >= 0:
        return (ResponseCode.SUCCESS, stored)
    # Check that the queue starts at 0 and its head is still in memory.
    if min_offset <= 0 and not first_entry_in_disk:
        return (ResponseCode.SUCCESS, 0)
    return (ResponseCode.QUERY_NOT_FOUND, None)


@rule("COMMIT-5", source="BrokerController.initialize; ConsumerOffsetManager", seeds=SEED_002)
def persist_due(elapsed_since_start: int, flush_consumer_offset_interval: int) -> bool:
    """The offset table is persisted 10 000 ms after start and then every
    flushConsumerOffsetInterval (5000 ms).

    pre: flush_consumer_offset_interval > 0
    post: not __return__ or elapsed_since_start >= 10000
    """
    if elapsed_since_start < FIRST_PERSIST_DELAY_MS:
        return False
    return (elapsed_since_start - FIRST_PERSIST_DELAY_MS) % flush_consumer_offset_interval == 0
