"""LAYOUT — RocketMQ 4.x's on-disk formats as far as positions depend on them.

Consume-queue entries and files, commit-log files and their end-of-file blank, the length of a
stored message per version, the properties string per version, the body CRC and the size limits
at put. The byte-level record codec lives in `spec.record`.
"""

from __future__ import annotations

import re
import struct
import zlib

from pullspec.spec.message import Properties
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated
from pullspec.spec.status import PutMessageStatus

CQ_STORE_UNIT_SIZE = 20
MESSAGE_MAGIC_CODE = -626_843_481  # 0xDAA320A7
BLANK_MAGIC_CODE = -875_286_124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32_767
#: A 4.9 record may exceed maxMessageSize by this much (body checked separately).
MESSAGE_SIZE_SLACK_4_9 = 65_536
#: The slots before a queue's first real entry (LAYOUT-3): phys 0, size Integer.MAX_VALUE, tags 0.
PRE_BLANK_ENTRY = (0, 2_147_483_647, 0)

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_NOT_TYPE = 0x0
SYSFLAG_TRANSACTION_PREPARED_TYPE = 0x4
SYSFLAG_TRANSACTION_COMMIT_TYPE = 0x8
SYSFLAG_TRANSACTION_ROLLBACK_TYPE = 0xC
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20

_CQ_ENTRY = struct.Struct(">qiq")
_TOPIC_CHARS = re.compile(r"[%|a-zA-Z0-9_-]+")


@rule(
    "LAYOUT-1",
    source="ConsumeQueue.putMessagePositionInfo",
    seeds=("003_97f7c1df5f6104bc.txt", "000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt"),
)
def pack_cq_entry(phys: int, size: int, tags_code: int) -> bytes:
    """A consume-queue entry is 20 big-endian bytes: commit-log offset (long), record size (int)
    and tags code (long).

    pre: -(2**63) <= phys < 2**63 and -(2**31) <= size < 2**31 and -(2**63) <= tags_code < 2**63
    post: len(__return__) == 20
    """
    return _CQ_ENTRY.pack(phys, size, tags_code)


def unpack_cq_entry(entry: bytes) -> tuple[int, int, int]:
    """The (phys, size, tags_code) of a 20-byte consume-queue entry (inverse of pack_cq_entry)."""
    phys, size, tags_code = _CQ_ENTRY.unpack(entry)
    return int(phys), int(size), int(tags_code)


@rule(
    "LAYOUT-2",
    source="MessageStoreConfig.getMappedFileSizeConsumeQueue; UtilAll.offset2FileName",
    seeds=("003_97f7c1df5f6104bc.txt",),
)
def consume_queue_units_per_file(mapped_file_size_consume_queue: int) -> int:
    """A consume-queue file holds ceil(mappedFileSizeConsumeQueue / 20) entries, index i living in
    file i div U at byte (i mod U) × 20.

    pre: mapped_file_size_consume_queue > 0
    post: __return__ * 20 >= mapped_file_size_consume_queue > (__return__ - 1) * 20
    """
    return -(-mapped_file_size_consume_queue // CQ_STORE_UNIT_SIZE)


def offset_to_file_name(offset: int) -> str:
    """The 20-digit zero-padded name of a file starting at byte `offset` (offset2FileName)."""
    return f"{offset:020d}"


@rule("LAYOUT-3", source="ConsumeQueue.fillPreBlank", seeds=())
def pre_blank_entries(first_index: int, units_per_file: int) -> int:
    """When a queue's first file is created for a first index ≠ 0, the slots of that file before
    it are filled with pre-blank entries that lie below minOffset and are never read.

    pre: first_index >= 0 and units_per_file > 0
    post: 0 <= __return__ < units_per_file
    """
    return first_index % units_per_file


@rule("LAYOUT-4", source="MappedFileQueue; CommitLog", seeds=())
def commit_log_file_start(phys: int, mapped_file_size_commit_log: int) -> int:
    """Commit-log files have a fixed size and are named by their start offset, so the file holding
    phys starts at phys − phys mod F and a record never spans two files.

    pre: phys >= 0 and mapped_file_size_commit_log > 0
    post: __return__ <= phys < __return__ + mapped_file_size_commit_log
    """
    return phys - phys % mapped_file_size_commit_log


@rule(
    "LAYOUT-5",
    source="CommitLog.calMsgLength",
    seeds=("004_60fc00b6c6a023ff.txt",),
)
def calc_msg_length(
    sys_flag: int, body_length: int, topic_length: int, properties_length: int
) -> int:
    """A stored record is 91 bytes plus the body, topic and properties bytes, plus 12 for each
    IPv6 host.

    pre: body_length >= 0 and topic_length >= 0 and properties_length >= 0
    post: __return__ >= 91 + body_length + topic_length + properties_length
    """
    born_host_length = 8 if sys_flag & SYSFLAG_BORNHOST_V6 == 0 else 20
    store_host_length = 8 if sys_flag & SYSFLAG_STOREHOST_V6 == 0 else 20
    return (
        4  # TOTALSIZE
        + 4  # MAGICCODE
        + 4  # BODYCRC
        + 4  # QUEUEID
        + 4  # FLAG
        + 8  # QUEUEOFFSET
        + 8  # PHYSICALOFFSET
        + 4  # SYSFLAG
        + 8  # BORNTIMESTAMP
        + born_host_length
        + 8  # STORETIMESTAMP
        + store_host_length
        + 4  # RECONSUMETIMES
        + 8  # PREPARED TRANSACTION OFFSET
        + 4
        + body_length
        + 1
        + topic_length
        + 2
        + properties_length
    )


@rule("LAYOUT-6", source="CommitLog", seeds=())
def is_record_magic(magic: int) -> bool | None:
    """A record's magic is MESSAGE_MAGIC_CODE (a message) or BLANK_MAGIC_CODE (the end-of-file
    blank); any other value marks a corrupt record where recovery stops.

    post: __return__ is None or isinstance(__return__, bool)
    """
    if magic == MESSAGE_MAGIC_CODE:
        return True
    if magic == BLANK_MAGIC_CODE:
        return False
    return None


@rule(
    "LAYOUT-7",
    source="CommitLog.DefaultAppendMessageCallback.doAppend",
    seeds=(),
    versions="4.7.1 writes F − w bytes (8 meaningful); 4.9.7 writes only the 8 header bytes.",
)
def needs_end_of_file_blank(msg_length: int, write_position: int, file_size: int) -> bool:
    """A record of length L at write position w of a file of size F goes to the next file, after
    an end-of-file blank of F − w bytes, when L + 8 > F − w.

    pre: msg_length > 0 and 0 <= write_position <= file_size
    post: __return__ == (msg_length + 8 > file_size - write_position)
    """
    # The record leaves room for the 8-byte blank a completed file must end with.
    return msg_length + END_FILE_MIN_BLANK_LENGTH > file_size - write_position


@rule("LAYOUT-8", source="UtilAll.crc32", seeds=())
def body_crc(body: bytes) -> int:
    """BODYCRC is the CRC-32 (IEEE) of the stored body bytes AND 0x7FFFFFFF.

    post: 0 <= __return__ < 2**31
    """
    return zlib.crc32(body) & 0x7FFFFFFF


# [4.7]
@rule(
    "LAYOUT-9",
    source="MessageDecoder.messageProperties2String",
    seeds=(),
    profiles=(Profile.V4_7,),
    versions="4.7.1 puts U+0002 after every pair including the last; 4.9.7 has no trailing "
    "separator and drops WAIT=true on ordinary sends.",
)
def message_properties_to_string_v47(properties: Properties) -> str:
    """The properties string is name U+0001 value U+0002 for every pair, the last one included.

    pre: all(chr(1) not in k + v and chr(2) not in k + v for k, v in properties)
    post: __return__ == "" or __return__.endswith(chr(2))
    """
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties)


# [Modified in 4.9]
@rule(
    "LAYOUT-9",
    source="MessageDecoder.messageProperties2String",
    seeds=(),
    profiles=(Profile.V4_9,),
)
def message_properties_to_string_v49(properties: Properties) -> str:
    """The properties string is name U+0001 value pairs joined by U+0002, with no trailing
    separator.

    pre: all(chr(1) not in k + v and chr(2) not in k + v for k, v in properties)
    post: not __return__.endswith(chr(2))
    """
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in properties)


def _java_split(text: str, sep: str) -> list[str]:
    """Java's String.split with a literal separator: trailing empty strings are removed."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


# [4.7]
@rule(
    "LAYOUT-13",
    source="MessageDecoder.string2messageProperties",
    seeds=(),
    profiles=(Profile.V4_7,),
    versions="4.7.1 splits the string with String.split and keeps a pair only when it splits in "
    "exactly two (an empty name is kept); 4.9.7 scans for the separators and also drops a pair "
    "with an empty name. Both drop a pair whose value is empty.",
)
def string_to_message_properties_v47(text: str) -> Properties:
    """A properties string reads back as the pairs that String.split cuts into exactly a name
    and a non-empty value, so a property stored with an empty value (TAGS="") comes back absent.

    post: all(v != "" for _, v in __return__)
    """
    out: list[tuple[str, str]] = []
    for item in _java_split(text, PROPERTY_SEPARATOR):
        nv = _java_split(item, NAME_VALUE_SEPARATOR)
        # Check that the pair split into exactly a name and a value (Java drops trailing empties).
        if len(nv) == 2:
            out.append((nv[0], nv[1]))
    return tuple(out)


# [Modified in 4.9]
@rule(
    "LAYOUT-13",
    source="MessageDecoder.string2messageProperties",
    seeds=(),
    profiles=(Profile.V4_9,),
)
def string_to_message_properties_v49(text: str) -> Properties:
    """A properties string reads back as the segments of at least three characters whose first
    U+0001 leaves a non-empty name before it and a non-empty value after it, so a property stored
    with an empty value (TAGS="") comes back absent.

    post: all(k != "" and v != "" for k, v in __return__)
    """
    out: list[tuple[str, str]] = []
    for item in text.split(PROPERTY_SEPARATOR):
        at = item.find(NAME_VALUE_SEPARATOR)
        # Check that the segment has a name and a value around its first separator.
        if len(item) >= 3 and 0 < at < len(item) - 1:
            out.append((item[:at], item[at + 1 :]))
    return tuple(out)


@rule("LAYOUT-10", source="MessageSysFlag", seeds=())
def transaction_type(sys_flag: int) -> int:
    """Bits 2–3 of sysFlag are the transaction type: 0 none, 0x4 prepared, 0x8 commit, 0xC rollback.

    post: __return__ in (0, 4, 8, 12)
    """
    return sys_flag & SYSFLAG_TRANSACTION_ROLLBACK_TYPE


def is_dispatched_type(sys_flag: int) -> bool:
    """True for transaction types none and commit: the ones that take a queue offset (STORE-18)."""
    return transaction_type(sys_flag) in (
        SYSFLAG_TRANSACTION_NOT_TYPE,
        SYSFLAG_TRANSACTION_COMMIT_TYPE,
    )


# [4.7]
@rule(
    "LAYOUT-11",
    source="DefaultMessageStore.checkMessage; CommitLog.DefaultAppendMessageCallback.doAppend",
    seeds=(),
    profiles=(Profile.V4_7,),
    versions="4.7.1 limits the whole record to maxMessageSize; 4.9.7 limits the body to "
    "maxMessageSize and the record to maxMessageSize + 64 KiB, and reports oversized encoded "
    "properties as PROPERTIES_SIZE_EXCEEDED.",
)
def check_message_limits_v47(
    topic: str, properties_string: str, body_length: int, msg_length: int, max_message_size: int
) -> PutMessageStatus | None:
    """The store refuses a topic over 127 characters, properties over 32 767, or a record longer
    than maxMessageSize, with MESSAGE_ILLEGAL.

    post: __return__ in (None, PutMessageStatus.MESSAGE_ILLEGAL)
    """
    # Check that the topic and properties fit their length fields.
    if len(topic) > MAX_TOPIC_LENGTH or len(properties_string) > MAX_PROPERTIES_LENGTH:
        return PutMessageStatus.MESSAGE_ILLEGAL
    if len(properties_string.encode("utf-8")) > MAX_PROPERTIES_LENGTH:
        return PutMessageStatus.MESSAGE_ILLEGAL
    # Check that the whole record fits maxMessageSize.
    if msg_length > max_message_size:
        return PutMessageStatus.MESSAGE_ILLEGAL
    return None


# [Modified in 4.9]
@rule(
    "LAYOUT-11",
    source="DefaultMessageStore.checkMessage; CommitLog.MessageExtEncoder.encode",
    seeds=(),
    profiles=(Profile.V4_9,),
)
def check_message_limits_v49(
    topic: str, properties_string: str, body_length: int, msg_length: int, max_message_size: int
) -> PutMessageStatus | None:
    """The store refuses a topic over 127 characters or properties over 32 767 (bytes: with
    PROPERTIES_SIZE_EXCEEDED), a body over maxMessageSize or a record over maxMessageSize + 64 KiB.

    post: __return__ is None or __return__.name in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED")
    """
    # Check that the topic and properties fit their length fields.
    if len(topic) > MAX_TOPIC_LENGTH or len(properties_string) > MAX_PROPERTIES_LENGTH:
        return PutMessageStatus.MESSAGE_ILLEGAL
    if len(properties_string.encode("utf-8")) > MAX_PROPERTIES_LENGTH:
        return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    # Check that the body, then the whole record, fit their limits.
    if body_length > max_message_size:
        return PutMessageStatus.MESSAGE_ILLEGAL
    if msg_length > max_message_size + MESSAGE_SIZE_SLACK_4_9:
        return PutMessageStatus.MESSAGE_ILLEGAL
    return None


def validate_topic(topic: str) -> str | None:
    """Why TopicValidator.validateTopic refuses `topic` (blank, characters outside
    [%|a-zA-Z0-9_-], longer than 127), or None when it accepts it (LAYOUT-11)."""
    if not topic or not topic.strip():
        return "the topic is blank"
    if not _TOPIC_CHARS.fullmatch(topic):
        return "the topic contains characters outside [%|a-zA-Z0-9_-]"
    if len(topic) > MAX_TOPIC_LENGTH:
        return f"the topic is longer than {MAX_TOPIC_LENGTH} characters"
    return None


class LayoutRules(Rules):
    """The LAYOUT rules of one profile (see `spec.rules.Rules`)."""

    pack_cq_entry = stated(pack_cq_entry)
    consume_queue_units_per_file = stated(consume_queue_units_per_file)
    pre_blank_entries = stated(pre_blank_entries)
    commit_log_file_start = stated(commit_log_file_start)
    calc_msg_length = stated(calc_msg_length)
    is_record_magic = stated(is_record_magic)
    needs_end_of_file_blank = stated(needs_end_of_file_blank)
    body_crc = stated(body_crc)
    message_properties_to_string = stated(
        message_properties_to_string_v47, message_properties_to_string_v49
    )
    string_to_message_properties = stated(
        string_to_message_properties_v47, string_to_message_properties_v49
    )
    transaction_type = stated(transaction_type)
    check_message_limits = stated(check_message_limits_v47, check_message_limits_v49)
