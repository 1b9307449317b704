"""ClientScheduler: one client process's view of the shared deterministic scheduler.

Every thread and timer of a client instance (pull thread, rebalance thread, consume pools,
scheduled executors) schedules its events through its own ClientScheduler, which forwards them
to the world's `Scheduler` and remembers their handles. `kill()` is the process dying: every
event it still has is cancelled and every later one is refused, while the brokers and the
network (which use the world's scheduler directly) run on. Pull answers that reach a dead
client's callbacks only touch its memory: whatever they would schedule is refused.
"""

from __future__ import annotations

from pullspec.reference.scheduler import Scheduler, Task
from pullspec.spec.errors import InvalidTypeError

#: The handle a dead client's scheduling requests get (real handles start at 1).
DEAD_HANDLE = 0


class ClientScheduler(Scheduler):
    """A Scheduler that forwards to `parent` and can be killed; running it runs the world."""

    def __init__(self, parent: Scheduler, name: str = "client") -> None:
        if not isinstance(parent, Scheduler):
            raise InvalidTypeError("parent", parent, "Scheduler")
        super().__init__(parent.clock)
        self.parent = parent
        self.name = name
        self.killed = False
        self._live: set[int] = set()

    def call_at(self, at: int, task: Task, name: str = "task") -> int:
        """Schedule `task` on the world's scheduler; refused (DEAD_HANDLE) once killed."""
        if self.killed:
            return DEAD_HANDLE
        box: list[int] = []

        def run() -> None:
            self._live.discard(box[0])
            task()

        handle = self.parent.call_at(at, run, f"{self.name}: {name}")
        box.append(handle)
        self._live.add(handle)
        return handle

    def cancel(self, handle: int) -> None:
        """Cancel one of this client's events (only live ones reach the world's scheduler)."""
        if handle in self._live:
            self._live.discard(handle)
            self.parent.cancel(handle)

    def kill(self) -> None:
        """The process dies: cancel every event still scheduled, refuse every later one."""
        self.killed = True
        for handle in self._live:
            self.parent.cancel(handle)
        self._live.clear()

    @property
    def live_events(self) -> int:
        """How many of this client's events are scheduled and not yet run."""
        return len(self._live)

    # Driving a client's scheduler drives the whole world.

    @property
    def next_time(self) -> int | None:
        """The world's next due time."""
        return self.parent.next_time

    def pending(self) -> list[str]:
        """The world's live tasks, in run order."""
        return self.parent.pending()

    def run_next(self) -> str | None:
        """Run the world's next task."""
        return self.parent.run_next()

    def run_until(self, until: int, max_tasks: int | None = None) -> int:
        """Run the world until `until`."""
        return self.parent.run_until(until, max_tasks)
