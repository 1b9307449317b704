"""PQ — the ProcessQueue's state: `ProcessQueueState` and the rules on its fields outside the two
trees — a new queue (PQ-1), the dropped flag (PQ-14), lastConsumeTimestamp (PQ-17) and
tryUnlockTimes (PQ-20).

It also holds what `spec.process_queue` (the trees) and `spec.process_queue_expiry` (the clocks)
share: the tree type, the seeds the PQ rules cite and Java's Long.parseLong. `spec.process_queue`
re-exports the state type and the rules.
"""

from __future__ import annotations

import re

import attrs

from pullspec.spec.errors import InvalidTypeError, NumberFormatError, require_int
from pullspec.spec.message import StoredMessage
from pullspec.spec.rules import rule

S_000 = "000_26b83a4251c26823.txt"
S_001 = "001_c163ec5dbc0ced81.txt"
S_002 = "002_c88c8921902728c1.txt"
S_003 = "003_97f7c1df5f6104bc.txt"
S_004 = "004_60fc00b6c6a023ff.txt"

Tree = tuple[StoredMessage, ...]
_JAVA_LONG = re.compile(r"[+-]?[0-9]+")


@attrs.frozen
class ProcessQueueState:
    """Everything a ProcessQueue holds; both trees are sorted by queue offset, offsets unique."""

    msg_tree: Tree = ()
    consuming_tree: Tree = ()
    msg_count: int = 0
    msg_size: int = 0
    queue_offset_max: int = 0
    msg_acc_cnt: int = 0
    consuming: bool = False
    dropped: bool = False
    locked: bool = False
    last_lock_timestamp: int = 0
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0
    try_unlock_times: int = 0

    @property
    def cached_offsets(self) -> tuple[int, ...]:
        """The keys of msgTreeMap, ascending."""
        return tuple(m.queue_offset for m in self.msg_tree)

    @property
    def consuming_offsets(self) -> tuple[int, ...]:
        """The keys of consumingMsgOrderlyTreeMap, ascending."""
        return tuple(m.queue_offset for m in self.consuming_tree)


def parse_java_long(name: str, text: str) -> int:
    """`text` read with Java's Long.parseLong, else NumberFormatError naming `name`."""
    if not _JAVA_LONG.fullmatch(text) or not -(2**63) <= int(text) < 2**63:
        raise NumberFormatError(name, text, "not a Java long")
    return int(text)


@rule("PQ-1", source="ProcessQueue.<init>", seeds=(S_000, S_002, S_004), versions=(
    "4.7.1 names the locks lockTreeMap/lockConsume (getLockConsume), 4.9.7 treeMapLock/"
    "consumeLock (getConsumeLock); behaviour is identical"))  # fmt: skip
def initial_state(now: int) -> ProcessQueueState:
    """A new ProcessQueue has empty trees, zero counters, all flags false and its three
    timestamps (pull, consume, lock) at its creation time.

    post: __return__.msg_count == 0 and __return__.msg_size == 0
    post: __return__.last_pull_timestamp == now and __return__.last_lock_timestamp == now
    raises: InvalidTypeError
    """
    t = require_int("now", now)
    return ProcessQueueState(last_lock_timestamp=t, last_pull_timestamp=t, last_consume_timestamp=t)


@rule("PQ-14", source="ProcessQueue.setDropped", seeds=(S_000, S_001, S_002, S_003, S_004))
def set_dropped(state: ProcessQueueState, dropped: bool) -> ProcessQueueState:
    """`dropped` is a plain flag the rebalance, OFFSET_ILLEGAL and shutdown paths set to true and
    RocketMQ never sets back, because a dropped ProcessQueue is never reused.

    post: __return__.dropped == dropped
    raises: InvalidTypeError
    """
    if not isinstance(dropped, bool):
        raise InvalidTypeError("dropped", dropped, "bool")
    return attrs.evolve(state, dropped=dropped)


@rule("PQ-17", source="ProcessQueue.removeMessage")
def mark_consumed_at(state: ProcessQueueState, now: int) -> ProcessQueueState:
    """Every removeMessage and takeMessages call sets lastConsumeTimestamp to now, whether or not
    it finds anything; commit and rollback do not.

    post: __return__.last_consume_timestamp == now
    """
    return attrs.evolve(state, last_consume_timestamp=now)


@rule("PQ-20", source="ProcessQueue.incTryUnlockTimes")
def inc_try_unlock_times(state: ProcessQueueState) -> ProcessQueueState:
    """tryUnlockTimes counts the times removeUnnecessaryMessageQueue failed to get the consume
    lock, and is only reported.

    post: __return__.try_unlock_times == state.try_unlock_times + 1
    """
    return attrs.evolve(state, try_unlock_times=state.try_unlock_times + 1)
