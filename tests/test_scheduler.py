"""The deterministic scheduler: time order, FIFO within a time, cancellation, no past times."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.reference.scheduler import Scheduler
from pullspec.spec.clock import ManualClock
from pullspec.spec.errors import InvalidArgumentError


def test_tasks_run_in_time_then_submission_order() -> None:
    clock = ManualClock(100)
    sched = Scheduler(clock)
    seen: list[tuple[str, int]] = []
    sched.call_later(50, lambda: seen.append(("b", clock.now_ms())))
    sched.call_later(10, lambda: seen.append(("a", clock.now_ms())))
    sched.call_later(50, lambda: seen.append(("c", clock.now_ms())))
    assert 3 == sched.run_until(1_000)
    assert [("a", 110), ("b", 150), ("c", 150)] == seen
    assert 1_000 == clock.now_ms()


def test_a_task_scheduled_now_runs_after_those_already_due() -> None:
    clock = ManualClock(0)
    sched = Scheduler(clock)
    seen: list[str] = []

    def first() -> None:
        seen.append("first")
        sched.call_soon(lambda: seen.append("third"))

    sched.call_soon(first)
    sched.call_soon(lambda: seen.append("second"))
    sched.run_until(0)
    assert ["first", "second", "third"] == seen


def test_cancel_and_past_times() -> None:
    clock = ManualClock(10)
    sched = Scheduler(clock)
    seen: list[str] = []
    handle = sched.call_later(5, lambda: seen.append("x"))
    sched.cancel(handle)
    assert None is sched.next_time
    assert 0 == sched.run_until(100)
    with pytest.raises(InvalidArgumentError):
        sched.call_at(50, lambda: None)
    assert [] == seen


@given(st.lists(st.integers(min_value=0, max_value=1_000), max_size=30))
def test_run_order_is_sorted_by_time_and_stable(delays: list[int]) -> None:
    clock = ManualClock(0)
    sched = Scheduler(clock)
    seen: list[tuple[int, int]] = []
    for i, d in enumerate(delays):
        sched.call_later(d, lambda i=i, d=d: seen.append((d, i)))  # type: ignore[misc]
    sched.run_until(1_000)
    assert sorted(seen) == seen
    assert len(delays) == len(seen)
