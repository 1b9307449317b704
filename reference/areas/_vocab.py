"""The vectors' JSON vocabulary of the client areas, turned into spec values and back.

Every reference driver of a client area (`reference.areas.<area>`) reads its ops' arguments and
writes its observations through these helpers, so that every area spells queues, messages,
re-enqueue actions and consumer configs the same way (docs/protocol.md, "Conventions shared by
the client areas"). `DriverBase` is the base of those drivers: op ``x`` runs method ``op_x``.

Example: ``mq({"topic": "T", "brokerName": "b", "queueId": 0})`` is ``MessageQueue("T", "b", 0)``
and ``mq_json`` of it gives the object back.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

import attrs

from pullspec.reference.scheduler import Scheduler
from pullspec.spec.allocate import message_queue_key
from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.consumer_config import (
    ConsumeFromWhere,
    ConsumeMode,
    ConsumerConfig,
    MessageModel,
)
from pullspec.spec.errors import InvalidArgumentError, UnsupportedError
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import SubscriptionData, build_subscription_data, java_string_hash
from pullspec.spec.message import PROPERTY_TAGS, MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_actions import Delay, Drop, Immediately, Pull
from pullspec.spec.ruleset import Ruleset

E = TypeVar("E", bound=enum.Enum)


class Args:
    """A step's arguments with typed, named access (a missing required key is a vector bug)."""

    def __init__(self, op: str, raw: Mapping[str, Any]) -> None:
        self.op = op
        self.raw = dict(raw)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key`, or `default` when absent."""
        return self.raw.get(key, default)

    def req(self, key: str) -> Any:
        """The value of `key`, which must be present."""
        if key not in self.raw:
            raise InvalidArgumentError(key, None, f"op {self.op} needs argument {key}")
        return self.raw[key]

    def int(self, key: str, default: int | None = None) -> int:
        """An integer argument (bools are refused: JSON true is not 1 here)."""
        value = self.req(key) if default is None else self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(key, value, "expected an integer")
        return value

    def bool(self, key: str, default: bool | None = None) -> bool:
        """A boolean argument."""
        value = self.req(key) if default is None else self.raw.get(key, default)
        if not isinstance(value, bool):
            raise InvalidArgumentError(key, value, "expected true or false")
        return value

    def enum(self, key: str, kind: type[E], default: E | None = None) -> E:
        """An enum argument spelt by its value."""
        if default is not None and key not in self.raw:
            return default
        return enum_of(kind, self.req(key), key)


class DriverBase:
    """Base of the reference drivers: op ``x`` runs method ``op_x(args)``."""

    #: The area this driver serves (for messages).
    area: ClassVar[str] = "?"

    def __init__(self, config: Mapping[str, Any], profile: Profile) -> None:
        self.config = dict(config)
        self.profile = profile
        #: The profile's rules, looked up once.
        self.rules = Ruleset.of(profile)

    def apply(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Dispatch `op` to its method; an op without one is UNSUPPORTED."""
        method: Callable[[Args], dict[str, Any]] | None = getattr(self, f"op_{op}", None)
        if method is None:
            raise UnsupportedError(f"{self.area} op {op}")
        return method(Args(op, args))


# -- JSON ↔ spec values ----------------------------------------------------------------------


def enum_of(kind: type[E], value: object, name: str = "value") -> E:
    """The member of `kind` whose value (or name) is `value`."""
    for member in kind:
        if value in (member.value, member.name):
            return member
    raise InvalidArgumentError(name, value, f"expected one of {[m.value for m in kind]}")


def mq(value: Mapping[str, Any]) -> MessageQueue:
    """A MessageQueue from ``{"topic", "brokerName", "queueId"}``."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentError("mq", value, "expected {topic, brokerName, queueId}")
    return MessageQueue(value["topic"], value["brokerName"], value["queueId"])


def mqs(values: Iterable[Mapping[str, Any]] | None) -> list[MessageQueue] | None:
    """A list of MessageQueues, or None for JSON null."""
    return None if values is None else [mq(v) for v in values]


def mq_json(value: MessageQueue) -> dict[str, Any]:
    """The JSON of a MessageQueue."""
    return {"topic": value.topic, "brokerName": value.broker_name, "queueId": value.queue_id}


def mqs_json(values: Iterable[MessageQueue] | None, ordered: bool = False) -> list[Any] | None:
    """The JSON of queues; a set's are sorted (topic, broker, id) so the answer is stable."""
    if values is None:
        return None
    items = list(values)
    if not ordered:
        items.sort(key=lambda q: (q.topic, q.broker_name, q.queue_id))
    return [mq_json(q) for q in items]


def sorted_by_mq(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows about queues (each with an `mq` in the vectors' JSON) that RocketMQ produces from a
    hash map or a hash set — a set in the vocabulary — written in MessageQueue.compareTo order
    (topic, brokerName, queueId), then by their other fields so the answer is stable.

    Example: ``sorted_by_mq([{"mq": mq_json(q2)}, {"mq": mq_json(q1)}])`` lists q1 first when
    q1 < q2.
    """
    return sorted(
        rows,
        key=lambda r: (message_queue_key(mq(r["mq"])), json.dumps(r, sort_keys=True)),
    )


def broker_addrs(value: Iterable[Any]) -> BrokerAddrs:
    """BrokerData.brokerAddrs from ``[[brokerId, addr], …]``: the pairs are put in the listed
    order into a HashMap<Long, String>, which iterates in its own order (`spec.broker_addrs`)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise InvalidArgumentError("brokerAddrs", value, "expected [[brokerId, addr], …]")
    return BrokerAddrs(tuple(pair) if isinstance(pair, list) else pair for pair in value)


def message(value: Mapping[str, Any], topic: str = "T", queue_id: int = 0) -> StoredMessage:
    """A consumer-side message from ``{"queueOffset", "tags"?, "reconsumeTimes"?, "properties"?,
    "topic"?, "queueId"?, "bodySize"?, "commitLogOffset"?}``; the commit-log offset defaults to
    100 × the queue offset and the body to `bodySize` zero bytes (default 1)."""
    offset = value["queueOffset"]
    props = dict(value.get("properties") or {})
    tags = value.get("tags")
    if tags is not None:
        props[PROPERTY_TAGS] = tags
    size = value.get("bodySize", 1)
    return StoredMessage(
        topic=value.get("topic", topic),
        queue_id=value.get("queueId", queue_id),
        queue_offset=offset,
        commitlog_offset=value.get("commitLogOffset", offset * 100),
        size=size,
        tags_code=java_string_hash(tags) if tags is not None else 0,
        body=b"\x00" * size,
        properties=props,
        reconsume_times=value.get("reconsumeTimes", 0),
    )


def message_json(msg: StoredMessage) -> dict[str, Any]:
    """What the areas observe of a message: topic, queue, offset, reconsume times, properties."""
    return {
        "topic": msg.topic,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "reconsumeTimes": msg.reconsume_times,
        "properties": dict(sorted(msg.properties)),
    }


def action_json(action: Pull | Delay | Immediately | Drop | None) -> dict[str, Any] | None:
    """A PullRequest action: PULL (with the offset), DELAY (ms, reason), IMMEDIATELY or DROP."""
    if action is None:
        return None
    if isinstance(action, Pull):
        return {"kind": "PULL", "requestOffset": action.request_offset}
    if isinstance(action, Delay):
        return {"kind": "DELAY", "delayMs": action.ms, "reason": action.reason.value}
    if isinstance(action, Immediately):
        return {"kind": "IMMEDIATELY"}
    return {"kind": "DROP"}


@functools.lru_cache(maxsize=1024)
def camel(name: str) -> str:
    """snake_case → camelCase (remembered: the observations spell the same few field names
    after every op)."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


_CONFIG_ENUMS: dict[str, type[enum.Enum]] = {
    "consume_mode": ConsumeMode,
    "message_model": MessageModel,
    "consume_from_where": ConsumeFromWhere,
}


def consumer_config(config: Mapping[str, Any]) -> ConsumerConfig:
    """The ConsumerConfig a case's config describes, by DefaultMQPushConsumer's camelCase names
    (unknown keys belong to the area and are ignored)."""
    kwargs: dict[str, Any] = {}
    for field in attrs.fields(ConsumerConfig):
        key = camel(field.name)
        if key in config:
            kind = _CONFIG_ENUMS.get(field.name)
            kwargs[field.name] = enum_of(kind, config[key], key) if kind else config[key]
    return ConsumerConfig(**kwargs)


def subscription(value: Mapping[str, Any] | None, topic: str = "T") -> SubscriptionData | None:
    """SubscriptionData from ``{"expression", "expressionType"?, "classFilterMode"?,
    "subVersion"?, "topic"?}`` (FilterAPI.buildSubscriptionData), or None for JSON null."""
    if value is None:
        return None
    built = build_subscription_data(
        value.get("topic", topic), value.get("expression"), value.get("expressionType")
    )
    return evolve(
        built,
        class_filter_mode=value.get("classFilterMode", False),
        sub_version=value.get("subVersion", 0),
    )


#: The JSON leaves value_json answers as they are (most of what it is handed), by exact type.
_LEAVES = frozenset({int, str, bool, float, type(None)})
_ACTIONS = (Pull, Delay, Immediately, Drop)


_CAMEL_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _camel_fields(cls: type) -> tuple[tuple[str, str], ...]:
    """(camelCase key, attribute name) of each field of the attrs class `cls`, remembered."""
    found = _CAMEL_FIELDS.get(cls)
    if found is None:
        found = _CAMEL_FIELDS[cls] = tuple((camel(f.name), f.name) for f in attrs.fields(cls))
    return found


def value_json(value: Any) -> Any:
    """Plain JSON of a spec value: enums by value, queues and messages as above, attrs classes
    as camelCase objects, sets sorted."""
    if type(value) in _LEAVES:
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, MessageQueue):
        return mq_json(value)
    if isinstance(value, StoredMessage):
        return message_json(value)
    if isinstance(value, _ACTIONS):
        return action_json(value)
    if attrs.has(type(value)):
        return {key: value_json(getattr(value, name)) for key, name in _camel_fields(type(value))}
    if isinstance(value, frozenset | set):
        if all(isinstance(v, MessageQueue) for v in value):
            return mqs_json(value)
        # Any other set is compared as a list sorted by its members' JSON text.
        return sorted((value_json(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, list | tuple):
        return [value_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): value_json(v) for k, v in value.items()}
    return value


def periodic_schedule(scheduler: Scheduler) -> dict[str, Any] | None:
    """A started service's periodic task as observed on its own scheduler: the first run's due
    time, the period to the second, and whether a third is due after the second run threw (the
    driver makes it throw). None when the service scheduled nothing.

    Example: a task due at 1000 and every 60 000 ms after, surviving its exception, is
    ``{"initialDelayMs": 1000, "periodMs": 60000, "survivesException": True}``.
    """
    first = scheduler.next_time
    if first is None:
        return None
    scheduler.run_next()  # the first run
    second = scheduler.next_time
    scheduler.run_next()  # the second run throws
    assert second is not None
    return {
        "initialDelayMs": first,
        "periodMs": second - first,
        "survivesException": scheduler.next_time is not None,
    }
