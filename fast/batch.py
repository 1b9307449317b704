"""MessageBatch: many messages for the store described by columns, as Arrow dictionary-encodes
them — the bodies one buffer with offsets, topics and property sets each a small dictionary
indexed per message."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pullspec.fast.gather import I64, U8
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, require_int
from pullspec.spec.message import (
    DEFAULT_BORN_HOST,
    DEFAULT_STORE_HOST,
    BrokerInnerMessage,
    HostAddress,
    Properties,
    to_properties,
)

#: A property set as given: a mapping or (name, value) pairs.
PropertySet = Mapping[str, str] | Iterable[tuple[str, str]]
#: An integer column as given: one int for every message, or one per message.
IntColumn = int | np.integer[Any] | Sequence[int] | npt.NDArray[np.integer[Any]]

_ARRAY_EQ = attrs.cmp_using(eq=np.array_equal)


def _frozen(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a.flags.writeable = False
    return a


def _owned(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """`a` itself when it is already read-only (the caller promised not to change it), else a
    read-only copy: a batch is a value."""
    return a if not a.flags.writeable else _frozen(a.copy())


def _int_array(name: str, value: object) -> I64:
    """`value` as an int64 array (0-d or 1-d); typed errors name the column."""
    if isinstance(value, bool | np.bool_):
        raise InvalidTypeError(name, value, "int or integer array")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidTypeError(name, value, "int or integer array") from e
    if raw.size == 0 and raw.ndim == 1 and raw.dtype.kind in "fO":
        return np.zeros(0, dtype=np.int64)  # [] reads as float64: an empty column is an int one
    if raw.dtype == object and raw.ndim <= 1:
        # Python ints beyond int64 (or non-ints) land in an object array.
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in raw.reshape(-1)):
            raise InvalidTypeError(name, value, "int or integer array")
        raise InvalidArgumentError(name, value, "does not fit a 64-bit integer")
    if raw.dtype.kind not in "iu":
        raise InvalidTypeError(name, value, "int or integer array")
    if raw.ndim > 1:
        raise InvalidArgumentError(name, raw.shape, "expected a scalar or a 1-D column")
    if raw.dtype.kind == "u" and raw.size and int(raw.max()) > np.iinfo(np.int64).max:
        raise InvalidArgumentError(name, int(raw.max()), "does not fit a 64-bit integer")
    return raw if raw.dtype == np.int64 else raw.astype(np.int64)


def _column(name: str, value: object, n: int) -> I64:
    """An int64 column of `n` values from a scalar or `n` values."""
    raw = _int_array(name, value)
    if raw.ndim == 0:
        return _frozen(np.full(n, int(raw), dtype=np.int64))
    if len(raw) != n:
        raise InvalidArgumentError(name, len(raw), f"expected {n} values, one per message")
    return _owned(np.ascontiguousarray(raw))


def _index(name: str, value: object, n: int, size: int) -> I64:
    col = _column(name, value, n)
    if n and (int(col.min()) < 0 or int(col.max()) >= size):
        bad = int(col[(col < 0) | (col >= size)][0])
        raise InvalidArgumentError(name, bad, f"must index one of the {size} entries")
    return col


def _topics(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not value:
        raise InvalidTypeError("topics", value, "str or a non-empty sequence of str")
    for i, t in enumerate(value):
        if not isinstance(t, str):
            raise InvalidTypeError(f"topics[{i}]", t, "str")
    return tuple(value)


def _property_sets(value: object) -> tuple[Properties, ...]:
    if isinstance(value, Mapping):
        return (to_properties(value),)
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        raise InvalidTypeError("property_sets", value, "a non-empty sequence of property maps")
    out = []
    for i, props in enumerate(value):
        if isinstance(props, str | bytes) or not isinstance(props, Mapping | Iterable):
            raise InvalidTypeError(f"property_sets[{i}]", props, "a property map")
        out.append(to_properties(props))
    return tuple(out)


def _body_data(value: object) -> U8:
    if isinstance(value, bytes):
        return np.frombuffer(value, dtype=np.uint8)
    if isinstance(value, bytearray | memoryview):
        return _frozen(np.frombuffer(bytes(value), dtype=np.uint8).copy())
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1:
        return _owned(np.ascontiguousarray(value))
    raise InvalidTypeError("body_data", value, "bytes or a 1-D uint8 array")


def _body_offsets(value: object, size: int) -> I64:
    raw = _int_array("body_offsets", value)
    if raw.ndim != 1 or len(raw) == 0:
        raise InvalidArgumentError("body_offsets", value, "expected n + 1 offsets (n ≥ 0)")
    if int(raw[0]) < 0 or int(raw[-1]) > size:
        raise InvalidArgumentError("body_offsets", value, f"must lie in [0, {size}]")
    if len(raw) > 1 and not bool((raw[1:] >= raw[:-1]).all()):
        k = int(np.flatnonzero(raw[1:] < raw[:-1])[0])
        raise InvalidArgumentError(f"body_offsets[{k + 1}]", int(raw[k + 1]), "decreases")
    return _owned(np.ascontiguousarray(raw))


def _host(name: str, value: object) -> HostAddress:
    if not isinstance(value, HostAddress):
        raise InvalidTypeError(name, value, "HostAddress")
    return value


@attrs.frozen(init=False)
class MessageBatch:
    """Messages by columns, exactly equivalent to the BrokerInnerMessage list `messages()`.

    Message k has topic `topics[topic_index[k]]`, body `body_data[body_offsets[k] :
    body_offsets[k + 1]]`, properties `property_sets[property_index[k]]` and queue_id, flag,
    born_timestamp and reconsume_times from the columns of the same names (plural); sys_flag,
    prepared_transaction_offset and the hosts are shared. Every column may be given as one int
    for all messages. Arrays are copied unless already read-only (then they must not change).

    >>> batch = MessageBatch("T", b"abcdef", [0, 2, 4, 6], queue_ids=[0, 1, 1])
    >>> len(batch), [m.body for m in batch.messages()], [m.queue_id for m in batch.messages()]
    (3, [b'ab', b'cd', b'ef'], [0, 1, 1])
    """

    topics: tuple[str, ...]
    body_data: U8 = attrs.field(eq=_ARRAY_EQ, hash=False)
    body_offsets: I64 = attrs.field(eq=_ARRAY_EQ, hash=False)
    queue_ids: I64 = attrs.field(eq=_ARRAY_EQ, hash=False)
    topic_index: I64 = attrs.field(eq=_ARRAY_EQ, hash=False)
    property_sets: tuple[Properties, ...]
    property_index: I64 = attrs.field(eq=_ARRAY_EQ, hash=False)
    flags: I64 = attrs.field(eq=_ARRAY_EQ, hash=False)
    born_timestamps: I64 = attrs.field(eq=_ARRAY_EQ, hash=False)
    reconsume_times: I64 = attrs.field(eq=_ARRAY_EQ, hash=False)
    sys_flag: int
    prepared_transaction_offset: int
    born_host: HostAddress
    store_host: HostAddress

    def __init__(
        self,
        topics: str | Sequence[str],
        body_data: bytes | bytearray | memoryview | U8,
        body_offsets: Sequence[int] | npt.NDArray[np.integer[Any]],
        *,
        queue_ids: IntColumn = 0,
        topic_index: IntColumn = 0,
        property_sets: PropertySet | Sequence[PropertySet] = ((),),
        property_index: IntColumn = 0,
        flags: IntColumn = 0,
        born_timestamps: IntColumn = 0,
        reconsume_times: IntColumn = 0,
        sys_flag: int = 0,
        prepared_transaction_offset: int = 0,
        born_host: HostAddress = DEFAULT_BORN_HOST,
        store_host: HostAddress = DEFAULT_STORE_HOST,
    ) -> None:
        names = _topics(topics)
        data = _body_data(body_data)
        offsets = _body_offsets(body_offsets, len(data))
        sets = _property_sets(property_sets)
        n = len(offsets) - 1
        self.__attrs_init__(
            names,
            data,
            offsets,
            _column("queue_ids", queue_ids, n),
            _index("topic_index", topic_index, n, len(names)),
            sets,
            _index("property_index", property_index, n, len(sets)),
            _column("flags", flags, n),
            _column("born_timestamps", born_timestamps, n),
            _column("reconsume_times", reconsume_times, n),
            require_int("sys_flag", sys_flag),
            require_int("prepared_transaction_offset", prepared_transaction_offset),
            _host("born_host", born_host),
            _host("store_host", store_host),
        )

    @classmethod
    def from_bodies(
        cls, topics: str | Sequence[str], bodies: Sequence[bytes], **columns: Any
    ) -> MessageBatch:
        """A batch of the given bodies (joined into one buffer); other columns as in __init__."""
        if isinstance(bodies, bytes | str) or not isinstance(bodies, Sequence):
            raise InvalidTypeError("bodies", bodies, "a sequence of bytes")
        for i, b in enumerate(bodies):
            if not isinstance(b, bytes | bytearray | memoryview):
                raise InvalidTypeError(f"bodies[{i}]", b, "bytes")
        offsets = np.zeros(len(bodies) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in bodies], out=offsets[1:])
        return cls(topics, b"".join(bodies), _frozen(offsets), **columns)

    @classmethod
    def from_messages(cls, msgs: Sequence[BrokerInnerMessage]) -> MessageBatch:
        """The batch equivalent to `msgs`; InvalidArgumentError when they differ in a shared
        field (sys_flag, prepared_transaction_offset, hosts) or carry stored_properties."""
        if isinstance(msgs, BrokerInnerMessage) or not isinstance(msgs, Sequence):
            raise InvalidTypeError("msgs", msgs, "a sequence of BrokerInnerMessage")
        for i, m in enumerate(msgs):
            if not isinstance(m, BrokerInnerMessage):
                raise InvalidTypeError(f"msgs[{i}]", m, "BrokerInnerMessage")
        batch = columns_of(msgs)
        if batch is None:
            raise InvalidArgumentError(
                "msgs", len(msgs), "shared fields differ, stored_properties set or values overflow"
            )
        return batch

    def __len__(self) -> int:
        return len(self.body_offsets) - 1

    @property
    def body_lengths(self) -> I64:
        """The length of every body."""
        return np.diff(self.body_offsets)

    def body(self, k: int) -> bytes:
        """The body of message k."""
        return self.body_data[self.body_offsets[k] : self.body_offsets[k + 1]].tobytes()

    def messages(self) -> list[BrokerInnerMessage]:
        """The BrokerInnerMessages this batch stands for, in order."""
        sets, names, offsets = self.property_sets, self.topics, self.body_offsets.tolist()
        data = self.body_data.tobytes()
        return [
            BrokerInnerMessage(
                topic=names[t],
                queue_id=q,
                body=data[offsets[k] : offsets[k + 1]],
                properties=sets[p],
                flag=f,
                sys_flag=self.sys_flag,
                reconsume_times=r,
                prepared_transaction_offset=self.prepared_transaction_offset,
                born_timestamp=b,
                born_host=self.born_host,
                store_host=self.store_host,
            )
            for k, (t, q, p, f, r, b) in enumerate(
                zip(
                    self.topic_index.tolist(),
                    self.queue_ids.tolist(),
                    self.property_index.tolist(),
                    self.flags.tolist(),
                    self.reconsume_times.tolist(),
                    self.born_timestamps.tolist(),
                    strict=True,
                )
            )
        ]


_PER_MESSAGE = operator.attrgetter(
    "topic", "queue_id", "body", "properties", "flag", "reconsume_times", "born_timestamp"
)
_SHARED = operator.attrgetter(
    "sys_flag", "prepared_transaction_offset", "born_host", "store_host", "stored_properties"
)


def _dictionary(values: Sequence[Any]) -> tuple[list[Any], I64]:
    """(distinct values in first-seen order, the index of each value among them)."""
    distinct = dict.fromkeys(values)
    for i, key in enumerate(distinct):
        distinct[key] = i
    return list(distinct), _frozen(np.fromiter(map(distinct.__getitem__, values), np.int64))


def columns_of(msgs: Sequence[BrokerInnerMessage]) -> MessageBatch | None:
    """The batch equivalent to `msgs` (all BrokerInnerMessage), or None when there is none: a
    shared field differs, stored_properties is set, or a value overflows its column."""
    if not msgs:
        return None
    shared = _SHARED(msgs[0])
    if shared[4] is not None or list(map(_SHARED, msgs)).count(shared) != len(msgs):
        return None
    topics, queue_ids, bodies, props, flags, reconsume, born = zip(
        *map(_PER_MESSAGE, msgs), strict=True
    )
    names, topic_index = _dictionary(topics)
    sets, property_index = _dictionary(props)
    offsets = np.zeros(len(msgs) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, bodies), np.int64, len(bodies)), out=offsets[1:])
    try:
        return MessageBatch(
            names,
            b"".join(bodies),
            _frozen(offsets),
            queue_ids=_frozen(np.array(queue_ids, dtype=np.int64)),
            topic_index=topic_index,
            property_sets=sets,
            property_index=property_index,
            flags=_frozen(np.array(flags, dtype=np.int64)),
            born_timestamps=_frozen(np.array(born, dtype=np.int64)),
            reconsume_times=_frozen(np.array(reconsume, dtype=np.int64)),
            sys_flag=shared[0],
            prepared_transaction_offset=shared[1],
            born_host=shared[2],
            store_host=shared[3],
        )
    except (OverflowError, TypeError, InvalidArgumentError, InvalidTypeError):
        return None
