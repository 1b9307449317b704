"""The whole pull loop on the fake clock: PullMessageService → ReferencePushConsumer (FLOW, REQ,
RESULT) → ReferenceRemoting → ReferenceBroker / ReferenceMessageStore → ScriptedConsumeService →
offset store. Every expected time and offset below is worked out by hand from the rulebooks.

Records are 200 bytes (topic "T", property TAGS=A, body 102 bytes, LAYOUT-5 in 4.9). A new group
on a young queue reads offset 0 from the broker (COMMIT-4), so every queue starts at 0; the
broker's hold checks run every 5 s from 5000 (HOLD-2).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pullspec.reference.areas.pull_loop import ScriptedConsumeService
from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.client_remoting import RemotingAdmin, RemotingOffsetClient
from pullspec.reference.offset_store import (
    ReferenceLocalFileOffsetStore,
    ReferenceRemoteOffsetStore,
    decode_offset_table,
)
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.pull_service import PullRequest
from pullspec.reference.push_consumer import ReferencePushConsumer, ServiceState
from pullspec.reference.remoting import ReferenceRemoting
from pullspec.reference.scheduler import Scheduler
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import PullResponse
from pullspec.spec.config import StoreConfig
from pullspec.spec.consumer_config import ConsumeMode, ConsumerConfig, MessageModel
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError
from pullspec.spec.message import BrokerInnerMessage, MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.pull_actions import (
    Delay,
    DelayReason,
    Drop,
    FlowControlCounters,
    Immediately,
    Pull,
)
from pullspec.spec.pull_request import PullMessageRequestHeader
from pullspec.spec.status import PullStatus
from tests.pull_harness import StaticAssignment

V47, V49 = Profile.V4_7, Profile.V4_9
Q0 = MessageQueue("T", "broker-a", 0)
BODY = bytes(102)
TINY = StoreConfig(
    mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
)
COUNT, SIZE, SPAN = (
    DelayReason.CACHED_MESSAGE_COUNT,
    DelayReason.CACHED_MESSAGE_SIZE,
    DelayReason.MAX_SPAN,
)
NOW = Immediately()
FOUND, NO_NEW, ILLEGAL = PullStatus.FOUND, PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL


class RecordingOffsetStore(ReferenceRemoteOffsetStore):
    """The remote offset store, recording every updateOffset and persistAll it gets."""

    def __init__(self, remoting: ReferenceRemoting, clock: ManualClock) -> None:
        super().__init__(RemotingOffsetClient(remoting, "G", V49), "G")
        self.clock = clock
        #: (time, offset, increase_only) of every updateOffset.
        self.updates: list[tuple[int, int, bool]] = []
        #: (time, queues) of every persistAll.
        self.persists: list[tuple[int, list[MessageQueue]]] = []

    def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        self.updates.append((self.clock.now_ms(), offset, increase_only))
        super().update_offset(mq, offset, increase_only)

    def persist_all(self, mqs: Collection[MessageQueue] | None) -> None:
        self.persists.append((self.clock.now_ms(), sorted(mqs or ())))
        super().persist_all(mqs)


@attrs.define
class Script:
    """The scripted listener: a batch waits while its queue or one of its offsets is blocked."""

    blocked_queues: set[int] = attrs.Factory(set)
    blocked_offsets: set[int] = attrs.Factory(set)

    def __call__(self, msgs: Sequence[StoredMessage], mq: MessageQueue) -> bool:
        if mq.queue_id in self.blocked_queues:
            return False
        return not any(m.queue_offset in self.blocked_offsets for m in msgs)


@attrs.define
class World:
    """One client, one broker "broker-a" with topic T, and the scripted consumption."""

    clock: ManualClock
    scheduler: Scheduler
    broker: ReferenceBroker
    remoting: ReferenceRemoting
    addr: str
    offsets: RecordingOffsetStore
    assignment: StaticAssignment
    script: Script
    consume: ScriptedConsumeService
    consumer: ReferencePushConsumer

    def send(self, n: int, queue_id: int = 0, body: bytes = BODY) -> None:
        for _ in range(n):
            msg = BrokerInnerMessage("T", queue_id, body, {"TAGS": "A"})
            self.remoting.send_message(self.addr, msg)

    def start(self) -> None:
        self.consumer.start()
        self.assignment.start(self.consumer)

    def release(self) -> None:
        self.script.blocked_queues.clear()
        self.script.blocked_offsets.clear()
        self.consume.release()

    def sent(self) -> list[tuple[int, int, int, int]]:
        """(time, queue offset, sys flag, commit offset) of every pull put on the wire."""
        return [
            (s.at, s.header.queue_offset, s.header.sys_flag, s.header.commit_offset)
            for s in self.remoting.sent
        ]

    def attempts(self) -> list[tuple[int, int, Pull | Delay | Drop]]:
        """(time, cursor, action) of every pullMessage attempt."""
        return [(a.at, a.next_offset, a.action) for a in self.consumer.attempts]

    def outcomes(self) -> list[tuple[int, PullStatus | None, int, Immediately | Delay | None]]:
        """(time, status, cursor after, re-enqueue) of every answer (status None: exception)."""
        return [(o.at, o.status, o.next_offset, o.reenqueue) for o in self.consumer.outcomes]

    def committed(self) -> list[tuple[int, int]]:
        """(time, offset) of every increase-only commit the consume service made."""
        return [(t, offset) for t, _, offset in self.consume.committed]

    def memory(self, mq: MessageQueue = Q0) -> int | None:
        """The client's in-memory offset of `mq`."""
        return self.offsets.clone_offset_table(None).get(mq)

    def broker_offset(self, queue_id: int = 0) -> int | None:
        """The broker's committed offset of T/queue_id for group G."""
        return self.broker.offsets.get("T@G", {}).get(queue_id)


def world(
    config: ConsumerConfig | None = None,
    store_config: StoreConfig | None = None,
    queues: int = 1,
    remoting_type: type[ReferenceRemoting] = ReferenceRemoting,
) -> World:
    clock = ManualClock(0)
    scheduler = Scheduler(clock)
    store = ReferenceMessageStore(store_config or StoreConfig(), V49, clock=clock)
    broker = ReferenceBroker(store, clock=clock)
    broker.create_topic("T", queues)
    broker.register_consumer("G", {"T": "*"})
    remoting = remoting_type(scheduler)
    addr = remoting.register_broker("broker-a", 0, broker)
    offsets = RecordingOffsetStore(remoting, clock)
    cfg = config or ConsumerConfig()
    mqs = [MessageQueue("T", "broker-a", q) for q in range(queues)]
    assignment = StaticAssignment(
        "G", mqs, {"T": "*"}, offsets, RemotingAdmin(remoting), cfg, V49, clock
    )
    script = Script()
    consume = ScriptedConsumeService(scheduler, offsets, script)
    consumer = ReferencePushConsumer(
        "G", cfg, V49, scheduler, remoting, offsets, consume, assignment
    )
    return World(
        clock, scheduler, broker, remoting, addr, offsets, assignment, script, consume, consumer
    )


# --- the scripted scenario: put → pull → consume → commit, with flow control --------------------


def test_messages_are_pulled_consumed_and_committed_through_count_flow_control() -> None:
    """pull_batch_size 3, pull_threshold_for_queue 5; consumption blocked until 120 ms.

    0: pulls at 0 and 3 cache 6 > 5 messages, so the attempts at 0, 50 and 100 wait 50 ms each
    (FLOW-6). 120: the six are consumed; removeMessage commits 1 … 6 (PQ-7, CONC-9).
    150: pulls at 6 (commit 6, sys flag 3), 9 (commit 9) and 10 (commit 10, held: the queue
    ends at 10). 20000: the first hold check 15 s after 150 answers NO_NEW_MSG (HOLD-7) and the
    request goes straight back (RESULT-8).
    """
    w = world(ConsumerConfig(pull_batch_size=3, pull_threshold_for_queue=5))
    w.send(10)
    w.script.blocked_queues.add(0)
    w.start()
    w.scheduler.run_until(120)
    assert [(0, 0, 2, 0), (0, 3, 2, 0)] == w.sent()
    assert [
        (0, 0, Pull(0)),
        (0, 3, Pull(3)),
        (0, 6, Delay(50, COUNT)),
        (50, 6, Delay(50, COUNT)),
        (100, 6, Delay(50, COUNT)),
    ] == w.attempts()
    assert ([], 0, None) == (w.committed(), w.memory(), w.broker_offset())
    w.release()
    w.scheduler.run_until(149)
    assert [(120, n) for n in range(1, 7)] == w.committed()
    assert (6, None) == (w.memory(), w.broker_offset())
    w.scheduler.run_until(20_000)
    assert [
        (0, 0, 2, 0),
        (0, 3, 2, 0),
        (150, 6, 3, 6),
        (150, 9, 3, 9),
        (150, 10, 3, 10),
        (20_000, 10, 3, 10),
    ] == w.sent()
    assert [(150, 7), (150, 8), (150, 9), (150, 10)] == w.committed()[6:]
    assert [
        (0, FOUND, 3, NOW),
        (0, FOUND, 6, NOW),
        (150, FOUND, 9, NOW),
        (150, FOUND, 10, NOW),
        (20_000, NO_NEW, 10, NOW),
    ] == w.outcomes()
    assert (10, 10) == (w.memory(), w.broker_offset())
    # OFFSET-8: persistAll of the table's queues first at 10 s, then every 5 s.
    assert [(10_000, [Q0]), (15_000, [Q0]), (20_000, [Q0])] == w.offsets.persists
    assert FlowControlCounters(3, 0) == w.consumer.counters
    assert 1 == len([m for _, m in w.consumer.log if "flow control" in m])  # FLOW-9: the 1st
    assert ([], [], []) == (w.consume.waiting, w.consume.discarded, w.consumer.pull_service.log)


def test_size_flow_control_trips_above_one_mib() -> None:
    """pull_threshold_size_for_queue 1 MiB; 700 000-byte bodies, one per pull (the first record
    of a pull is always taken, the second passes the 256 KiB in-memory limit, BATCH-2).

    Two cached bodies are 1 400 000 B = 1 MiB (floor), not > 1, so a third is pulled; three are
    2 MiB > 1 and the attempts at 0, 50, 100 wait 50 ms (FLOW-5, FLOW-7)."""
    w = world(ConsumerConfig(pull_threshold_size_for_queue=1))
    w.send(4, body=bytes(700_000))
    w.script.blocked_queues.add(0)
    w.start()
    w.scheduler.run_until(120)
    assert [(0, 0, 2, 0), (0, 1, 2, 0), (0, 2, 2, 0)] == w.sent()
    assert [(0, 3, Delay(50, SIZE)), (50, 3, Delay(50, SIZE)), (100, 3, Delay(50, SIZE))] == (
        w.attempts()[3:]
    )
    w.release()
    w.scheduler.run_until(200)
    assert [(0, 0, 2, 0), (0, 1, 2, 0), (0, 2, 2, 0), (150, 3, 3, 3), (150, 4, 3, 4)] == w.sent()
    assert [(120, 1), (120, 2), (120, 3), (150, 4)] == w.committed()
    assert (4, 4, FlowControlCounters(3, 0)) == (w.memory(), w.broker_offset(), w.consumer.counters)


def test_span_flow_control_counts_offset_distance_not_messages() -> None:
    """pull_batch_size 2, consume_concurrently_max_span 3; offsets 0, 4 and 5 wait.

    Pulls at 0, 2, 4 leave {0, 4, 5} cached: 3 messages but a span of 5 > 3 (FLOW-8, PQ-6), so
    the attempts at 0, 50, 100 wait 50 ms on the span counter. While 0 is cached every commit is
    0 (removeMessage returns the smallest cached offset); releasing it commits 4, 5, 6."""
    w = world(ConsumerConfig(pull_batch_size=2, consume_concurrently_max_span=3))
    w.send(8)
    w.script.blocked_offsets |= {0, 4, 5}
    w.start()
    w.scheduler.run_until(120)
    assert [(0, 0, 2, 0), (0, 2, 2, 0), (0, 4, 2, 0)] == w.sent()
    assert [(0, 6, Delay(50, SPAN)), (50, 6, Delay(50, SPAN)), (100, 6, Delay(50, SPAN))] == (
        w.attempts()[3:]
    )
    assert [(0, 0), (0, 0), (0, 0)] == w.committed()
    w.release()
    w.scheduler.run_until(200)
    assert [(120, 4), (120, 5), (120, 6), (150, 7), (150, 8)] == w.committed()[3:]
    assert [(150, 6, 3, 6), (150, 8, 3, 8)] == w.sent()[3:]
    assert (8, 8, FlowControlCounters(0, 3)) == (w.memory(), w.broker_offset(), w.consumer.counters)


def test_offset_illegal_after_expired_files_drops_fixes_up_and_recovers() -> None:
    """Tiny files: 1 KiB commit-log files (five 200-byte records each), 4-entry consume-queue
    files, every file but the last expired at once.

    0: offsets 0 … 4 are pulled ([0-3] ends consume-queue file 0, then [4]) and committed; the
    pull at 5 (commit 5) is held. 1000: suspend. 2000: ten more messages; the held pull returns
    [5] (committed 6) and the next attempts are paused; files 0 and 1 expire, the queue's min
    offset becomes 10. 4500: resume. 5000: the pull at 6 (commit 6) answers OFFSET_ILLEGAL with
    nextBeginOffset 10: the queue is dropped, not re-enqueued (RESULT-10). 15000: the fix-up
    writes 10 (increase_only False), persists it and removes the queue, its offset with it
    (REBAL-16, REBAL-14). 20000: a rebalance re-creates the queue at the broker's 10 and
    consumes 10 … 14; 6 … 9 are gone with their files."""
    w = world(store_config=TINY)
    w.send(5)
    w.start()
    w.scheduler.run_until(1000)
    assert ([(0, 0, 2, 0), (0, 4, 3, 4), (0, 5, 3, 5)], 5, 5) == (
        w.sent(),
        w.memory(),
        w.broker_offset(),
    )
    w.consumer.suspend()
    w.scheduler.run_until(2000)
    w.send(10)
    assert (2, 10, 15) == (
        w.broker.store.delete_expired_files(),
        w.broker.store.get_min_offset_in_queue("T", 0),
        w.broker.store.get_max_offset_in_queue("T", 0),
    )
    w.scheduler.run_until(4500)
    w.consumer.resume()
    first = w.assignment.pull_requests[Q0]
    w.scheduler.run_until(5000)
    assert [
        (2000, 6, Delay(1000, DelayReason.PAUSED)),
        (3000, 6, Delay(1000, DelayReason.PAUSED)),
        (4000, 6, Delay(1000, DelayReason.PAUSED)),
        (5000, 6, Pull(6)),
    ] == w.attempts()[3:]
    assert (5000, ILLEGAL, 10, None) == w.outcomes()[-1]
    assert (True, 6, 6) == (first.process_queue.dropped, w.memory(), w.broker_offset())
    w.scheduler.run_until(14_999)
    assert (7, 6, 6, [Q0]) == (  # no attempt after 5000: the request died (PULLQ-8)
        len(w.consumer.attempts),
        w.memory(),
        w.broker_offset(),
        list(w.assignment.process_queues()),
    )
    w.scheduler.run_until(15_000)
    assert (None, 10, []) == (w.memory(), w.broker_offset(), list(w.assignment.process_queues()))
    w.scheduler.run_until(20_000)
    w.assignment.do_rebalance()
    w.scheduler.run_until(25_000)
    second = w.assignment.pull_requests[Q0]
    assert (True, False) == (first == second, first is second)  # PULLQ-7: equal, not the same
    assert [(5000, 6, 3, 6), (20_000, 10, 3, 10), (20_000, 12, 3, 12), (20_000, 15, 3, 15)] == (
        w.sent()[3:]
    )
    assert [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14] == [o for _, _, (o,) in w.consume.consumed]
    assert [
        (0, 0, False),  # READ_FROM_STORE at the first rebalance (OFFSET-5)
        *[(0, n, True) for n in range(1, 6)],
        (2000, 6, True),
        (15_000, 10, False),  # the fix-up overwrites (OFFSET-3)
        (20_000, 10, False),  # READ_FROM_STORE at the second rebalance
        *[(20_000, n, True) for n in range(11, 16)],
    ] == w.offsets.updates
    assert [(10_000, [Q0]), (15_000, []), (20_000, []), (25_000, [Q0])] == w.offsets.persists
    assert (15, 15, 10) == (w.memory(), w.broker_offset(), len(w.consumer.attempts))
    assert [("warn", "fix the pull request offset, " + str(Q0) + " 10")] == [
        e for e in w.consumer.log if "fix the pull" in e[1]
    ]


def test_a_held_pull_is_answered_on_arrival_and_by_the_hold_check_after_15_s() -> None:
    """0: pull at 0, held (empty queue). 3000: a message wakes it: FOUND [0], committed 1, pull
    at 1 (commit 1) held. 20000: the first check at or after 3000 + 15000 answers NO_NEW_MSG."""
    w = world()
    w.start()
    w.scheduler.run_until(3000)
    assert ([(0, 0, 2, 0)], []) == (w.sent(), w.outcomes())
    w.send(1)
    w.scheduler.run_until(19_999)
    assert [(0, 0, 2, 0), (3000, 1, 3, 1)] == w.sent()
    w.scheduler.run_until(20_000)
    assert [(3000, FOUND, 1, NOW), (20_000, NO_NEW, 1, NOW)] == w.outcomes()
    assert [(0, 0, 2, 0), (3000, 1, 3, 1), (20_000, 1, 3, 1)] == w.sent()


def test_a_paused_consumer_pulls_nothing_and_resumes() -> None:
    """A pull in flight when suspend() is called is still answered (200); every later attempt
    waits 1000 ms (FLOW-4) but still touches lastPullTimestamp (FLOW-2); resume() at 2500 lets
    the attempt at 3200 pull the two messages sent at 1000."""
    w = world()
    w.start()
    w.scheduler.run_until(100)
    w.consumer.suspend()
    w.scheduler.run_until(200)
    w.send(1)
    w.scheduler.run_until(1000)
    w.send(2)
    w.scheduler.run_until(2500)
    assert ([(0, 0, 2, 0)], 2200) == (
        w.sent(),
        w.assignment.pull_requests[Q0].process_queue.last_pull_timestamp,
    )
    w.consumer.resume()
    w.scheduler.run_until(4000)
    paused = Delay(1000, DelayReason.PAUSED)
    assert [
        (0, 0, Pull(0)),
        (200, 1, paused),
        (1200, 1, paused),
        (2200, 1, paused),
        (3200, 1, Pull(1)),
        (3200, 3, Pull(3)),
    ] == w.attempts()
    assert [(200, 1), (3200, 2), (3200, 3)] == w.committed()


def test_faults_delay_by_e_a_timeout_and_a_connect_error() -> None:
    """100: the broker goes down under a held pull, whose answer (15000) never arrives; the
    client times out at 30000 (REQ-12) and waits E = 1000 (RESULT-13). The attempts at 31000 and
    32000 fail to connect (REQ-11, later(E)); the broker is back at 32500 and 33000 pulls."""
    w = world()
    w.start()
    w.scheduler.run_until(100)
    w.remoting.set_broker_down(w.addr, True)
    w.scheduler.run_until(32_500)
    w.remoting.set_broker_down(w.addr, False)
    w.scheduler.run_until(33_000)
    kernel = Delay(1000, DelayReason.PULL_KERNEL_EXCEPTION)
    assert [
        (30_000, None, 0, Delay(1000, DelayReason.PULL_EXCEPTION)),
        (31_000, None, 0, kernel),
        (32_000, None, 0, kernel),
    ] == w.outcomes()
    assert [(0, 0, 2, 0), (33_000, 0, 2, 0)] == w.sent()
    assert 2 == len([m for level, m in w.consumer.log if "pullKernelImpl exception" in m])


def test_a_missing_subscription_delays_by_e_until_it_is_back() -> None:
    w = world()
    w.start()
    w.assignment.unsubscribe("T")
    w.scheduler.run_until(2500)
    w.assignment.subscribe("T", "*")
    w.scheduler.run_until(3000)
    none = Delay(1000, DelayReason.NO_SUBSCRIPTION)
    assert [(0, 0, none), (1000, 0, none), (2000, 0, none), (3000, 0, Pull(0))] == w.attempts()


def test_a_broadcasting_consumer_never_piggy_backs_and_persists_to_its_file(
    tmp_path: Path,
) -> None:
    """BROADCASTING: the local file store (OFFSET-1); nothing is stored, so the queue starts at
    the broker's max offset 0 (REBAL-17); pulls send commit 0 without the commit bit (REQ-2);
    the persist at 10 s writes offsets.json (OFFSET-11)."""
    w = world(ConsumerConfig(message_model=MessageModel.BROADCASTING))
    local = ReferenceLocalFileOffsetStore(tmp_path)
    w.assignment = StaticAssignment(
        "G", [Q0], {"T": "*"}, local, RemotingAdmin(w.remoting), w.consumer.config, V49, w.clock
    )
    w.consume = ScriptedConsumeService(w.scheduler, local, w.script)
    w.consumer = ReferencePushConsumer(
        "G", w.consumer.config, V49, w.scheduler, w.remoting, local, w.consume, w.assignment
    )
    w.start()
    w.scheduler.run_until(100)
    w.send(1)
    w.scheduler.run_until(10_000)
    assert [(0, 0, 2, 0), (100, 1, 2, 0)] == w.sent()
    assert {Q0: 1} == decode_offset_table((tmp_path / "offsets.json").read_text())
    assert {} == w.broker.offsets


def test_an_orderly_first_pull_rereads_the_offset_once() -> None:
    """4.9: the new queue is locked at creation (REBAL-11); the first attempt re-reads the
    broker's offset (FLOW-12), here moved back from 3 to 1 after the rebalance read it."""
    w = world(ConsumerConfig(consume_mode=ConsumeMode.ORDERLY))
    w.send(4)
    w.broker.commit_offset("G", "T", 0, 3)
    w.start()
    assert 3 == w.assignment.pull_requests[Q0].next_offset
    w.broker.commit_offset("G", "T", 0, 1)
    w.scheduler.run_until(0)
    assert (0, 1, 3, 1) == w.sent()[0]
    assert True is w.assignment.pull_requests[Q0].previously_locked


def test_a_4_7_orderly_queue_waits_for_its_lock() -> None:
    w = world(ConsumerConfig(consume_mode=ConsumeMode.ORDERLY))
    w.assignment = StaticAssignment(
        "G", [Q0], {"T": "*"}, w.offsets, RemotingAdmin(w.remoting), w.consumer.config, V47, w.clock
    )
    w.consumer = ReferencePushConsumer(
        "G", w.consumer.config, V47, w.scheduler, w.remoting, w.offsets, w.consume, w.assignment
    )
    w.start()
    w.scheduler.run_until(2500)
    w.assignment.lock_all()
    w.scheduler.run_until(3000)
    locked = Delay(1000, DelayReason.NOT_LOCKED)
    assert [(0, 0, locked), (1000, 0, locked), (2000, 0, locked), (3000, 0, Pull(0))] == (
        w.attempts()
    )


def test_direct_attempts_of_a_stopped_consumer_and_an_unknown_broker() -> None:
    w = world()
    pq = ReferenceProcessQueue(w.clock, V49)
    w.consumer.pull_message(PullRequest("G", Q0, pq, 0))  # not started: FLOW-3
    w.consumer.start()
    w.consumer.pull_message(PullRequest("G", MessageQueue("T", "broker-x", 0), pq, 0))
    assert [
        (0, 0, Delay(1000, DelayReason.CONSUMER_NOT_RUNNING)),
        (0, 0, Pull(0)),
    ] == w.attempts()
    assert (0, None, 0, Delay(1000, DelayReason.PULL_KERNEL_EXCEPTION)) == w.outcomes()[0]
    assert "The broker[broker-x] not exist" in w.consumer.log[-1][1]


def test_shutdown_persists_once_and_the_requests_die() -> None:
    w = world()
    w.send(2)
    w.start()
    w.scheduler.run_until(1000)
    w.consumer.shutdown()
    w.send(1)
    w.scheduler.run_until(40_000)
    assert [(1000, [Q0])] == w.offsets.persists
    assert [(0, 0, 2, 0), (0, 2, 3, 2)] == w.sent()  # the held pull's answer at 1000 dies
    assert ServiceState.SHUTDOWN_ALREADY == w.consumer.service_state
    with pytest.raises(MQClientError):
        w.consumer.start()


# --- bad input -----------------------------------------------------------------------------------


def consumer_args(w: World) -> dict[str, Any]:
    return {
        "group": "G2",
        "config": w.consumer.config,
        "profile": V49,
        "scheduler": w.scheduler,
        "remoting": w.remoting,
        "offset_store": w.offsets,
        "consume_service": w.consume,
        "rebalance_hooks": w.assignment,
    }


@pytest.mark.parametrize(
    "name",
    [
        "group",
        "config",
        "scheduler",
        "remoting",
        "offset_store",
        "consume_service",
        "rebalance_hooks",
    ],
)
def test_the_consumer_rejects_a_wrong_collaborator(name: str) -> None:
    w = world()
    args = consumer_args(w)
    args[name] = 42
    with pytest.raises(InvalidTypeError) as err:
        ReferencePushConsumer(**args)
    assert name == err.value.name


def test_consumer_methods_reject_bad_input_and_change_nothing() -> None:
    w = world()
    w.start()
    w.scheduler.run_until(0)
    before = (w.attempts(), w.scheduler.pending(), w.consumer.pull_service.queued)
    with pytest.raises(InvalidTypeError) as err:
        w.consumer.pull_message("pr")  # type: ignore[arg-type]
    assert "pull_request" == err.value.name
    with pytest.raises(InvalidArgumentError) as bad:
        w.consumer.execute_pull_request_later(w.assignment.pull_requests[Q0], -50)
    assert "delay_ms" == bad.value.name
    with pytest.raises(InvalidTypeError):
        ReferencePushConsumer(**consumer_args(w), pull_service="service")  # type: ignore[arg-type]
    assert before == (w.attempts(), w.scheduler.pending(), w.consumer.pull_service.queued)


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda a: a.subscribe(1, "*"), InvalidTypeError, "topic"),
        (lambda a: a.subscribe("T", None), InvalidTypeError, "expression"),
        (lambda a: a.unsubscribe(None), InvalidTypeError, "topic"),
        (lambda a: a.subscription(3), InvalidTypeError, "topic"),
        (lambda a: a.remove_process_queue("T"), InvalidTypeError, "mq"),
        (lambda a: a.compute_pull_from_where(0), InvalidTypeError, "mq"),
        (lambda a: a.start(object()), InvalidTypeError, "dispatcher"),
    ],
)
def test_static_assignment_rejects_bad_input(call: Any, error: type[Exception], name: str) -> None:
    w = world()
    w.start()
    with pytest.raises(error) as err:
        call(w.assignment)
    assert name == err.value.name  # type: ignore[attr-defined]
    assert ([Q0], "*") == (
        list(w.assignment.process_queues()),
        getattr(w.assignment.subscription("T"), "sub_string", None),
    )


def test_static_assignment_needs_start_and_collaborators() -> None:
    w = world()
    with pytest.raises(InvalidArgumentError) as err:
        w.assignment.do_rebalance()
    assert "dispatcher" == err.value.name
    with pytest.raises(InvalidTypeError) as typed:
        queues: list[Any] = ["T"]
        StaticAssignment(
            "G", queues, {}, w.offsets, RemotingAdmin(w.remoting), ConsumerConfig(), V49, w.clock
        )
    assert "mq" == typed.value.name
    with pytest.raises(InvalidTypeError) as admin:
        admin_object: Any = object()
        StaticAssignment("G", [Q0], {}, w.offsets, admin_object, ConsumerConfig(), V49, w.clock)
    assert "admin" == admin.value.name


@pytest.mark.parametrize(
    ("args", "error", "name"),
    [
        (("msgs", None, Q0, True), InvalidTypeError, "msgs"),
        (([], "pq", Q0, True), InvalidTypeError, "process_queue"),
        (([], None, "T", True), InvalidTypeError, "mq"),
        (([], None, Q0, 1), InvalidTypeError, "dispatch_to_consume"),
    ],
)
def test_scripted_consume_service_rejects_bad_input(
    args: tuple[Any, ...], error: type[Exception], name: str
) -> None:
    w = world()
    pq = ReferenceProcessQueue(w.clock, V49)
    msgs, queue, mq, dispatch = args
    with pytest.raises(error) as err:
        w.consume.submit_consume_request(msgs, pq if queue is None else queue, mq, dispatch)
    assert (name, []) == (err.value.name, w.scheduler.pending()[2:])  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgumentError):
        ScriptedConsumeService(w.scheduler, w.offsets, batch_size=0)


# --- properties: gates, dropped queues, no loss ---------------------------------------------------

MIB = 1 << 20


def gate_violations(consumer: ReferencePushConsumer, header: PullMessageRequestHeader) -> list[str]:
    """The gates a pull going on the wire should have passed (FLOW-1 … FLOW-13), read from the
    live state of the request the pull thread is handling."""
    pr = consumer.pull_service.current
    if pr is None:
        return [f"pull sent outside the pull thread: {header}"]
    pq, cfg = pr.process_queue, consumer.config
    closed = {
        "consumer not running": not consumer.running,
        "consumer paused": consumer.paused,
        "process queue dropped": pq.dropped,
        "count": pq.msg_count > cfg.pull_threshold_for_queue,
        "size": pq.msg_size // MIB > cfg.pull_threshold_size_for_queue,
        "span": pq.max_span > cfg.consume_concurrently_max_span,
        "no subscription": consumer.rebalance_hooks.subscription(header.topic) is None,
        "cursor": header.queue_offset != pr.next_offset,
    }
    return [f"{gate}: {header}" for gate, shut in closed.items() if shut]


class GateCheckingRemoting(ReferenceRemoting):
    """The remoting, checking every gate at the moment a pull is sent; the consumer swallows
    exceptions on this path (REQ-11), so violations are collected, not raised."""

    def __init__(self, scheduler: Scheduler, latency_ms: int = 0) -> None:
        super().__init__(scheduler, latency_ms)
        self.consumer: ReferencePushConsumer | None = None
        #: ids of process queues ever seen dropped (they stay referenced by the machine).
        self.dropped_ids: set[int] = set()
        self.violations: list[str] = []

    def pull_message_async(
        self,
        addr: str,
        header: PullMessageRequestHeader,
        timeout_ms: int,
        on_response: Callable[[PullResponse], None],
        on_exception: Callable[[BaseException], None],
    ) -> int:
        assert self.consumer is not None
        self.violations += gate_violations(self.consumer, header)
        current = self.consumer.pull_service.current
        if current is not None and id(current.process_queue) in self.dropped_ids:
            self.violations.append(f"a dropped queue pulled again: {header}")
        return super().pull_message_async(addr, header, timeout_ms, on_response, on_exception)


@given(
    threshold=st.integers(1, 6),
    span=st.integers(1, 6),
    batch=st.integers(1, 4),
    size=st.integers(1, 2),
    bodies=st.lists(st.sampled_from([102, 700_000]), min_size=1, max_size=12),
    blocked=st.sets(st.integers(0, 11)),
    release_at=st.integers(0, 500),
)
@settings(max_examples=150, deadline=None)
def test_no_pull_passes_a_closed_gate_and_everything_is_consumed(
    threshold: int,
    span: int,
    batch: int,
    size: int,
    bodies: list[int],
    blocked: set[int],
    release_at: int,
) -> None:
    config = ConsumerConfig(
        pull_threshold_for_queue=threshold,
        consume_concurrently_max_span=span,
        pull_batch_size=batch,
        pull_threshold_size_for_queue=size,
    )
    w = world(config, remoting_type=GateCheckingRemoting)
    assert isinstance(w.remoting, GateCheckingRemoting)
    w.remoting.consumer = w.consumer
    for body in bodies:
        w.send(1, body=bytes(body))
    w.script.blocked_offsets |= blocked
    w.start()
    w.scheduler.run_until(release_at)
    w.release()
    w.scheduler.run_until(release_at + 1000)
    for reason in {a.action.reason for a in w.consumer.attempts if isinstance(a.action, Delay)}:
        event(f"delay {reason.value}")
    assert [] == w.remoting.violations
    assert list(range(len(bodies))) == sorted(o for _, _, offs in w.consume.consumed for o in offs)
    assert len(bodies) == w.memory()


QUEUES = (Q0, MessageQueue("T", "broker-a", 1))


class PullLoopMachine(RuleBasedStateMachine):
    """Two queues, random sends (small and 700 kB bodies), time, blocked consumption, pauses,
    queue drops and rebalances."""

    @initialize(
        threshold=st.integers(1, 8),
        span=st.integers(1, 4),
        batch=st.integers(1, 4),
        size=st.integers(1, 2),
        blocked=st.sets(st.integers(0, 1)),
    )
    def setup(self, threshold: int, span: int, batch: int, size: int, blocked: set[int]) -> None:
        config = ConsumerConfig(
            pull_threshold_for_queue=threshold,
            consume_concurrently_max_span=span,
            pull_batch_size=batch,
            pull_threshold_size_for_queue=size,
        )
        self.w = world(config, queues=2, remoting_type=GateCheckingRemoting)
        assert isinstance(self.w.remoting, GateCheckingRemoting)
        self.net = self.w.remoting
        self.net.consumer = self.w.consumer
        self.seen: list[ProcessQueue] = []
        self.w.script.blocked_queues |= blocked
        self.w.start()
        self.w.scheduler.run_for(0)  # the first pulls go out at 0

    @rule(
        queue_id=st.integers(0, 1), n=st.integers(1, 8), big=st.booleans(), ms=st.integers(0, 200)
    )
    def send_then_run(self, queue_id: int, n: int, big: bool, ms: int) -> None:
        self.w.send(n, queue_id, bytes(700_000) if big else BODY)
        self.w.scheduler.run_for(ms)

    @rule(ms=st.integers(0, 200))
    def run_briefly(self, ms: int) -> None:
        self.w.scheduler.run_for(ms)

    @rule(ms=st.integers(0, 20_000))
    def run(self, ms: int) -> None:
        self.w.scheduler.run_for(ms)

    @rule(queue_id=st.integers(0, 1))
    def block(self, queue_id: int) -> None:
        self.w.script.blocked_queues.add(queue_id)

    @rule(offset=st.integers(0, 6))
    def block_offset(self, offset: int) -> None:
        self.w.script.blocked_offsets.add(offset)

    @rule()
    def release(self) -> None:
        self.w.release()

    @rule()
    def suspend_or_resume(self) -> None:
        if self.w.consumer.paused:
            self.w.consumer.resume()
        else:
            self.w.consumer.suspend()

    @rule(queue_id=st.integers(0, 1))
    def drop(self, queue_id: int) -> None:
        self.w.assignment.remove_process_queue(QUEUES[queue_id])

    @rule()
    def rebalance(self) -> None:
        self.w.consumer.do_rebalance()

    def teardown(self) -> None:
        # Coverage, shown by --hypothesis-show-statistics: which delays the examples reached.
        for reason in sorted(
            {a.action.reason.value for a in self.w.consumer.attempts if isinstance(a.action, Delay)}
        ):
            event(f"delay {reason}")
        event(
            f"pulls sent: {'0' if not self.net.sent else '1-9' if len(self.net.sent) < 10 else '10+'}"
        )

    @invariant()
    def track_dropped_queues(self) -> None:
        for pr in self.w.assignment.pull_requests.values():
            if all(pr.process_queue is not pq for pq in self.seen):
                self.seen.append(pr.process_queue)
        self.net.dropped_ids |= {id(pq) for pq in self.seen if pq.dropped}

    @invariant()
    def no_pull_while_a_gate_is_closed(self) -> None:
        assert [] == self.net.violations

    @invariant()
    def committed_offsets_never_pass_an_unconsumed_or_cached_message(self) -> None:
        consumed = {(mq, o) for _, mq, offsets in self.w.consume.consumed for o in offsets}
        for mq in QUEUES:
            committed = [
                c for c in (self.w.memory(mq), self.w.broker_offset(mq.queue_id)) if c is not None
            ]
            assert [] == [(mq, o) for c in committed for o in range(c) if (mq, o) not in consumed]
            live = self.w.assignment.process_queues().get(mq)
            if live is not None and not live.dropped and live.cached_offsets:
                assert [] == [c for c in committed if c > live.cached_offsets[0]]

    @invariant()
    def nothing_failed(self) -> None:
        logs = self.w.consumer.log + self.w.consumer.pull_service.log + self.w.offsets.log
        assert [] == [message for level, message in logs if level == "error"]


TestPullLoopMachine = PullLoopMachine.TestCase
TestPullLoopMachine.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
