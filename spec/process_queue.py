"""PQ: the consumer's ProcessQueue (rulebook-client section 5), pure functions over a frozen state.

Every transition takes a `ProcessQueueState` and returns the next one (plus RocketMQ's return
value); bad input raises a typed error before anything is built, so the caller's state stays as
it was. Java guards both tree maps with one read-write lock; a pure function needs none (PQ-19).

This module states the two trees; the state type and the rules on its other fields live in
`spec.process_queue_state`, the expiry rules in `spec.process_queue_expiry`. Both are re-exported
here, so `spec.process_queue` stays the one namespace of the PQ area.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from pullspec.spec.errors import (
    InvalidTypeError,
    NoSuchElementError,
    NumberFormatError,  # noqa: F401  (named by put_message's raises: line, which CrossHair reads)
    require_int,
    require_range,
)
from pullspec.spec.message import PROPERTY_MAX_OFFSET, StoredMessage
from pullspec.spec.process_queue_expiry import (
    CLEAN_EXPIRED_LOOP_MAX,
    DEFAULT_CONSUME_TIMEOUT_MIN,
    LOCK_INTERVAL_MS,
    LOCK_MAX_LIVE_TIME_MS,
    PULL_MAX_IDLE_TIME_MS,
    SEND_BACK_DELAY_LEVEL,
    expired_head_v4_7,
    expired_head_v4_9,
    is_lock_expired,
    is_pull_expired,
)
from pullspec.spec.process_queue_state import (
    S_000,
    S_001,
    S_002,
    S_004,
    ProcessQueueState,
    Tree,
    inc_try_unlock_times,
    initial_state,
    mark_consumed_at,
    parse_java_long,
    set_dropped,
)
from pullspec.spec.rules import rule

JAVA_INT_MAX = 2**31 - 1


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
    # Verify the MAX_OFFSET property before mutating: Java parses it after the tree changed.
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
    nxt = attrs.evolve(
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
    # Verify the cache is non-empty
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
    # Verify something is cached on entry
    if not state.msg_tree:
        return stamped, -1
    tree, count, size = state.msg_tree, state.msg_count, state.msg_size
    for msg in batch:
        tree, prev = _tree_remove(tree, msg.queue_offset)
        if prev is not None:
            count, size = count - 1, size - len(msg.body)
    result = tree[0].queue_offset if tree else state.queue_offset_max + 1
    return attrs.evolve(stamped, msg_tree=tree, msg_count=count, msg_size=size), result


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
    return attrs.evolve(
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
    # Verify something is being consumed: TreeMap.lastKey() throws on an empty map
    if not state.consuming_tree:
        raise NoSuchElementError("commit: the consuming tree is empty")
    offset = state.consuming_tree[-1].queue_offset
    released = sum(len(m.body) for m in state.consuming_tree)
    nxt = attrs.evolve(
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
    return attrs.evolve(state, msg_tree=tree, consuming_tree=())


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
    return attrs.evolve(state, msg_tree=tree, consuming_tree=consuming_tree)


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
    return attrs.evolve(
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


__all__ = [
    "CLEAN_EXPIRED_LOOP_MAX",
    "DEFAULT_CONSUME_TIMEOUT_MIN",
    "INTERRUPTED_RESULTS",
    "JAVA_INT_MAX",
    "LOCK_INTERVAL_MS",
    "LOCK_MAX_LIVE_TIME_MS",
    "PULL_MAX_IDLE_TIME_MS",
    "SEND_BACK_DELAY_LEVEL",
    "ProcessQueueState",
    "clear",
    "commit",
    "dispatch_to_consume",
    "expired_head_v4_7",
    "expired_head_v4_9",
    "has_temp_message",
    "inc_try_unlock_times",
    "initial_state",
    "interrupted_result",
    "is_lock_expired",
    "is_pull_expired",
    "make_message_to_consume_again",
    "mark_consumed_at",
    "max_offset_property",
    "max_span",
    "msg_acc_cnt_after",
    "put_accounting",
    "put_message",
    "queue_offset_max_after",
    "remove_message",
    "require_messages",
    "rollback",
    "set_dropped",
    "take_messages",
]
