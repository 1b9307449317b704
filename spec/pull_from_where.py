"""Where a newly assigned queue starts pulling: `RebalancePushImpl.computePullFromWhere` (REBAL-17),
used by rebalance (REBAL-10) and by the orderly first-lock correction (FLOW-12)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pullspec.spec.client_errors import MQClientError
from pullspec.spec.consumer_config import ConsumeFromWhere
from pullspec.spec.message import RETRY_GROUP_TOPIC_PREFIX, MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

_SEEDS = ("004_60fc00b6c6a023ff.txt", "003_97f7c1df5f6104bc.txt", "002_c88c8921902728c1.txt")

_LAST_OFFSET_FAMILY = frozenset(
    {
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
        ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET,
    }
)


@runtime_checkable
class OffsetQueries(Protocol):
    """The broker queries computePullFromWhere may make (MQAdminImpl); both raise MQClientError
    on failure."""

    def max_offset(self, mq: MessageQueue) -> int:
        """The queue's max offset on the broker (one past its last entry)."""
        ...

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of the queue stored at or after `timestamp_ms`."""
        ...


def _compute(
    consume_from_where: ConsumeFromWhere,
    mq: MessageQueue,
    last_offset: int,
    admin: OffsetQueries,
    consume_timestamp_ms: int,
) -> int:
    if last_offset >= 0:
        return last_offset
    if last_offset != -1:
        return -1  # −2: the store read failed; rebalance skips the queue
    retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if consume_from_where in _LAST_OFFSET_FAMILY:
        return 0 if retry else admin.max_offset(mq)
    if consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return 0
    if retry:
        return admin.max_offset(mq)
    return admin.search_offset(mq, consume_timestamp_ms)


# [4.7]
@rule(
    "REBAL-17",
    source="RebalancePushImpl.computePullFromWhere",
    seeds=_SEEDS,
    profiles=(Profile.V4_7,),
    versions="4.9's computePullFromWhereWithException rethrows a maxOffset/searchOffset failure",
)
def compute_pull_from_where(
    consume_from_where: ConsumeFromWhere,
    mq: MessageQueue,
    last_offset: int,
    admin: OffsetQueries,
    consume_timestamp_ms: int,
) -> int:
    """A queue resumes at its stored offset (READ_FROM_STORE) when it is ≥ 0; with −1 (none) it
    starts per ConsumeFromWhere (last: retry topic 0, else maxOffset; first: 0; timestamp: retry
    topic maxOffset, else searchOffset(consumeTimestamp)); with −2 or a failed query, −1.

    post: last_offset < 0 or __return__ == last_offset
    post: last_offset > -2 or __return__ == -1
    post: last_offset != -1 or consume_from_where is not ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or __return__ == 0
    """
    # ConsumeFromWhere matters only when nothing is stored, and the deprecated values
    # behave as CONSUME_FROM_LAST_OFFSET.
    try:
        return _compute(consume_from_where, mq, last_offset, admin, consume_timestamp_ms)
    except MQClientError:
        return -1


# [Modified in 4.9]
@rule(
    "REBAL-17",
    source="RebalancePushImpl.computePullFromWhereWithException",
    profiles=(Profile.V4_9,),
)
def compute_pull_from_where_with_exception(
    consume_from_where: ConsumeFromWhere,
    mq: MessageQueue,
    last_offset: int,
    admin: OffsetQueries,
    consume_timestamp_ms: int,
) -> int:
    """A queue resumes at its stored offset when it is ≥ 0, starts per ConsumeFromWhere when
    it is −1, gets −1 when it is −2, and a failed maxOffset or searchOffset query is rethrown.

    post: last_offset < 0 or __return__ == last_offset
    post: last_offset > -2 or __return__ == -1
    post: last_offset != -1 or consume_from_where is not ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or __return__ == 0
    """
    # The rethrow: rebalance then skips the queue and FLOW-12 delays by E with the
    # first-lock flag still false.
    return _compute(consume_from_where, mq, last_offset, admin, consume_timestamp_ms)


class PullFromWhereRules(Rules):
    """The changed REBAL rule of the first offset (see `spec.rules.Rules`).

    `compute_pull_from_where` is REBAL-17 as rebalance and FLOW-12 call it (4.9: may raise
    MQClientError; 4.9's deprecated `computePullFromWhere` wrapper catches the failure and
    returns −1, which is exactly the 4.7 function).
    """

    compute_pull_from_where = stated(
        compute_pull_from_where, compute_pull_from_where_with_exception
    )
