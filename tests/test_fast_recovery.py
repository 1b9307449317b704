"""Recovery of the fast store on open: torn tails, bad CRCs and magic codes, damaged or missing
consume queues, and kill -9 of a writer process at random points.

`make fuzz` (HYPOTHESIS_PROFILE=fuzz) or PULLSPEC_KILL_TRIALS=n raise the number of kill trials.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import CorruptStoreError
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile

CFG = StoreConfig(mapped_file_size_commit_log=1 << 16, mapped_file_size_consume_queue=200)
KILL_TRIALS = int(
    os.environ.get(
        "PULLSPEC_KILL_TRIALS", "40" if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else "3"
    )
)


def message(k: int) -> BrokerInnerMessage:
    """The k-th message of every test here: its born timestamp names it."""
    body = hashlib.sha256(str(k).encode()).digest() * (1 + k % 9)
    return BrokerInnerMessage(
        topic="T",
        queue_id=k % 3,
        body=body[: 1 + k * 37 % 280],
        properties={"TAGS": f"Tag{k % 4}", "KEYS": f"key{k}"},
        born_timestamp=k,
    )


def fill(root: Path, n: int, cfg: StoreConfig = CFG) -> list[Any]:
    with MmapMessageStore(root, cfg, Profile.V4_9, ManualClock(1_000)) as store:
        return store.put_messages([message(k) for k in range(n)])


def answers(store: MmapMessageStore) -> list[Any]:
    """Every pull answer of every queue, with the messages' contents."""
    out = []
    for q in range(3):
        low, high = store.get_min_offset_in_queue("T", q), store.get_max_offset_in_queue("T", q)
        for offset in range(low - 1, high + 2):
            for f in (None, tag_filter("T", "Tag1 || Tag2")):
                r = store.get_message("G", "T", q, offset, 4, f)
                out.append((r, [(m.body, m.born_timestamp) for m in r.messages]))
    return out


def reopen(root: Path, **kwargs: Any) -> MmapMessageStore:
    return MmapMessageStore(
        root, kwargs.pop("cfg", CFG), Profile.V4_9, ManualClock(2_000), **kwargs
    )


def crash_marker(root: Path) -> None:
    (root / "abort").touch()


def commit_log_file(root: Path) -> Path:
    return root / "commitlog" / f"{0:020d}"


def test_torn_tail_is_cut(tmp_path: Path) -> None:
    results = fill(tmp_path, 30)
    with reopen(tmp_path, read_only=True) as store:
        before = answers(store)
    end = results[-1].wrote_offset + results[-1].wrote_bytes
    raw = commit_log_file(tmp_path).read_bytes()
    torn = raw[results[5].wrote_offset : results[5].wrote_offset + results[5].wrote_bytes // 2]
    with commit_log_file(tmp_path).open("r+b") as fh:
        fh.seek(end)
        fh.write(torn)
    crash_marker(tmp_path)
    with reopen(tmp_path, read_only=True) as store:
        assert store.recovery.torn_tail and store.get_max_phy_offset() == end
        assert answers(store) == before
    with reopen(tmp_path) as store:
        assert store.recovery.abnormal and store.get_max_phy_offset() == end
        assert answers(store) == before
    assert commit_log_file(tmp_path).read_bytes()[end:] == bytes(len(raw) - end)
    assert not (tmp_path / "abort").exists()


def test_queue_entry_pointing_past_a_torn_record_is_dropped(tmp_path: Path) -> None:
    results = fill(tmp_path, 30)
    last = results[-1]
    with commit_log_file(tmp_path).open("r+b") as fh:  # the record was never fully written
        fh.seek(last.wrote_offset + 40)
        fh.write(bytes(last.wrote_bytes - 40))
    crash_marker(tmp_path)
    with reopen(tmp_path) as store:
        assert store.get_max_phy_offset() == last.wrote_offset
        assert store.recovery.dropped_entries >= 1
        assert store.get_max_offset_in_queue("T", 29 % 3) == last.queue_offset
        assert store.put_message(message(29)).wrote_offset == last.wrote_offset


@pytest.mark.parametrize("how", ["zeroed entries", "no consumequeue dir"])
def test_missing_queue_entries_are_rebuilt(tmp_path: Path, how: str) -> None:
    fill(tmp_path, 40)
    with reopen(tmp_path, read_only=True) as store:
        before = answers(store)
    if how == "zeroed entries":
        last = sorted((tmp_path / "consumequeue" / "T" / "1").iterdir())[-1]
        raw = bytearray(last.read_bytes())
        raw[20:] = bytes(len(raw) - 20)
        last.write_bytes(bytes(raw))
    else:
        shutil.rmtree(tmp_path / "consumequeue")
    crash_marker(tmp_path)
    with reopen(tmp_path, read_only=True) as store:
        assert store.recovery.rebuilt_entries > 0 and answers(store) == before
    with reopen(tmp_path) as store:
        assert answers(store) == before
    with reopen(tmp_path) as store:  # rebuilt on disk: nothing left to do
        assert store.recovery.rebuilt_entries == 0 and answers(store) == before


def _corrupt(root: Path, at: int, data: bytes) -> None:
    with commit_log_file(root).open("r+b") as fh:
        fh.seek(at)
        fh.write(data)


def test_bad_crc_in_the_middle(tmp_path: Path) -> None:
    results = fill(tmp_path, 30)
    victim = results[7]
    body_at = victim.wrote_offset + 88
    original = commit_log_file(tmp_path).read_bytes()[body_at : body_at + 1]
    _corrupt(tmp_path, body_at, bytes([original[0] ^ 0xFF]))
    with pytest.raises(CorruptStoreError):
        reopen(tmp_path, read_only=True)
    unchecked = StoreConfig(
        mapped_file_size_commit_log=1 << 16,
        mapped_file_size_consume_queue=200,
        check_crc_on_recover=False,
    )
    with reopen(tmp_path, read_only=True, cfg=unchecked) as store:  # getMessage never checks
        assert store.get_max_phy_offset() == results[-1].wrote_offset + results[-1].wrote_bytes
    with reopen(tmp_path, repair=True) as store:  # RocketMQ's answer: cut the log there
        assert store.get_max_phy_offset() == victim.wrote_offset
        assert store.get_max_offset_in_queue("T", 7 % 3) == victim.queue_offset
        assert store.look_message_by_offset(results[6].wrote_offset) is not None


def test_bad_crc_at_the_tail_is_cut(tmp_path: Path) -> None:
    results = fill(tmp_path, 30)
    body_at = results[-1].wrote_offset + 88
    _corrupt(tmp_path, body_at, b"\xff\xfe")
    with reopen(tmp_path) as store:
        assert store.get_max_phy_offset() == results[-1].wrote_offset
        assert store.recovery.dropped_entries == 1


def test_bad_magic_raises(tmp_path: Path) -> None:
    results = fill(tmp_path, 30)
    _corrupt(tmp_path, results[3].wrote_offset + 4, struct.pack(">i", 0x12345678))
    with pytest.raises(CorruptStoreError):
        reopen(tmp_path)
    with reopen(tmp_path, repair=True) as store:
        assert store.get_max_phy_offset() == results[3].wrote_offset


def test_truncated_consume_queue(tmp_path: Path) -> None:
    fill(tmp_path, 40)
    with reopen(tmp_path, read_only=True) as store:
        before = answers(store)
    files = sorted((tmp_path / "consumequeue" / "T" / "0").iterdir())
    os.truncate(files[-1], 50)  # the last file, cut mid-entry
    with reopen(tmp_path, read_only=True) as store:
        assert answers(store) == before
    assert files[-1].stat().st_size == 50  # read-only: repaired in memory only
    with reopen(tmp_path) as store:
        assert answers(store) == before
    assert files[-1].stat().st_size == 200
    os.truncate(files[0], 100)  # a middle file: RocketMQ refuses to load it
    with pytest.raises(CorruptStoreError):
        reopen(tmp_path)


def test_wrong_file_sizes_raise(tmp_path: Path) -> None:
    fill(tmp_path, 10)
    with pytest.raises(CorruptStoreError):
        reopen(tmp_path, cfg=StoreConfig(mapped_file_size_commit_log=1 << 15))


WRITER = """
import sys, random
sys.path.insert(0, sys.argv[3])
from test_fast_recovery import message, SMALL
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import SystemClock
from pullspec.spec.profiles import Profile
rng = random.Random(int(sys.argv[2]))
store = MmapMessageStore(sys.argv[1], SMALL, Profile.V4_9, SystemClock(), flush="sync")
k = 0
print("ready", flush=True)
while True:
    n = rng.choice([1, 1, 2, 5, 9])
    results = store.put_messages([message(k + i) for i in range(n)])
    sys.stdout.write("".join(f"{k + i} {r.queue_offset} {r.wrote_offset}\\n"
                             for i, r in enumerate(results)))
    sys.stdout.flush()
    k += n
"""

SMALL = StoreConfig(mapped_file_size_commit_log=8192, mapped_file_size_consume_queue=200)


@pytest.mark.parametrize("trial", range(KILL_TRIALS))
def test_kill_nine_writer(tmp_path: Path, trial: int) -> None:
    """Every put acknowledged (sync flush) before kill -9 is readable byte-identical after
    reopening; nothing partial is visible."""
    rng = random.Random(trial)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), str(trial), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(rng.uniform(0.0, 0.25))
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    # Only complete lines were acknowledged; a line cut by the kill is not.
    acked = [tuple(map(int, line.split())) for line in out.split("\n")[:-1]]
    with MmapMessageStore(tmp_path, SMALL, Profile.V4_9, ManualClock(0)) as store:
        for k, queue_offset, phys in acked:
            expected = message(k)
            m = store.look_message_by_offset(phys)
            assert m is not None and m.queue_offset == queue_offset
            assert (m.body, m.born_timestamp, dict(m.properties)) == (
                expected.body,
                k,
                dict(expected.properties),
            )
        seen = set()
        for q in range(3):
            offset = store.get_min_offset_in_queue("T", q)
            while offset < store.get_max_offset_in_queue("T", q):
                r = store.get_message("G", "T", q, offset, 32)
                for m in r.messages:  # whatever is visible is a whole, correct message
                    want = message(m.born_timestamp)
                    assert (m.body, m.queue_id, dict(m.properties)) == (
                        want.body,
                        want.queue_id,
                        dict(want.properties),
                    )
                    seen.add(m.born_timestamp)
                offset = r.next_begin_offset
        assert {a[0] for a in acked} <= seen
        assert seen == set(range(len(seen)))
        store.put_message(message(len(seen)))  # and the store takes writes again
