"""The reference driver of area `allocate` (vocabulary: conformance.adapters.allocate, docs/protocol.md)."""

from __future__ import annotations

from typing import Any

from pullspec.reference.areas import _vocab as _client
from pullspec.spec import allocate
from pullspec.spec.consumer_config import MessageModel
from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.message import MessageQueue

#: The vector area this module serves.
AREA = "allocate"

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

    def op_allocate(self, args: _client.Args) -> dict[str, Any]:
        """One strategy call (REBAL-6, REBAL-7, REBAL-8)."""
        result = strategy(args.req("strategy"))(
            str(args.get("consumerGroup", "G")),
            args.req("currentCid"),
            _client.mqs(args.req("mqAll")),  # type: ignore[arg-type]
            args.req("cidAll"),
        )
        return {"result": _client.mqs_json(result, ordered=True)}

    def op_rebalance_by_topic(self, args: _client.Args) -> dict[str, Any]:
        """rebalanceByTopic's allocation (REBAL-4, REBAL-5)."""
        mq_set: list[MessageQueue] | None = _client.mqs(args.req("mqSet"))
        model = args.enum("messageModel", MessageModel)
        if model is MessageModel.BROADCASTING:
            allocated = allocate.broadcasting_allocation(mq_set)
        else:
            allocated = allocate.clustering_allocation(
                mq_set,
                args.req("cidAll"),
                str(args.get("consumerGroup", "G")),
                str(args.req("currentCid")),
                strategy(args.req("strategy")),
            )
        return {"allocated": _client.mqs_json(allocated)}

    def op_rebalance_topics(self, args: _client.Args) -> dict[str, Any]:
        """doRebalance's topics and truncateMessageQueueNotMyTopic (REBAL-2, REBAL-3)."""
        topics = list(args.req("subscribedTopics"))
        table = _client.mqs(args.get("tableMqs", [])) or []
        return {
            "topics": list(allocate.rebalance_topics(args.bool("paused"), topics)),
            "truncated": _client.mqs_json(allocate.truncated_queues(table, topics), ordered=True),
        }

    def op_next_rebalance_at(self, args: _client.Args) -> dict[str, Any]:
        """RebalanceService's next run (REBAL-1)."""
        return {"at": allocate.next_rebalance_at(args.int("lastRunEnd"), args.get("wokenAt"))}

    def op_client_id(self, args: _client.Args) -> dict[str, Any]:
        """buildMQClientId (REBAL-24)."""
        cid = allocate.client_id(
            self.profile,
            str(args.req("clientIp")),
            str(args.req("instanceName")),
            args.get("unitName"),
            args.enum("messageModel", MessageModel),
            args.int("pid"),
            args.int("nanoTime", 0),
            args.bool("enableStream", False),
        )
        return {"clientId": cid}
