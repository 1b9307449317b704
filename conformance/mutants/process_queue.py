"""Mutants of the consumer's ProcessQueue (ReferenceProcessQueue); seen by the process_queue
area."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from pullspec.conformance.mutants._patch import Candidate, mutate, wrap
from pullspec.conformance.mutants.base import Mutant
from pullspec.spec import process_queue as pq
from pullspec.spec.clock import Clock
from pullspec.spec.evolve import evolve
from pullspec.spec.message import StoredMessage
from pullspec.spec.process_queue import ProcessQueueState, Tree
from pullspec.spec.profiles import Profile

if TYPE_CHECKING:
    from pullspec.reference.process_queue import ReferenceProcessQueue

_PQ = "pullspec.spec.process_queue"


def _pq_mutant(name: str, rule: str, doc: str, replace: Mapping[str, object]) -> Mutant:
    def build() -> Candidate:
        from pullspec.reference.process_queue import ReferenceProcessQueue

        queue_class = mutate(ReferenceProcessQueue, {_PQ: replace})

        def process_queue(clock: Clock, profile: Profile) -> ReferenceProcessQueue:
            return queue_class(clock=clock, profile=profile)

        return Candidate(name, process_queue=process_queue)

    return Mutant(name, rule, ("process_queue",), doc, build)


#: spec.process_queue.remove_message: (state, messages, now) → (state, result).
RemoveMessage = Callable[
    [ProcessQueueState, Sequence[StoredMessage], int], tuple[ProcessQueueState, int]
]


def _remove_returns_max(
    f: RemoveMessage, state: ProcessQueueState, msgs: Sequence[StoredMessage], now: int, /
) -> tuple[ProcessQueueState, int]:
    nxt, result = f(state, msgs, now)
    return nxt, (nxt.msg_tree[-1].queue_offset if nxt.msg_tree else result)


def _remove_emptied(
    f: RemoveMessage, state: ProcessQueueState, msgs: Sequence[StoredMessage], now: int, /
) -> tuple[ProcessQueueState, int]:
    nxt, result = f(state, msgs, now)
    emptied = state.msg_tree and not nxt.msg_tree
    return nxt, (result - 1 if emptied else result)


def _take_keeps_consuming(
    f: Callable[[ProcessQueueState, int, int], tuple[ProcessQueueState, Tree]],
    state: ProcessQueueState,
    n: int,
    now: int,
    /,
) -> tuple[ProcessQueueState, Tree]:
    nxt, taken = f(state, n, now)
    return evolve(nxt, consuming=state.consuming), taken


def _commit_empty(
    f: Callable[[ProcessQueueState], tuple[ProcessQueueState, int]], state: ProcessQueueState, /
) -> tuple[ProcessQueueState, int]:
    return (state, -1) if not state.consuming_tree else f(state)


def _consume_again_counts(
    f: Callable[[ProcessQueueState, Sequence[StoredMessage]], ProcessQueueState],
    state: ProcessQueueState,
    msgs: Sequence[StoredMessage],
    /,
) -> ProcessQueueState:
    nxt = f(state, msgs)
    return evolve(nxt, msg_count=nxt.msg_count + len(msgs))


MUTANTS: tuple[Mutant, ...] = (
    _pq_mutant(
        "remove-returns-max",
        "PQ-7",
        "removeMessage returns the largest offset still cached instead of the smallest.",
        {"remove_message": wrap(pq.remove_message, _remove_returns_max)},
    ),
    _pq_mutant(
        "remove-emptied-returns-offset-max",
        "PQ-7",
        "removeMessage that empties the cache returns queueOffsetMax, not queueOffsetMax + 1.",
        {"remove_message": wrap(pq.remove_message, _remove_emptied)},
    ),
    _pq_mutant(
        "queue-offset-max-is-max",
        "PQ-4",
        "queueOffsetMax becomes the maximum offset ever put, not the last new one.",
        {"queue_offset_max_after": lambda cur, new: max((cur, *new))},
    ),
    _pq_mutant(
        "msg-acc-cnt-negative",
        "PQ-5",
        "msgAccCnt takes MAX_OFFSET − offset even when the difference is not positive.",
        {"msg_acc_cnt_after": lambda cur, last, mx: cur if mx is None else mx - last},
    ),
    _pq_mutant(
        "max-span-off-by-one",
        "PQ-6",
        "getMaxSpan counts the cached offsets inclusively (last − first + 1).",
        {"max_span": lambda offsets: offsets[-1] - offsets[0] + 1 if offsets else 0},
    ),
    _pq_mutant(
        "dispatch-ignores-consuming",
        "PQ-3",
        "putMessage asks to dispatch whenever anything is cached, even while consuming.",
        {"dispatch_to_consume": lambda has_cached, consuming: has_cached},
    ),
    _pq_mutant(
        "take-nothing-keeps-consuming",
        "PQ-8",
        "takeMessages that takes nothing leaves the consuming flag set.",
        {"take_messages": wrap(pq.take_messages, _take_keeps_consuming)},
    ),
    _pq_mutant(
        "commit-empty-returns-minus-one",
        "PQ-9",
        "commit with nothing being consumed answers −1 instead of NoSuchElementException.",
        {"commit": wrap(pq.commit, _commit_empty)},
    ),
    _pq_mutant(
        "put-counts-replacements",
        "PQ-13",
        "putMessage counts a re-put of an offset already cached as a new message.",
        {"put_accounting": lambda already, size: (1, size)},
    ),
    _pq_mutant(
        "consume-again-counts",
        "PQ-11",
        "makeMessageToConsumeAgain adds the messages to msgCount.",
        {
            "make_message_to_consume_again": wrap(
                pq.make_message_to_consume_again, _consume_again_counts
            )
        },
    ),
    _pq_mutant(
        "lock-expiry-inclusive",
        "PQ-15",
        "The client lock is expired already at exactly lockMaxLiveTime (>= instead of >).",
        {"is_lock_expired": lambda now, last, live=30_000: now - last >= live},
    ),
    _pq_mutant(
        "pull-expiry-inclusive",
        "PQ-16",
        "The queue is pull-expired already at exactly pullMaxIdleTime (>= instead of >).",
        {"is_pull_expired": lambda now, last, idle=120_000: now - last >= idle},
    ),
)
