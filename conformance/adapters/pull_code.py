"""Adapter for area `pull_code`: PullMessageProcessor without long polling over a fresh store."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from pullspec.conformance.adapters import store as store_adapter
from pullspec.conformance.adapters._config import broker_config, store_config
from pullspec.conformance.candidates import Broker, Candidate, factory
from pullspec.conformance.jsontypes import JSONObject, JSONValue, as_given
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import FLAG_SUBSCRIPTION, PullMessageRequest
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole


@attrs.define
class PullCase:
    """One case's broker, its store view for the setup steps, and the config."""

    broker: Broker
    store: store_adapter.StoreCase
    group: str
    topic: str


def create(
    candidate: Candidate, config: Mapping[str, JSONValue], profile: Profile, base: Path
) -> PullCase:
    """A fresh broker whose store starts as a master; the case's set_role steps switch it."""
    new_broker = factory(candidate, "broker")
    clock = ManualClock(0)
    scfg = evolve(store_config(config), broker_role=BrokerRole.ASYNC_MASTER)
    broker = new_broker(scfg, broker_config(config), profile, clock)
    topic = as_given(str, config.get("topic", "T"))
    group = as_given(str, config.get("group", "G"))
    broker.create_topic(topic, as_given(int, config.get("topicQueueNums", 4)))
    return PullCase(
        broker, store_adapter.StoreCase(broker.store, clock, topic, group), group, topic
    )


def apply(case: PullCase, op: str, args: JSONObject) -> JSONObject:
    """Run one step: setup steps as in `store`, then `pull` through the processor."""
    if op != "pull":
        return store_adapter.apply(case.store, op, args)
    subscription = args.get("subscription")
    _, response = case.broker.pull_message(
        PullMessageRequest(
            consumer_group=case.group,
            topic=case.topic,
            queue_id=as_given(int, args["queueId"]),
            queue_offset=as_given(int, args["offset"]),
            max_msg_nums=as_given(int, args["maxMsgNums"]),
            sys_flag=FLAG_SUBSCRIPTION if subscription is not None else 0,
            subscription=None if subscription is None else as_given(str, subscription),
        )
    )
    if response is None:
        raise UnsupportedError("a pull without the suspend flag was held")
    return {
        "code": response.code.name,
        "status": response.status.value if response.status else None,
        "nextBeginOffset": response.next_begin_offset,
        "minOffset": response.min_offset,
        "maxOffset": response.max_offset,
        "suggestWhichBrokerId": response.suggest_which_broker_id,
        "msgOffsets": response.msg_offsets,
    }
