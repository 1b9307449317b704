"""The reference driver of area `allocate` (vocabulary: conformance.adapters.allocate, docs/protocol.md)."""

from __future__ import annotations

from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.rebalance import ReferenceRebalancePushImpl
from pullspec.reference.rebalance_service import ReferenceRebalanceService
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import allocate
from pullspec.spec.clock import ManualClock
from pullspec.spec.consumer_config import ConsumerConfig, MessageModel
from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.filter import build_subscription_data

#: The vector area this module serves.
AREA = "allocate"

#: The topic rebalanced when the route is unknown.
_TOPIC = "T"


#: Strategy name → the spec function, looked up at call time so a patched rule is the one run.
STRATEGY_FUNCTIONS = {"AVG": "allocate_averagely", "AVG_BY_CIRCLE": "allocate_averagely_by_circle"}


def strategy(name: object) -> allocate.AllocateStrategy:
    """The allocation strategy called `name`."""
    if name not in STRATEGY_FUNCTIONS:
        raise InvalidArgumentError("strategy", name, f"expected {list(STRATEGY_FUNCTIONS)}")
    fn: allocate.AllocateStrategy = getattr(allocate, STRATEGY_FUNCTIONS[str(name)])
    return fn


class Driver(_client.DriverBase):
    """The reference driver: spec.allocate."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def op_allocate(self, args: _client.Args) -> dict[str, Any]:
        """One strategy call (REBAL-6, REBAL-7, REBAL-8)."""
        result = strategy(args.req("strategy"))(
            str(args.get("consumerGroup", "G")),
            args.req("currentCid"),
            _client.mqs(args.req("mqAll")),  # type: ignore[arg-type]
            args.req("cidAll"),
        )
        return {"result": _client.mqs_json(result, ordered=True)}

    def _rebalance(self, args: _client.Args) -> ReferenceRebalancePushImpl:
        """A push consumer's rebalance whose route and consumer list answer the op's."""
        mq_set = _client.mqs(args.get("mqSet"))
        cid_all = args.get("cidAll")
        config = ConsumerConfig(
            message_model=args.enum("messageModel", MessageModel, MessageModel.CLUSTERING)
        )
        scheduler = Scheduler(ManualClock(0))
        return self.classes.rebalance(
            scheduler,
            group=str(args.get("consumerGroup", "G")),
            client_id=str(args.get("currentCid", "c")),
            config=config,
            profile=self.profile,
            lock_client=_wiring.ScriptedLocks(),
            offset_store=_wiring.RecordingOffsetStore(),
            admin=_wiring.ScriptedAdmin(),
            route=lambda _topic: None if mq_set is None else frozenset(mq_set),
            consumer_ids=lambda _topic, _group: None if cid_all is None else list(cid_all),
            strategy=strategy(args.get("strategy", "AVG")),
        )

    def op_rebalance_by_topic(self, args: _client.Args) -> dict[str, Any]:
        """rebalanceByTopic's allocation (REBAL-4, REBAL-5) on a reference rebalance."""
        rebalance = self._rebalance(args)
        topic = _TOPIC if not args.get("mqSet") else args.get("mqSet")[0]["topic"]
        rebalance.subscribe(build_subscription_data(topic, "*"))
        allocated = rebalance.rebalance_by_topic(topic)
        return {"allocated": _client.mqs_json(allocated)}

    def op_rebalance_topics(self, args: _client.Args) -> dict[str, Any]:
        """doRebalance's topics and truncateMessageQueueNotMyTopic (REBAL-2, REBAL-3), on a
        reference rebalance whose table holds `tableMqs`."""
        rebalance = self._rebalance(args)
        topics = list(args.req("subscribedTopics"))
        for topic in topics:
            rebalance.subscribe(build_subscription_data(topic, "*"))
        queues = {}
        for q in _client.mqs(args.get("tableMqs", [])) or []:
            queues[q] = self.classes.process_queue(rebalance.scheduler.clock, self.profile)
            rebalance.put_process_queue(q, queues[q])
        asked: list[str] = []

        def route(topic: str) -> None:
            asked.append(topic)  # rebalanceByTopic asks the route first: the topics, in order

        rebalance.route = route
        rebalance.paused = args.bool("paused")
        rebalance.do_rebalance()
        truncated = [q for q, pq in queues.items() if q not in rebalance.process_queues()]
        return {"topics": asked, "truncated": _client.mqs_json(truncated, ordered=True)}

    def op_next_rebalance_at(self, args: _client.Args) -> dict[str, Any]:
        """RebalanceService's next run (REBAL-1): a run ending at `lastRunEnd`, woken at
        `wokenAt` (during that run when earlier)."""
        last_end, woken = args.int("lastRunEnd"), args.get("wokenAt")
        clock = ManualClock(0)
        scheduler = Scheduler(clock)

        def run() -> None:
            if woken is not None and woken < last_end:
                clock.jump_to(max(woken, clock.now_ms()))
                service.rebalance_immediately()
            clock.jump_to(last_end)

        service = ReferenceRebalanceService(scheduler, [run])
        service.start()
        service.rebalance_immediately()
        scheduler.run_next()  # the run that ends at lastRunEnd
        service.consumers = []
        if woken is not None and woken >= last_end:
            due = scheduler.next_time
            if due is not None and woken < due:
                scheduler.run_until(woken)
                service.rebalance_immediately()
        scheduler.run_next()
        return {"at": service.runs[1]}

    def op_client_id(self, args: _client.Args) -> dict[str, Any]:
        """buildMQClientId (REBAL-24)."""
        cid = self.rules.client_id(
            str(args.req("clientIp")),
            str(args.req("instanceName")),
            args.get("unitName"),
            args.enum("messageModel", MessageModel),
            args.int("pid"),
            args.int("nanoTime", 0),
            args.bool("enableStream", False),
        )
        return {"clientId": cid}
