"""Commit-log files: warm (preallocated) files and the background flush of files that filled."""

from __future__ import annotations

import hashlib
import itertools
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import pullspec.fast.commitlog
import pullspec.fast.consumequeue
import pullspec.fast.mapped
from pullspec.fast.batch import MessageBatch
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import PutMessageStatus

CONFIG = StoreConfig(mapped_file_size_commit_log=4096)
RULES = Ruleset.of(Profile.V4_9)


def _messages(n: int) -> list[BrokerInnerMessage]:
    return [
        BrokerInnerMessage(topic="T", queue_id=k % 2, body=bytes([k % 251]) * 150, properties={})
        for k in range(n)
    ]


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "abort":
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def test_warm_files_hold_the_same_bytes_and_are_allocated(tmp_path: Path) -> None:
    stores = {}
    for warm in (False, True):
        s = MmapMessageStore(
            tmp_path / str(warm), CONFIG, Profile.V4_9, ManualClock(5), warm_mapped_files=warm
        )
        s.put_messages(_messages(100))
        s.close()
        stores[warm] = tmp_path / str(warm)
    assert _digest(stores[False]) == _digest(stores[True])
    files = sorted((stores[True] / "commitlog").iterdir())
    assert len(files) > 2
    # Every block of a warm file is allocated; a cold file's unwritten tail stays a hole.
    for f in files:
        assert f.stat().st_blocks * 512 >= CONFIG.mapped_file_size_commit_log


@pytest.fixture
def background() -> Any:
    """Hand even these small files to the background flusher."""
    with mock.patch("pullspec.fast.commitlog.BACKGROUND_FLUSH_MIN", 0):
        yield


def test_small_files_are_flushed_in_place(tmp_path: Path) -> None:
    s = MmapMessageStore(tmp_path, CONFIG, Profile.V4_9, ManualClock(5))
    s.put_messages(_messages(100))
    assert len(list((tmp_path / "commitlog").iterdir())) > 2
    assert [] == s.commit_log._pending
    s.close()


@pytest.mark.usefixtures("background")
def test_files_that_fill_are_flushed_in_the_background(tmp_path: Path) -> None:
    flushed: list[str] = []
    real = pullspec.fast.commitlog._fdatasync

    def record(path: Path) -> None:
        real(path)
        flushed.append(path.name)

    with mock.patch("pullspec.fast.commitlog._fdatasync", record):
        s = MmapMessageStore(tmp_path, CONFIG, Profile.V4_9, ManualClock(5))
        s.put_messages(_messages(100))
        s.flush()
        names = sorted(p.name for p in (tmp_path / "commitlog").iterdir())
        # Every file but the last (flushed by flush() itself) went through the flusher.
        assert names[:-1] == sorted(flushed)
        s.close()


@pytest.mark.usefixtures("background")
def test_consume_queue_files_that_fill_are_flushed_in_the_background(tmp_path: Path) -> None:
    # A filled queue file used to be msynced in place, the appending thread waiting on the disk.
    flushed: list[Path] = []
    real = pullspec.fast.commitlog._fdatasync

    def record(path: Path) -> None:
        real(path)
        flushed.append(path)

    cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=200)
    with mock.patch("pullspec.fast.commitlog._fdatasync", record):
        s = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(5))
        s.put_messages(_messages(100))  # 50 entries per queue: 5 files of 10 each
        s.flush()
        filled = []
        for queue in sorted((tmp_path / "consumequeue" / "T").iterdir()):
            names = sorted(queue.iterdir())
            assert 5 == len(names)
            filled += names[:-1]  # the last is flushed by flush() itself
        assert filled == sorted(p for p in flushed if "consumequeue" in p.parts)
        s.close()


@pytest.mark.usefixtures("background")
def test_a_failed_background_flush_is_raised_by_flush(tmp_path: Path) -> None:
    def broken(path: Path) -> None:
        raise OSError(5, "Input/output error", str(path))

    s = MmapMessageStore(tmp_path, CONFIG, Profile.V4_9, ManualClock(5))
    with mock.patch("pullspec.fast.commitlog._fdatasync", broken):
        s.put_messages(_messages(100))
        with pytest.raises(OSError, match="Input/output"):
            s.flush()
    # Raised once; the store stays usable and closes cleanly.
    s.flush()
    s.close()


@pytest.mark.usefixtures("background")
def test_expiry_waits_for_pending_flushes(tmp_path: Path) -> None:
    cfg = StoreConfig(mapped_file_size_commit_log=4096, file_reserved_time=0)
    s = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(5))
    s.put_messages(_messages(100))
    pending_at_delete: list[int] = []
    real_destroy = pullspec.fast.mapped.MappedFile.destroy

    def destroy(f: pullspec.fast.mapped.MappedFile) -> None:
        pending_at_delete.append(len(s.commit_log._pending))
        real_destroy(f)

    assert s.commit_log._pending  # files filled: their flushes were handed off
    with mock.patch.object(pullspec.fast.mapped.MappedFile, "destroy", destroy):
        assert s.delete_expired_files() > 0
    assert pending_at_delete
    assert set(pending_at_delete) == {0}
    s.close()


@pytest.mark.parametrize("batched", [False, True], ids=["list", "batch"])
def test_transient_store_pool_writes_the_same_files(tmp_path: Path, batched: bool) -> None:
    from pullspec.fast.batch import MessageBatch

    msgs = _messages(300)
    answers = {}
    for transient in (False, True):
        root = tmp_path / str(transient)
        s = MmapMessageStore(
            root, CONFIG, Profile.V4_9, ManualClock(5), transient_store_pool=transient
        )
        if batched:
            s.put_batch(MessageBatch.from_messages(msgs[:150]))
            s.put_batch(MessageBatch.from_messages(msgs[150:]))
        else:
            for k in range(0, 300, 7):
                s.put_messages(msgs[k : k + 7])
        # Pulls read the records back through the mapping, right after the writes.
        answers[transient] = [list(s.pull_through("G", "T", q, 0, 32)) for q in (0, 1)]
        s.close()
    assert answers[False] == answers[True]
    assert [150, 150] == [sum(r.message_count for r in rs) for rs in answers[True]]
    assert bytes([7 % 251]) * 150 == answers[True][1][0].messages[3].body
    assert _digest(tmp_path / "False") == _digest(tmp_path / "True")


def test_a_long_run_encoded_by_numba_equals_the_numpy_encoder(tmp_path: Path) -> None:
    from pullspec.fast import encode_kernels
    from pullspec.fast.batch import MessageBatch

    n = 5000
    batch = MessageBatch.from_messages(
        [
            BrokerInnerMessage(
                topic="T",
                queue_id=k % 3,
                body=b"%06d" % k * (k % 7),
                properties={"TAGS": "AB"[k % 2]},
            )
            for k in range(n)
        ]
    )
    for compiled in (True, False):
        s = MmapMessageStore(tmp_path / str(compiled), StoreConfig(), Profile.V4_9, ManualClock(5))
        with mock.patch.object(
            encode_kernels, "_compiled", encode_kernels._compiled if compiled else lambda: None
        ):
            s.put_batch(batch)
        s.close()
    assert _digest(tmp_path / "True") == _digest(tmp_path / "False")


@pytest.mark.usefixtures("background")
def test_the_file_being_appended_to_is_written_back_early(tmp_path: Path) -> None:
    flushed: list[str] = []

    def record(path: Path) -> None:
        flushed.append(path.name)

    s = MmapMessageStore(tmp_path, StoreConfig(), Profile.V4_9, ManualClock(5))
    with (
        mock.patch("pullspec.fast.commitlog._fdatasync", record),
        mock.patch("pullspec.fast.commitlog.FLUSH_EVERY", 1000),
    ):
        s.put_messages(_messages(10))  # about 2 KB into the first (1 GiB) file
        s.commit_log.drain()
    assert [s.commit_log.files[0].path.name] == sorted(set(flushed))  # type: ignore[union-attr]
    s.close()


@pytest.mark.parametrize(
    ("rel", "size", "expected"),
    [
        ([0, 60, 120, 180, 240], 300, [2, 4, 5]),  # cut before the records at 120 and 240
        ([0, 100, 200], 201, [1, 2, 3]),  # a record starting exactly at a mark starts a part
        ([0, 250], 260, [1, 2]),  # one record longer than a part is a part of its own
        ([0, 10, 20], 260, [3]),  # the last record spans both marks: nothing to cut before
        ([0, 60, 120], 199, [3]),  # under two parts' bytes: written whole
    ],
)
def test_commit_parts_cut_before_each_part_mark(
    rel: list[int], size: int, expected: list[int]
) -> None:
    import numpy as np

    from pullspec.fast.commitlog import CommitLog

    log = CommitLog(Path("unused"), 4096, RULES, read_only=False)
    log.transient = True
    with mock.patch("pullspec.fast.commitlog.COMMIT_PART", 100):
        assert expected == log.commit_parts(np.array(rel, dtype=np.int64), size)
        log.transient = False
        assert [len(rel)] == log.commit_parts(np.array(rel, dtype=np.int64), size)


def _parted_batch() -> Any:
    from pullspec.fast.batch import MessageBatch

    return MessageBatch.from_messages(
        [
            BrokerInnerMessage(
                topic="T", queue_id=k % 3, body=b"%05d" % k * (1 + k % 9), properties={}
            )
            for k in range(2000)
        ]
    )


def test_a_batch_committed_in_parts_writes_the_same_files(tmp_path: Path) -> None:
    batch = _parted_batch()
    cfg = StoreConfig(mapped_file_size_commit_log=64 << 10)
    parts: list[tuple[int, int, int]] = []
    real_part = pullspec.fast.commitlog.CommitLog.commit_part

    def spy(log: pullspec.fast.commitlog.CommitLog, phys: int, lo: int, hi: int) -> None:
        parts.append((phys, lo, hi))
        real_part(log, phys, lo, hi)

    answers = {}
    for transient in (False, True):
        root = tmp_path / str(transient)
        s = MmapMessageStore(
            root, cfg, Profile.V4_9, ManualClock(5), transient_store_pool=transient
        )
        with (
            mock.patch("pullspec.fast.commitlog.COMMIT_PART", 4096),
            mock.patch.object(pullspec.fast.commitlog.CommitLog, "commit_part", spy),
        ):
            s.put_batch(batch)
        answers[transient] = [list(s.pull_through("G", "T", q, 0, 32)) for q in (0, 1, 2)]
        s.close()
    assert answers[False] == answers[True]
    assert _digest(tmp_path / "False") == _digest(tmp_path / "True")
    # Only the transient store hands parts off: each of its files took several, each taking on
    # where the last ended.
    assert len({phys for phys, _, _ in parts}) > 3
    for (phys_a, _, hi_a), (phys_b, lo_b, _) in itertools.pairwise(parts):
        assert phys_a != phys_b or hi_a == lo_b


def _full_disk(calls: list[int], committer_only: bool) -> Any:
    """A pwrite that fails as a full disk would on the second of its `calls` (those of the
    committer thread only, when `committer_only`), the others passing to the real one."""
    real_pwrite = pullspec.fast.commitlog._pwrite

    def failing(fd: int, data: Any, pos: int) -> None:
        if not committer_only or threading.current_thread().name.startswith("pullspec-commit"):
            calls.append(pos)
            if len(calls) == 2:
                raise OSError(28, "No space left on device")
        real_pwrite(fd, data, pos)

    return mock.patch("pullspec.fast.commitlog._pwrite", failing)


def test_a_failed_part_is_raised_by_its_put(tmp_path: Path) -> None:
    calls: list[int] = []
    cfg = StoreConfig(mapped_file_size_commit_log=64 << 10)
    s = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(5), transient_store_pool=True)
    with (
        mock.patch("pullspec.fast.commitlog.COMMIT_PART", 4096),
        _full_disk(calls, committer_only=True),
        pytest.raises(OSError, match="No space"),
    ):
        s.put_batch(_parted_batch())
    assert not s.commit_log._parts  # every part was waited for: none still reads the buffer
    assert len(calls) >= 2
    s.close()


def _pulled(s: MmapMessageStore) -> list[list[tuple[int, int, bytes]]]:
    """Every queue's messages, as (queue offset, commit-log offset, body)."""
    return [
        [
            (m.queue_offset, m.commitlog_offset, m.body)
            for r in s.pull_through("G", "T", q, 0, 32)
            for m in r.messages
        ]
        for q in (0, 1, 2)
    ]


@pytest.mark.parametrize("how", ["put_batch", "put_messages", "put_message"])
def test_a_failed_write_stops_the_appends_until_reopened(tmp_path: Path, how: str) -> None:
    writes: list[int] = []  # the put under test fails on its second write
    cfg = StoreConfig(mapped_file_size_commit_log=64 << 10)
    s = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(5), transient_store_pool=True)
    s.put_messages(_messages(40))
    before, stored = s.get_max_phy_offset(), _pulled(s)
    batch = _parted_batch()
    with (
        mock.patch("pullspec.fast.commitlog.COMMIT_PART", 4096),
        _full_disk(writes, committer_only=False),
        pytest.raises(OSError, match="No space"),
    ):
        tried = batch.messages()
        if how == "put_batch":
            s.put_batch(batch)
        elif how == "put_messages":
            tried = tried[:100]
            s.put_messages(tried)  # message by message: one write per file
        else:
            # Its records go to the staging buffer only when they start a file: fill this one.
            for m in tried:
                s.put_message(m)
    assert isinstance(s.write_error, OSError)
    # Every later put is refused, by each path, and the store does not move.
    refused = PutMessageStatus.SERVICE_NOT_AVAILABLE
    published = s.get_max_phy_offset()
    assert refused == s.put_message(_messages(1)[0]).status
    assert [refused] * 2 == [r.status for r in s.put_messages(_messages(2))]
    assert [refused] * 40 == [r.status for r in s.put_messages(_messages(40))]
    assert [refused] * 3 == [
        r.status for r in s.put_batch(MessageBatch.from_messages(_messages(3)))
    ]
    assert published == s.get_max_phy_offset()
    # What was stored before the failed put is still read whole.
    assert stored == [q[: len(q0)] for q, q0 in zip(_pulled(s), stored, strict=True)]
    s.close()
    assert (tmp_path / "abort").exists()
    # Reopened, the files are recovered as after a crash: the messages before the failed put
    # are all there, the queues hold no hole, and the store takes messages again after them.
    again = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(6))
    assert again.recovery.abnormal
    assert again.write_error is None
    assert before <= again.get_max_phy_offset()
    reread = _pulled(again)
    assert stored == [q[: len(q0)] for q, q0 in zip(reread, stored, strict=True)]
    for queue_id, (q, q0) in enumerate(zip(reread, stored, strict=True)):
        assert list(range(len(q))) == [offset for offset, _, _ in q]
        # Beyond them, only records the failed put wrote whole: the first of its messages.
        kept = [body for _, _, body in q[len(q0) :]]
        assert [m.body for m in tried if m.queue_id == queue_id][: len(kept)] == kept
    result = again.put_message(BrokerInnerMessage(topic="T", queue_id=0, body=b"after"))
    assert PutMessageStatus.PUT_OK == result.status
    assert len(reread[0]) == result.queue_offset
    assert again.get_max_phy_offset() == result.wrote_offset + result.wrote_bytes
    again.close()
    assert not (tmp_path / "abort").exists()


def test_a_failed_entry_write_loses_no_message_of_its_put(tmp_path: Path) -> None:
    # The records are in the commit log, published, when a consume-queue write fails (a full
    # disk): the put raises, the store stops, and the reopened store rebuilds the entries, so
    # every message of the failed put is read back, each queue's offsets without a hole.
    real_write = pullspec.fast.consumequeue.ConsumeQueue._write
    writes: list[int] = []

    def failing(q: pullspec.fast.consumequeue.ConsumeQueue, pos: int, data: Any) -> None:
        writes.append(pos)
        if len(writes) == 2:
            raise OSError(28, "No space left on device")
        real_write(q, pos, data)

    cfg = StoreConfig(mapped_file_size_commit_log=64 << 10)
    s = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(5), transient_store_pool=True)
    s.put_messages(_messages(40))
    batch = _parted_batch()
    with (
        mock.patch.object(pullspec.fast.consumequeue.ConsumeQueue, "_write", failing),
        pytest.raises(OSError, match="No space"),
    ):
        s.put_batch(batch)
    assert isinstance(s.write_error, OSError)
    s.close()
    again = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(6))
    assert again.recovery.abnormal and again.recovery.rebuilt_entries > 0
    before = {q: [m.body for m in _messages(40) if m.queue_id == q] for q in (0, 1, 2)}
    for queue_id, q in enumerate(_pulled(again)):
        expected = before[queue_id] + [m.body for m in batch.messages() if m.queue_id == queue_id]
        assert expected == [body for _, _, body in q]
        assert list(range(len(q))) == [offset for offset, _, _ in q]
    again.close()
