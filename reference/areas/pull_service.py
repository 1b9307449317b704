"""The reference driver of area `pull_service` (vocabulary: conformance.adapters.pull_service, docs/protocol.md)."""

from __future__ import annotations

from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.pull_service import PullRequest
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import pull_service
from pullspec.spec.clock import ManualClock
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_service"


class _Consumer:
    """A registered consumer: pullMessage records the request (and throws when told to)."""

    def __init__(self, driver: Driver, group: str, raises: bool) -> None:
        self.driver, self.group, self.raises = driver, group, raises

    def pull_message(self, pull_request: PullRequest) -> None:
        self.driver.dispatched.append(
            {"at": self.driver.clock.now_ms(), **_request_json(pull_request)}
        )
        if self.raises:
            raise RuntimeError("pullMessage threw")


def _request_json(pr: PullRequest) -> dict[str, Any]:
    return {
        "group": pr.consumer_group,
        "queueId": pr.message_queue.queue_id,
        "nextOffset": pr.next_offset,
    }


class Driver(_client.DriverBase):
    """The reference driver: reference.pull_service.PullMessageService on a manual scheduler."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.clock = ManualClock(0)
        self.scheduler = Scheduler(self.clock)
        self.service = self.classes.pull_service(self.scheduler)
        self.dispatched: list[dict[str, Any]] = []
        self.tasks_run: list[dict[str, Any]] = []

    def _request(self, value: dict[str, Any]) -> PullRequest:
        return PullRequest(
            value["group"],
            MessageQueue("T", "b", value["queueId"]),
            self.classes.process_queue(self.clock, self.profile),
            value["nextOffset"],
        )

    def _state(self) -> dict[str, Any]:
        return {
            "now": self.clock.now_ms(),
            "queued": [_request_json(pr) for pr in self.service.queued],
            "pendingTimers": self.service.pending_timers,
            "stopped": self.service.stopped,
        }

    def op_register_consumer(self, args: _client.Args) -> dict[str, Any]:
        """MQClientInstance.registerConsumer."""
        group = str(args.req("group"))
        ok = self.service.register_consumer(
            group, _Consumer(self, group, args.bool("raises", False))
        )
        return {"registered": ok, **self._state()}

    def op_unregister_consumer(self, args: _client.Args) -> dict[str, Any]:
        """MQClientInstance.unregisterConsumer: later takes of the group's requests die."""
        self.service.unregister_consumer(str(args.req("group")))
        return self._state()

    def op_start(self, args: _client.Args) -> dict[str, Any]:
        """Start the pull thread."""
        self.service.start()
        return self._state()

    def op_execute_immediately(self, args: _client.Args) -> dict[str, Any]:
        """executePullRequestImmediately (PULLQ-2, PULLQ-3)."""
        self.service.execute_pull_request_immediately(self._request(args.raw))
        return self._state()

    def op_execute_later(self, args: _client.Args) -> dict[str, Any]:
        """executePullRequestLater (PULLQ-4)."""
        self.service.execute_pull_request_later(self._request(args.raw), args.int("delayMs"))
        return self._state()

    def op_execute_task_later(self, args: _client.Args) -> dict[str, Any]:
        """executeTaskLater on the same timer (PULLQ-5)."""
        name = str(args.req("name"))

        def task() -> None:
            self.tasks_run.append({"at": self.clock.now_ms(), "name": name})

        self.service.execute_task_later(task, args.int("delayMs"))
        return self._state()

    def op_shutdown(self, args: _client.Args) -> dict[str, Any]:
        """shutdown (PULLQ-10): later, only timers due within the grace period still fire."""
        self.service.shutdown()
        return self._state()

    def op_advance(self, args: _client.Args) -> dict[str, Any]:
        """Let `ms` of virtual time pass, running the thread and the timer (PULLQ-1, PULLQ-6)."""
        self.dispatched, self.tasks_run = [], []
        self.scheduler.run_for(args.int("ms"))
        return {"dispatched": self.dispatched, "tasksRun": self.tasks_run, **self._state()}

    def op_same_request(self, args: _client.Args) -> dict[str, Any]:
        """PullRequest.equals (PULLQ-7)."""
        a, b = self._request(args.req("a")), self._request(args.req("b"))
        return {"equal": a == b}

    def op_thread_start_times(self, args: _client.Args) -> dict[str, Any]:
        """When the one pull thread starts each request (PULLQ-11)."""
        starts = pull_service.pull_thread_start_times(
            tuple(args.req("arrivals")), tuple(args.req("durations"))
        )
        return {"startTimes": list(starts)}
