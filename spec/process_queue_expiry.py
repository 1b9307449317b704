"""PQ — the ProcessQueue's clocks: the client lock's expiry (PQ-15), the pull's idle expiry
(PQ-16) and the cleanExpiredMsg sweep of messages consumed for too long (PQ-18), with RocketMQ's
default timings. `spec.process_queue` re-exports every name.
"""

from __future__ import annotations

from pullspec.spec.errors import NumberFormatError
from pullspec.spec.message import PROPERTY_CONSUME_START_TIME, StoredMessage
from pullspec.spec.process_queue_state import S_002, S_004, Tree, parse_java_long
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import rule

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
    # Verify the head has started consuming (StringUtils.isNotEmpty)
    if not start:
        return None
    return msg_tree[0] if _expired(start, now, consume_timeout_min) else None
