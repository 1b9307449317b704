"""pullspec.fast.recovery_kernels: the compiled walk, field reads and byte grouping answer exactly what the
numpy/Python paths answer, and recovery through either path stops at the same record for a bad
CRC, a bad magic, a torn tail or a zeroed tail."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.fast import kernels, recovery_kernels
from pullspec.fast.mapped import MappedFile
from pullspec.fast.store import MmapMessageStore
from pullspec.fast.validate import dispatch_fields, scan_file, walk_records
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.delay import SCHEDULE_TOPIC
from pullspec.spec.errors import CorruptStoreError
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage, HostAddress
from pullspec.spec.profiles import Profile

pytestmark = pytest.mark.skipif(
    not recovery_kernels.accelerated(), reason="numba missing or disabled: one path only"
)

CFG = StoreConfig(mapped_file_size_commit_log=1 << 15, mapped_file_size_consume_queue=400)
V6 = HostAddress(bytes(range(16)), 9876)


def message(k: int) -> BrokerInnerMessage:
    """Message k: two topics and the schedule topic, IPv6 hosts, transactions, shared
    properties (tags only) and unique ones (KEYS), empty bodies."""
    props = {"TAGS": f"Tag{k % 3}"}
    if k % 4 == 0:
        props["KEYS"] = f"key{k}"
    if k % 13 == 0:
        props["DELAY"] = str(1 + k % 3)
    return BrokerInnerMessage(
        topic=("T", "U", "T")[k % 3],
        queue_id=k % 2,
        body=bytes([k % 251]) * (k * 7 % 120),
        properties=props,
        sys_flag=(0, 0, 4, 8, 0, 12)[k % 6],
        born_timestamp=k,
        born_host=V6 if k % 5 == 0 else HostAddress(b"\x7f\x00\x00\x01", 1),
        store_host=V6 if k % 7 == 0 else HostAddress(b"\x7f\x00\x00\x01", 2),
    )


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    root = tmp_path_factory.mktemp("filled")
    with MmapMessageStore(root, CFG, Profile.V4_9, ManualClock(1_000)) as store:
        results = store.put_messages([message(k) for k in range(400)])
    return root, results


def no_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recovery_kernels, "_compiled", lambda: None)
    monkeypatch.setattr(kernels, "_compiled", lambda *_: None)


def answers(store: MmapMessageStore) -> list[Any]:
    """Every pull answer of every queue, with the messages' contents."""
    out = []
    for topic in ("T", "U", SCHEDULE_TOPIC):
        for q in range(3):
            lo = store.get_min_offset_in_queue(topic, q)
            hi = store.get_max_offset_in_queue(topic, q)
            for offset in range(lo, hi + 1, 3):
                for f in (None, tag_filter(topic, "Tag1")):
                    r = store.get_message("G", topic, q, offset, 5, f)
                    out.append((r, [(m.body, m.born_timestamp) for m in r.messages]))
    return out


def outcome(root: Path, **kwargs: Any) -> Any:
    """What opening `root` gives: the recovery report and every answer, or the error."""
    try:
        with MmapMessageStore(root, CFG, Profile.V4_9, ManualClock(2_000), **kwargs) as store:
            return store.recovery, store.get_max_phy_offset(), answers(store)
    except CorruptStoreError as e:
        return "CorruptStoreError", str(e).replace(str(root), "")


def corrupt(root: Path, at: int, data: bytes) -> None:
    path = root / "commitlog" / f"{at - at % CFG.mapped_file_size_commit_log:020d}"
    with path.open("r+b") as fh:
        fh.seek(at % CFG.mapped_file_size_commit_log)
        fh.write(data)


def damage(root: Path, results: list[Any], how: str) -> int:
    """Damage the copy at `root` as `how` says; the offset recovery must stop at."""
    victim = results[len(results) // 2]
    last = results[-1]
    end = last.wrote_offset + last.wrote_bytes
    if how == "bad crc in the middle":
        corrupt(root, victim.wrote_offset + 8, struct.pack(">i", 12345))
        return int(victim.wrote_offset)
    if how == "bad magic":
        corrupt(root, victim.wrote_offset + 4, struct.pack(">i", 0x12345678))
        return int(victim.wrote_offset)
    if how == "torn tail":
        # The first half of a record written past the end, as a crash mid-append leaves it.
        raw = (root / "commitlog" / f"{0:020d}").read_bytes()
        first = results[1]
        corrupt(root, end, raw[first.wrote_offset : first.wrote_offset + first.wrote_bytes // 2])
        return int(end)
    assert how == "zeroed tail"
    corrupt(root, last.wrote_offset + 40, bytes(last.wrote_bytes - 40))
    return int(last.wrote_offset)


HOWS = ["intact", "bad crc in the middle", "bad magic", "torn tail", "zeroed tail"]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("mode", ["clean", "abort", "no consumequeue", "repair"])
def test_recovery_stops_at_the_same_record_on_both_paths(
    filled: tuple[Path, list[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    mode: str,
) -> None:
    source, results = filled
    got = {}
    for path in ("compiled", "fallback"):
        root = tmp_path / path
        shutil.copytree(source, root)
        stop = damage(root, results, how) if how != "intact" else None
        if mode == "abort":
            (root / "abort").touch()
            (root / "checkpoint").write_bytes(bytes(4096))
        if mode == "no consumequeue":
            shutil.rmtree(root / "consumequeue")
        if path == "fallback":
            no_kernels(monkeypatch)
        got[path] = outcome(root, repair=mode == "repair")
        if mode == "repair" and stop is not None:
            assert stop == got[path][1]
    assert got["fallback"] == got["compiled"]


def walk_both(f: MappedFile) -> tuple[Any, Any]:
    walked = recovery_kernels.walk(f.data, 0, f.size, f.start)
    assert walked is not None
    found, end, how = walk_records(f.mm, 0, f.size, f.start, f.size + 1)
    return (found, end, how), (walked.positions.tolist(), walked.end, walked.how)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_walk_equals_walk_records_after_any_byte_change(
    filled: tuple[Path, list[Any]], data: st.DataObject
) -> None:
    source, results = filled
    raw = bytearray((source / "commitlog" / f"{0:020d}").read_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, results[120].wrote_offset))
        raw[at] = data.draw(st.integers(0, 255))
    f = MappedFile.anonymous(0, len(raw), bytes(raw))
    expected, actual = walk_both(f)
    assert expected == actual
    hints = np.array(expected[0], dtype=np.int64)
    compiled = scan_file(f, 0, f.size, hints, True)
    recovery_kernels._compiled.cache_clear()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(recovery_kernels, "_compiled", lambda: None)
            fallback = scan_file(f, 0, f.size, hints, True)
    finally:
        recovery_kernels._compiled.cache_clear()
    assert (fallback[0].tolist(), fallback[1], fallback[2]) == (
        compiled[0].tolist(),
        compiled[1],
        compiled[2],
    )


def test_walk_ends_on_the_blank_and_reads_every_field(filled: tuple[Path, list[Any]]) -> None:
    source, _ = filled
    f = MappedFile.open(
        source / "commitlog" / f"{0:020d}", 0, CFG.mapped_file_size_commit_log, True
    )
    expected, actual = walk_both(f)
    assert expected == actual
    assert 1 == actual[2]  # the end-of-file blank
    pos = np.array(actual[0], dtype=np.int64)
    compiled = recovery_kernels.record_fields(f.data, pos)
    assert compiled is not None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recovery_kernels, "_compiled", lambda: None)
        fallback = dispatch_fields(f, pos)
    assert {k: v.tolist() for k, v in fallback.items()} == {
        k: v.tolist() for k, v in compiled.items()
    }
    f.close()


def test_a_size_field_running_past_the_file_is_a_bad_record() -> None:
    # A 91-byte record claiming IPv6 hosts at the very end of a file: its body length would lie
    # past the record (and the file); both walks call it bad instead of reading beyond.
    raw = bytearray(91)
    struct.pack_into(">ii", raw, 0, 91, -626_843_481)
    struct.pack_into(">qi", raw, 28, 0, 0x30)
    f = MappedFile.anonymous(0, 91, bytes(raw))
    expected, actual = walk_both(f)
    assert ([], 0, -1) == expected
    assert expected == actual


@settings(max_examples=80, deadline=None)
@given(
    st.binary(min_size=0, max_size=64),
    st.lists(st.tuples(st.integers(0, 64), st.integers(0, 6)), max_size=60),
)
def test_group_ranges_equals_python_grouping(blob: bytes, ranges: list[tuple[int, int]]) -> None:
    ranges = [(s, n) for s, n in ranges if s + n <= len(blob)]
    data = np.frombuffer(blob, dtype=np.uint8)
    starts = np.array([s for s, _ in ranges], dtype=np.int64)
    lengths = np.array([n for _, n in ranges], dtype=np.int64)
    inverse, first = recovery_kernels.group_ranges(data, starts, lengths)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recovery_kernels, "_compiled", lambda: None)
        expected = recovery_kernels.group_ranges(data, starts, lengths)
    assert (expected[0].tolist(), expected[1].tolist()) == (inverse.tolist(), first.tolist())
    strings = [blob[s : s + n] for s, n in ranges]
    assert [strings[int(first[g])] for g in inverse.tolist()] == strings


def test_group_ranges_refuses_ranges_outside_the_data() -> None:
    data = np.zeros(10, dtype=np.uint8)
    with pytest.raises(ValueError, match="outside"):
        recovery_kernels.group_ranges(data, np.array([5]), np.array([6]))
    with pytest.raises(ValueError, match="1 starts but 2 lengths"):
        recovery_kernels.group_ranges(data, np.array([0]), np.array([1, 2]))
