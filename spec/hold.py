"""HOLD — long polling: PullRequestHoldService suspends PULL_NOT_FOUND pulls and answers them
when data arrives or the hold times out."""

from __future__ import annotations

import enum

from pullspec.spec.rules import rule
from pullspec.spec.status import BrokerRole, GetMessageStatus

SEEDS_HOLD = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")
LONG_POLLING_CHECK_INTERVAL_MS = 5_000


class HoldDecision(enum.Enum):
    """What a hold check does with one held request."""

    WAKE = "WAKE"
    TIMEOUT = "TIMEOUT"
    KEEP = "KEEP"


@rule(
    "HOLD-1",
    source="PullMessageProcessor.processRequest; PullRequestHoldService.suspendPullRequest",
    seeds=(*SEEDS_HOLD, "001_c163ec5dbc0ced81.txt", "000_26b83a4251c26823.txt"),
)
def hold_timeout_millis(
    long_polling_enable: bool, suspend_timeout_millis: int, short_polling_time_mills: int
) -> int:
    """A held pull waits the request's suspendTimeoutMillis with long polling, else
    shortPollingTimeMills, and remembers the requested offset as pullFromThisOffset.

    post: __return__ == (suspend_timeout_millis if long_polling_enable else short_polling_time_mills)
    """
    return suspend_timeout_millis if long_polling_enable else short_polling_time_mills


def hold_key(topic: str, queue_id: int) -> str:
    """The hold table key "<topic>@<queueId>"."""
    return f"{topic}@{queue_id}"


@rule("HOLD-2", source="PullRequestHoldService.run", seeds=SEEDS_HOLD)
def hold_check_interval(long_polling_enable: bool, short_polling_time_mills: int) -> int:
    """The hold service checks every 5000 ms with long polling, else every shortPollingTimeMills,
    and nothing wakes it early.

    post: __return__ == (5000 if long_polling_enable else short_polling_time_mills)
    """
    return LONG_POLLING_CHECK_INTERVAL_MS if long_polling_enable else short_polling_time_mills


@rule("HOLD-3", source="PullRequestHoldService.checkHoldRequest", seeds=SEEDS_HOLD)
def periodic_check_queue(key: str) -> tuple[str, int] | None:
    """A periodic check notifies, with a null tags code, every key that splits on "@" into exactly
    a topic and a queue id, passing the queue's current max offset.

    post: __return__ is None or key == f"{__return__[0]}@{__return__[1]}"
    """
    parts = key.split("@")
    # Check that the key is "<topic>@<queueId>".
    if len(parts) != 2:
        return None
    try:
        queue_id = int(parts[1])
    except ValueError:
        return None
    if str(queue_id) != parts[1]:
        return None
    return (parts[0], queue_id)


@rule("HOLD-4", source="PullRequestHoldService.notifyMessageArriving", seeds=SEEDS_HOLD)
def held_request_decision(
    max_offset: int,
    current_max_offset: int,
    pull_from_this_offset: int,
    matches: bool,
    now: int,
    suspend_timestamp: int,
    timeout_millis: int,
) -> HoldDecision:
    """A held request wakes when its queue has passed its offset and the arrival matches its
    filter, times out when now ≥ suspend time + timeout, and otherwise stays held.

    post: __return__ is not HoldDecision.WAKE or max(max_offset, current_max_offset) > pull_from_this_offset
    """
    newest = max_offset if max_offset > pull_from_this_offset else current_max_offset
    # Check that new data arrived past the requested offset and matches the filter.
    if newest > pull_from_this_offset and matches:
        return HoldDecision.WAKE
    # Check that the hold has not timed out (non-strict).
    if now >= suspend_timestamp + timeout_millis:
        return HoldDecision.TIMEOUT
    return HoldDecision.KEEP


@rule(
    "HOLD-5",
    source="DefaultMessageStore.ReputMessageService.doReput; NotifyMessageArrivingListener.arriving",
    seeds=("004_60fc00b6c6a023ff.txt", "002_c88c8921902728c1.txt"),
)
def notifies_on_arrival(broker_role: BrokerRole, long_polling_enable: bool) -> bool:
    """After dispatching a record a master with long polling notifies the queue's held pulls with
    the record's tags code, so a matching arrival answers them at once.

    post: __return__ == (broker_role is not BrokerRole.SLAVE and long_polling_enable)
    """
    return broker_role is not BrokerRole.SLAVE and long_polling_enable


@rule("HOLD-6", source="PullMessageProcessor.executeRequestWhenWakeup", seeds=SEEDS_HOLD)
def rerun_allows_suspend() -> bool:
    """A woken request is re-run from its original offset with brokerAllowSuspend false, so it is
    answered, never held again, and commits no offset.

    post: __return__ is False
    """
    return False


@rule(
    "HOLD-7",
    source="PullRequestHoldService.run, notifyMessageArriving",
    seeds=("004_60fc00b6c6a023ff.txt",),
)
def timeout_answer_time(
    suspend_timestamp: int, timeout_millis: int, first_check: int, interval: int
) -> int:
    """Without traffic a hold is answered at the first periodic check at or after suspend time +
    timeout, i.e. 15–20 s after a 15 s hold with long polling.

    pre: interval > 0
    post: __return__ >= suspend_timestamp + timeout_millis and __return__ >= first_check
    """
    due = suspend_timestamp + timeout_millis
    if first_check >= due:
        return first_check
    checks = -(-(due - first_check) // interval)
    return first_check + checks * interval


@rule(
    "HOLD-8",
    source="PullMessageProcessor.processRequest; PullRequestHoldService.run",
    seeds=SEEDS_HOLD,
)
def short_polling_notifications(long_polling_enable: bool) -> bool:
    """With long polling off the hold time and the check interval are shortPollingTimeMills and no
    arrival notifications are sent, so held pulls are answered by periodic checks only.

    post: __return__ == long_polling_enable
    """
    return long_polling_enable


@rule("HOLD-9", source="DefaultMessageStore.ReputMessageService.doReput", seeds=())
def slave_notifications(broker_role: BrokerRole) -> bool:
    """A slave never sends arrival notifications: its held pulls are answered by periodic checks.

    post: __return__ == (broker_role is not BrokerRole.SLAVE)
    """
    return broker_role is not BrokerRole.SLAVE


@rule("HOLD-10", source="PullRequestHoldService; PullMessageProcessor", seeds=())
def woken_at_next_check(status: GetMessageStatus) -> bool:
    """A held OFFSET_FOUND_NULL pull is woken at the next check (its queue is past its offset),
    while OFFSET_OVERFLOW_ONE and an empty queue stay held until the queue passes the offset.

    post: __return__ == (status is GetMessageStatus.OFFSET_FOUND_NULL)
    """
    return status is GetMessageStatus.OFFSET_FOUND_NULL
