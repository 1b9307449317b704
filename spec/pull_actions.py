"""The PullRequest re-enqueue vocabulary of PullMessageService (PULLQ): what an attempt, a result
or an exception does with the request, and when the request stops circulating."""

from __future__ import annotations

import enum

import attrs

from pullspec.spec.rules import rule

_SOURCE = "DefaultMQPushConsumerImpl.pullMessage"
_SEEDS = (
    "000_26b83a4251c26823.txt",
    "001_c163ec5dbc0ced81.txt",
    "002_c88c8921902728c1.txt",
    "004_60fc00b6c6a023ff.txt",
)


class DelayReason(enum.Enum):
    """Why a PullRequest is re-enqueued later (the rows of PULLQ-9)."""

    CONSUMER_NOT_RUNNING = "CONSUMER_NOT_RUNNING"
    PAUSED = "PAUSED"
    CACHED_MESSAGE_COUNT = "CACHED_MESSAGE_COUNT"
    CACHED_MESSAGE_SIZE = "CACHED_MESSAGE_SIZE"
    MAX_SPAN = "MAX_SPAN"
    NOT_LOCKED = "NOT_LOCKED"
    FIRST_LOCK_OFFSET_FAILED = "FIRST_LOCK_OFFSET_FAILED"
    NO_SUBSCRIPTION = "NO_SUBSCRIPTION"
    PULL_KERNEL_EXCEPTION = "PULL_KERNEL_EXCEPTION"
    PULL_INTERVAL = "PULL_INTERVAL"
    BROKER_FLOW_CONTROL = "BROKER_FLOW_CONTROL"
    PULL_EXCEPTION = "PULL_EXCEPTION"


@attrs.frozen
class Pull:
    """The attempt passes every check: send a pull for `request_offset` (REQ)."""

    request_offset: int


@attrs.frozen
class Delay:
    """Re-enqueue the same PullRequest after `ms` milliseconds (later(ms), PULLQ-4)."""

    ms: int
    reason: DelayReason


@attrs.frozen
class Immediately:
    """Re-enqueue the same PullRequest at once (executePullRequestImmediately, PULLQ-3)."""


@attrs.frozen
class Drop:
    """The attempt ends without re-enqueueing: the PullRequest stops circulating."""

    reason: str = "dropped"


@attrs.frozen
class FlowControlCounters:
    """The consumer's two flow-control log counters (FLOW-9): shared by all queues, never reset."""

    queue_flow_control_times: int = 0
    queue_max_span_flow_control_times: int = 0


#: Fresh counters, as a consumer starts with.
NO_FLOW_CONTROL = FlowControlCounters()


@attrs.frozen
class FlowControlLog:
    """A flow-control warning fired (FLOW-9); `suppressed` when logging it throws (FLOW-10)."""

    reason: DelayReason
    flow_control_times: int
    suppressed: bool


@attrs.frozen
class FirstLockCorrection:
    """FLOW-12 moved the cursor: the computed offset and whether it is below the old cursor."""

    offset: int
    broker_busy: bool


@attrs.frozen
class PullDecision:
    """The outcome of one pullMessage attempt and the state it leaves behind."""

    action: Pull | Delay | Drop
    #: pr.nextOffset after the attempt (FLOW-12 may move it even when a later check delays).
    next_offset: int
    #: The first-lock flag (lockedFirst / previouslyLocked) after the attempt.
    previously_locked: bool
    counters: FlowControlCounters
    #: FLOW-2: pq.lastPullTimestamp = now.
    touch_last_pull_timestamp: bool
    flow_control_log: FlowControlLog | None = None
    first_lock_correction: FirstLockCorrection | None = None


# --- PullMessageService -------------------------------------------------------------------------


@rule(
    "PULLQ-4",
    source="PullMessageService.executePullRequestLater, PullMessageService.executeTaskLater",
    seeds=("000_26b83a4251c26823.txt", "004_60fc00b6c6a023ff.txt"),
)
def schedules_later(stopped: bool) -> bool:
    """A delayed re-enqueue or task is scheduled only while the pull service is not stopped;
    after stop it is logged and dropped for good.

    post: __return__ == (not stopped)
    """
    # There is no retry once stopped: the request stops circulating.
    return not stopped


@rule(
    "PULLQ-6",
    source="PullMessageService.pullMessage",
    seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"),
)
def dispatches_to_consumer(consumer_registered: bool) -> bool:
    """A taken PullRequest reaches its consumer's pullMessage only if a consumer is registered
    for its group; otherwise it is logged and dies.

    post: __return__ == consumer_registered
    """
    # An unknown group kills the request instead of re-enqueueing it.
    return consumer_registered


@rule(
    "PULLQ-8",
    source="RebalanceImpl.updateProcessQueueTableInRebalance, " + _SOURCE,
    seeds=(*_SEEDS[:3], "003_97f7c1df5f6104bc.txt"),
)
def keeps_circulating(action: Pull | Delay | Immediately | Drop | None, stopped: bool) -> bool:
    """A PullRequest keeps circulating after an action only if the action re-enqueues it (or
    sends a pull whose callback will) and, for a delay, the service is not stopped.

    post: not isinstance(action, Drop) or not __return__
    post: action is not None or not __return__
    """
    # A dead request is revived only by rebalance creating a new process queue.
    if isinstance(action, Delay):
        return schedules_later(stopped)
    return isinstance(action, Pull | Immediately)
