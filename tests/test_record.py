"""pullspec.spec.record: the commit-log record codec, checked against an independent decoder written from
the LAYOUT-5 table, against records the fast store writes, and against a real 4.9.7 broker's."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import CorruptStoreError, InvalidArgumentError
from pullspec.spec.filter import tags_string_to_tags_code
from pullspec.spec.layout import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    calc_msg_length,
)
from pullspec.spec.message import BrokerInnerMessage, HostAddress
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.record import (
    check_record,
    decode_record,
    encode_record,
    host_sys_flag,
    parse_record,
    queue_offsets_in,
)
from pullspec.spec.ruleset import Ruleset

V4 = HostAddress(b"\x7f\x00\x00\x01", 52000)
V6 = HostAddress(bytes(range(16)), 8080)


def independent_decode(buf: bytes, pos: int) -> dict[str, Any]:
    """Decode one record following the LAYOUT-5 table literally, with struct only."""
    out: dict[str, Any] = {}
    (
        out["total_size"],
        out["magic"],
        out["body_crc"],
        out["queue_id"],
        out["flag"],
        out["queue_offset"],
        out["physical_offset"],
        out["sys_flag"],
        out["born_timestamp"],
    ) = struct.unpack_from(">iiiiiqqiq", buf, pos)
    at = pos + 48
    born_ip_len = 16 if out["sys_flag"] & 0x10 else 4
    out["born_ip"] = buf[at : at + born_ip_len]
    (out["born_port"],) = struct.unpack_from(">i", buf, at + born_ip_len)
    at += born_ip_len + 4
    (out["store_timestamp"],) = struct.unpack_from(">q", buf, at)
    at += 8
    store_ip_len = 16 if out["sys_flag"] & 0x20 else 4
    out["store_ip"] = buf[at : at + store_ip_len]
    (out["store_port"],) = struct.unpack_from(">i", buf, at + store_ip_len)
    at += store_ip_len + 4
    out["reconsume_times"], out["prepared_transaction_offset"], body_len = struct.unpack_from(
        ">iqi", buf, at
    )
    at += 16
    out["body"] = buf[at : at + body_len]
    at += body_len
    topic_len = buf[at]
    out["topic"] = buf[at + 1 : at + 1 + topic_len].decode()
    at += 1 + topic_len
    (props_len,) = struct.unpack_from(">h", buf, at)
    out["properties"] = buf[at + 2 : at + 2 + props_len].decode()
    out["end"] = at + 2 + props_len
    return out


def _messages() -> st.SearchStrategy[BrokerInnerMessage]:
    text = st.text(st.characters(blacklist_characters="\x01\x02", codec="utf-8"), min_size=1)
    return st.builds(
        BrokerInnerMessage,
        topic=st.text("abcXYZ019_-|%", min_size=1, max_size=40),
        queue_id=st.integers(0, 2**31 - 1),
        body=st.binary(max_size=300),
        properties=st.dictionaries(text, text, max_size=4),
        flag=st.integers(-(2**31), 2**31 - 1),
        sys_flag=st.sampled_from([0, 1, 2, 4, 8, 12]),
        reconsume_times=st.integers(0, 2**31 - 1),
        prepared_transaction_offset=st.integers(0, 2**63 - 1),
        born_timestamp=st.integers(0, 2**62),
        born_host=st.sampled_from([V4, V6]),
        store_host=st.sampled_from([V4, V6]),
    )


def _encode(msg: BrokerInnerMessage, profile: Profile, phys: int, qoff: int, ts: int) -> bytes:
    return encode_record(
        topic=msg.topic,
        queue_id=msg.queue_id,
        body=msg.body,
        properties_string=Ruleset.of(profile).message_properties_to_string(msg.properties),
        flag=msg.flag,
        sys_flag=host_sys_flag(msg.sys_flag, msg.born_host, msg.store_host),
        queue_offset=qoff,
        physical_offset=phys,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        store_timestamp=ts,
        store_host=msg.store_host,
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
    )


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
@given(msg=_messages(), phys=st.integers(0, 2**40), qoff=st.integers(0, 2**40))
@settings(max_examples=max(25, settings().max_examples // 2))
def test_round_trip_field_by_field(
    profile: Profile, msg: BrokerInnerMessage, phys: int, qoff: int
) -> None:
    raw = _encode(msg, profile, phys, qoff, 1_700_000_000_000)
    ind = independent_decode(raw, 0)
    props = Ruleset.of(profile).message_properties_to_string(msg.properties)
    assert ind["end"] == ind["total_size"] == len(raw)
    assert ind["total_size"] == calc_msg_length(
        host_sys_flag(msg.sys_flag, msg.born_host, msg.store_host),
        len(msg.body),
        len(msg.topic.encode()),
        len(props.encode()),
    )
    assert ind["magic"] == MESSAGE_MAGIC_CODE
    assert ind["body_crc"] == zlib.crc32(msg.body) & 0x7FFFFFFF
    assert (ind["queue_id"], ind["flag"], ind["queue_offset"]) == (msg.queue_id, msg.flag, qoff)
    assert ind["physical_offset"] == phys
    assert ind["born_ip"] == msg.born_host.ip and ind["born_port"] == msg.born_host.port
    assert ind["store_ip"] == msg.store_host.ip and ind["store_port"] == msg.store_host.port
    assert ind["sys_flag"] & 0x10 == (0x10 if msg.born_host.is_ipv6 else 0)
    assert ind["sys_flag"] & 0x20 == (0x20 if msg.store_host.is_ipv6 else 0)
    assert ind["store_timestamp"] == 1_700_000_000_000
    assert ind["body"] == msg.body and ind["topic"] == msg.topic and ind["properties"] == props
    stored = decode_record(raw, 0, Ruleset.of(profile))
    assert stored.body == msg.body and dict(stored.properties) == dict(msg.properties)
    assert stored.tags_code == tags_string_to_tags_code(msg.tags)
    assert stored.size == len(raw) and stored.commitlog_offset == phys
    assert check_record(raw, 0, True) == len(raw)


def test_properties_string_per_profile() -> None:
    msg = BrokerInnerMessage(topic="T", queue_id=0, body=b"x", properties={"TAGS": "a"})
    r47 = independent_decode(_encode(msg, Profile.V4_7, 0, 0, 0), 0)
    r49 = independent_decode(_encode(msg, Profile.V4_9, 0, 0, 0), 0)
    assert r47["properties"] == "TAGS\x01a\x02" and r49["properties"] == "TAGS\x01a"
    assert r47["total_size"] == r49["total_size"] + 1


def test_blank_per_profile() -> None:
    b49 = Ruleset.of(Profile.V4_9).encode_blank(300)
    b47 = Ruleset.of(Profile.V4_7).encode_blank(300)
    assert b49 == struct.pack(">ii", 300, BLANK_MAGIC_CODE)
    assert len(b47) == 300 and b47[:8] == b49 and b47[8:] == bytes(292)
    assert check_record(b49, 0, True) == 0
    with pytest.raises(InvalidArgumentError):
        Ruleset.of(Profile.V4_9).encode_blank(7)


def test_corrupt_records() -> None:
    msg = BrokerInnerMessage(topic="T", queue_id=0, body=b"hello", properties={"TAGS": "a"})
    raw = bytearray(_encode(msg, Profile.V4_9, 0, 0, 0))
    bad_crc = bytearray(raw)
    bad_crc[88] ^= 0x01  # the first body byte (IPv4 hosts)
    assert check_record(bytes(bad_crc), 0, True) == -1
    assert check_record(bytes(bad_crc), 0, False) == len(raw)
    bad_magic = bytearray(raw)
    bad_magic[4:8] = b"\0\0\0\1"
    assert check_record(bytes(bad_magic), 0, True) == -1
    with pytest.raises(CorruptStoreError):
        parse_record(bytes(bad_magic), 0)
    bad_len = bytearray(raw)
    bad_len[0:4] = struct.pack(">i", len(raw) + 1)
    assert check_record(bytes(bad_len) + b"\0", 0, True) == -1
    assert check_record(bytes(raw[:50]), 0, True) == -1
    with pytest.raises(InvalidArgumentError):
        host_sys_flag(0x10, V4, V4)


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_records_written_by_fast(tmp_path: Path, profile: Profile) -> None:
    """Every record the fast store writes decodes field by field with the independent decoder."""
    cfg = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=200)
    clock = ManualClock(1_000)
    msgs = [
        BrokerInnerMessage(
            topic=f"Topic{k % 3}",
            queue_id=k % 2,
            body=bytes([k % 251]) * (k * 7 % 400),
            properties={"TAGS": f"Tag{k % 5}", "KEYS": f"k{k}"} if k % 4 else {},
            born_timestamp=10_000 + k,
            born_host=V6 if k % 7 == 0 else V4,
            reconsume_times=k % 3,
        )
        for k in range(60)
    ]
    with MmapMessageStore(tmp_path, cfg, profile, clock) as store:
        results = [store.put_message(m) for m in msgs[:30]] + store.put_messages(msgs[30:])
    files = {int(p.name): p.read_bytes() for p in (tmp_path / "commitlog").iterdir()}
    for msg, res in zip(msgs, results, strict=True):
        raw = files[res.wrote_offset - res.wrote_offset % 4096]
        ind = independent_decode(raw, res.wrote_offset % 4096)
        assert ind["total_size"] == res.wrote_bytes
        assert ind["physical_offset"] == res.wrote_offset
        assert ind["queue_offset"] == res.queue_offset
        assert ind["body"] == msg.body and ind["topic"] == msg.topic
        assert ind["properties"] == Ruleset.of(profile).message_properties_to_string(msg.properties)
        assert ind["born_ip"] == msg.born_host.ip and ind["born_timestamp"] == msg.born_timestamp
        assert ind["store_timestamp"] == 1_000 and ind["reconsume_times"] == msg.reconsume_times
        assert ind["body_crc"] == zlib.crc32(msg.body) & 0x7FFFFFFF


@pytest.mark.parametrize("name", ["basic", "expired"])
def test_decode_broker_records(stores_dir: Path, name: str) -> None:
    """pullspec.spec.record decodes every record a real 4.9.7 broker wrote, field by field."""
    root = stores_dir / name
    rows = [json.loads(line) for line in (root / "messages.jsonl").open()]
    for row in rows:
        if row.get("on_disk") is False:
            continue
        phys = row["commitlog_offset"]
        raw = (root / "commitlog" / f"{phys - phys % 16384:020d}").read_bytes()
        m = decode_record(raw, phys % 16384, Ruleset.of(Profile.V4_9))
        fields = parse_record(raw, phys % 16384)
        assert (m.topic, m.queue_id, m.queue_offset) == (
            row["topic"],
            row["queue_id"],
            row["queue_offset"],
        )
        assert m.commitlog_offset == phys and m.size == row["size"]
        assert m.tags_code == row["tags_code"] and m.tags == row["tags"]
        assert dict(m.properties) == row["properties"]
        assert m.body == base64.b64decode(row["body_base64"]) and len(m.body) == row["body_length"]
        assert m.body_crc == row["body_crc"] and m.flag == row["flag"]
        assert (m.sys_flag, m.reconsume_times) == (row["sys_flag"], row["reconsume_times"])
        assert m.prepared_transaction_offset == row["prepared_transaction_offset"]
        assert m.born_timestamp == row["born_timestamp"] and str(m.born_host) == row["born_host"]
        assert m.store_timestamp == row["store_timestamp"]
        assert str(m.store_host) == row["store_host"] and m.msg_id == row["msg_id"]
        assert fields.properties_length == row["properties_raw_length"]
        assert check_record(raw, phys % 16384, True) == row["size"]


# --- msgOffsets as the vectors read them --------------------------------------------------------


def _record(queue_offset: int, body: int) -> bytes:
    return encode_record(
        topic="T",
        queue_id=0,
        body=bytes(body),
        properties_string="",
        flag=0,
        sys_flag=0,
        queue_offset=queue_offset,
        physical_offset=0,
        born_timestamp=0,
        born_host=HostAddress(b"\x7f\x00\x00\x01", 52000),
        store_timestamp=0,
        store_host=HostAddress(b"\x7f\x00\x00\x01", 10911),
        reconsume_times=0,
        prepared_transaction_offset=0,
    )


def test_store_21_msg_offsets_walk_the_bytes_record_by_record() -> None:
    five, seven = _record(5, 10), _record(7, 0)  # 102 and 92 bytes
    assert (102, 92) == (len(five), len(seven))
    assert [5, 7] == queue_offsets_in(five + seven)
    assert [5] == queue_offsets_in(five[:40])  # cut after its queue offset
    assert [5] == queue_offsets_in(five + seven[:27])  # a header cut before it holds none
    assert [5, 7] == queue_offsets_in(five + seven[:28])
    # a record cut short runs the walk into the next record's bytes: at byte 102 − 52 = 50 of
    # `seven`, bytes 50–53 (born IP 0.1, port 00 00) read as size 65536 and bytes 70–77 (store
    # port 2A 9F, then zeros) as queue offset 10911·2^48; that size runs past the end
    assert [5, 10911 << 48] == queue_offsets_in(five[:52] + seven)
    assert [0] == queue_offsets_in(bytes(28))  # a size of 0 ends the walk
    assert [] == queue_offsets_in(b"")


def test_store_21_a_4_7_blank_repeats_the_record_appended_before_it() -> None:
    five, blank = _record(5, 10), Ruleset.of(Profile.V4_7).encode_blank(60)  # 102 bytes, then 60
    body = five + blank
    assert body == Ruleset.of(Profile.V4_9).with_blank_leftovers(body)  # 4.9.7: header, then zeros
    left = Ruleset.of(Profile.V4_7).with_blank_leftovers(body)
    assert body[:110] + five[8:60] == left
    assert ([5, 0], [5, 5]) == (queue_offsets_in(body), queue_offsets_in(left))
