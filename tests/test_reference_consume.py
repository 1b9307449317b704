"""The reference consume services on the fake clock: concurrent send-back, local retry, the
cleaner and shutdown; orderly suspension, the DLQ path, the time slice and lease expiry. Every
expected offset and time is worked out by hand from the rulebook."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from pullspec.reference.consume_concurrently import (
    ConsumeRecord,
    ReferenceConsumeConcurrentlyService,
)
from pullspec.reference.consume_orderly import OrderlyConsumeRecord, ReferenceConsumeOrderlyService
from pullspec.reference.offset_store import ReferenceRemoteOffsetStore
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.scheduler import Scheduler
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.clock import ManualClock
from pullspec.spec.consume_concurrently import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeReturnType,
)
from pullspec.spec.consume_orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from pullspec.spec.consumer_config import ConsumeMode, ConsumerConfig, MessageModel
from pullspec.spec.errors import RejectedExecutionError
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ConsumeMessageService
from pullspec.spec.retry import ClientMessage, SendBackClient

MQ = MessageQueue("T", "broker-a", 0)
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
ORDERLY = ConsumerConfig(consume_mode=ConsumeMode.ORDERLY)


def msg(offset: int, props: dict[str, str] | None = None) -> StoredMessage:
    """A message of T at `offset`."""
    return StoredMessage("T", 0, offset, 1000 + offset, 0, 0, b"m", tuple((props or {}).items()))


class RecordingStore(ReferenceRemoteOffsetStore):
    """A remote offset store that also records every updateOffset with its time."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(OffsetBroker(), "G")
        self.clock = clock
        self.updates: list[tuple[int, int, bool]] = []

    def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        self.updates.append((self.clock.now_ms(), offset, increase_only))
        super().update_offset(mq, offset, increase_only)


class OffsetBroker:
    """The broker's consumer offsets (QUERY / UPDATE_CONSUMER_OFFSET)."""

    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}

    def query_offset(self, mq: MessageQueue) -> int:
        if mq not in self.offsets:
            raise MQBrokerError(22, "QUERY_NOT_FOUND")
        return self.offsets[mq]

    def update_offset(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        self.offsets[mq] = offset


class FakeSendBack:
    """SendBackClient recording both ways; `fail_rpc` / `fail_send` make them raise."""

    def __init__(self) -> None:
        self.rpcs: list[tuple[int, int, str | None, int]] = []
        self.sent: list[ClientMessage] = []
        self.fail_rpc = False
        self.fail_send = False

    def send_message_back(
        self,
        msg: StoredMessage,
        delay_level: int,
        broker_name: str | None,
        max_reconsume_times: int,
    ) -> None:
        if self.fail_rpc:
            raise MQClientError("send back RPC failed")
        self.rpcs.append((msg.queue_offset, delay_level, broker_name, max_reconsume_times))

    def send_retry_message(self, message: ClientMessage) -> None:
        if self.fail_send:
            raise MQClientError("producer send failed")
        self.sent.append(message)


class FakeLocking:
    """RebalanceImpl's lock / lockAll / unlockAll over one ProcessQueue."""

    def __init__(self, pq: ReferenceProcessQueue, clock: ManualClock) -> None:
        self.pq, self.clock = pq, clock
        self.calls: list[tuple[str, int]] = []
        self.fail_all = False

    def _mark(self) -> None:
        self.pq.locked = True
        self.pq.last_lock_timestamp = self.clock.now_ms()

    def lock(self, mq: MessageQueue) -> bool:
        self.calls.append(("lock", self.clock.now_ms()))
        self._mark()
        return True

    def lock_all(self) -> None:
        self.calls.append(("lock_all", self.clock.now_ms()))
        if self.fail_all:
            raise MQClientError("lockBatchMQ failed")
        self._mark()

    def unlock_all(self, oneway: bool) -> None:
        self.calls.append(("unlock_all", self.clock.now_ms()))
        self.pq.locked = False


Listener = Callable[[Sequence[StoredMessage], ConsumeConcurrentlyContext], object]


def concurrent(
    listener: Listener, config: ConsumerConfig | None = None, profile: Profile = Profile.V4_9
) -> tuple[
    ReferenceConsumeConcurrentlyService, ReferenceProcessQueue, RecordingStore, FakeSendBack
]:
    """A concurrent service at t=0 over one ProcessQueue of MQ."""
    clock = ManualClock(0)
    sched = Scheduler(clock)
    pq = ReferenceProcessQueue(clock, profile)
    store, back = RecordingStore(clock), FakeSendBack()
    svc = ReferenceConsumeConcurrentlyService(
        sched,
        group="G",
        config=config or ConsumerConfig(),
        profile=profile,
        listener=listener,  # type: ignore[arg-type]
        offset_store=store,
        send_back=back,
        process_queues=lambda: {MQ: pq},
    )
    return svc, pq, store, back


def feed(svc: ConsumeMessageService, pq: ReferenceProcessQueue, msgs: list[StoredMessage]) -> None:
    """What the pull callback does with a FOUND result: cache, then submit."""
    svc.submit_consume_request(msgs, pq, MQ, pq.put_messages(msgs))


# --- concurrent ----------------------------------------------------------------------------------


def test_a_failed_message_is_sent_back_and_the_offset_advances_past_it() -> None:
    svc, pq, store, back = concurrent(lambda msgs, ctx: LATER if msgs[0].queue_offset == 1 else OK)
    assert isinstance(svc, ConsumeMessageService)
    assert isinstance(back, SendBackClient)
    feed(svc, pq, [msg(0), msg(1), msg(2)])
    svc.scheduler.run_until(10_000)
    # CONSUMER_SEND_MSG_BACK for offset 1: delay level 0 (context default), broker of the
    # queue, maxReconsumeTimes −1 read as 16.
    assert [(1, 0, "broker-a", 16)] == back.rpcs
    assert [(0, 1, True), (0, 2, True), (0, 3, True)] == store.updates
    assert [] == pq.cached_offsets
    assert [OK, LATER, OK] == [r.status for r in svc.records]


def test_a_send_back_failure_is_retried_locally_after_5_s_with_reconsume_times_plus_1() -> None:
    seen: list[tuple[int, int, int, str | None]] = []

    def listener(msgs: Sequence[StoredMessage], ctx: ConsumeConcurrentlyContext) -> object:
        m = msgs[0]
        seen.append(
            (
                svc.scheduler.clock.now_ms(),
                m.queue_offset,
                m.reconsume_times,
                m.get_property("RETRY_TOPIC"),
            )
        )
        return LATER if (m.queue_offset, m.reconsume_times) == (1, 0) else OK

    svc, pq, store, back = concurrent(listener)
    back.fail_rpc = back.fail_send = True
    feed(svc, pq, [msg(0), msg(1), msg(2)])
    svc.scheduler.run_until(4_999)
    # Offset 1 stays cached, so every commit so far is 1 (increase-only).
    assert [(0, 1, True), (0, 1, True), (0, 1, True)] == store.updates
    assert [1] == pq.cached_offsets
    back.fail_rpc = back.fail_send = False
    svc.scheduler.run_until(10_000)
    # The retry at 5000 sees reconsumeTimes 1 and the property puts the failed fallback made.
    assert [(0, 0, 0, None), (0, 1, 0, None), (0, 2, 0, None), (5000, 1, 1, "T")] == seen
    assert (5000, 3, True) == store.updates[-1]
    assert [] == back.rpcs and [] == back.sent


def test_the_fallback_message_when_only_the_rpc_fails() -> None:
    svc, pq, _store, back = concurrent(lambda msgs, ctx: LATER)
    back.fail_rpc = True
    feed(svc, pq, [msg(0, {"UNIQ_KEY": "U"})])
    svc.scheduler.run_until(0)
    props = {"UNIQ_KEY": "U", "RETRY_TOPIC": "T", "RECONSUME_TIME": "1"}
    props |= {"MAX_RECONSUME_TIMES": "16", "DELAY": "3", "CONSUME_START_TIME": "0"}
    assert [ClientMessage("%RETRY%G", b"m", 0, props)] == back.sent
    assert [] == pq.cached_offsets


def test_ack_index_splits_a_batch_and_broadcasting_drops_failures() -> None:
    def ack_first(msgs: Sequence[StoredMessage], ctx: ConsumeConcurrentlyContext) -> object:
        ctx.ack_index = 0
        return OK

    svc, pq, store, back = concurrent(ack_first, ConsumerConfig(consume_message_batch_max_size=3))
    feed(svc, pq, [msg(0), msg(1), msg(2)])
    svc.scheduler.run_until(0)
    assert [(1, 0, "broker-a", 16), (2, 0, "broker-a", 16)] == back.rpcs
    assert [(0, 3, True)] == store.updates
    broadcast = ConsumerConfig(message_model=MessageModel.BROADCASTING)
    svc, pq, store, back = concurrent(lambda msgs, ctx: None, broadcast)
    feed(svc, pq, [msg(0)])
    svc.scheduler.run_until(0)
    assert ([], [(0, 1, True)]) == (back.rpcs, store.updates)
    assert ConsumeReturnType.RETURNNULL == svc.records[0].return_type


def test_an_ack_index_below_minus_one_leaves_the_messages_cached() -> None:
    def bad(msgs: Sequence[StoredMessage], ctx: ConsumeConcurrentlyContext) -> object:
        ctx.ack_index = -2
        return OK

    svc, pq, store, _back = concurrent(bad)
    feed(svc, pq, [msg(0)])
    svc.scheduler.run_until(0)
    assert ([0], []) == (pq.cached_offsets, store.updates)


@pytest.mark.parametrize("profile", [Profile.V4_7, Profile.V4_9])
def test_cleaner_cadence_strict_expiry_and_the_4_7_cancellation(profile: Profile) -> None:
    svc, pq, _store, back = concurrent(
        lambda msgs, ctx: OK, ConsumerConfig(consume_timeout=1), profile
    )
    svc.start()
    # Cached, consume started at 0, never finished: expired only when now − 0 > 60000.
    pq.put_messages([msg(0, {"CONSUME_START_TIME": "0"})])
    svc.scheduler.run_until(60_000)
    assert [] == back.rpcs
    svc.scheduler.run_until(120_000)
    assert [(0, 3, None, 16)] == back.rpcs
    assert [] == pq.cached_offsets
    # A head that never started consuming: 4.7 throws and the schedule dies, 4.9 skips it.
    pq.put_messages([msg(1)])
    svc.scheduler.run_until(180_000)
    assert (profile is Profile.V4_9) == ("clean-expire" in svc.scheduler.pending())


def test_a_call_past_consume_timeout_is_swept_and_its_late_result_still_processed() -> None:
    # The listener call of offset 0 lasts 150 s (CONC-4: CONSUME_START_TIME stamped at 0); the
    # cleaner (every minute, CONC-13) finds it expired at 120 000 (PQ-18), sends it back with
    # delay level 3 and removes it; offset 1 was consumed at once.
    config = ConsumerConfig(consume_timeout=1)
    durations = {0: 150_000, 1: 0}
    clock = ManualClock(0)
    pq = ReferenceProcessQueue(clock, Profile.V4_9)
    store, back = RecordingStore(clock), FakeSendBack()
    svc = ReferenceConsumeConcurrentlyService(
        Scheduler(clock),
        group="G",
        config=config,
        profile=Profile.V4_9,
        listener=lambda msgs, ctx: OK,
        offset_store=store,
        send_back=back,
        process_queues=lambda: {MQ: pq},
        consume_time=lambda msgs: durations[msgs[0].queue_offset],
    )
    svc.start()
    feed(svc, pq, [msg(0), msg(1)])
    svc.scheduler.run_until(119_999)
    # Offset 0 is still inside the listener: it holds the commit (PQ-7) and has no record yet.
    assert ([0], [(0, 0, True)], [1]) == (
        pq.cached_offsets,
        store.updates,
        [r.offsets[0] for r in svc.records],
    )
    svc.scheduler.run_until(120_000)
    assert ([(0, 3, None, 16)], []) == (back.rpcs, pq.cached_offsets)
    svc.scheduler.run_until(150_000)
    # The late CONSUME_SUCCESS is processed, but the queue caches nothing any more: removeMessage
    # answers −1 (PQ-7) and nothing is committed (CONC-9); the sweep's own removal commits
    # nothing either, so the offset stays at 0 until the next result.
    assert [(0, 0, True)] == store.updates
    late = svc.records[-1]
    assert (0, 150_000, ConsumeReturnType.TIME_OUT) == (late.at, late.end, late.return_type)


def test_the_result_of_a_call_whose_queue_was_dropped_meanwhile_is_discarded() -> None:
    svc, pq, store, _back = concurrent(lambda msgs, ctx: OK)
    svc.consume_time = lambda msgs: 1_000
    feed(svc, pq, [msg(0)])
    svc.scheduler.run_until(500)
    pq.dropped = True  # a rebalance took the queue while the listener ran (CONC-4 step 10)
    svc.scheduler.run_until(1_000)
    assert ([(0, 1_000)], [], [0]) == (
        [(r.at, r.end) for r in svc.records],
        store.updates,
        pq.cached_offsets,
    )


def test_a_dropped_queue_is_not_consumed_and_shutdown_rejects() -> None:
    svc, pq, store, _back = concurrent(lambda msgs, ctx: OK)
    pq.dropped = True
    feed(svc, pq, [msg(0)])
    svc.scheduler.run_until(0)
    assert ([], [0]) == (list(svc.records), pq.cached_offsets)
    svc, pq, store, _back = concurrent(lambda msgs, ctx: OK)
    feed(svc, pq, [msg(0)])
    svc.shutdown()
    svc.scheduler.run_until(0)
    assert [] == store.updates  # the queued request was dropped (shutdownNow)
    with pytest.raises(RejectedExecutionError):
        feed(svc, pq, [msg(1)])


# --- orderly -------------------------------------------------------------------------------------

OrderlyFn = Callable[[Sequence[StoredMessage], ConsumeOrderlyContext], object]


def orderly(
    listener: OrderlyFn,
    config: ConsumerConfig = ORDERLY,
    profile: Profile = Profile.V4_9,
    duration: int = 0,
) -> tuple[
    ReferenceConsumeOrderlyService, ReferenceProcessQueue, RecordingStore, FakeSendBack, FakeLocking
]:
    """An orderly service at t=0 over one locked ProcessQueue of MQ."""
    clock = ManualClock(0)
    sched = Scheduler(clock)
    pq = ReferenceProcessQueue(clock, profile)
    pq.locked = True
    store, back, locking = RecordingStore(clock), FakeSendBack(), FakeLocking(pq, clock)
    svc = ReferenceConsumeOrderlyService(
        sched,
        group="G",
        config=config,
        profile=profile,
        listener=listener,  # type: ignore[arg-type]
        offset_store=store,
        send_back=back,
        rebalance=locking,
        consume_time=lambda msgs: duration,
    )
    return svc, pq, store, back, locking


def summary(records: Sequence[OrderlyConsumeRecord]) -> list[tuple[int, int, int, int]]:
    """(start, end, offset, reconsumeTimes) of each single-message call."""
    return [(r.start, r.end, r.offsets[0], r.reconsume_times[0]) for r in records]


def test_orderly_suspend_resubmits_after_the_default_second_then_commits() -> None:
    calls = {"n": 0}

    def listener(msgs: Sequence[StoredMessage], ctx: ConsumeOrderlyContext) -> object:
        calls["n"] += 1
        return SUSPEND if calls["n"] <= 2 else SUCCESS

    svc, pq, store, _back, _locking = orderly(listener)
    feed(svc, pq, [msg(0), msg(1)])
    svc.scheduler.run_until(5_000)
    assert [(0, 0, 0, 0), (1000, 1000, 0, 1), (2000, 2000, 0, 2), (2000, 2000, 1, 0)] == summary(
        svc.records
    )
    assert [(2000, 1, False), (2000, 2, False)] == store.updates
    assert False is pq.consuming  # only the final empty take cleared it


def test_orderly_dead_letter_at_the_maximum_with_a_clamped_suspend() -> None:
    def listener(msgs: Sequence[StoredMessage], ctx: ConsumeOrderlyContext) -> object:
        ctx.suspend_current_queue_time_millis = 50_000
        return None  # null counts as SUSPEND_CURRENT_QUEUE_A_MOMENT

    config = ConsumerConfig(consume_mode=ConsumeMode.ORDERLY, max_reconsume_times=1)
    svc, pq, store, back, _locking = orderly(listener, config)
    feed(svc, pq, [msg(0, {"UNIQ_KEY": "U"})])
    svc.scheduler.run_until(40_000)
    # 50000 is clamped to 30000; at 30000 the message is at the maximum and goes to the DLQ.
    assert [(0, 0, 0, 0), (30_000, 30_000, 0, 1)] == summary(svc.records)
    props = {"UNIQ_KEY": "U", "RECONSUME_TIME": "1", "ORIGIN_MESSAGE_ID": "U", "RETRY_TOPIC": "T"}
    props |= {"MAX_RECONSUME_TIMES": "1", "DELAY": "4"}
    assert [ClientMessage("%RETRY%G", b"m", 0, props)] == back.sent
    assert [(30_000, 1, False)] == store.updates


def test_orderly_time_slice_and_periodic_lock() -> None:
    svc, pq, _store, _back, locking = orderly(lambda msgs, ctx: SUCCESS, duration=25_000)
    svc.start()
    feed(svc, pq, [msg(0), msg(1), msg(2), msg(3)])
    svc.scheduler.run_until(101_000)
    # Calls start at 0, 25000, 50000; at 75000 more than 60000 ms passed: resubmit after 10.
    starts = [(r.start, r.end) for r in svc.records]
    assert [(0, 25_000), (25_000, 50_000), (50_000, 75_000), (75_010, 100_010)] == starts
    assert [("lock_all", t) for t in range(1000, 101_001, 20_000)] == locking.calls


@pytest.mark.parametrize("profile", [Profile.V4_7, Profile.V4_9])
def test_orderly_lease_expiry_stops_consumption_until_the_lock_is_retaken(profile: Profile) -> None:
    svc, pq, _store, _back, locking = orderly(
        lambda m, c: SUCCESS, profile=profile, duration=20_000
    )
    locking.fail_all = True
    svc.start()
    feed(svc, pq, [msg(0), msg(1), msg(2)])
    svc.scheduler.run_until(70_000)
    # Lease taken at 0 and never renewed: at 40000 it is expired (40000 > 30000), the lock is
    # retried 10 ms later and the request resubmitted 10 ms after that.
    assert [(0, 20_000), (20_000, 40_000), (40_020, 60_020)] == [
        (r.start, r.end) for r in svc.records
    ]
    renewals = [t for name, t in locking.calls if name == "lock_all"]
    # 4.7.1 loses periodic locking at the first exception; 4.9.7 keeps trying.
    assert ([1000] if profile is Profile.V4_7 else [1000, 21_000, 41_000, 61_000]) == renewals
    assert ("lock", 40_010) in locking.calls


def test_orderly_shutdown_unlocks_and_rejects() -> None:
    svc, pq, _store, _back, locking = orderly(lambda m, c: SUCCESS)
    svc.shutdown()
    assert [("unlock_all", 0)] == locking.calls
    assert False is pq.locked
    with pytest.raises(RejectedExecutionError):
        feed(svc, pq, [msg(0)])


def test_records_are_typed() -> None:
    svc, pq, _store, _back = concurrent(lambda msgs, ctx: OK)
    feed(svc, pq, [msg(0)])
    svc.scheduler.run_until(0)
    assert [ConsumeRecord(0, MQ, (0,), (0,), OK, ConsumeReturnType.SUCCESS)] == list(svc.records)
