"""PULLQ: the PullMessageService rules of spec.pull_service, the reference PullRequest and the
reference PullMessageService on the scheduler (expected values worked out from rulebook §1)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.pull_service import PullMessageService, PullRequest
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import rules
from pullspec.spec.clock import ManualClock
from pullspec.spec.contracts import check_call
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_service import (
    delayed_task_runs_after_shutdown,
    enqueue,
    enqueues_immediately,
    pull_loop_continues,
    pull_request_key,
    pull_thread_start_times,
    schedules_task_later,
)

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)
PULLQ = [f"PULLQ-{n}" for n in range(1, 12)]


class Recorder:
    """A consumer that records (time, queue, cursor) of every pullMessage it gets."""

    def __init__(self, clock: ManualClock, fail_on: MessageQueue | None = None) -> None:
        self.clock = clock
        self.fail_on = fail_on
        self.pulls: list[tuple[int, MessageQueue, int]] = []

    def pull_message(self, pull_request: PullRequest) -> None:
        self.pulls.append(
            (self.clock.now_ms(), pull_request.message_queue, pull_request.next_offset)
        )
        if pull_request.message_queue == self.fail_on:
            raise RuntimeError("boom")


def world(started: bool = True) -> tuple[ManualClock, Scheduler, PullMessageService, Recorder]:
    clock = ManualClock(0)
    scheduler = Scheduler(clock)
    service = PullMessageService(scheduler)
    recorder = Recorder(clock)
    assert True is service.register_consumer("G", recorder)
    if started:
        service.start()
    return clock, scheduler, service, recorder


def request(mq: MessageQueue = Q0, offset: int = 0, group: str = "G") -> PullRequest:
    pq = ReferenceProcessQueue(ManualClock(0), Profile.V4_9)
    return PullRequest(group, mq, pq, offset)


# --- the rules ----------------------------------------------------------------------------------


def test_every_pullq_rule_is_registered_with_one_sentence_statements() -> None:
    catalogue = {r.id: r for r in rules.catalogue()}
    assert [] == [i for i in PULLQ if i not in catalogue]
    assert [] == [i for i in PULLQ if not catalogue[i].statement.endswith(".")]


def test_pullq_examples() -> None:
    assert [True, False] == [pull_loop_continues(False, True), pull_loop_continues(True, False)]
    assert ("a", "b", "a") == enqueue(("a", "b"), "a")  # no deduplication
    assert True is enqueues_immediately(True)
    assert [True, False] == [schedules_task_later(False), schedules_task_later(True)]
    assert ("G", Q0) == pull_request_key("G", Q0)
    assert [True, False, False] == [
        delayed_task_runs_after_shutdown(999),
        delayed_task_runs_after_shutdown(1000),
        delayed_task_runs_after_shutdown(20_000),
    ]
    # A 5000 ms first-lock query at 0 pushes the request that arrived at 10 back to 5000.
    assert (0, 5000, 5000) == pull_thread_start_times((0, 10, 20), (5000, 0, 0))


@given(st.lists(st.integers(0, 5)), st.integers(0, 5))
def test_pullq_2_contract(queue: list[int], item: int) -> None:
    assert (*queue, item) == check_call(enqueue, tuple(queue), item)


@given(st.integers(0, 100_000))
def test_pullq_10_contract(due: int) -> None:
    assert (due < 1000) == check_call(delayed_task_runs_after_shutdown, due)


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=8))
def test_pullq_11_contract(pairs: list[tuple[int, int]]) -> None:
    arrivals = tuple(sorted(a for a, _ in pairs))
    durations = tuple(d for _, d in pairs)
    starts = check_call(pull_thread_start_times, arrivals, durations)
    assert len(arrivals) == len(starts)


# --- PullRequest --------------------------------------------------------------------------------


def test_pull_request_equality_uses_group_and_queue_only() -> None:
    a, b = request(Q0, 0), request(Q0, 99)
    b.previously_locked = True
    assert a == b
    assert hash(a) == hash(b)
    assert a != request(Q1, 0)
    assert a != request(Q0, 0, group="H")
    assert 1 == len({a, b})


def test_pull_request_is_mutable_and_validates_every_assignment() -> None:
    pr = request(Q0, 5)
    pr.next_offset = 7
    with pytest.raises(InvalidTypeError) as err:
        pr.next_offset = "8"  # type: ignore[assignment]
    assert ("next_offset", 7) == (err.value.name, pr.next_offset)
    with pytest.raises(InvalidTypeError):
        pr.previously_locked = 1  # type: ignore[assignment]
    assert False is pr.previously_locked


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((1, Q0, None, 0), "consumer_group"),
        (("G", "T", None, 0), "message_queue"),
        (("G", Q0, "pq", 0), "process_queue"),
        (("G", Q0, None, 1.5), "next_offset"),
    ],
)
def test_pull_request_rejects_bad_fields(args: tuple[Any, ...], name: str) -> None:
    pq = ReferenceProcessQueue(ManualClock(0), Profile.V4_9)
    fields: list[Any] = [pq if a is None else a for a in args]
    with pytest.raises(InvalidTypeError) as err:
        PullRequest(*fields)
    assert name == err.value.name


# --- the service --------------------------------------------------------------------------------


def test_requests_are_taken_fifo_one_event_each() -> None:
    _, scheduler, service, recorder = world()
    a, b = request(Q0, 1), request(Q1, 2)
    service.execute_pull_request_immediately(a)
    service.execute_pull_request_immediately(b)
    service.execute_pull_request_immediately(a)  # the same object twice: no deduplication
    assert ["pull-thread"] == scheduler.pending()
    assert 3 == scheduler.run_until(0)
    assert [(0, Q0, 1), (0, Q1, 2), (0, Q0, 1)] == recorder.pulls
    assert (3, ()) == (service.taken, service.queued)


def test_requests_wait_until_the_service_starts() -> None:
    _, scheduler, service, recorder = world(started=False)
    service.execute_pull_request_immediately(request())
    assert 0 == scheduler.run_until(100)
    assert 1 == len(service.queued)
    service.start()
    scheduler.run_until(100)
    assert [(100, Q0, 0)] == recorder.pulls


def test_delayed_enqueue_and_task_share_the_timer() -> None:
    _, scheduler, service, recorder = world()
    ran: list[int] = []
    service.execute_pull_request_later(request(Q0, 3), 50)
    service.execute_task_later(lambda: ran.append(scheduler.clock.now_ms()), 10_000)
    assert 2 == service.pending_timers
    scheduler.run_until(20_000)
    assert ([(50, Q0, 3)], [10_000], 0) == (recorder.pulls, ran, service.pending_timers)


def test_a_blocked_pull_thread_takes_nothing_until_it_returns_while_the_timer_runs_on() -> None:
    _, scheduler, service, recorder = world()
    service.block_until(5_000)
    service.execute_pull_request_immediately(request(Q0, 1))
    service.execute_pull_request_later(request(Q1, 2), 100)
    scheduler.run_until(4_999)
    # The delayed re-enqueue fired at 100 (the timer is another thread) but nothing was taken.
    assert ([], 2) == (recorder.pulls, len(service.queued))
    scheduler.run_until(5_000)
    assert [(5_000, Q0, 1), (5_000, Q1, 2)] == recorder.pulls


def test_no_consumer_kills_the_request_and_a_raising_consumer_does_not_stop_the_loop() -> None:
    _, scheduler, service, recorder = world()
    recorder.fail_on = Q1
    service.execute_pull_request_immediately(request(Q0, 0, group="other"))
    service.execute_pull_request_immediately(request(Q1, 0))
    service.execute_pull_request_immediately(request(Q0, 0))
    scheduler.run_until(0)
    assert [(0, Q1, 0), (0, Q0, 0)] == recorder.pulls
    assert ["warn", "error"] == [level for level, _ in service.log]
    assert service.current is None


def test_a_failing_task_is_swallowed_like_a_scheduled_future() -> None:
    _, scheduler, service, _ = world()

    def boom() -> None:
        raise RuntimeError("task")

    service.execute_task_later(boom, 5)
    scheduler.run_until(5)
    assert [("error", "scheduled task failed: RuntimeError('task')")] == service.log


def test_shutdown_abandons_the_queue_and_keeps_tasks_due_within_the_grace() -> None:
    clock, scheduler, service, recorder = world(started=False)
    ran: list[int] = []
    service.execute_pull_request_immediately(request(Q0, 0))
    service.execute_task_later(lambda: ran.append(clock.now_ms()), 999)
    service.execute_task_later(lambda: ran.append(clock.now_ms()), 1000)
    service.execute_pull_request_later(request(Q1, 0), 500)
    service.start()
    service.shutdown()
    assert True is service.stopped
    service.execute_pull_request_later(request(Q0, 1), 10)  # PULLQ-4: logged, dropped
    service.execute_task_later(lambda: ran.append(-1), 10)
    service.execute_pull_request_immediately(request(Q0, 2))  # PULLQ-3: queued, never taken
    scheduler.run_until(5000)
    assert ([], [999]) == (recorder.pulls, ran)
    # The 500 ms re-enqueue ran, after the immediate put at 0, into the abandoned queue.
    assert [(Q0, 0), (Q0, 2), (Q1, 0)] == [(p.message_queue, p.next_offset) for p in service.queued]
    assert 2 * [("warn", "PullMessageServiceScheduledThread has shutdown")] == service.log


def test_register_consumer_refuses_a_second_consumer_for_a_group() -> None:
    clock, _, service, recorder = world()
    assert False is service.register_consumer("G", Recorder(clock))
    assert recorder is service.select_consumer("G")
    service.unregister_consumer("G")
    assert service.select_consumer("G") is None


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda s: s.execute_pull_request_immediately("pr"), InvalidTypeError, "pull_request"),
        (lambda s: s.execute_pull_request_later(None, 5), InvalidTypeError, "pull_request"),
        (lambda s: s.execute_pull_request_later(request(), -1), InvalidArgumentError, "delay_ms"),
        (lambda s: s.execute_pull_request_later(request(), 1.0), InvalidTypeError, "delay_ms"),
        (lambda s: s.execute_task_later("task", 5), InvalidTypeError, "task"),
        (lambda s: s.execute_task_later(lambda: None, -5), InvalidArgumentError, "delay_ms"),
        (lambda s: s.register_consumer(7, object()), InvalidTypeError, "group"),
        (lambda s: s.register_consumer("H", object()), InvalidTypeError, "consumer"),
        (lambda s: s.unregister_consumer(None), InvalidTypeError, "group"),
    ],
)
def test_bad_input_is_rejected_and_changes_nothing(
    call: Any, error: type[Exception], name: str
) -> None:
    _, scheduler, service, _ = world()
    with pytest.raises(error) as err:
        call(service)
    assert name == err.value.name  # type: ignore[attr-defined]
    assert ((), 0, [], ["G"]) == (
        service.queued,
        service.pending_timers,
        scheduler.pending(),
        [g for g in ("G", "H") if service.select_consumer(g) is not None],
    )


def test_the_service_needs_a_scheduler() -> None:
    with pytest.raises(InvalidTypeError) as err:
        PullMessageService(ManualClock(0))  # type: ignore[arg-type]
    assert "scheduler" == err.value.name
