"""The checker catches each anomaly kind on a deliberately broken configuration of the whole
simulated system, and the same run on the correct configuration shows no violation."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest

from pullspec.reference.sim.cluster import RecordingStore
from pullspec.reference.sim.faults import parse_schedule
from pullspec.reference.sim.observe import ObservedOffsetStore, ObservedProcessQueue
from pullspec.reference.sim.simulator import SimConfig, SimHooks, SimResult, simulate
from pullspec.spec import invariants as inv
from pullspec.spec.message import BrokerInnerMessage, MessageQueue, StoredMessage
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult, PutMessageResult
from pullspec.spec.status import PutMessageStatus

#: A failing message whose send-back fails both ways stays cached for a local retry (CONC-8)
#: while the messages after it are consumed; then its consumer crashes.
CACHED_THEN_CRASH = "listener-fail@2000:c0=3,send-back-fail@2000:c0=6,crash@3000:c0=1000"


def run(
    schedule: str,
    steps: int,
    hooks: SimHooks | None = None,
    **config: object,
) -> SimResult:
    cfg = SimConfig(schedule=parse_schedule(schedule), **config)  # type: ignore[arg-type]
    return simulate(cfg, steps, hooks=hooks)[0]


def violations(result: SimResult) -> dict[str, int]:
    return result.check.violations


# --- lost ------------------------------------------------------------------------------------------


class CommitsMaxOffset(ObservedProcessQueue):
    """removeMessage answers queueOffsetMax + 1 even while older messages are still cached."""

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        super().remove_messages(msgs)
        return self.queue_offset_max + 1


def test_a_process_queue_that_commits_its_max_offset_loses_messages() -> None:
    broken = run(CACHED_THEN_CRASH, 1500, SimHooks(process_queue=CommitsMaxOffset), consumers=1)
    assert violations(broken).get(inv.LOST, 0) >= 1
    assert {} == violations(run(CACHED_THEN_CRASH, 1500, consumers=1))


class DropsEveryTenthSend(RecordingStore):
    """Acknowledges every tenth producer message without storing it (the next one takes its
    offset)."""

    sends: int = 0

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        if msg.topic == "T":
            self.sends += 1
            if self.sends % 10 == 0:
                offset = self.get_max_offset_in_queue(msg.topic, msg.queue_id)
                return PutMessageResult(PutMessageStatus.PUT_OK, offset)
        return super().put_message(msg)


def test_a_broker_that_drops_acknowledged_messages_loses_them() -> None:
    broken = run("", 800, SimHooks(master_store=DropsEveryTenthSend), consumers=2)
    assert violations(broken).get(inv.LOST, 0) >= 10


# --- duplicate -------------------------------------------------------------------------------------


class StoresRetriesTwice(RecordingStore):
    """The send-back's copy (bound for the schedule topic) is stored twice."""

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        result = super().put_message(msg)
        if dict(msg.properties).get("DELAY") and msg.topic.startswith("%RETRY%"):
            super().put_message(msg)
        return result


def test_a_broker_that_stores_each_retry_twice_duplicates_without_a_cause() -> None:
    broken = run("", 3000, SimHooks(master_store=StoresRetriesTwice), fail_rate=0.05)
    assert violations(broken).get(inv.DUPLICATE, 0) >= 1
    assert {} == violations(run("", 3000, fail_rate=0.05))


# --- nonmonotonic-commit ---------------------------------------------------------------------------


class IgnoresIncreaseOnly(ObservedOffsetStore):
    """updateOffset sets the value whatever increaseOnly says."""

    def write(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        super().write(mq, offset, False)


class CommitsWhatItRemoved(ObservedProcessQueue):
    """removeMessage answers the offset after the messages it removed."""

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        super().remove_messages(msgs)
        return max((m.queue_offset for m in msgs), default=-2) + 1


def test_an_offset_store_that_ignores_increase_only_lowers_the_offset() -> None:
    # The locally retried message succeeds after the ones behind it: its commit is lower.
    retried = "listener-fail@2000:c0=3,send-back-fail@2000:c0=6"
    hooks = SimHooks(process_queue=CommitsWhatItRemoved, offset_store=IgnoresIncreaseOnly)
    broken = run(retried, 1500, hooks, consumers=1)
    assert violations(broken).get(inv.NONMONOTONIC_COMMIT, 0) >= 1


# --- orderly-overlap -------------------------------------------------------------------------------

#: c1's next calls (on T:2 and T:3) last 10 s each; c2 joins meanwhile and is given T:3.
SLOW_THEN_JOIN = "listener-slow@5000:c1=10000,join@6000:c2"


def test_a_broker_lease_that_lapses_at_once_lets_two_consumers_into_one_queue() -> None:
    broken = run(SLOW_THEN_JOIN, 1500, SimHooks(broker_lock_ms=0), orderly=True, consumers=2)
    assert violations(broken).get(inv.ORDERLY_OVERLAP, 0) >= 1
    assert {} == violations(run(SLOW_THEN_JOIN, 1500, orderly=True, consumers=2))


# --- orderly-reorder -------------------------------------------------------------------------------


class TakesNewestFirst(ObservedProcessQueue):
    """takeMessages hands out the newest cached messages instead of the oldest."""

    def take_messages(self, batch_size: int) -> list[StoredMessage]:
        taken = super().take_messages(len(self.cached_offsets))
        keep, newest = taken[: max(len(taken) - batch_size, 0)], taken[-batch_size:]
        if keep:
            self.make_messages_to_consume_again(keep)
        return newest if taken else []


def test_a_process_queue_that_takes_its_newest_message_first_reorders() -> None:
    broken = run(SLOW_THEN_JOIN, 1500, SimHooks(process_queue=TakesNewestFirst), orderly=True)
    assert violations(broken).get(inv.ORDERLY_REORDER, 0) >= 1
    assert {} == violations(run(SLOW_THEN_JOIN, 1500, orderly=True))


# --- flow-bound-exceeded ---------------------------------------------------------------------------


class NeverCounts(ObservedProcessQueue):
    """msgCount stays 0, so flow control (FLOW-6) never holds a pull back."""

    @property
    def msg_count(self) -> int:
        return 0


def test_a_process_queue_whose_count_never_grows_overflows_its_bound() -> None:
    # c1's queues stand still for 60 s while messages keep arriving.
    stuck = "listener-slow@5000:c1=20000"
    broken = run(stuck, 3000, SimHooks(process_queue=NeverCounts), orderly=True, consumers=2)
    assert violations(broken).get(inv.FLOW_BOUND_EXCEEDED, 0) >= 1
    assert {} == violations(run(stuck, 3000, orderly=True, consumers=2))


# --- dlq-accounting --------------------------------------------------------------------------------


class DropsRetries(RecordingStore):
    """Acknowledges send-back copies (bound for the schedule topic) without storing them."""

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        if msg.topic.startswith("%RETRY%") and dict(msg.properties).get("DELAY"):
            return PutMessageResult(PutMessageStatus.PUT_OK, 0)
        return super().put_message(msg)


@pytest.mark.parametrize(("retry_queue_nums", "rule"), [(1, None), (0, "RETRY-1")])
def test_send_backs_that_store_nothing_are_unaccounted_unless_the_group_has_no_retry_queue(
    retry_queue_nums: int, rule: str | None
) -> None:
    hooks = SimHooks(master_store=DropsRetries) if rule is None else None
    result = run("", 1500, hooks, fail_rate=0.05, retry_queue_nums=retry_queue_nums)
    if rule is None:
        assert violations(result).get(inv.DLQ_ACCOUNTING, 0) >= 1
    else:
        assert {} == violations(result)
        assert result.check.allowed_by_kind[inv.DLQ_ACCOUNTING][rule] >= 1


# --- stuck -----------------------------------------------------------------------------------------


class NeverDeliversDelayed(RecordingStore):
    """The schedule service finds nothing in SCHEDULE_TOPIC_XXXX: a sent-back message never
    comes back from its delay (RETRY-9)."""

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        result = super().get_message(group, topic, queue_id, offset, max_msg_nums, message_filter)
        if topic == "SCHEDULE_TOPIC_XXXX":
            return attrs.evolve(result, messages=(), next_begin_offset=offset)
        return result


def test_a_broker_whose_delayed_retries_never_come_back_leaves_messages_stuck() -> None:
    # Listener failures are sent back (delay level 3); nothing is poison, nothing is lost.
    broken = run(
        "", 1500, SimHooks(master_store=NeverDeliversDelayed), fail_rate=0.05, poison_rate=0.0
    )
    assert [inv.STUCK] == list(violations(broken))
    assert (True, False) == (broken.check.liveness["judged"], broken.check.liveness["settled"])
    clean = run("", 1500, fail_rate=0.05, poison_rate=0.0)
    assert ({}, True) == (violations(clean), clean.check.liveness["settled"])


# --- dlq-missing -----------------------------------------------------------------------------------


class NeverDeadLetters(RecordingStore):
    """A send-back past maxReconsumeTimes is stored back into the retry topic, 10 s later
    (delay level 3), instead of into %DLQ%G (RETRY-4)."""

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        if msg.topic.startswith("%DLQ%"):
            props = {**dict(msg.properties), "DELAY": "3"}
            msg = attrs.evolve(msg, topic="%RETRY%G", properties=props, stored_properties=None)
        return super().put_message(msg)


def test_a_broker_that_never_dead_letters_keeps_poison_messages_out_of_the_dlq() -> None:
    # Only the poison messages fail; after maxReconsumeTimes (3) each belongs in %DLQ%G.
    hooks = SimHooks(master_store=NeverDeadLetters)
    broken = run("", 1500, hooks, fail_rate=0.0, poison_rate=0.01)
    assert [inv.DLQ_MISSING] == list(violations(broken))
    assert 0 == broken.check.liveness["poisonInDlq"]
    clean = run("", 1500, fail_rate=0.0, poison_rate=0.01)
    poison = clean.check.liveness["poison"]
    assert ({}, poison) == (violations(clean), clean.check.liveness["poisonInDlq"])
    assert isinstance(poison, int) and poison >= 1


# --- duplicate-budget ------------------------------------------------------------------------------


class CommitsItsFirstOffset(ObservedProcessQueue):
    """removeMessage answers the first offset ever put, so the commit never moves past it."""

    first: int | None = None

    def put_messages(self, msgs: Sequence[StoredMessage]) -> bool:
        if self.first is None and msgs:
            self.first = msgs[0].queue_offset
        return super().put_messages(msgs)

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        offset = super().remove_messages(msgs)
        return offset if self.first is None or offset < 0 else self.first


def test_a_commit_that_never_advances_repeats_more_than_handovers_allow() -> None:
    # c0 crashes at 40 s and restarts: every handover starts its queues from the beginning,
    # and each duplicate is "allowed" (PQ-7, REBAL-9) — but far more of them than a handover
    # can repeat.
    schedule = "crash@40000:c0=5000"
    broken = run(schedule, 6000, SimHooks(process_queue=CommitsItsFirstOffset), consumers=2)
    assert inv.DUPLICATE_BUDGET in violations(broken)
    assert inv.DUPLICATE not in violations(broken)  # each one has a rule that allows it
    assert {} == violations(run(schedule, 6000, consumers=2))


# --- commit-budget ---------------------------------------------------------------------------------


class CommitsBackEveryOtherTime(ObservedProcessQueue):
    """commit answers an offset 10 below the true one every other time, so the orderly
    consumer's offset (written not increase-only, ORDER-11) keeps moving back."""

    commits = 0

    def commit(self) -> int:
        offset = super().commit()
        self.commits += 1
        return max(0, offset - 10) if self.commits % 2 else offset


def test_an_orderly_commit_that_keeps_moving_back_exceeds_the_commit_budget() -> None:
    hooks = SimHooks(process_queue=CommitsBackEveryOtherTime)
    broken = run("", 2000, hooks, orderly=True, consumers=2)
    # Each backward broker commit is allowed (ORDER-11: the writer's own offset went back), but
    # no handover or first-lock move is there to cause so many.
    assert [inv.COMMIT_BUDGET] == list(violations(broken))
    assert broken.check.allowed_by_kind[inv.NONMONOTONIC_COMMIT]["ORDER-11"] > 10
    assert {} == violations(run("", 2000, orderly=True, consumers=2))
