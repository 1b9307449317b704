"""Which queues a consumer gets: the rebalance cadence and topics (REBAL-1, REBAL-2), the
truncation of unsubscribed topics (REBAL-3), BROADCASTING and CLUSTERING allocation (REBAL-4,
REBAL-5), the strategies (REBAL-6, REBAL-7, REBAL-8) and the client id that orders the consumers
(REBAL-24). The table update and locking are in `spec.rebalance`.

Every consumer of a group runs the same strategy over the same sorted inputs, so the sort order
is part of the semantics: MessageQueue.compareTo (topic, then brokerName, both by Java's
String.compareTo over UTF-16 code units, then queueId) and String.compareTo for client ids.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from pullspec.spec.consumer_config import MessageModel
from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.message import RETRY_GROUP_TOPIC_PREFIX, MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

#: REBAL-1: rocketmq.client.rebalance.waitInterval.
REBALANCE_WAIT_INTERVAL_MILLIS = 20_000


#: REBAL-5: GET_CONSUMER_LIST_BY_GROUP timeout (4.9: mqClientApiTimeout, same default).
CONSUMER_LIST_RPC_TIMEOUT_MILLIS = 3_000


_S24 = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")
_S34 = ("003_97f7c1df5f6104bc.txt", "004_60fc00b6c6a023ff.txt")
_S234 = ("002_c88c8921902728c1.txt", *_S34)
_IMPL = "RebalanceImpl"
_AVG = "AllocateMessageQueueAveragely"
_CIRCLE = "AllocateMessageQueueAveragelyByCircle"
#: ClientConfig's default instanceName (system property rocketmq.client.name).
DEFAULT_INSTANCE_NAME = "DEFAULT"
#: RequestType.STREAM, the 4.9.7 clientId suffix.
STREAM_SUFFIX = "STREAM"

#: AllocateMessageQueueStrategy.allocate(consumerGroup, currentCID, mqAll, cidAll).
AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def java_string_key(text: str) -> bytes:
    """A sort key ordering strings as Java's String.compareTo does: by UTF-16 code units.

    Big-endian UTF-16 bytes compare exactly as the code-unit sequence, so a supplementary
    character (a surrogate pair, 0xD800…) sorts before U+E000…U+FFFF, unlike Python's code-point
    order.
    """
    return text.encode("utf-16-be", "surrogatepass")


def message_queue_key(mq: MessageQueue) -> tuple[bytes, bytes, int]:
    """MessageQueue.compareTo as a key: topic, brokerName (UTF-16 order), then queueId."""
    return java_string_key(mq.topic), java_string_key(mq.broker_name), mq.queue_id


def sort_message_queues(mqs: Iterable[MessageQueue]) -> list[MessageQueue]:
    """REBAL-5 step 4.1: a sorted copy of the topic's queue set (mqAll)."""
    return sorted(mqs, key=message_queue_key)


def sort_client_ids(cids: Iterable[str]) -> list[str]:
    """REBAL-5 step 4.2: the consumer ids sorted by String.compareTo (cidAll)."""
    return sorted(cids, key=java_string_key)


@rule("REBAL-1", source="RebalanceService.run, MQClientInstance.doRebalance", seeds=_S24)
def next_rebalance_at(
    last_run_end: int, woken_at: int | None, wait_interval_ms: int = REBALANCE_WAIT_INTERVAL_MILLIS
) -> int:
    """The rebalance thread runs doRebalance for every consumer of the client instance
    waitInterval (20000 ms) after its previous run, or at once when rebalanceImmediately woke it
    meanwhile, a failing consumer not stopping the others.

    pre: wait_interval_ms >= 0
    post: last_run_end <= __return__ <= last_run_end + wait_interval_ms
    post: woken_at is not None or __return__ == last_run_end + wait_interval_ms
    """
    # A wake-up came before the interval ran out (a wake-up during a run counts at once).
    if woken_at is None:
        return last_run_end + wait_interval_ms
    return max(last_run_end, min(woken_at, last_run_end + wait_interval_ms))


@rule("REBAL-2", source="DefaultMQPushConsumerImpl.doRebalance, RebalanceImpl.doRebalance",
      seeds=_S234)  # fmt: skip
def rebalance_topics(paused: bool, subscribed_topics: Sequence[str]) -> tuple[str, ...]:
    """A consumer that is not paused rebalances every subscribed topic, the auto-subscribed
    %RETRY%<group> included, logging a failure unless the topic is a retry topic, and then
    truncates the queues of unsubscribed topics.

    post: __return__ == (() if paused else tuple(subscribed_topics))
    """
    # The pause flag; a paused consumer does not even truncate.
    return () if paused else tuple(subscribed_topics)


def warns_on_failure(topic: str) -> bool:
    """REBAL-2: a rebalanceByTopic failure is logged unless the topic starts with %RETRY%."""
    return not topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


@rule("REBAL-3", source=f"{_IMPL}.truncateMessageQueueNotMyTopic", seeds=_S24)
def truncated_queues(
    table_mqs: Iterable[MessageQueue], subscribed_topics: Collection[str]
) -> tuple[MessageQueue, ...]:
    """Every ProcessQueue whose topic is no longer subscribed is removed from the table and
    dropped, with no persist, no offset removal and no unlock.

    post: all(q.topic not in subscribed_topics for q in __return__)
    """
    # The topic is still subscribed; nothing else is looked at.
    return tuple(q for q in table_mqs if q.topic not in subscribed_topics)


@rule("REBAL-4", source=f"{_IMPL}.rebalanceByTopic", seeds=_S234)
def broadcasting_allocation(
    mq_set: Collection[MessageQueue] | None,
) -> frozenset[MessageQueue] | None:
    """In BROADCASTING every consumer takes every readable queue of the topic's route, and an
    unknown topic is only logged, leaving the table untouched (None).

    post: (__return__ is None) == (mq_set is None)
    """
    # The route is known.
    return None if mq_set is None else frozenset(mq_set)


@rule("REBAL-5", source=f"{_IMPL}.rebalanceByTopic", seeds=_S234, versions=(
    "the consumer-list RPC timeout is 3000 in 4.7.1 and mqClientApiTimeout (3000) in 4.9.7"))  # fmt: skip
def clustering_allocation(
    mq_set: Collection[MessageQueue] | None,
    cid_all: Collection[str] | None,
    consumer_group: str,
    current_cid: str,
    strategy: AllocateStrategy,
) -> frozenset[MessageQueue] | None:
    """In CLUSTERING the strategy runs over the sorted queue set and the sorted consumer ids
    when both are known, and a missing input or a strategy failure leaves the table untouched
    (None).

    post: mq_set is not None and cid_all is not None or __return__ is None
    """
    # Both inputs arrived (the consumer list is fetched even without a route).
    if mq_set is None or cid_all is None:
        return None
    try:
        result = strategy(
            consumer_group, current_cid, sort_message_queues(mq_set), sort_client_ids(cid_all)
        )
    except Exception:
        # The strategy ran: any Throwable is logged and the rebalance returns.
        return None
    return frozenset(result)


@rule("REBAL-6", source="AllocateMessageQueueAveragely.allocate", versions=(
    "4.9.7 moves the checks into AbstractAllocateMessageQueueStrategy.check; same behaviour"))  # fmt: skip
def check_allocate_args(
    current_cid: str | None,
    mq_all: Sequence[MessageQueue] | None,
    cid_all: Sequence[str] | None,
) -> bool:
    """A strategy throws IllegalArgumentException for an empty currentCID or an empty or null
    mqAll or cidAll, and returns an empty allocation, logged as a bug, when currentCID is not in
    cidAll.

    post: __return__ == (current_cid in cid_all)
    raises: InvalidArgumentError
    """
    # Each argument is checked in RocketMQ's order; REBAL-5 catches the exception (no change).
    if not current_cid:
        raise InvalidArgumentError("current_cid", current_cid, "currentCID is empty")
    if not mq_all:
        raise InvalidArgumentError("mq_all", mq_all, "mqAll is null or mqAll empty")
    if not cid_all:
        raise InvalidArgumentError("cid_all", cid_all, "cidAll is null or cidAll empty")
    # Membership: a stranger gets nothing and so drops every queue of the topic.
    return current_cid in cid_all


@rule("REBAL-7", source=f"{_AVG}.allocate", seeds=_S34)
def allocate_averagely(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
) -> list[MessageQueue]:
    """AVG gives consumer i of c a contiguous block of the sorted queues, of n/c + 1 queues for
    the first n mod c consumers and n/c for the others (one each when n ≤ c, nothing for the
    surplus), starting at i·avg, plus n mod c for the smaller blocks.

    pre: len(set(cid_all)) == len(cid_all)
    post: current_cid not in cid_all or len(__return__) - len(mq_all) // len(cid_all) in (0, 1)
    post: all(q in mq_all for q in __return__)
    raises: InvalidArgumentError
    """
    if not check_allocate_args(current_cid, mq_all, cid_all):
        return []
    n, c = len(mq_all), len(cid_all)
    index = cid_all.index(current_cid)
    mod = n % c
    # Whether this consumer is among the first `mod`, which take one extra queue.
    extra = mod > 0 and index < mod
    average = 1 if n <= c else (n // c + 1 if extra else n // c)
    start = index * average if extra else index * average + mod
    size = min(average, n - start)
    # The modulo never wraps in practice (start + k < n); it is Java's, kept for fidelity
    return [mq_all[(start + k) % n] for k in range(size)]


@rule("REBAL-8", source=f"{_CIRCLE}.allocate", seeds=_S34)
def allocate_averagely_by_circle(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
) -> list[MessageQueue]:
    """AVG_BY_CIRCLE deals the sorted queues round-robin, giving consumer i every queue j ≥ i
    with j mod c = i, in ascending j.

    pre: len(set(cid_all)) == len(cid_all)
    post: current_cid not in cid_all or __return__ == list(mq_all[cid_all.index(current_cid) :: len(cid_all)])
    raises: InvalidArgumentError
    """
    if not check_allocate_args(current_cid, mq_all, cid_all):
        return []
    index, c = cid_all.index(current_cid), len(cid_all)
    # The residue class of each position.
    return [mq_all[j] for j in range(index, len(mq_all)) if j % c == index]


#: The strategies by their RocketMQ names (getName()).
STRATEGIES: dict[str, AllocateStrategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
}


def _client_id(client_ip: str, instance_name: str, unit_name: str | None) -> str:
    cid = f"{client_ip}@{instance_name}"
    # UtilAll.isBlank: null, empty or whitespace only
    if unit_name is not None and unit_name.strip():
        cid += "@" + unit_name
    return cid


def _renamed(instance_name: str, message_model: MessageModel, pid_name: str) -> str:
    if message_model is MessageModel.CLUSTERING and instance_name == DEFAULT_INSTANCE_NAME:
        return pid_name
    return instance_name


# [4.7]
@rule("REBAL-24", source="ClientConfig.buildMQClientId, ClientConfig.changeInstanceNameToPID",
      seeds=("003_97f7c1df5f6104bc.txt",), profiles=(Profile.V4_7,), versions=(
    "4.7.1 renames DEFAULT to <pid>; 4.9.7 to <pid>#<nanoTime> and may append @STREAM"))  # fmt: skip
def client_id_v47(
    client_ip: str,
    instance_name: str,
    unit_name: str | None,
    message_model: MessageModel,
    pid: int,
    nano_time: int = 0,
    enable_stream: bool = False,
) -> str:
    """The clientId is clientIP@instanceName plus @unitName when that is not blank, a CLUSTERING
    consumer first renaming the instance DEFAULT to its pid.

    post: __return__.startswith(client_ip + "@")
    """
    # The rename applies only to CLUSTERING consumers named DEFAULT.
    return _client_id(client_ip, _renamed(instance_name, message_model, str(pid)), unit_name)


# [Modified in 4.9]
@rule("REBAL-24", source="ClientConfig.buildMQClientId, ClientConfig.changeInstanceNameToPID",
      profiles=(Profile.V4_9,))  # fmt: skip
def client_id_v49(
    client_ip: str,
    instance_name: str,
    unit_name: str | None,
    message_model: MessageModel,
    pid: int,
    nano_time: int = 0,
    enable_stream: bool = False,
) -> str:
    """The clientId is clientIP@instanceName plus @unitName when that is not blank and @STREAM
    when enabled, a CLUSTERING consumer first renaming the instance DEFAULT to pid#nanoTime.

    post: __return__.startswith(client_ip + "@")
    post: __return__.endswith("@STREAM") or not enable_stream
    """
    # The rename: the nanoTime makes every start a new clientId.
    name = _renamed(instance_name, message_model, f"{pid}#{nano_time}")
    cid = _client_id(client_ip, name, unit_name)
    return f"{cid}@{STREAM_SUFFIX}" if enable_stream else cid


class AllocateRules(Rules):
    """The changed REBAL rule of the client id (see `spec.rules.Rules`)."""

    client_id = stated(client_id_v47, client_id_v49)
