"""Messages and queues in RocketMQ's vocabulary: `MessageQueue`, the message handed to the store
(`BrokerInnerMessage`, Java MessageExtBrokerInner) and the record the store gives back
(`StoredMessage`, Java MessageExt read from the commit log)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from pullspec.spec.errors import (
    InvalidArgumentError,
    require_bytes,
    require_int,
    require_non_negative,
    require_range,
    require_str,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.rules import rule

# Property names (MessageConst).
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_DELAY = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_CONSUME_START_TIME = "CONSUME_START_TIME"

Properties = tuple[tuple[str, str], ...]


def to_properties(value: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> Properties:
    """Normalise a property map (or pairs) to an ordered tuple of (name, value) pairs."""
    if value is None:
        return ()
    if type(value) is tuple and all(
        type(pair) is tuple and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str
        for pair in value
    ):  # already normalised: what every evolve of a message hands its converter again
        return value
    items = value.items() if isinstance(value, Mapping) else value
    out: list[tuple[str, str]] = []
    for k, v in items:
        out.append((require_str("property name", k), require_str(f"property {k}", v)))
    return tuple(out)


def optional_properties(
    value: Mapping[str, str] | Iterable[tuple[str, str]] | None,
) -> Properties | None:
    """Normalise optional properties: None stays None."""
    return None if value is None else to_properties(value)


def require_body(value: object) -> bytes:
    """Convert a message body, rejecting anything that is not bytes-like."""
    return require_bytes("body", value)


def _same_map(a: Properties, b: Properties) -> bool:
    return dict(a) == dict(b)


@attrs.frozen(order=True)
class MessageQueue:
    """A queue of a topic on one broker: (topic, broker_name, queue_id)."""

    topic: str = attrs.field(validator=lambda _i, _a, v: require_str("topic", v))
    broker_name: str = attrs.field(validator=lambda _i, _a, v: require_str("broker_name", v))
    queue_id: int = attrs.field(validator=lambda _i, _a, v: require_non_negative("queue_id", v))


@attrs.frozen
class HostAddress:
    """An IPv4 or IPv6 socket address as stored in a commit-log record."""

    ip: bytes = attrs.field(converter=bytes)
    port: int = attrs.field(validator=lambda _i, _a, v: require_range("port", v, 0, 65535))

    def __attrs_post_init__(self) -> None:
        if len(self.ip) not in (4, 16):
            raise InvalidArgumentError("ip", self.ip, "must be 4 (IPv4) or 16 (IPv6) bytes")

    @property
    def is_ipv6(self) -> bool:
        """True for a 16-byte address."""
        return len(self.ip) == 16

    @classmethod
    def parse(cls, text: str) -> HostAddress:
        """Parse "a.b.c.d:port"."""
        host, _, port = text.rpartition(":")
        return cls(bytes(int(p) for p in host.split(".")), int(port))

    def __str__(self) -> str:
        return ".".join(str(b) for b in self.ip) + f":{self.port}"


DEFAULT_BORN_HOST = HostAddress(b"\x7f\x00\x00\x01", 52000)
DEFAULT_STORE_HOST = HostAddress(b"\x7f\x00\x00\x01", 10911)


@attrs.frozen
class BrokerInnerMessage:
    """A message handed to the store's putMessage (Java MessageExtBrokerInner)."""

    topic: str = attrs.field(validator=lambda _i, _a, v: require_str("topic", v))
    queue_id: int = attrs.field(validator=lambda _i, _a, v: require_int("queue_id", v))
    body: bytes = attrs.field(converter=require_body)
    properties: Properties = attrs.field(
        default=(), converter=to_properties, eq=attrs.cmp_using(eq=_same_map), hash=False
    )
    flag: int = 0
    sys_flag: int = 0
    reconsume_times: int = attrs.field(
        default=0, validator=lambda _i, _a, v: require_int("reconsume_times", v)
    )
    #: The properties to store when they differ from the map the store decides on (Java keeps a
    #: serialised propertiesString beside the map: RETRY-9 stores DELAY while deciding without it).
    stored_properties: Properties | None = attrs.field(
        default=None,
        converter=optional_properties,
        eq=False,
        hash=False,
    )
    prepared_transaction_offset: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = DEFAULT_BORN_HOST
    store_host: HostAddress = DEFAULT_STORE_HOST

    @property
    def tags(self) -> str | None:
        """The TAGS property, or None."""
        return dict(self.properties).get(PROPERTY_TAGS)

    def get_property(self, name: str) -> str | None:
        """The value of property `name`, or None."""
        return dict(self.properties).get(name)


@attrs.frozen
class StoredMessage:
    """A message as read back from the commit log (Java MessageExt decoded by the broker)."""

    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    body: bytes
    properties: Properties = attrs.field(
        default=(), converter=to_properties, eq=attrs.cmp_using(eq=_same_map), hash=False
    )
    reconsume_times: int = 0
    flag: int = 0
    sys_flag: int = 0
    body_crc: int = 0
    prepared_transaction_offset: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = DEFAULT_BORN_HOST
    store_timestamp: int = 0
    store_host: HostAddress = DEFAULT_STORE_HOST

    @property
    def tags(self) -> str | None:
        """The TAGS property, or None (no tag)."""
        return dict(self.properties).get(PROPERTY_TAGS)

    def get_property(self, name: str) -> str | None:
        """The value of property `name`, or None."""
        return dict(self.properties).get(name)

    @property
    def msg_id(self) -> str:
        """The offset message id of this record (LAYOUT-12)."""
        return create_message_id(self.store_host, self.commitlog_offset)


@rule(
    "LAYOUT-12",
    source="MessageDecoder.createMessageId",
    seeds=(),
)
def create_message_id(store_host: HostAddress, commitlog_offset: int) -> str:
    """The offset message id is the upper-case hex of the store host's IP bytes, its port as a
    4-byte int and the commit-log offset as an 8-byte long.

    pre: 0 <= commitlog_offset < 2**63 and 0 <= store_host.port <= 65535
    post: len(__return__) == (32 if len(store_host.ip) == 4 else 56)
    """
    raw = (
        store_host.ip
        + store_host.port.to_bytes(4, "big", signed=True)
        + commitlog_offset.to_bytes(8, "big", signed=True)
    )
    return raw.hex().upper()


#: MixAll.RETRY_GROUP_TOPIC_PREFIX and MixAll.DLQ_GROUP_TOPIC_PREFIX.
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
#: NamespaceUtil.NAMESPACE_SEPARATOR.
NAMESPACE_SEPARATOR = "%"
#: MessageConst.PROPERTY_TRANSACTION_PREPARED, cleared on every client-built retry message.
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"


def retry_topic_name(group: str) -> str:
    """MixAll.getRetryTopic: `%RETRY%<group>`."""
    return RETRY_GROUP_TOPIC_PREFIX + require_str("group", group)


def dlq_topic_name(group: str) -> str:
    """MixAll.getDLQTopic: `%DLQ%<group>`."""
    return DLQ_GROUP_TOPIC_PREFIX + require_str("group", group)


def put_property(msg: StoredMessage, name: str, value: str) -> StoredMessage:
    """A copy of `msg` with property `name` set to `value` (Java mutates the cached object)."""
    return evolve(msg, properties={**dict(msg.properties), name: value})


def _prefix_of(resource: str) -> str:
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix
    return ""


def without_namespace(resource: str, namespace: str | None) -> str:
    """NamespaceUtil.withoutNamespace for plain, %RETRY% and %DLQ% resources: strip
    `<namespace>%` after the prefix; anything else is returned unchanged.

    System resources (RocketMQ's own topics) are out of scope: consumers here never use them.
    """
    if not namespace or not resource:
        return resource
    prefix = _prefix_of(resource)
    rest = resource[len(prefix) :]
    marker = namespace + NAMESPACE_SEPARATOR
    return prefix + rest[len(marker) :] if rest.startswith(marker) else resource


def with_namespace(resource: str, namespace: str | None) -> str:
    """NamespaceUtil.wrapNamespace for plain, %RETRY% and %DLQ% resources: insert
    `<namespace>%` after the prefix unless it is already there."""
    if not namespace or not resource:
        return resource
    prefix = _prefix_of(resource)
    rest = resource[len(prefix) :]
    marker = namespace + NAMESPACE_SEPARATOR
    return resource if rest.startswith(marker) else prefix + marker + rest
