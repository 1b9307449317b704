"""A deterministic discrete-event scheduler on the injected clock: RocketMQ's executors, timers
and thread pools become events run one at a time, in (time, submission) order."""

from __future__ import annotations

import heapq
from collections.abc import Callable

import attrs

from pullspec.spec.clock import ManualClock
from pullspec.spec.errors import InvalidArgumentError, require_int, require_non_negative

Task = Callable[[], None]


#: A heap entry: (time, submission number, name, task); plain tuples keep the heap fast.
_Event = tuple[int, int, str, Task]


@attrs.define
class Scheduler:
    """Runs tasks at virtual times; a task scheduled for now runs after those already due."""

    clock: ManualClock
    _queue: list[_Event] = attrs.field(init=False, factory=list)
    _seq: int = attrs.field(init=False, default=0)
    _cancelled: set[int] = attrs.field(init=False, factory=set)
    executed: int = attrs.field(init=False, default=0)

    def call_at(self, at: int, task: Task, name: str = "task") -> int:
        """Run `task` at virtual time `at` (not before now); return a handle for `cancel`."""
        at = require_int("at", at)
        if at < self.clock.now_ms():
            raise InvalidArgumentError("at", at, f"is before now ({self.clock.now_ms()})")
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, name, task))
        return self._seq

    def call_later(self, delay_ms: int, task: Task, name: str = "task") -> int:
        """Run `task` `delay_ms` ≥ 0 milliseconds from now."""
        return self.call_at(
            self.clock.now_ms() + require_non_negative("delay_ms", delay_ms), task, name
        )

    def call_soon(self, task: Task, name: str = "task") -> int:
        """Run `task` now, after every task already due."""
        return self.call_at(self.clock.now_ms(), task, name)

    def cancel(self, handle: int) -> None:
        """Forget a scheduled task (a no-op when it already ran)."""
        self._cancelled.add(handle)

    @property
    def next_time(self) -> int | None:
        """When the next live task is due, or None when nothing is scheduled."""
        self._drop_cancelled()
        return self._queue[0][0] if self._queue else None

    def pending(self) -> list[str]:
        """The names of the live scheduled tasks, in run order."""
        return [
            e[2] for e in sorted(self._queue, key=lambda e: e[:2]) if e[1] not in self._cancelled
        ]

    def pending_at(self) -> list[tuple[int, str]]:
        """(due time, name) of every live scheduled task, in run order."""
        return [
            (e[0], e[2])
            for e in sorted(self._queue, key=lambda e: e[:2])
            if e[1] not in self._cancelled
        ]

    def _drop_cancelled(self) -> None:
        while self._queue and self._queue[0][1] in self._cancelled:
            self._cancelled.discard(heapq.heappop(self._queue)[1])

    def run_next(self) -> str | None:
        """Advance the clock to the next task and run it; return its name (None when idle)."""
        self._drop_cancelled()
        if not self._queue:
            return None
        at, _seq, name, task = heapq.heappop(self._queue)
        if at > self.clock.now_ms():
            self.clock.jump_to(at)
        self.executed += 1
        task()
        return name

    def run_until(self, until: int, max_tasks: int | None = None) -> int:
        """Run every task due at or before `until`, then set the clock to `until`; return the count."""
        ran = 0
        while (nt := self.next_time) is not None and nt <= until:
            if max_tasks is not None and ran >= max_tasks:
                break
            self.run_next()
            ran += 1
        if self.clock.now_ms() < until:
            self.clock.jump_to(until)
        return ran

    def run_for(self, duration_ms: int, max_tasks: int | None = None) -> int:
        """Run for `duration_ms` of virtual time from now."""
        return self.run_until(
            self.clock.now_ms() + require_non_negative("duration_ms", duration_ms), max_tasks
        )
