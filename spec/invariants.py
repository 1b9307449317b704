"""INV — the safety properties a whole RocketMQ 4.x consumer group promises, as small pure
functions over what a history shows (`reference.sim.history`); `reference.sim.checker` applies
them to every event and names each failure as an anomaly.

Some of them RocketMQ 4.x is known to break: the broker's commit is not increase-only
(COMMIT-1), delivery is at least once, not exactly once (OFFSET-8, PQ-7, REBAL-9 …), and the
orderly lease arithmetic assumes well-behaved clocks (REBAL-22). The checker reports such a
failure as *allowed* with the rule that explains it; a failure nothing explains is a violation.
The functions only state the property; explaining a failure is the checker's job.

Liveness, and the budgets that bound what INV-2 and INV-4 allow, are the LIVE rules
(`spec.liveness`); their anomalies are named here too.
"""

from __future__ import annotations

from pullspec.spec.rules import rule

#: Anomaly names (Jepsen's vocabulary), one per invariant below.
LOST = "lost"
DUPLICATE = "duplicate"
NONMONOTONIC_COMMIT = "nonmonotonic-commit"
ORDERLY_OVERLAP = "orderly-overlap"
ORDERLY_REORDER = "orderly-reorder"
FLOW_BOUND_EXCEEDED = "flow-bound-exceeded"
DLQ_ACCOUNTING = "dlq-accounting"
#: Liveness (judged after the quiet tail) and the budgets of the allowed anomalies.
STUCK = "stuck"
DLQ_MISSING = "dlq-missing"
DUPLICATE_BUDGET = "duplicate-budget"
COMMIT_BUDGET = "commit-budget"
ANOMALIES = (
    LOST,
    DUPLICATE,
    NONMONOTONIC_COMMIT,
    ORDERLY_OVERLAP,
    ORDERLY_REORDER,
    FLOW_BOUND_EXCEEDED,
    DLQ_ACCOUNTING,
    STUCK,
    DLQ_MISSING,
    DUPLICATE_BUDGET,
    COMMIT_BUDGET,
)
#: The rule each anomaly breaks.
ANOMALY_RULES = {
    LOST: "INV-1",
    DUPLICATE: "INV-2",
    NONMONOTONIC_COMMIT: "INV-4",
    ORDERLY_OVERLAP: "INV-5",
    ORDERLY_REORDER: "INV-6",
    FLOW_BOUND_EXCEEDED: "INV-7",
    DLQ_ACCOUNTING: "INV-8",
    STUCK: "LIVE-1",
    DLQ_MISSING: "LIVE-2",
    DUPLICATE_BUDGET: "LIVE-3",
    COMMIT_BUDGET: "LIVE-3",
}


@rule("INV-1", source="at-least-once delivery in CLUSTERING (ProcessQueue.removeMessage)")
def copy_not_lost(consumed: bool, handed_back: bool, committed: int, queue_offset: int) -> bool:
    """A stored copy of a message is not lost when it was consumed, handed back to the broker,
    or its queue's committed offset has not passed it.

    pre: queue_offset >= 0
    post: __return__ == (consumed or handed_back or committed <= queue_offset)
    """
    return consumed or handed_back or committed <= queue_offset


@rule("INV-2", source="exactly-once is not promised: at-least-once delivery in CLUSTERING")
def consumed_at_most_once(successes: int) -> bool:
    """A message is consumed successfully at most once (RocketMQ 4.x only promises at least once,
    so every further success needs a rule that explains it).

    pre: successes >= 0
    post: __return__ == (successes <= 1)
    """
    return successes <= 1


@rule("INV-3", source="MixAll.compareAndIncreaseOnly (OffsetStore.updateOffset, increaseOnly)")
def client_offset_monotone(before: int | None, after: int, increase_only: bool) -> bool:
    """An increase-only write never lowers a client's in-memory offset; the first write of a
    queue and the other writers (ORDER-11, RESULT-10, reads from the store) may set any value.

    post: __return__ == (not increase_only or before is None or after >= before)
    """
    return not increase_only or before is None or after >= before


@rule("INV-4", source="ConsumerOffsetManager.commitOffset (a consumer group's progress)")
def broker_commit_monotone(before: int | None, after: int) -> bool:
    """The broker's committed offset of a queue never decreases (COMMIT-1 does not enforce it, so
    every decrease needs a rule that explains it).

    post: __return__ == (before is None or after >= before)
    """
    return before is None or after >= before


@rule("INV-5", source="one consumer at a time per orderly queue (RebalanceLockManager)")
def one_orderly_owner(owners: frozenset[str]) -> bool:
    """At most one client is inside a listener call of an orderly queue at any instant.

    post: __return__ == (len(owners) <= 1)
    """
    return len(owners) <= 1


@rule("INV-6", source="ordered consumption per queue (ConsumeMessageOrderlyService)")
def orderly_in_order(highest_consumed: int, first_offset: int, same_batch_again: bool) -> bool:
    """An orderly consumer never consumes an offset below one it already consumed from the queue,
    except by retrying the very batch it was given last (ORDER-9's suspend).

    post: __return__ == (same_batch_again or first_offset > highest_consumed)
    """
    return same_batch_again or first_offset > highest_consumed


@rule("INV-7", source="DefaultMQPushConsumerImpl.pullMessage flow control (FLOW-6)")
def within_flow_bound(cached: int, threshold: int, batch: int) -> bool:
    """A ProcessQueue never caches more than pullThresholdForQueue plus one pull batch, because
    a pull starts only while the count is within the threshold and brings at most one batch.

    pre: threshold >= 1 and batch >= 1
    post: __return__ == (cached <= threshold + batch)
    """
    return cached <= threshold + batch


@rule("INV-8", source="every message consumed, dead-lettered or pending (RETRY, CONC-8/9)")
def dlq_accounted(consumed: bool, in_dlq: bool, pending: bool) -> bool:
    """Every produced message ends up consumed, in the dead-letter queue, or still pending (cached
    by a client, waiting in the schedule topic, or stored at or above its queue's committed
    offset).

    post: __return__ == (consumed or in_dlq or pending)
    """
    return consumed or in_dlq or pending
