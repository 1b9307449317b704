"""Adapter for area `schedule`: retries end to end on the broker — CONSUMER_SEND_MSG_BACK, the
delayed delivery of ScheduleMessageService and plain sends to a retry topic.

One case is one broker over a fresh store, clock at 0, original topic `T` (4 queues), consumer
group `G`. config: `groupRetryMaxTimes` (the subscription group's retryMaxTimes, default 16),
`messageDelayLevel` (default RocketMQ's 18 levels).

| op | args | expect |
|---|---|---|
| `put` | `msgs` [{`queueId`, `tags`, `bodySize`, `reconsumeTimes`}] | `results` [{`status`, `queueOffset`}] |
| `send_back` | `topic` (default `T`), `queueId`, `queueOffset` (where the consumed message is stored; its original topic is `T`), `delayLevel`, `maxReconsumeTimes` (null: header field absent) | `code`, `stored` |
| `send_message` | `topic`, `queueId`, `tags`, `bodySize`, `reconsumeTimes`, `maxReconsumeTimes`, `delayLevel` (the DELAY property, null: none) | `code`, `stored` |
| `advance_clock` | `ms` | `now`, `delivered` [{`at`, `topic`, `queueId`, `queueOffset`, `reconsumeTimes`, `properties`}] |
| `retry_timetable` | `maxReconsumeTimes` | `delaysMs` (the delay before the (r + 1)-th retry, r = 0 …) |

`stored` is the record the request appended: {`topic`, `queueId`, `queueOffset`,
`reconsumeTimes`, `properties`} (DELAY, REAL_TOPIC, REAL_QID, RETRY_TOPIC, …), or null.
ORIGIN_MESSAGE_ID and UNIQ_KEY are observed as `"<id>"`: only their presence is compared,
because a message id embeds the commit-log offset and host of one implementation's store.
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.adapters._config import store_config
from pullspec.conformance.adapters.store import message
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject, as_given, to_int
from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec import delay, retry
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import SubscriptionGroupConfig
from pullspec.spec.evolve import evolve
from pullspec.spec.message import PROPERTY_DELAY, BrokerInnerMessage, StoredMessage
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "schedule"
#: Properties whose values differ between implementations for reasons outside these rules
#: (message ids embed commit-log offsets and hosts): observed only as present or absent.
OPAQUE = frozenset({"ORIGIN_MESSAGE_ID", "UNIQ_KEY"})


def record_json(record: StoredMessage) -> JSONObject:
    """A stored record as the area observes it."""
    return {
        "topic": record.topic,
        "queueId": record.queue_id,
        "queueOffset": record.queue_offset,
        "reconsumeTimes": record.reconsume_times,
        "properties": {k: ("<id>" if k in OPAQUE else v) for k, v in sorted(record.properties)},
    }


class Reference(_client.ReferenceDriver):
    """The reference driver: reference.broker.ReferenceBroker with its send-back processor and
    schedule service."""

    area = AREA

    def __init__(self, config: JSONObject, profile: Profile) -> None:
        super().__init__(config, profile)
        self.clock = ManualClock(0)
        scfg = store_config(config)
        if "messageDelayLevel" in config:
            levels = as_given(str, config["messageDelayLevel"])
            scfg = evolve(scfg, message_delay_level=levels)
        self.store = ReferenceMessageStore(config=scfg, profile=profile, clock=self.clock)
        self.broker = ReferenceBroker(store=self.store, profile=profile, clock=self.clock)
        self.broker.create_topic("T", 4)
        self.broker.groups["G"] = SubscriptionGroupConfig(
            group_name="G", retry_max_times=to_int(config.get("groupRetryMaxTimes", 16))
        )
        self.levels = delay.parse_delay_levels(scfg.message_delay_level)
        #: (topic, queueId, queueOffset) of every record stored → its commit-log offset.
        self.phys: dict[tuple[str, int, int], int] = {}

    def _appended(self, before: int) -> list[StoredMessage]:
        """The records appended since commit-log offset `before`."""
        out, phys, end = [], before, self.store.get_max_phy_offset()
        while phys < end:
            record = self.store.look_message_by_offset(phys)
            if record is None:
                break
            out.append(record)
            self.phys[(record.topic, record.queue_id, record.queue_offset)] = phys
            phys += record.size
        return out

    def op_put(self, args: _client.Args) -> JSONObject:
        """Store the original messages in topic T."""
        results = []
        for m in args.req("msgs"):
            r = self.broker.send_message(message("T", m))
            if r.ok:
                self.phys[("T", m["queueId"], r.queue_offset)] = r.wrote_offset
            results.append(
                {"status": r.status.value, "queueOffset": r.queue_offset if r.ok else None}
            )
        return {"results": results}

    def op_send_back(self, args: _client.Args) -> JSONObject:
        """CONSUMER_SEND_MSG_BACK of a stored message (RETRY-1 … RETRY-8)."""
        before = self.store.get_max_phy_offset()
        request = retry.SendBackRequest(
            offset=self.phys[
                (str(args.get("topic", "T")), args.int("queueId"), args.int("queueOffset"))
            ],
            group="G",
            delay_level=args.int("delayLevel"),
            origin_topic="T",
            max_reconsume_times=args.get("maxReconsumeTimes"),
        )
        response = self.broker.consumer_send_msg_back(request)
        stored = self._appended(before)
        return {"code": response.code.name, "stored": record_json(stored[0]) if stored else None}

    def op_send_message(self, args: _client.Args) -> JSONObject:
        """SEND_MESSAGE, e.g. a client's fallback send to %RETRY%G (RETRY-11)."""
        before = self.store.get_max_phy_offset()
        props = {}
        if args.get("tags") is not None:
            props["TAGS"] = str(args.get("tags"))
        if args.get("delayLevel") is not None:
            props[PROPERTY_DELAY] = str(args.get("delayLevel"))
        msg = BrokerInnerMessage(
            topic=str(args.req("topic")),
            queue_id=args.int("queueId", 0),
            body=bytes(args.int("bodySize", 1)),
            properties=props,
        )
        response = self.broker.send_message_request(
            msg,
            reconsume_times=args.get("reconsumeTimes"),
            max_reconsume_times=args.get("maxReconsumeTimes"),
        )
        stored = self._appended(before)
        return {"code": response.code.name, "stored": record_json(stored[0]) if stored else None}

    def op_advance_clock(self, args: _client.Args) -> JSONObject:
        """Let time pass, running the schedule service whenever a message falls due (RETRY-9)."""
        until = self.clock.now_ms() + args.int("ms")
        delivered: list[JSONObject] = []
        while (due := self.broker.next_schedule_delivery_at) is not None and due <= until:
            self.clock.jump_to(max(due, self.clock.now_ms()))
            before = self.store.get_max_phy_offset()
            self.broker.deliver_due_messages()
            delivered += [
                {"at": self.clock.now_ms(), **record_json(r)} for r in self._appended(before)
            ]
        self.clock.jump_to(until)
        return {"now": until, "delivered": delivered}

    def op_retry_timetable(self, args: _client.Args) -> JSONObject:
        """The delay before each retry of a message sent back with delay level 0 (RETRY-10)."""
        return {"delaysMs": list(retry.retry_timetable(args.int("maxReconsumeTimes"), self.levels))}


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh broker on a clock at 0."""
    return _client.open_driver(candidate, AREA, config, profile, Reference)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
