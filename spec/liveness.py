"""LIVE — what a whole RocketMQ 4.x consumer group promises over time, as small pure functions
over what a history shows (`reference.sim.history`); `reference.sim.checker` applies them.

LIVE-1 and LIVE-2 are liveness: they are judged once the faults have stopped and a quiet tail
has let every retry, restart and lease run out (the simulator's `Quiet` event). LIVE-3 bounds
what the safety invariants allow (`spec.invariants`: INV-2's duplicates, INV-4's backward
commits): an allowed anomaly needs a cause, and each cause can account for only so many
(`reference.sim.budget` counts them).
"""

from __future__ import annotations

from pullspec.spec.rules import rule


@rule("LIVE-1", source="progress after the faults stop (RebalanceService, PullMessageService)")
def message_settled(consumed: bool, in_dlq: bool, gone: bool) -> bool:
    """Once the faults have stopped and a quiet tail has passed, every produced message is
    consumed, in the dead-letter queue, or gone with its expired commit-log file.

    post: __return__ == (consumed or in_dlq or gone)
    """
    return consumed or in_dlq or gone


@rule("LIVE-2", source="SendMessageProcessor.consumerSendMsgBack (maxReconsumeTimes → %DLQ%)")
def poison_dead_lettered(in_dlq: bool, gone: bool) -> bool:
    """A message every listener call fails reaches the dead-letter queue after maxReconsumeTimes
    retries, unless its expired commit-log file took it first.

    post: __return__ == (in_dlq or gone)
    """
    return in_dlq or gone


@rule(
    "LIVE-3", source="at-least-once delivery: what a crash, a rebalance or a send-back can repeat"
)
def within_budget(count: int, budget: int) -> bool:
    """The allowed duplicates (or backward commits) of one cause stay within the budget its
    occurrences grant: a queue handover repeats at most one cache plus one persist interval of
    messages, a failed send-back that stored a copy or a swept message one message, a re-put
    one message.

    pre: count >= 0 and budget >= 0
    post: __return__ == (count <= budget)
    """
    return count <= budget
