"""LAYOUT (rulebook-broker §4): on-disk formats, record lengths, properties strings, limits."""

from __future__ import annotations

import binascii

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.contracts import check_call
from pullspec.spec.layout import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    body_crc,
    calc_msg_length,
    check_message_limits_v47,
    check_message_limits_v49,
    commit_log_file_start,
    consume_queue_units_per_file,
    is_dispatched_type,
    is_record_magic,
    message_properties_to_string_v47,
    message_properties_to_string_v49,
    needs_end_of_file_blank,
    offset_to_file_name,
    pack_cq_entry,
    pre_blank_entries,
    string_to_message_properties_v47,
    string_to_message_properties_v49,
    transaction_type,
    unpack_cq_entry,
    validate_topic,
)
from pullspec.spec.message import BrokerInnerMessage, HostAddress, Properties, create_message_id
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import PutMessageStatus

V47, V49 = Profile.V4_7, Profile.V4_9
GIB = 1_073_741_824
MAX_MESSAGE_SIZE = 4_194_304
ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL
EXCEEDED = PutMessageStatus.PROPERTIES_SIZE_EXCEEDED

# Property names and values without the two separators (U+0001, U+0002).
plain_text = st.text(st.characters(exclude_characters="\x01\x02"), min_size=1, max_size=10)
properties_maps = st.dictionaries(plain_text, plain_text, max_size=6)


def pairs(mapping: dict[str, str]) -> Properties:
    return tuple(mapping.items())


# --- LAYOUT-1 ---------------------------------------------------------------------------------


def test_layout_1_consume_queue_entry_is_20_big_endian_bytes() -> None:
    entry = pack_cq_entry(1024, 200, 2598919)
    assert bytes.fromhex("0000000000000400" + "000000C8" + "000000000027A807") == entry
    assert bytes.fromhex("FF" * 8 + "7FFFFFFF" + "FF" * 8) == pack_cq_entry(-1, 2**31 - 1, -1)
    assert (1024, 200, 2598919) == unpack_cq_entry(entry)


@given(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
def test_layout_1_entry_fields_in_order(phys: int, size: int, tags_code: int) -> None:
    expected = (
        phys.to_bytes(8, "big", signed=True)
        + size.to_bytes(4, "big", signed=True)
        + tags_code.to_bytes(8, "big", signed=True)
    )
    assert expected == check_call(pack_cq_entry, phys, size, tags_code)
    assert (phys, size, tags_code) == unpack_cq_entry(expected)


# --- LAYOUT-2 ---------------------------------------------------------------------------------


def test_layout_2_consume_queue_files() -> None:
    assert 300_000 == consume_queue_units_per_file(6_000_000)
    assert 4 == consume_queue_units_per_file(80)
    assert 5 == consume_queue_units_per_file(81)  # rounded up to whole entries
    assert 100 == StoreConfig(mapped_file_size_consume_queue=81).consume_queue_file_size
    assert 300_000 == StoreConfig().consume_queue_units_per_file
    assert ["00000000000000000000", "00000000000006000000", "00000000000012000000"] == [
        offset_to_file_name(n * 6_000_000) for n in range(3)
    ]


@given(st.integers(1, 10**9))
def test_layout_2_units_per_file_is_the_ceiling(size: int) -> None:
    assert (size + 19) // 20 == check_call(consume_queue_units_per_file, size)


# --- LAYOUT-3 ---------------------------------------------------------------------------------


def test_layout_3_pre_blank_slots_before_the_first_real_entry() -> None:
    assert 0 == pre_blank_entries(0, 4)
    assert 1 == pre_blank_entries(5, 4)
    assert 1 == pre_blank_entries(300_001, 300_000)


@given(st.integers(0, 10**12), st.integers(1, 10**6))
def test_layout_3_contract(first_index: int, units: int) -> None:
    assert first_index % units == check_call(pre_blank_entries, first_index, units)


# --- LAYOUT-4 ---------------------------------------------------------------------------------


def test_layout_4_commit_log_files_are_fixed_size_and_named_by_start() -> None:
    assert 0 == commit_log_file_start(0, GIB)
    assert 0 == commit_log_file_start(GIB - 1, GIB)
    assert GIB == commit_log_file_start(GIB, GIB)
    assert "00000000001073741824" == offset_to_file_name(GIB)


@given(st.integers(0, 2**62), st.integers(1, 2**31))
def test_layout_4_contract(phys: int, size: int) -> None:
    assert phys // size * size == check_call(commit_log_file_start, phys, size)


# --- LAYOUT-5 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("sys_flag", "extra"), [(0, 0), (0x10, 12), (0x20, 12), (0x30, 24)])
def test_layout_5_record_length(sys_flag: int, extra: int) -> None:
    assert 91 + 10 + 1 + 6 + extra == calc_msg_length(sys_flag, 10, 1, 6)


@pytest.mark.parametrize(("profile", "length"), [(V47, 99 + 10), (V49, 98 + 10)])
def test_layout_5_store_writes_91_plus_body_topic_properties(
    profile: Profile, length: int, clock: ManualClock
) -> None:
    # topic "T" (1 byte) + properties "TAGS\x01A" (6 bytes; 4.7 adds a trailing \x02).
    store = ReferenceMessageStore(StoreConfig(), profile, clock=clock)
    result = store.put_message(BrokerInnerMessage("T", 0, bytes(10), {"TAGS": "A"}))
    assert (0, length) == (result.wrote_offset, result.wrote_bytes)
    untagged = store.put_message(BrokerInnerMessage("T", 0, bytes(10)))
    assert (length, 91 + 10 + 1) == (untagged.wrote_offset, untagged.wrote_bytes)


def test_layout_5_lengths_count_utf8_bytes(clock: ManualClock) -> None:
    store = ReferenceMessageStore(StoreConfig(), V49, clock=clock)
    result = store.put_message(BrokerInnerMessage("T", 0, b"", {"TAGS": "中文"}))
    assert 91 + 0 + 1 + len("TAGS\x01") + 6 == result.wrote_bytes


def test_layout_5_ipv6_hosts_add_12_bytes_each(clock: ManualClock) -> None:
    store = ReferenceMessageStore(StoreConfig(), V49, clock=clock)
    v6 = HostAddress(bytes(15) + b"\x01", 10911)
    result = store.put_message(
        BrokerInnerMessage("T", 0, b"", sys_flag=0x30, born_host=v6, store_host=v6)
    )
    assert 91 + 1 + 24 == result.wrote_bytes


@given(st.integers(0, 0xFF), st.integers(0, 2**24), st.integers(0, 127), st.integers(0, 32767))
def test_layout_5_contract_and_definition(sys_flag: int, n: int, t: int, p: int) -> None:
    expected = 91 + n + t + p + 12 * bool(sys_flag & 0x10) + 12 * bool(sys_flag & 0x20)
    assert expected == check_call(calc_msg_length, sys_flag, n, t, p)


# --- LAYOUT-6 ---------------------------------------------------------------------------------


def test_layout_6_magic_codes() -> None:
    assert int.from_bytes(bytes.fromhex("DAA320A7"), "big", signed=True) == MESSAGE_MAGIC_CODE
    assert int.from_bytes(bytes.fromhex("CBD43194"), "big", signed=True) == BLANK_MAGIC_CODE
    assert (-626_843_481, -875_286_124) == (MESSAGE_MAGIC_CODE, BLANK_MAGIC_CODE)
    assert [True, False, None, None] == [
        is_record_magic(-626_843_481),
        is_record_magic(-875_286_124),
        is_record_magic(0),
        is_record_magic(0x7FFFFFFF),
    ]


@given(st.integers(-(2**31), 2**31 - 1))
def test_layout_6_contract(magic: int) -> None:
    expected = {MESSAGE_MAGIC_CODE: True, BLANK_MAGIC_CODE: False}.get(magic)
    assert expected == check_call(is_record_magic, magic)


# --- LAYOUT-7 ---------------------------------------------------------------------------------


def test_layout_7_end_of_file_blank_needs_8_spare_bytes() -> None:
    assert needs_end_of_file_blank(216, 800, 1024) is False  # leaves exactly 8 bytes
    assert needs_end_of_file_blank(217, 800, 1024) is True
    assert needs_end_of_file_blank(1, 1016, 1024) is True  # 9 > 8
    assert needs_end_of_file_blank(1016, 0, 1024) is False


@given(st.integers(1, 5000), st.integers(0, 5000), st.integers(0, 5000))
def test_layout_7_contract(length: int, position: int, spare: int) -> None:
    size = position + spare
    assert (length + 8 > spare) == check_call(needs_end_of_file_blank, length, position, size)


# --- LAYOUT-8 ---------------------------------------------------------------------------------


def test_layout_8_body_crc() -> None:
    # The CRC-32 check value of "123456789" is 0xCBF43926; the broker keeps its low 31 bits.
    assert 0x4BF43926 == body_crc(b"123456789")
    assert 0 == body_crc(b"")


def test_layout_8_store_computes_the_crc(clock: ManualClock) -> None:
    store = ReferenceMessageStore(StoreConfig(), V49, clock=clock)
    result = store.put_message(BrokerInnerMessage("T", 0, b"123456789"))
    stored = store.look_message_by_offset(result.wrote_offset)
    assert stored is not None
    assert 0x4BF43926 == stored.body_crc


@given(st.binary(max_size=200))
def test_layout_8_contract(body: bytes) -> None:
    assert binascii.crc32(body) & 0x7FFFFFFF == check_call(body_crc, body)


# --- LAYOUT-9 ---------------------------------------------------------------------------------


def test_layout_9_encoding_per_profile() -> None:
    props = (("TAGS", "A"), ("KEYS", "k"))
    assert "TAGS\x01A\x02KEYS\x01k\x02" == message_properties_to_string_v47(props)
    assert "TAGS\x01A\x02KEYS\x01k" == message_properties_to_string_v49(props)
    assert "TAGS\x01A\x02KEYS\x01k\x02" == Ruleset.of(V47).message_properties_to_string(props)
    assert "TAGS\x01A\x02KEYS\x01k" == Ruleset.of(V49).message_properties_to_string(props)
    assert ["", ""] == [Ruleset.of(p).message_properties_to_string(()) for p in ALL_PROFILES]


@pytest.mark.parametrize("decoder", ALL_PROFILES)
def test_layout_9_both_decoders_read_both_encodings(decoder: Profile) -> None:
    for text in ("TAGS\x01A\x02KEYS\x01k\x02", "TAGS\x01A\x02KEYS\x01k"):
        assert {"TAGS": "A", "KEYS": "k"} == dict(
            Ruleset.of(decoder).string_to_message_properties(text)
        )


@pytest.mark.parametrize(
    ("text", "v47", "v49"),
    [
        ("k\x01\x02a\x01b", {"a": "b"}, {"a": "b"}),  # empty value dropped by both
        ("\x01vw\x02a\x01b", {"": "vw", "a": "b"}, {"a": "b"}),  # 4.7 keeps an empty key
        ("k\x01v\x01w", {}, {"k": "v\x01w"}),  # 4.9 value may hold U+0001
        ("k\x01v", {"k": "v"}, {"k": "v"}),  # exactly 3 chars
        ("kv\x02\x02a\x01b\x02", {"a": "b"}, {"a": "b"}),  # no separator / empty segment
        ("a\x01b\x02a\x01c", {"a": "c"}, {"a": "c"}),  # a map: the last value wins
    ],
)
def test_layout_9_decoder_edge_cases(text: str, v47: dict[str, str], v49: dict[str, str]) -> None:
    assert v47 == dict(Ruleset.of(V47).string_to_message_properties(text))
    assert v49 == dict(Ruleset.of(V49).string_to_message_properties(text))


@given(properties_maps)
def test_layout_9_round_trip_in_both_profiles(props: dict[str, str]) -> None:
    encoded = {
        V47: check_call(message_properties_to_string_v47, pairs(props)),
        V49: check_call(message_properties_to_string_v49, pairs(props)),
    }
    for writer in ALL_PROFILES:
        for reader in ALL_PROFILES:
            assert props == dict(Ruleset.of(reader).string_to_message_properties(encoded[writer]))
    assert encoded[V47] == (encoded[V49] + "\x02" if props else "")


# --- LAYOUT-13 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "v47", "v49"),
    [
        ("TAGS\x01", (), ()),  # TAGS="" as 4.9 writes it
        ("TAGS\x01\x02", (), ()),  # and as 4.7 writes it
        ("TAGS\x01\x02KEYS\x01k\x02", (("KEYS", "k"),), (("KEYS", "k"),)),
        ("KEYS\x01\x02TAGS\x01A", (("TAGS", "A"),), (("TAGS", "A"),)),
        ("\x01v", (("", "v"),), ()),  # only 4.7 keeps an empty name
        ("ab", (), ()),  # no separator at all
    ],
)
def test_layout_13_a_property_with_an_empty_value_reads_back_absent(
    text: str, v47: Properties, v49: Properties
) -> None:
    assert v47 == check_call(string_to_message_properties_v47, text)
    assert v49 == check_call(string_to_message_properties_v49, text)
    assert (v47, v49) == (
        Ruleset.of(V47).string_to_message_properties(text),
        Ruleset.of(V49).string_to_message_properties(text),
    )


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_layout_13_every_stored_empty_value_is_gone_after_a_round_trip(profile: Profile) -> None:
    written = Ruleset.of(profile).message_properties_to_string(
        (("TAGS", ""), ("KEYS", "k"), ("X", ""))
    )
    assert (("KEYS", "k"),) == Ruleset.of(profile).string_to_message_properties(written)


# --- LAYOUT-10 --------------------------------------------------------------------------------


def test_layout_10_transaction_type_bits() -> None:
    assert [0, 0x4, 0x8, 0xC, 0x8] == [
        transaction_type(0),
        transaction_type(0x4),
        transaction_type(0x8 | 0x1),
        transaction_type(0xC | 0x30),
        transaction_type(0x8 | 0x2 | 0x10),
    ]
    assert [True, False, True, False] == [is_dispatched_type(f) for f in (0, 0x4, 0x8, 0xC)]


@given(st.integers(0, 2**16))
def test_layout_10_contract(sys_flag: int) -> None:
    assert (sys_flag >> 2 & 3) * 4 == check_call(transaction_type, sys_flag)


# --- LAYOUT-11 --------------------------------------------------------------------------------


def test_layout_11_limits_common_to_both_profiles() -> None:
    for check in (check_message_limits_v47, check_message_limits_v49):
        assert check("T" * 127, "", 0, 218, MAX_MESSAGE_SIZE) is None
        assert ILLEGAL == check("T" * 128, "", 0, 219, MAX_MESSAGE_SIZE)
        assert check("T", "x" * 32_767, 0, 32_859, MAX_MESSAGE_SIZE) is None
        assert ILLEGAL == check("T", "x" * 32_768, 0, 32_860, MAX_MESSAGE_SIZE)


def test_layout_11_encoded_properties_over_32767_bytes() -> None:
    props = "中" * 11_000  # 11 000 chars but 33 000 UTF-8 bytes
    assert ILLEGAL == check_message_limits_v47("T", props, 0, 33_092, MAX_MESSAGE_SIZE)
    assert EXCEEDED == check_message_limits_v49("T", props, 0, 33_092, MAX_MESSAGE_SIZE)


def test_layout_11_message_size_4_7_limits_the_record() -> None:
    assert check_message_limits_v47("T", "", 0, MAX_MESSAGE_SIZE, MAX_MESSAGE_SIZE) is None
    assert ILLEGAL == check_message_limits_v47("T", "", 0, MAX_MESSAGE_SIZE + 1, MAX_MESSAGE_SIZE)


def test_layout_11_message_size_4_9_limits_body_and_record() -> None:
    body = MAX_MESSAGE_SIZE
    assert check_message_limits_v49("T", "", body, body + 92, MAX_MESSAGE_SIZE) is None
    assert ILLEGAL == check_message_limits_v49("T", "", body + 1, body + 93, MAX_MESSAGE_SIZE)
    record = MAX_MESSAGE_SIZE + 65_536
    assert check_message_limits_v49("T", "", 10, record, MAX_MESSAGE_SIZE) is None
    assert ILLEGAL == check_message_limits_v49("T", "", 10, record + 1, MAX_MESSAGE_SIZE)
    assert ILLEGAL == Ruleset.of(V49).check_message_limits(
        "T", "", body + 1, body + 93, MAX_MESSAGE_SIZE
    )
    assert (
        Ruleset.of(V47).check_message_limits("T", "", body + 1, body + 93, MAX_MESSAGE_SIZE * 2)
        is None
    )


@given(
    st.text(alphabet="Tx", max_size=130),
    st.text(alphabet="a中", max_size=40),
    st.integers(0, 300),
    st.integers(0, 500),
    st.integers(1, 300),
)
def test_layout_11_contracts(topic: str, props: str, body: int, record: int, limit: int) -> None:
    too_long = len(topic) > 127
    v47 = check_call(check_message_limits_v47, topic, props, body, record, limit)
    v49 = check_call(check_message_limits_v49, topic, props, body, record, limit)
    assert (ILLEGAL if too_long or record > limit else None) == v47
    assert (ILLEGAL if too_long or body > limit or record > limit + 65_536 else None) == v49


@pytest.mark.parametrize(
    ("topic", "accepted"),
    [
        ("T", True),
        ("%RETRY%G", True),
        ("a|b-c_1", True),
        ("T" * 127, True),
        ("T" * 128, False),
        ("", False),
        ("   ", False),
        ("a b", False),
        ("T.x", False),
        ("中", False),
    ],
)
def test_layout_11_topic_validator(topic: str, accepted: bool) -> None:
    assert accepted == (validate_topic(topic) is None)


@pytest.mark.parametrize("topic", ["T\n", "%RETRY%G\n"])
def test_layout_11_topic_validator_refuses_a_trailing_newline(topic: str) -> None:
    assert validate_topic(topic) is not None


@given(st.text(max_size=10))
def test_layout_11_validator_accepts_exactly_the_character_table(topic: str) -> None:
    allowed = set("%|_-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    expected = topic != "" and set(topic) <= allowed
    assert expected == (validate_topic(topic) is None)


# --- LAYOUT-12 --------------------------------------------------------------------------------


def test_layout_12_offset_message_id() -> None:
    host = HostAddress(bytes([127, 0, 0, 1]), 10911)
    assert "7F00000100002A9F0000000000000000" == create_message_id(host, 0)
    v6 = HostAddress(bytes(15) + b"\x01", 10911)
    assert "00" * 15 + "01" + "00002A9F" + "0000000000000400" == create_message_id(v6, 1024)


@given(
    st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16),
    st.integers(0, 65535),
    st.integers(0, 2**63 - 1),
)
def test_layout_12_id_is_ip_port_offset_in_hex(ip: bytes, port: int, phys: int) -> None:
    msg_id = check_call(create_message_id, HostAddress(ip, port), phys)
    raw = bytes.fromhex(msg_id)
    assert msg_id == msg_id.upper()
    assert (ip, port, phys) == (
        raw[: len(ip)],
        int.from_bytes(raw[len(ip) : len(ip) + 4], "big"),
        int.from_bytes(raw[len(ip) + 4 :], "big"),
    )
