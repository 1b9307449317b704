"""PullMessageService (PULLQ-1, 2, 3, 5, 7, 10, 11): the pull thread, its FIFO queue, the timer it
shares with the OFFSET_ILLEGAL fix-up, PullRequest identity and shutdown. PULLQ-4, 6, 8 and 9 are
stated in `spec.pull_actions` and `spec.pull_decision`."""

from __future__ import annotations

from typing import TypeVar

from pullspec.spec.message import MessageQueue
from pullspec.spec.pull_actions import schedules_later
from pullspec.spec.rules import rule

T = TypeVar("T")

_SERVICE = "PullMessageService"
_S0124 = (
    "000_26b83a4251c26823.txt",
    "001_c163ec5dbc0ced81.txt",
    "002_c88c8921902728c1.txt",
    "004_60fc00b6c6a023ff.txt",
)
_S024 = ("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")

#: PULLQ-10: ThreadUtils.shutdownGracefully waits this long before shutdownNow.
SHUTDOWN_GRACE_MILLIS = 1000


@rule("PULLQ-1", source=f"{_SERVICE}.run", seeds=(*_S0124, "003_97f7c1df5f6104bc.txt"))
def pull_loop_continues(stopped: bool, pull_message_raised: bool) -> bool:
    """The one pull thread of a client instance takes the head of the queue, hands it to
    pullMessage and loops again after any exception that call throws, until it is stopped.

    post: __return__ == (not stopped)
    """
    # An exception is only logged: it costs the request that raised, not the loop.
    return not stopped


@rule("PULLQ-2", source=f"{_SERVICE}.pullRequestQueue", seeds=_S0124[1:3])
def enqueue(queue: tuple[T, ...], request: T) -> tuple[T, ...]:
    """The pull queue is an unbounded FIFO that appends every put at its tail without looking
    for an equal request, so the same PullRequest may be queued twice.

    post: __return__[:-1] == queue and len(__return__) == len(queue) + 1
    """
    # There is no deduplication: PullRequest.equals is never consulted (RESULT-14).
    return (*queue, request)


@rule("PULLQ-3", source=f"{_SERVICE}.executePullRequestImmediately", seeds=_S024)
def enqueues_immediately(stopped: bool) -> bool:
    """executePullRequestImmediately puts the request into the queue at once, with no stopped
    check, so after shutdown it lands in a queue nobody takes from.

    post: __return__
    """
    # The stopped flag is ignored here, unlike PULLQ-4's delayed variant.
    return True


@rule("PULLQ-5", source=f"{_SERVICE}.executeTaskLater", seeds=_S024)
def schedules_task_later(stopped: bool) -> bool:
    """executeTaskLater runs a task after its delay on the same single timer thread as the
    delayed pull re-enqueues, with the same stopped check and warning.

    post: __return__ == (not stopped)
    """
    # The OFFSET_ILLEGAL fix-up is lost when the service is already stopped.
    return schedules_later(stopped)


@rule(
    "PULLQ-7",
    source="PullRequest.equals, PullRequest.hashCode",
    seeds=("000_26b83a4251c26823.txt", "003_97f7c1df5f6104bc.txt"),
    versions="the first-lock flag is lockedFirst in 4.7 and previouslyLocked in 4.9; same meaning",
)
def pull_request_key(consumer_group: str, message_queue: MessageQueue) -> tuple[str, MessageQueue]:
    """Two PullRequests are equal when their consumer group and message queue are, whatever
    their cursor, process queue or first-lock flag.

    post: __return__ == (consumer_group, message_queue)
    """
    # The mutable cursor (nextOffset) takes no part in equality or hashing.
    return consumer_group, message_queue


@rule("PULLQ-10", source=f"{_SERVICE}.shutdown, ThreadUtils.shutdownGracefully")
def delayed_task_runs_after_shutdown(due_in_ms: int) -> bool:
    """Shutdown stops the pull thread, abandons the queued requests and shuts the timer down
    gracefully, so a delayed task scheduled before it still runs only if it falls due before
    the 1000 ms wait ends.

    pre: due_in_ms >= 0
    post: __return__ == (due_in_ms < 1000)
    """
    # A ScheduledThreadPoolExecutor keeps its delayed tasks across shutdown() (the JDK
    # default) and shutdownNow cancels what is left; a task due exactly at the end races.
    return due_in_ms < SHUTDOWN_GRACE_MILLIS


@rule("PULLQ-11", source="DefaultMQPushConsumerImpl.pullMessage")
def pull_thread_start_times(
    arrivals: tuple[int, ...], durations: tuple[int, ...]
) -> tuple[int, ...]:
    """The pull thread handles the requests it takes strictly one after another, so a request
    starts no earlier than its arrival and the end of the previous one's pre-pull work,
    synchronous broker queries included.

    pre: len(arrivals) == len(durations)
    pre: all(d >= 0 for d in durations)
    pre: list(arrivals) == sorted(arrivals)
    post: len(__return__) == len(arrivals)
    post: all(s >= a for s, a in zip(__return__, arrivals, strict=True))
    post: all(__return__[i + 1] >= __return__[i] + durations[i] for i in range(len(arrivals) - 1))
    """
    # A slow first-lock offset query on one queue delays every queue of the instance.
    starts: list[int] = []
    free_at: int | None = None
    for arrival, duration in zip(arrivals, durations, strict=True):
        start = arrival if free_at is None else max(arrival, free_at)
        starts.append(start)
        free_at = start + duration
    return tuple(starts)
