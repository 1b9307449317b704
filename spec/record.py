"""The byte codec of a commit-log record: RocketMQ 4.x's "v1" message record (LAYOUT-5), its magic
codes (LAYOUT-6), the end-of-file blank (LAYOUT-7) and the body CRC (LAYOUT-8).

Every function here is pure: it builds or reads bytes and nothing else. Positions are the ones
LAYOUT-5 lists for IPv4 hosts; an IPv6 born host (sysFlag 0x10) moves every later field by 12
bytes, an IPv6 store host (sysFlag 0x20) every field after it by 12 more.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import attrs

from pullspec.spec.delay import SCHEDULE_TOPIC, deliver_timestamp
from pullspec.spec.errors import CorruptStoreError, InvalidArgumentError
from pullspec.spec.filter import tags_string_to_tags_code
from pullspec.spec.layout import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    LayoutRules,
    body_crc,
    calc_msg_length,
)
from pullspec.spec.message import (
    PROPERTY_DELAY,
    PROPERTY_TAGS,
    HostAddress,
    Properties,
    StoredMessage,
)
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer as Buffer

#: Byte offsets of the fields that never move (LAYOUT-5 rows 1–9).
OFF_TOTAL_SIZE = 0
OFF_MAGIC = 4
OFF_BODY_CRC = 8
OFF_QUEUE_ID = 12
OFF_FLAG = 16
OFF_QUEUE_OFFSET = 20
OFF_PHYSICAL_OFFSET = 28
OFF_SYS_FLAG = 36
OFF_BORN_TIMESTAMP = 40
OFF_BORN_HOST = 48
#: Where BODYLENGTH sits with IPv4 hosts; add 12 per IPv6 host (`body_length_offset`).
OFF_BODY_LENGTH_V4 = 84
#: Where the body of a record with IPv4 hosts starts: every fixed field through BODYLENGTH.
OFF_BODY_V4 = OFF_BODY_LENGTH_V4 + 4
#: The smallest well-formed message record: no body, topic or properties.
MIN_RECORD_LENGTH = 91

_HEAD = struct.Struct(">iiiiiqqiq")  # rows 1–9: 48 bytes
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_LONG = struct.Struct(">q")
_SIZE_MAGIC = struct.Struct(">ii")
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def host_length(sys_flag: int, flag_bit: int) -> int:
    """The stored length of a host field: 8 (IPv4 + port) or 20 (IPv6 + port) per its sysFlag bit."""
    return 8 if sys_flag & flag_bit == 0 else 20


def body_length_offset(sys_flag: int) -> int:
    """The byte offset of BODYLENGTH inside a record with this sysFlag (84 with IPv4 hosts)."""
    return (
        OFF_BODY_LENGTH_V4
        + host_length(sys_flag, SYSFLAG_BORNHOST_V6)
        - 8
        + host_length(sys_flag, SYSFLAG_STOREHOST_V6)
        - 8
    )


def store_timestamp_offset(sys_flag: int) -> int:
    """The byte offset of STORETIMESTAMP: right after the born host."""
    return OFF_BORN_HOST + host_length(sys_flag, SYSFLAG_BORNHOST_V6)


def host_sys_flag(sys_flag: int, born_host: HostAddress, store_host: HostAddress) -> int:
    """The sysFlag the store writes: the message's flag with 0x10 / 0x20 set for IPv6 hosts.

    CommitLog.asyncPutMessage sets the bits from the address types and never clears them, so a
    flag that claims IPv6 for an IPv4 address would produce an unreadable record; it is refused.
    """
    flag = sys_flag
    if born_host.is_ipv6:
        flag |= SYSFLAG_BORNHOST_V6
    elif flag & SYSFLAG_BORNHOST_V6:
        raise InvalidArgumentError("sys_flag", sys_flag, "claims an IPv6 born host (0x10)")
    if store_host.is_ipv6:
        flag |= SYSFLAG_STOREHOST_V6
    elif flag & SYSFLAG_STOREHOST_V6:
        raise InvalidArgumentError("sys_flag", sys_flag, "claims an IPv6 store host (0x20)")
    return flag


def _check_range(name: str, value: int, bounds: tuple[int, int]) -> None:
    if not bounds[0] <= value <= bounds[1]:
        bits = bounds[1].bit_length() + 1
        raise InvalidArgumentError(name, value, f"does not fit a Java {bits}-bit field")


def stored_tags_code(
    topic: str,
    properties: Properties,
    store_timestamp: int,
    delay_levels: tuple[int, ...] | None,
) -> int:
    """The consume-queue tags code dispatch derives from a record (FILTER-1): the hash of TAGS,
    except that a SCHEDULE_TOPIC_XXXX record with DELAY > 0 gets its delivery time, the level
    clamped to the levels there are (CommitLog.checkMessageAndReturnSize; RETRY-8). Without
    `delay_levels` the exception is not applied."""
    props = dict(properties)
    if delay_levels is not None and topic == SCHEDULE_TOPIC:
        try:
            level = int(props.get(PROPERTY_DELAY, ""))
        except ValueError:
            level = 0
        level = min(level, len(delay_levels))
        if level > 0:
            return deliver_timestamp(level, store_timestamp, delay_levels)
    return tags_string_to_tags_code(props.get(PROPERTY_TAGS))


@attrs.frozen
class RecordFields:
    """Every field of a message record as stored, the properties still as their raw string."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: HostAddress
    store_timestamp: int
    store_host: HostAddress
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_string: str
    properties_length: int

    def to_stored_message(
        self, rules: LayoutRules, delay_levels: tuple[int, ...] | None = None
    ) -> StoredMessage:
        """The StoredMessage the broker decodes from this record under `rules` (a profile's
        ruleset: its LAYOUT-13 parser; tags code per FILTER-1; with the store's
        `delay_levels`, a schedule-topic record's code is its delivery time, RETRY-8)."""
        properties = rules.string_to_message_properties(self.properties_string)
        return StoredMessage(
            topic=self.topic,
            queue_id=self.queue_id,
            queue_offset=self.queue_offset,
            commitlog_offset=self.physical_offset,
            size=self.total_size,
            tags_code=stored_tags_code(self.topic, properties, self.store_timestamp, delay_levels),
            body=self.body,
            properties=properties,
            reconsume_times=self.reconsume_times,
            flag=self.flag,
            sys_flag=self.sys_flag,
            body_crc=self.body_crc,
            prepared_transaction_offset=self.prepared_transaction_offset,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            store_timestamp=self.store_timestamp,
            store_host=self.store_host,
        )


_FIXED: dict[tuple[bool, bool], struct.Struct] = {
    (b, st): struct.Struct(f">iiiiiqqiq{16 if b else 4}siq{16 if st else 4}siiqi")
    for b in (False, True)
    for st in (False, True)
}


def encode_record(
    *,
    topic: str,
    queue_id: int,
    body: bytes,
    properties_string: str,
    flag: int,
    sys_flag: int,
    queue_offset: int,
    physical_offset: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_timestamp: int,
    store_host: HostAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> bytes:
    """The bytes of one message record (LAYOUT-5) with BODYCRC per LAYOUT-8.

    `sys_flag` must already carry the IPv6 bits of the hosts (`host_sys_flag`). A value that does
    not fit its Java field raises InvalidArgumentError naming it.
    """
    return encode_record_bytes(
        topic.encode("utf-8"),
        properties_string.encode("utf-8"),
        body,
        queue_id=queue_id,
        flag=flag,
        sys_flag=sys_flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
    )


def encode_stored(message: StoredMessage, properties_string: str) -> bytes:
    """`encode_record` of a record read back: its fields, written with the properties string it
    was stored with (which may hold what reading dropped, LAYOUT-13)."""
    return encode_record(
        topic=message.topic,
        queue_id=message.queue_id,
        body=message.body,
        properties_string=properties_string,
        flag=message.flag,
        sys_flag=message.sys_flag,
        queue_offset=message.queue_offset,
        physical_offset=message.commitlog_offset,
        born_timestamp=message.born_timestamp,
        born_host=message.born_host,
        store_timestamp=message.store_timestamp,
        store_host=message.store_host,
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
    )


def encode_record_bytes(
    topic: bytes,
    properties: bytes,
    body: bytes,
    *,
    queue_id: int,
    flag: int,
    sys_flag: int,
    queue_offset: int,
    physical_offset: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_timestamp: int,
    store_host: HostAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
    crc: int | None = None,
) -> bytes:
    """`encode_record` for a topic and properties string already UTF-8 encoded (and, optionally,
    the body CRC already computed)."""
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidArgumentError("topic", topic, "longer than 127 bytes")
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise InvalidArgumentError("properties", len(properties), "longer than 32767 bytes")
    born_v6, store_v6 = bool(sys_flag & SYSFLAG_BORNHOST_V6), bool(sys_flag & SYSFLAG_STOREHOST_V6)
    if born_host.is_ipv6 != born_v6 or store_host.is_ipv6 != store_v6:
        raise InvalidArgumentError("sys_flag", sys_flag, "IPv6 bits disagree with the hosts")
    length = calc_msg_length(sys_flag, len(body), len(topic), len(properties))
    try:
        head = _FIXED[born_v6, store_v6].pack(
            length,
            MESSAGE_MAGIC_CODE,
            body_crc(body) if crc is None else crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp,
            born_host.ip,
            born_host.port,
            store_timestamp,
            store_host.ip,
            store_host.port,
            reconsume_times,
            prepared_transaction_offset,
            len(body),
        )
    except struct.error:
        for name, value, bounds in (
            ("queue_id", queue_id, _INT32),
            ("flag", flag, _INT32),
            ("queue_offset", queue_offset, _INT64),
            ("physical_offset", physical_offset, _INT64),
            ("sys_flag", sys_flag, _INT32),
            ("born_timestamp", born_timestamp, _INT64),
            ("born_host.port", born_host.port, _INT32),
            ("store_timestamp", store_timestamp, _INT64),
            ("store_host.port", store_host.port, _INT32),
            ("reconsume_times", reconsume_times, _INT32),
            ("prepared_transaction_offset", prepared_transaction_offset, _INT64),
        ):
            _check_range(name, value, bounds)
        raise
    return b"".join(
        (head, body, bytes((len(topic),)), topic, _SHORT.pack(len(properties)), properties)
    )


def queue_offsets_in(body: bytes) -> list[int]:
    """The queue offsets a reader finds walking `body` record by record: at each record start
    the TOTALSIZE (bytes 0–3) leads to the next record and bytes 20–27 hold the queue offset. The
    walk stops at the end, at a header cut before its queue offset, and after a TOTALSIZE that
    is not positive.

    This is how the recorded vectors observe `msgOffsets`: for whole records it is their queue
    offsets; a read that is not one whole record (STORE-21) walks on into whatever bytes follow.

    >>> queue_offsets_in(b"")
    []
    """
    out: list[int] = []
    at = 0
    while at + OFF_QUEUE_OFFSET + 8 <= len(body):
        size = _INT.unpack_from(body, at)[0]
        out.append(_LONG.unpack_from(body, at + OFF_QUEUE_OFFSET)[0])
        if size <= 0:
            break
        at += size
    return out


_LAYOUT_7 = "CommitLog.DefaultAppendMessageCallback.doAppend"


# [4.7]
@rule("LAYOUT-7", source=_LAYOUT_7, profiles=(Profile.V4_7,))
def encode_blank_v47(remaining: int) -> bytes:
    """The end-of-file blank for `remaining` = F − w free bytes is [int F − w][int
    BLANK_MAGIC_CODE] written over all F − w bytes (zeros after the header here: 4.7's own
    bytes there are unspecified).

    raises: InvalidArgumentError
    post: len(__return__) == remaining
    """
    return _blank_header(remaining) + bytes(remaining - END_FILE_MIN_BLANK_LENGTH)


# [Modified in 4.9]
@rule("LAYOUT-7", source=_LAYOUT_7, profiles=(Profile.V4_9,))
def encode_blank_v49(remaining: int) -> bytes:
    """The end-of-file blank for `remaining` = F − w free bytes is the 8 bytes [int F − w][int
    BLANK_MAGIC_CODE] alone; the new file's zeros follow.

    raises: InvalidArgumentError
    post: len(__return__) == 8
    """
    return _blank_header(remaining)


def _blank_header(remaining: int) -> bytes:
    if remaining < END_FILE_MIN_BLANK_LENGTH:
        raise InvalidArgumentError("remaining", remaining, "a blank needs at least 8 bytes")
    return _SIZE_MAGIC.pack(remaining, BLANK_MAGIC_CODE)


# [4.7]
@rule("LAYOUT-7", source=_LAYOUT_7, profiles=(Profile.V4_7,))
def with_blank_leftovers_v47(body: bytes) -> bytes:
    """4.7.1 writes the whole end-of-file blank from the buffer it encodes records in, so after
    the blank's 8-byte header a read from a record start on sees the record appended just before
    the blank again from its byte 8 on (older bytes follow; zeros here).

    post: len(__return__) == len(body)
    """
    # The stores write zeros there (LAYOUT-7 leaves the bytes unspecified); only a read that
    # runs into the blank (STORE-21) shows them, through the msgOffsets walk (queue_offsets_in).
    at, previous = 0, None
    while at + END_FILE_MIN_BLANK_LENGTH <= len(body):
        size, magic = _SIZE_MAGIC.unpack_from(body, at)
        if magic == MESSAGE_MAGIC_CODE and size > 0:
            previous, at = (at, size), at + size
            continue
        if magic == BLANK_MAGIC_CODE and previous is not None:
            start, length = previous
            leftover = body[start + END_FILE_MIN_BLANK_LENGTH : start + min(length, size)]
            tail = len(body) - at - END_FILE_MIN_BLANK_LENGTH
            head = body[: at + END_FILE_MIN_BLANK_LENGTH]
            return head + leftover[:tail].ljust(tail, b"\0")
        break
    return body


# [Modified in 4.9]
@rule("LAYOUT-7", source=_LAYOUT_7, profiles=(Profile.V4_9,))
def with_blank_leftovers_v49(body: bytes) -> bytes:
    """4.9.7 writes the blank's 8-byte header alone, so a read from a record start on sees a new
    file's zeros after it, as the store wrote them.

    post: __return__ == body
    """
    return body


def read_size_and_magic(buf: Buffer, pos: int) -> tuple[int, int]:
    """TOTALSIZE and MAGICCODE of the record at `pos` (a blank's TOTALSIZE is its F − w)."""
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    return int(size), int(magic)


def _corrupt(pos: int, reason: str) -> CorruptStoreError:
    return CorruptStoreError(f"record@{pos}", reason)


def decode_host(buf: Buffer, pos: int, ipv6: bool) -> HostAddress:
    """The host field at `pos`: 16 (IPv6) or 4 address bytes then the port."""
    n = 16 if ipv6 else 4
    mv = memoryview(buf)
    ip = bytes(mv[pos : pos + n])
    (port,) = _INT.unpack_from(buf, pos + n)
    return HostAddress(ip, int(port))


def parse_record(buf: Buffer, pos: int = 0) -> RecordFields:
    """Every field of the message record at `pos`; CorruptStoreError when it is not a well-formed
    message record (bad magic, lengths that overrun the buffer or disagree with TOTALSIZE)."""
    mv = memoryview(buf).cast("B")
    if pos < 0 or pos + MIN_RECORD_LENGTH > len(mv):
        raise _corrupt(pos, "too few bytes for a record")
    (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts) = _HEAD.unpack_from(
        mv, pos
    )
    if magic != MESSAGE_MAGIC_CODE:
        raise _corrupt(pos, f"magic 0x{magic & 0xFFFFFFFF:08X} is not a message record")
    if total < MIN_RECORD_LENGTH or pos + total > len(mv):
        raise _corrupt(pos, f"TOTALSIZE {total} overruns the buffer")
    at = OFF_BORN_HOST
    born_host = decode_host(mv, pos + at, bool(sys_flag & SYSFLAG_BORNHOST_V6))
    at += host_length(sys_flag, SYSFLAG_BORNHOST_V6)
    (store_ts,) = _LONG.unpack_from(mv, pos + at)
    at += 8
    store_host = decode_host(mv, pos + at, bool(sys_flag & SYSFLAG_STOREHOST_V6))
    at += host_length(sys_flag, SYSFLAG_STOREHOST_V6)
    (reconsume,) = _INT.unpack_from(mv, pos + at)
    (prepared,) = _LONG.unpack_from(mv, pos + at + 4)
    (body_len,) = _INT.unpack_from(mv, pos + at + 12)
    at += 16
    if body_len < 0 or at + body_len + 3 > total:
        raise _corrupt(pos, f"BODYLENGTH {body_len} overruns TOTALSIZE {total}")
    body = bytes(mv[pos + at : pos + at + body_len])
    at += body_len
    topic_len = int.from_bytes(mv[pos + at : pos + at + 1], "big", signed=True)
    at += 1
    if topic_len < 0 or at + topic_len + 2 > total:
        raise _corrupt(pos, f"TOPICLENGTH {topic_len} overruns TOTALSIZE {total}")
    topic = bytes(mv[pos + at : pos + at + topic_len]).decode("utf-8", "replace")
    at += topic_len
    (props_len,) = _SHORT.unpack_from(mv, pos + at)
    at += 2
    n_props = max(props_len, 0)
    if at + n_props != total:
        raise _corrupt(pos, f"field lengths give {at + n_props} bytes, TOTALSIZE is {total}")
    props = bytes(mv[pos + at : pos + at + n_props]).decode("utf-8", "replace")
    return RecordFields(
        total_size=total,
        magic=magic,
        body_crc=crc,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=phys,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=int(store_ts),
        store_host=store_host,
        reconsume_times=int(reconsume),
        prepared_transaction_offset=int(prepared),
        body=body,
        topic=topic,
        properties_string=props,
        properties_length=int(props_len),
    )


def decode_record(
    buf: Buffer, pos: int, rules: LayoutRules, delay_levels: tuple[int, ...] | None = None
) -> StoredMessage:
    """The StoredMessage at `pos` as the broker of `rules` (a profile's ruleset) decodes it
    (CorruptStoreError if the bytes there are not a message record); `delay_levels` as in
    `RecordFields.to_stored_message`."""
    return parse_record(buf, pos).to_stored_message(rules, delay_levels)


def check_record(buf: Buffer, pos: int, check_crc: bool) -> int:
    """What recovery makes of the bytes at `pos` (CommitLog.checkMessageAndReturnSize): the record
    length (> 0) for a well-formed message, 0 for the end-of-file blank, −1 for anything else — a
    bad magic (LAYOUT-6), a BODYCRC mismatch when `check_crc` (LAYOUT-8), field lengths that
    disagree with TOTALSIZE (LAYOUT-5), or too few bytes."""
    mv = memoryview(buf).cast("B")
    if pos < 0 or pos + 8 > len(mv):
        return -1
    _total, magic = read_size_and_magic(mv, pos)
    if magic == BLANK_MAGIC_CODE:
        return 0
    if magic != MESSAGE_MAGIC_CODE:
        return -1
    try:
        fields = parse_record(mv, pos)
    except CorruptStoreError:
        return -1
    if check_crc and body_crc(fields.body) != fields.body_crc:
        return -1
    return fields.total_size


class RecordRules(Rules):
    """The changed LAYOUT rule of the end-of-file blank (see `spec.rules.Rules`)."""

    encode_blank = stated(encode_blank_v47, encode_blank_v49)
    with_blank_leftovers = stated(with_blank_leftovers_v47, with_blank_leftovers_v49)
