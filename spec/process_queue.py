"""PQ: the consumer's ProcessQueue (rulebook-client section 5), pure functions over a frozen state.

Every transition takes a `ProcessQueueState` and returns the next one (plus RocketMQ's return
value); bad input raises a typed error before anything is built, so the caller's state stays as
it was. Java guards both tree maps with one read-write lock; a pure function needs none (PQ-19).

The module reads in three parts: the state and the rules on its fields outside the trees (a new
queue, the dropped flag, lastConsumeTimestamp, tryUnlockTimes); the two trees (put, remove,
take, commit, rollback); the clocks (the client lock's and the pull's expiry, and the
cleanExpiredMsg sweep).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import attrs

from pullspec.spec.errors import (
    JAVA_INT_MAX,
    InvalidTypeError,
    NoSuchElementError,
    NumberFormatError,
    require_bool,
    require_int,
    require_range,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.message import PROPERTY_CONSUME_START_TIME, PROPERTY_MAX_OFFSET, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

S_000 = "000_26b83a4251c26823.txt"
S_001 = "001_c163ec5dbc0ced81.txt"
S_002 = "002_c88c8921902728c1.txt"
S_003 = "003_97f7c1df5f6104bc.txt"
S_004 = "004_60fc00b6c6a023ff.txt"

Tree = tuple[StoredMessage, ...]
_JAVA_LONG = re.compile(r"[+-]?[0-9]+")


#: DefaultMQPushConsumer.sendMessageBack(msg, delayLevel) as cleanExpiredMsg calls it (PQ-18).
SendMessageBack = Callable[[StoredMessage, int], object]


# -- the state -------------------------------------------------------------------------------------


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
    return evolve(state, dropped=require_bool("dropped", dropped))


@rule("PQ-17", source="ProcessQueue.removeMessage")
def mark_consumed_at(state: ProcessQueueState, now: int) -> ProcessQueueState:
    """Every removeMessage and takeMessages call sets lastConsumeTimestamp to now, whether or not
    it finds anything; commit and rollback do not.

    post: __return__.last_consume_timestamp == now
    """
    return evolve(state, last_consume_timestamp=now)


@rule("PQ-20", source="ProcessQueue.incTryUnlockTimes")
def inc_try_unlock_times(state: ProcessQueueState) -> ProcessQueueState:
    """tryUnlockTimes counts the times removeUnnecessaryMessageQueue failed to get the consume
    lock, and is only reported.

    post: __return__.try_unlock_times == state.try_unlock_times + 1
    """
    return evolve(state, try_unlock_times=state.try_unlock_times + 1)


# -- the two trees ---------------------------------------------------------------------------------


def _tree_put(tree: Tree, msg: StoredMessage) -> tuple[Tree, StoredMessage | None]:
    """TreeMap.put: the new object always replaces the stored one; returns (tree, old)."""
    by_offset = {m.queue_offset: m for m in tree}
    old = by_offset.get(msg.queue_offset)
    by_offset[msg.queue_offset] = msg
    return tuple(by_offset[k] for k in sorted(by_offset)), old


def _tree_remove(tree: Tree, offset: int) -> tuple[Tree, StoredMessage | None]:
    """TreeMap.remove: returns (tree, the removed value or None)."""
    for i, m in enumerate(tree):
        if m.queue_offset == offset:
            return tree[:i] + tree[i + 1 :], m
    return tree, None


def require_messages(name: str, msgs: object) -> tuple[StoredMessage, ...]:
    """Return `msgs` (a list or tuple of StoredMessage) as a tuple, else raise a typed error."""
    if not isinstance(msgs, list | tuple):
        raise InvalidTypeError(name, msgs, "list of StoredMessage")
    for i, m in enumerate(msgs):
        if not isinstance(m, StoredMessage):
            raise InvalidTypeError(f"{name}[{i}]", m, "StoredMessage")
        require_int(f"{name}[{i}].queue_offset", m.queue_offset)
        if not isinstance(m.body, bytes):
            raise InvalidTypeError(f"{name}[{i}].body", m.body, "bytes")
    return tuple(msgs)


def max_offset_property(msg: StoredMessage) -> int | None:
    """The MAX_OFFSET property the pull path sets on `msg` (RESULT-4), or None when absent."""
    text = msg.get_property(PROPERTY_MAX_OFFSET)
    return None if text is None else parse_java_long(f"property {PROPERTY_MAX_OFFSET}", text)


@rule("PQ-2", source="ProcessQueue.putMessage", seeds=(S_002, S_000, S_004))
def put_message(
    state: ProcessQueueState, msgs: Sequence[StoredMessage]
) -> tuple[ProcessQueueState, bool]:
    """putMessage stores each message under its queue offset (replacing any cached object),
    counts only the newly inserted ones and returns dispatchToConsume, true exactly when it
    turns the consuming flag on.

    post: __return__[0].msg_count - state.msg_count == len(__return__[0].msg_tree) - len(state.msg_tree)
    post: __return__[1] == (len(__return__[0].msg_tree) > 0 and not state.consuming)
    post: len(__return__[0].consuming_tree) == len(state.consuming_tree)
    raises: InvalidTypeError, NumberFormatError
    """
    batch = require_messages("msgs", msgs)
    # The MAX_OFFSET property is read before mutating: Java parses it after the tree changed.
    last_max_offset = max_offset_property(batch[-1]) if batch else None
    tree, count, size, new_offsets = state.msg_tree, state.msg_count, state.msg_size, []
    for msg in batch:
        tree, old = _tree_put(tree, msg)
        dc, ds = put_accounting(old is not None, len(msg.body))
        count, size = count + dc, size + ds
        if old is None:
            new_offsets.append(msg.queue_offset)
    dispatch = dispatch_to_consume(len(tree) > 0, state.consuming)
    acc = state.msg_acc_cnt
    if batch:
        acc = msg_acc_cnt_after(acc, batch[-1].queue_offset, last_max_offset)
    nxt = evolve(
        state,
        msg_tree=tree,
        msg_count=count,
        msg_size=size,
        queue_offset_max=queue_offset_max_after(state.queue_offset_max, tuple(new_offsets)),
        msg_acc_cnt=acc,
        consuming=state.consuming or dispatch,
    )
    return nxt, dispatch


@rule("PQ-3", source="ProcessQueue.putMessage", seeds=(S_002,))
def dispatch_to_consume(has_cached: bool, consuming: bool) -> bool:
    """A put dispatches (and sets `consuming`) exactly when the cached tree is non-empty after
    it and `consuming` was false; only a take that returns nothing clears the flag (PQ-8).

    The concurrent service ignores the answer and never takes, so `consuming` stays true there.

    post: __return__ == (has_cached and not consuming)
    """
    return has_cached and not consuming


@rule("PQ-4", source="ProcessQueue.putMessage", seeds=(S_002, S_000))
def queue_offset_max_after(queue_offset_max: int, new_offsets: tuple[int, ...]) -> int:
    """queueOffsetMax becomes the offset of the last newly inserted message of the put, in list
    order, so a put of a lower new offset lowers it (it is not a maximum).

    post: __return__ == (new_offsets[-1] if new_offsets else queue_offset_max)
    """
    return new_offsets[-1] if new_offsets else queue_offset_max


@rule("PQ-5", source="ProcessQueue.putMessage", seeds=(S_002,))
def msg_acc_cnt_after(msg_acc_cnt: int, last_offset: int, max_offset: int | None) -> int:
    """msgAccCnt becomes MAX_OFFSET − queueOffset of the put's last message when that property
    is present and the difference is positive, and otherwise keeps its value.

    It is never reset and has no behavioural effect (adjustThreadPool's resizers are empty).

    post: __return__ > 0 or __return__ == msg_acc_cnt
    post: max_offset is None or max_offset - last_offset <= 0 or __return__ == max_offset - last_offset
    """
    if max_offset is not None and max_offset - last_offset > 0:
        return max_offset - last_offset
    return msg_acc_cnt


@rule("PQ-6", source="ProcessQueue.getMaxSpan", seeds=(S_001, S_000, S_002, S_004))
def max_span(cached_offsets: tuple[int, ...]) -> int:
    """getMaxSpan is the last cached offset minus the first, or 0 when nothing is cached; the
    consuming tree does not count.

    pre: list(cached_offsets) == sorted(cached_offsets)
    post: __return__ >= 0
    post: __return__ == (cached_offsets[-1] - cached_offsets[0] if cached_offsets else 0)
    """
    # Check that the cache is non-empty.
    if not cached_offsets:
        return 0
    return cached_offsets[-1] - cached_offsets[0]


@rule("PQ-7", source="ProcessQueue.removeMessage", seeds=(S_002, S_004))
def remove_message(
    state: ProcessQueueState, msgs: Sequence[StoredMessage], now: int
) -> tuple[ProcessQueueState, int]:
    """removeMessage stamps lastConsumeTimestamp and returns −1 if nothing was cached on entry,
    else the smallest offset still cached, or queueOffsetMax + 1 when the call emptied the tree.

    msgSize loses the body length of the argument object, not of the one that was cached (PQ-13);
    offsets that are not cached change nothing.

    post: __return__[0].last_consume_timestamp == now
    post: (__return__[1] == -1) == (len(state.msg_tree) == 0)
    post: state.msg_count - __return__[0].msg_count == len(state.msg_tree) - len(__return__[0].msg_tree)
    post: all(o >= __return__[1] for o in __return__[0].cached_offsets)
    raises: InvalidTypeError
    """
    batch = require_messages("msgs", msgs)
    stamped = mark_consumed_at(state, require_int("now", now))
    # Check that something is cached on entry.
    if not state.msg_tree:
        return stamped, -1
    tree, count, size = state.msg_tree, state.msg_count, state.msg_size
    for msg in batch:
        tree, prev = _tree_remove(tree, msg.queue_offset)
        if prev is not None:
            count, size = count - 1, size - len(msg.body)
    result = tree[0].queue_offset if tree else state.queue_offset_max + 1
    return evolve(stamped, msg_tree=tree, msg_count=count, msg_size=size), result


@rule("PQ-8", source="ProcessQueue.takeMessages", seeds=(S_004,))
def take_messages(
    state: ProcessQueueState, batch_size: int, now: int
) -> tuple[ProcessQueueState, Tree]:
    """takeMessages stamps lastConsumeTimestamp, moves up to batchSize lowest-offset messages from
    the cached tree to the consuming tree, and clears `consuming` when it takes nothing.

    msgCount, msgSize and queueOffsetMax do not change; a negative batchSize makes Java's
    `new ArrayList(batchSize)` throw IllegalArgumentException before anything else happens.

    pre: 0 <= batch_size <= 2**31 - 1
    post: len(__return__[1]) == min(batch_size, len(state.msg_tree))
    post: __return__[0].msg_count == state.msg_count and __return__[0].msg_size == state.msg_size
    post: __return__[0].consuming == (state.consuming and len(__return__[1]) > 0)
    post: __return__[0].last_consume_timestamp == now
    raises: InvalidArgumentError, InvalidTypeError
    """
    n = require_range("batch_size", batch_size, 0, JAVA_INT_MAX)
    stamped = mark_consumed_at(state, require_int("now", now))
    taken = state.msg_tree[:n]
    consuming_tree = state.consuming_tree
    for msg in taken:
        consuming_tree, _ = _tree_put(consuming_tree, msg)
    return evolve(
        stamped,
        msg_tree=state.msg_tree[n:],
        consuming_tree=consuming_tree,
        consuming=state.consuming and bool(taken),
    ), taken


@rule("PQ-9", source="ProcessQueue.commit", seeds=(S_004,))
def commit(state: ProcessQueueState) -> tuple[ProcessQueueState, int]:
    """commit returns the last consuming offset + 1 after subtracting the consuming tree's size
    from msgCount and its stored body lengths from msgSize and emptying it, and throws
    NoSuchElementException, changing nothing, when the consuming tree is empty.

    pre: len(state.consuming_tree) > 0
    post: __return__[1] == state.consuming_tree[-1].queue_offset + 1
    post: __return__[0].msg_count == state.msg_count - len(state.consuming_tree)
    post: __return__[0].consuming_tree == ()
    raises: NoSuchElementError
    """
    # Something is being consumed: TreeMap.lastKey() throws on an empty map.
    if not state.consuming_tree:
        raise NoSuchElementError("commit: the consuming tree is empty")
    offset = state.consuming_tree[-1].queue_offset
    released = sum(len(m.body) for m in state.consuming_tree)
    nxt = evolve(
        state,
        consuming_tree=(),
        msg_count=state.msg_count - len(state.consuming_tree),
        msg_size=state.msg_size - released,
    )
    return nxt, offset + 1


@rule("PQ-10", source="ProcessQueue.rollback", seeds=(S_004,))
def rollback(state: ProcessQueueState) -> ProcessQueueState:
    """rollback puts every consuming message back into the cached tree (replacing any cached
    object at the same offset) and empties the consuming tree, changing no counter.

    post: __return__.consuming_tree == () and __return__.msg_count == state.msg_count
    post: set(__return__.cached_offsets) == set(state.cached_offsets) | set(state.consuming_offsets)
    """
    tree = state.msg_tree
    for msg in state.consuming_tree:
        tree, _ = _tree_put(tree, msg)
    return evolve(state, msg_tree=tree, consuming_tree=())


@rule("PQ-11", source="ProcessQueue.makeMessageToConsumeAgain", seeds=(S_004,), versions=(
    "4.7.1 spells the method makeMessageToCosumeAgain; behaviour is identical"))  # fmt: skip
def make_message_to_consume_again(
    state: ProcessQueueState, msgs: Sequence[StoredMessage]
) -> ProcessQueueState:
    """makeMessageToConsumeAgain removes each given offset from the consuming tree and puts the
    given object into the cached tree, changing no counter, whether or not it was taken.

    post: __return__.msg_count == state.msg_count and __return__.msg_size == state.msg_size
    post: {m.queue_offset for m in msgs} <= set(__return__.cached_offsets)
    raises: InvalidTypeError
    """
    batch = require_messages("msgs", msgs)
    tree, consuming_tree = state.msg_tree, state.consuming_tree
    for msg in batch:
        consuming_tree, _ = _tree_remove(consuming_tree, msg.queue_offset)
        tree, _ = _tree_put(tree, msg)
    return evolve(state, msg_tree=tree, consuming_tree=consuming_tree)


def has_temp_message(state: ProcessQueueState) -> bool:
    """hasTempMessage (PQ-12) is true exactly when the cached tree is non-empty."""
    return bool(state.msg_tree)


@rule("PQ-12", source="ProcessQueue.clear")
def clear(state: ProcessQueueState) -> ProcessQueueState:
    """clear empties both trees and zeroes msgCount, msgSize and queueOffsetMax, leaving the
    flags, msgAccCnt and timestamps alone; hasTempMessage looks only at the cached tree.

    post: __return__.msg_tree == () and __return__.consuming_tree == ()
    post: __return__.msg_count == 0 and __return__.queue_offset_max == 0
    post: __return__.consuming == state.consuming
    """
    return evolve(
        state, msg_tree=(), consuming_tree=(), msg_count=0, msg_size=0, queue_offset_max=0
    )


@rule("PQ-13", source="ProcessQueue.putMessage")
def put_accounting(already_cached: bool, body_size: int) -> tuple[int, int]:
    """A put adds (1, body length) to (msgCount, msgSize) exactly when its offset is not in the
    cached tree, even if that offset sits in the consuming tree or was removed before.

    So msgCount == |cached| + |consuming| holds only until an offset is re-put while taken, and
    a re-put of a cached offset with a body of another length makes msgSize drift by
    len(old) − len(new), because removeMessage subtracts the object it is given (PQ-7).

    post: __return__ == ((0, 0) if already_cached else (1, body_size))
    """
    return (0, 0) if already_cached else (1, body_size)


INTERRUPTED_RESULTS: dict[str, object] = {
    "putMessage": False,
    "removeMessage": -1,
    "takeMessages": (),
    "commit": -1,
    "getMaxSpan": 0,
    "hasTempMessage": True,
}


@rule("PQ-19", source="ProcessQueue.treeMapLock")
def interrupted_result(method: str) -> object:
    """An interrupted tree-lock acquisition makes the method change nothing and return its
    fallback (putMessage false, removeMessage −1, takeMessages empty, commit −1, getMaxSpan 0,
    hasTempMessage true, the others nothing); this single-threaded model is never interrupted.

    post: __return__ in (False, -1, (), 0, True, None)
    """
    return INTERRUPTED_RESULTS.get(method)


# -- the clocks ------------------------------------------------------------------------------------

LOCK_MAX_LIVE_TIME_MS = 30_000  # rocketmq.client.rebalance.lockMaxLiveTime
LOCK_INTERVAL_MS = 20_000  # rocketmq.client.rebalance.lockInterval
PULL_MAX_IDLE_TIME_MS = 120_000  # rocketmq.client.pull.pullMaxIdleTime
CLEAN_EXPIRED_LOOP_MAX = 16
SEND_BACK_DELAY_LEVEL = 3
DEFAULT_CONSUME_TIMEOUT_MIN = 15


@rule("PQ-15", source="ProcessQueue.isLockExpired", seeds=(S_004,))
def is_lock_expired(
    now: int, last_lock_timestamp: int, lock_max_live_time: int = LOCK_MAX_LIVE_TIME_MS
) -> bool:
    """The client lock is expired when now − lastLockTimestamp is strictly greater than
    lockMaxLiveTime (30000 ms by default), whatever `locked` says.

    post: __return__ == (now - last_lock_timestamp > lock_max_live_time)
    """
    return now - last_lock_timestamp > lock_max_live_time


@rule("PQ-16", source="ProcessQueue.isPullExpired", seeds=(S_002,))
def is_pull_expired(
    now: int, last_pull_timestamp: int, pull_max_idle_time: int = PULL_MAX_IDLE_TIME_MS
) -> bool:
    """The queue is pull-expired when now − lastPullTimestamp is strictly greater than
    pullMaxIdleTime (120000 ms by default).

    post: __return__ == (now - last_pull_timestamp > pull_max_idle_time)
    """
    return now - last_pull_timestamp > pull_max_idle_time


def _expired(start: str, now: int, consume_timeout_min: int) -> bool:
    started = parse_java_long(PROPERTY_CONSUME_START_TIME, start)
    return now - started > consume_timeout_min * 60_000


@rule("PQ-18", source="ProcessQueue.cleanExpiredMsg", seeds=(S_002,),
      profiles=(Profile.V4_7,), versions=(
    "4.7.1 parses a missing CONSUME_START_TIME (NumberFormatException, the sweep task dies); "
    "4.9.7 stops the sweep at a head message without one"))  # fmt: skip
def expired_head_v4_7(
    msg_tree: Tree, now: int, consume_timeout_min: int = DEFAULT_CONSUME_TIMEOUT_MIN
) -> StoredMessage | None:  # [4.7]
    """The cleanExpiredMsg sweep sends back the head cached message when now − its
    CONSUME_START_TIME exceeds consumeTimeout minutes strictly, and stops at the first head that
    has not expired.

    A head without the property throws NumberFormatException, which nothing catches.

    post: __return__ is None or __return__ == msg_tree[0]
    raises: NumberFormatError
    """
    if not msg_tree:
        return None
    start = msg_tree[0].get_property(PROPERTY_CONSUME_START_TIME)
    if start is None:
        raise NumberFormatError(PROPERTY_CONSUME_START_TIME, None, "Long.parseLong(null)")
    return msg_tree[0] if _expired(start, now, consume_timeout_min) else None


@rule("PQ-18", source="ProcessQueue.cleanExpiredMsg", seeds=(S_002,), profiles=(Profile.V4_9,))
def expired_head_v4_9(
    msg_tree: Tree, now: int, consume_timeout_min: int = DEFAULT_CONSUME_TIMEOUT_MIN
) -> StoredMessage | None:  # [Modified in 4.9]
    """The cleanExpiredMsg sweep sends back the head cached message when it has a non-empty
    CONSUME_START_TIME and now − that time exceeds consumeTimeout minutes strictly, and stops
    at the first head that does not.

    post: __return__ is None or __return__ == msg_tree[0]
    raises: NumberFormatError
    """
    if not msg_tree:
        return None
    start = msg_tree[0].get_property(PROPERTY_CONSUME_START_TIME)
    # Check that the head has started consuming (StringUtils.isNotEmpty).
    if not start:
        return None
    return msg_tree[0] if _expired(start, now, consume_timeout_min) else None


class ProcessQueueRules(Rules):
    """The changed PQ rule of the consume-timeout sweep (see `spec.rules.Rules`)."""

    expired_head = stated(expired_head_v4_7, expired_head_v4_9)
