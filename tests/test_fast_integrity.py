"""`pullspec store verify` and MmapMessageStore.verify (fast.integrity), and damaged bytes refused
at read (fast.damage): issue 17's bit rot. A byte flipped in any record field the format can
check, in any commit-log file (the oldest included: RocketMQ's recovery reads only the last
three), or in any live consume-queue entry, is reported with its file; clean stores — the real
broker's included — verify clean."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.conformance.cli import main
from pullspec.fast.integrity import verify_store
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import CorruptStoreError, InvalidArgumentError
from pullspec.spec.layout import SYSFLAG_TRANSACTION_PREPARED_TYPE
from pullspec.spec.message import BrokerInnerMessage, HostAddress
from pullspec.spec.profiles import Profile
from pullspec.spec.status import GetMessageStatus

CFG = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=200)
V6 = HostAddress(bytes(range(16)), 7000)


def message(k: int) -> BrokerInnerMessage:
    """Message k: two topics, three queues, every fourth with IPv6 hosts, some delayed, some a
    prepared transaction (no queue entry), bodies of 1–150 bytes."""
    props = {"TAGS": f"Tag{k % 3}", "KEYS": f"key{k}"}
    if k % 11 == 5:
        props["DELAY"] = "2"
    return BrokerInnerMessage(
        topic=("T", "U")[k % 2],
        queue_id=k % 3,
        body=bytes((k + i) % 251 for i in range(1 + k * 7 % 150)),
        properties=props,
        born_timestamp=1_000 + k,
        sys_flag=SYSFLAG_TRANSACTION_PREPARED_TYPE if k % 13 == 7 else 0,
        born_host=V6 if k % 4 == 3 else HostAddress(b"\x0a\x00\x00\x01", 5000 + k),
    )


def fill(root: Path, n: int = 120) -> list[Any]:
    with MmapMessageStore(root, CFG, Profile.V4_9, ManualClock(7)) as store:
        return store.put_messages([message(k) for k in range(n)])


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["store", "verify", *args])


# -- clean stores ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "records", "files", "entries"), [("basic", 300, 8, 300), ("expired", 148, 4, 180)]
)
def test_the_real_broker_stores_verify_clean(
    stores_dir: Path, name: str, records: int, files: int, entries: int
) -> None:
    report = verify_store(stores_dir / name)
    assert (report.problems, report.records, report.commit_log_files, report.entries) == (
        (),
        records,
        files,
        entries,
    )
    assert (report.commit_log_file_size, report.consume_queue_file_size) == (16384, 400)
    result = cli(str(stores_dir / name))
    assert result.exit_code == 0, result.output
    assert f"{records} records in {files} commit-log files" in result.output


def test_a_fast_store_verifies_clean_open_and_closed(tmp_path: Path) -> None:
    results = fill(tmp_path)
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(8))
    open_report = store.verify()
    store.close()
    closed = verify_store(tmp_path)
    assert open_report.problems == closed.problems == ()
    assert open_report.records == closed.records == 120
    prepared = sum(1 for k in range(120) if k % 13 == 7)
    assert closed.entries == 120 - prepared
    assert closed.commit_log_files == 1 + results[-1].wrote_offset // 4096


def test_an_expired_store_verifies_clean(tmp_path: Path) -> None:
    """Entries pointing into deleted commit-log files are below the min: not read."""
    fill(tmp_path)
    cfg = StoreConfig(
        mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=200, file_reserved_time=0
    )
    with MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(10**9)) as store:
        assert store.delete_expired_files() > 0
        assert store.verify().problems == ()
    assert verify_store(tmp_path).problems == ()


def test_a_crashed_store_is_noted(tmp_path: Path) -> None:
    fill(tmp_path, 10)
    (tmp_path / "abort").touch()
    report = verify_store(tmp_path)
    assert (report.ok, report.notes) == (
        True,
        ("abort marker present: the last writer did not close cleanly",),
    )


# -- a byte flipped in the commit log ----------------------------------------------------------


@pytest.fixture(scope="module")
def filled(tmp_path_factory: Any) -> Iterator[tuple[Path, list[Any]]]:
    root = tmp_path_factory.mktemp("filled")
    yield root, fill(root)


#: The record fields a flipped byte of is always found (offsets for IPv4 hosts; a record with
#: IPv6 ones has its later fields 12 or 24 bytes further): (name, start, length), the body and
#: the fields after it placed by `field_span`.
FIXED = (
    ("TOTALSIZE", 0, 4),
    ("MAGICCODE", 4, 4),
    ("BODYCRC", 8, 4),
    ("QUEUEID", 12, 4),
    ("QUEUEOFFSET", 20, 8),
    ("PHYSICALOFFSET", 28, 8),
)
AFTER_HOSTS = ("BODYLENGTH", "BODY", "TOPICLENGTH", "TOPIC", "PROPERTIESLENGTH", "TAGS")
FIELDS = [n for n, _, _ in FIXED] + list(AFTER_HOSTS)
#: Fields checked against the record's consume-queue entry: a prepared transaction has none.
CROSS = ("QUEUEID", "QUEUEOFFSET", "TOPIC", "TAGS")


def checked_fields(k: int) -> list[str]:
    """The fields of message k's record a flipped byte of is always found in (a delayed
    message's entry holds its delivery time, not its tags' hash)."""
    m = message(k)
    delayed = "DELAY" in dict(m.properties)
    return [f for f in FIELDS if not (m.sys_flag and f in CROSS) and not (delayed and f == "TAGS")]


def field_span(raw: bytes, name: str) -> tuple[int, int]:
    """(start, length) of field `name` in the record `raw`."""
    for n, start, length in FIXED:
        if n == name:
            return start, length
    flags = struct.unpack_from(">i", raw, 36)[0]
    at = 84 + (12 if flags & 0x10 else 0) + (12 if flags & 0x20 else 0)
    body = struct.unpack_from(">i", raw, at)[0]
    topic = raw[at + 4 + body]
    props_at = at + 4 + body + 1 + topic
    spans = {
        "BODYLENGTH": (at, 4),
        "BODY": (at + 4, body),
        "TOPICLENGTH": (at + 4 + body, 1),
        "TOPIC": (at + 5 + body, topic),
        "PROPERTIESLENGTH": (props_at, 2),
    }
    if name in spans:
        return spans[name]
    text = raw[props_at + 2 :]
    value = text.index(b"TAGS\x01") + 5
    return props_at + 2 + value, text.index(b"\x02", value) - value


class Flipped:
    """A byte of a file XORed with a mask for the length of a `with` block."""

    def __init__(self, path: Path, pos: int, mask: int) -> None:
        self.path, self.pos, self.mask = path, pos, mask

    def __enter__(self) -> None:
        self._flip()

    def __exit__(self, *exc: object) -> None:
        self._flip()

    def _flip(self) -> None:
        data = bytearray(self.path.read_bytes())
        data[self.pos] ^= self.mask
        self.path.write_bytes(bytes(data))


@given(
    k=st.integers(0, 119),
    field=st.sampled_from(FIELDS),
    where=st.floats(0, 1, exclude_max=True),
    mask=st.integers(1, 255),
)
@settings(max_examples=60, deadline=None)
def test_a_flipped_record_byte_is_reported(
    filled: tuple[Path, list[Any]], k: int, field: str, where: float, mask: int
) -> None:
    if field not in checked_fields(k):
        return
    root, results = filled
    r = results[k]
    name = f"commitlog/{r.wrote_offset - r.wrote_offset % 4096:020d}"
    path = root / name
    pos = r.wrote_offset % 4096
    start, length = field_span(path.read_bytes()[pos : pos + r.wrote_bytes], field)
    with Flipped(path, pos + start + int(where * length), mask):
        report = verify_store(root)
    assert not report.ok
    assert any(p.file == name for p in report.problems), report.problems


def test_every_byte_of_the_oldest_file_outside_unchecked_fields_is_reported(
    filled: tuple[Path, list[Any]],
) -> None:
    """Every byte of the first file (the records' checked fields, the end-of-file blank and
    the zeros after it), each flipped once."""
    root, results = filled
    path = root / "commitlog" / f"{0:020d}"
    raw = path.read_bytes()
    checked: list[int] = []
    for k, r in enumerate(results):
        if r.wrote_offset >= 4096:
            break
        record = raw[r.wrote_offset : r.wrote_offset + r.wrote_bytes]
        for field in checked_fields(k):
            start, length = field_span(record, field)
            checked += range(r.wrote_offset + start, r.wrote_offset + start + length)
    last = max(r.wrote_offset + r.wrote_bytes for r in results if r.wrote_offset < 4096)
    checked += range(last, 4096)  # the blank and its zeros
    for pos in checked[:: max(1, len(checked) // 100)]:  # a spread of 100 of them
        with Flipped(path, pos, 0x41):
            assert not verify_store(root).ok, pos


def test_bytes_after_the_last_record_are_reported(tmp_path: Path) -> None:
    results = fill(tmp_path, 5)
    end = results[-1].wrote_offset + results[-1].wrote_bytes
    with Flipped(tmp_path / "commitlog" / f"{0:020d}", end + 100, 0x01):
        report = verify_store(tmp_path)
        result = cli(str(tmp_path))
    assert [(p.file, p.position, p.what) for p in report.problems] == [
        (f"commitlog/{0:020d}", end, f"after the last record, bytes are not zero from {end + 100}")
    ]
    assert result.exit_code == 1


@given(k=st.integers(0, 119), byte=st.integers(0, 19), mask=st.integers(1, 255))
@settings(max_examples=40, deadline=None)
def test_a_flipped_entry_byte_is_reported(
    filled: tuple[Path, list[Any]], k: int, byte: int, mask: int
) -> None:
    root, results = filled
    m, r = message(k), results[k]
    if m.sys_flag:
        return  # a prepared transaction has no entry
    topic, queue_id = (
        ("SCHEDULE_TOPIC_XXXX", 1)
        if "DELAY" in dict(m.properties)
        else (
            m.topic,
            m.queue_id,
        )
    )
    pos = r.queue_offset * 20
    name = f"consumequeue/{topic}/{queue_id}/{pos - pos % 200:020d}"
    with Flipped(root / name, pos % 200 + byte, mask):
        report = verify_store(root)
    assert any(p.file == name and p.position == pos % 200 for p in report.problems), report.problems


# -- the command ---------------------------------------------------------------------------


def test_the_command_answers_json_and_exit_codes(tmp_path: Path) -> None:
    results = fill(tmp_path, 30)
    clean = cli(str(tmp_path), "--json")
    assert (clean.exit_code, json.loads(clean.output)["ok"]) == (0, True)
    at = results[2].wrote_offset  # IPv4 hosts: the body starts at byte 88
    with Flipped(tmp_path / "commitlog" / f"{0:020d}", at + 88, 0x20):
        damaged = cli(str(tmp_path), "--json")
    report = json.loads(damaged.output)
    assert damaged.exit_code == 1
    assert report["problems"][0] == {
        "file": f"commitlog/{0:020d}",
        "position": at,
        "what": report["problems"][0]["what"],
    }
    assert report["problems"][0]["what"].startswith("BODYCRC")


@pytest.mark.parametrize("make", ["missing", "empty", "file"])
def test_not_a_store_exits_2_with_one_line(tmp_path: Path, make: str) -> None:
    target = tmp_path / "x"
    if make == "empty":
        target.mkdir()
    elif make == "file":
        target.write_text("hello")
    result = CliRunner().invoke(main, ["store", "verify", str(target)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and result.output.startswith("error: ")
    with pytest.raises(InvalidArgumentError):
        verify_store(target)


def test_a_file_of_the_wrong_length_is_reported(tmp_path: Path) -> None:
    fill(tmp_path)
    path = tmp_path / "commitlog" / f"{4096:020d}"
    path.write_bytes(path.read_bytes()[:1000])
    report = verify_store(tmp_path)
    assert report.problems[0].file == f"commitlog/{4096:020d}"
    assert "length 1000" in report.problems[0].what
    assert any("missing" in p.what for p in report.problems)


# -- damaged bytes refused at read -----------------------------------------------------------


def test_a_damaged_body_in_the_oldest_file_is_refused_when_read(tmp_path: Path) -> None:
    """Recovery checks CRCs in the last files only: the first file's damage opens silently, and
    is refused when the message is read, naming its commit-log offset."""
    results = fill(tmp_path)
    r = results[2]
    assert r.wrote_offset < 4096 and results[-1].wrote_offset >= 4 * 4096
    body_at = r.wrote_offset + 88
    with Flipped(tmp_path / "commitlog" / f"{0:020d}", body_at, 0x01):
        store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(8), read_only=True)
        res = store.get_message("G", "T", 2, r.queue_offset, 1)
        assert res.status is GetMessageStatus.FOUND
        with pytest.raises(CorruptStoreError, match=f"offset {r.wrote_offset}: BODYCRC"):
            res.messages[0]
        with pytest.raises(CorruptStoreError, match=f"offset {r.wrote_offset}: BODYCRC"):
            store.look_message_by_offset(r.wrote_offset)
        store.close()


@pytest.mark.parametrize("call", ["get_message", "get_messages", "pull_through"])
def test_an_entry_naming_the_wrong_size_is_refused(tmp_path: Path, call: str) -> None:
    """A size byte flipped in an entry: RocketMQ finds no record of that size, answers
    MESSAGE_WAS_REMOVING and skips to the file's end; here the pull is refused, naming the
    entry."""
    results = fill(tmp_path, 60)
    k = 6  # T/0, queue offset 1
    r = results[k]
    assert (message(k).topic, message(k).queue_id, r.queue_offset) == ("T", 0, 1)
    name = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    with Flipped(name, 20 + 9, 0x10):
        store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(8), read_only=True)
        expected = f"{name}: entry 1 \\(byte 20\\) names {r.wrote_bytes + (1 << 20)} bytes"
        with pytest.raises(CorruptStoreError, match=expected):
            # (A pull from 0 stops before entry 1: its size alone fills the batch, BATCH-2.)
            if call == "get_message":
                store.get_message("G", "T", 0, 1, 8)
            elif call == "get_messages":
                store.get_messages([("G", "T", 0, 1, 8, None)])
            else:
                store.pull_through("G", "T", 0, 0, 8)
        store.close()


def test_verify_beside_writers_sees_only_whole_records(tmp_path: Path) -> None:
    """verify() holds the put lock: a store being written to verifies clean."""
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1))
    for k in range(40):
        store.put_message(message(k))
        if k % 10 == 9:
            assert store.verify().problems == ()
    store.close()


def test_verify_on_a_closed_store_is_refused(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1))
    store.close()
    with pytest.raises(Exception, match="closed"):
        store.verify()
