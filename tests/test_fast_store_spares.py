"""Spare files (pullspec.fast.spares) and the temporary store's shortcuts: expired small files become the
next files without changing a byte of what the store's directories hold, a file still viewed by
a result is never reused, and what a crash leaves is cleaned up."""

from __future__ import annotations

import hashlib
import mmap
import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import pullspec.fast.factories
import pullspec.fast.spares
from pullspec.fast.mapped import MappedFile
from pullspec.fast.spares import SPARES_DIR, Spares
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile

CFG = StoreConfig(
    mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
)


def _messages(n: int, start: int = 0) -> list[BrokerInnerMessage]:
    return [
        BrokerInnerMessage(
            topic="T", queue_id=k % 2, body=bytes([k % 251]) * (50 + k % 90), properties={}
        )
        for k in range(start, start + n)
    ]


def _store_files(root: Path) -> dict[str, bytes]:
    """Every file under the store's own directories, by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for sub in ("commitlog", "consumequeue")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file()
    }


def _run(root: Path, keep: bool) -> list[Any]:
    seen: list[Any] = []
    with (
        mock.patch.object(Spares, "keep", Spares.keep if keep else (lambda self, f: False)),
        MmapMessageStore(root, CFG, Profile.V4_9, ManualClock(1_000)) as store,
    ):
        for k in range(12):
            seen.append(store.put_messages(_messages(3, 3 * k)))
            seen.append(store.delete_expired_files())
            names = {p.name for p in (root / "commitlog").iterdir()}
            assert all(len(n) == 20 and n.isdigit() for n in names)
            seen.append(_store_files(root))
            seen.append([store.get_message("G", "T", q, 0, 32).msg_offsets for q in (0, 1)])
        if keep:
            assert any((root / SPARES_DIR).iterdir())
    assert not (root / SPARES_DIR).exists()
    return seen


def test_spares_change_nothing_the_store_shows(tmp_path: Path) -> None:
    assert _run(tmp_path / "spares", keep=True) == _run(tmp_path / "plain", keep=False)
    digests = [
        hashlib.sha256(repr(sorted(_store_files(tmp_path / d).items())).encode()).hexdigest()
        for d in ("spares", "plain")
    ]
    assert digests[0] == digests[1]


def test_a_file_viewed_by_a_result_is_not_reused(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1_000))
    store.put_messages(_messages(30))
    # The records decode lazily from the mapping, through a lease the file counts.
    old = store.get_message("G", "T", 0, 0, 2).messages
    expected = [m.body for m in store.get_message("G", "T", 0, 0, 2).messages]
    decisions: list[tuple[int, int, bool]] = []
    real_keep = Spares.keep

    def keep(self: Spares[MappedFile], f: MappedFile) -> bool:
        kept = real_keep(self, f)
        decisions.append((f.size, f.start, kept))
        return kept

    with mock.patch.object(Spares, "keep", keep):
        assert store.delete_expired_files() > 0
        store.put_messages(_messages(20, 100))
    assert (1024, 0, False) in decisions  # the file the result reads from
    assert any(kept for size, _, kept in decisions if size == 1024)
    assert [m.body for m in old] == expected
    store.close()


def test_a_lent_file_is_kept_only_once_every_lease_is_given_back(tmp_path: Path) -> None:
    spares = Spares[MappedFile](str(tmp_path))
    f = MappedFile.create(str(tmp_path / "a"), 0, 64, spares=spares)
    lease, other = f.lend(), f.lend()
    assert 2 == f.lent
    del other  # collected: given back
    assert 1 == f.lent
    assert not spares.keep(f)
    lease.release()
    lease.release()  # once only
    assert 0 == f.lent
    assert spares.keep(f)
    spares.close()


def test_taken_spares_are_zero_new_and_in_the_right_place(tmp_path: Path) -> None:
    spares = Spares[MappedFile](str(tmp_path))
    f = MappedFile.create(str(tmp_path / "a"), 0, 64, spares=spares)
    f.mm[:8] = b"\xff" * 8
    os.utime(f.file or "", ns=(5, 5))
    f.destroy()
    assert (
        not (tmp_path / "a" / f"{0:020d}").exists()
        and len(list((tmp_path / SPARES_DIR).iterdir())) == 1
    )
    g = MappedFile.create(str(tmp_path / "b" / "c"), 128, 64, spares=spares)
    assert g is f and g.start == 128 and g.path == tmp_path / "b" / "c" / f"{128:020d}"
    assert g.path.read_bytes() == bytes(64) and bytes(g.mm) == bytes(64)
    assert g.path.stat().st_mtime_ns > 5
    assert MappedFile.create(str(tmp_path / "b" / "c"), 192, 64, spares=spares) is not f
    assert MappedFile.create(str(tmp_path / "b"), 0, 128, spares=spares).size == 128
    spares.close()
    assert not (tmp_path / SPARES_DIR).exists()


def test_large_or_extra_files_are_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pullspec.fast.spares, "SPARES_PER_SIZE", 1)
    spares = Spares[MappedFile](str(tmp_path))
    big = MappedFile.create(
        str(tmp_path), 0, pullspec.fast.spares.SPARE_MAX_SIZE + 4096, spares=spares
    )
    first, second = (MappedFile.create(str(tmp_path), k * 64, 64, spares=spares) for k in (1, 2))
    for f in (big, first, second):
        f.destroy()
    assert sorted(p.name for p in tmp_path.iterdir()) == [SPARES_DIR]
    assert len(list((tmp_path / SPARES_DIR).iterdir())) == 1
    spares.close()


def test_what_a_crash_left_is_removed_at_open(tmp_path: Path) -> None:
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1_000)) as store:
        store.put_messages(_messages(10))
    (tmp_path / SPARES_DIR).mkdir()
    (tmp_path / SPARES_DIR / "3").write_bytes(b"x" * 1024)
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1_000)) as store:
        assert not (tmp_path / SPARES_DIR).exists()
        assert store.get_max_offset_in_queue("T", 0) == 5
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1_000), read_only=True):
        pass


def test_the_temporary_store_starts_empty_and_leaves_nothing(tmp_path: Path) -> None:
    with mock.patch("tempfile.tempdir", str(tmp_path)):
        store = pullspec.fast.factories.message_store(CFG, Profile.V4_9, ManualClock(1_000))
    root = store.store_dir
    assert sorted(p.name for p in root.iterdir()) == ["abort", "checkpoint"]
    assert (root / "checkpoint").stat().st_size == 4096
    store.put_messages(_messages(40))
    store.delete_expired_files()
    del store
    assert not root.exists()


def test_remove_tree_removes_links_not_their_targets(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "kept").write_text("x")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("y")
    (tree / "link").symlink_to(target)
    pullspec.fast.factories.remove_tree(str(tree))
    assert not tree.exists() and (target / "kept").exists()
    pullspec.fast.factories.remove_tree(str(tree))  # already gone


def test_the_directory_is_synced_through_one_descriptor(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1_000))
    opened: list[Any] = []
    real_open = os.open

    def spy(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(path)
        return real_open(path, *args, **kwargs)

    with mock.patch("os.open", spy):
        for k in range(6):
            store.put_messages(_messages(6, 6 * k))
            store.delete_expired_files()
    assert opened.count(str(tmp_path / "commitlog")) == 1
    fd = store.commit_log._dir_fd
    assert fd is not None
    store.close()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_ram_filesystems_are_told_apart(tmp_path: Path) -> None:
    from pullspec.fast.mapped import on_ram_filesystem

    if Path("/dev/shm").is_dir():
        assert on_ram_filesystem("/dev/shm")
    assert not on_ram_filesystem(str(tmp_path / "missing"))
    assert not on_ram_filesystem("/proc")


class _NoSync(mmap.mmap):
    """A mapping that fails the test if it is msynced."""

    def flush(self, *args: Any) -> None:
        raise AssertionError("msync on a RAM filesystem")


def test_files_on_a_ram_filesystem_are_not_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pullspec.fast.store

    monkeypatch.setattr(pullspec.fast.store, "on_ram_filesystem", lambda path: True)
    monkeypatch.setattr(mmap, "mmap", _NoSync)
    synced: list[Any] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1_000), flush="sync") as store:
        assert store.commit_log.volatile and store.checkpoint.volatile
        for k in range(4):
            store.put_messages(_messages(20, 20 * k))
            store.delete_expired_files()
        files = [*store.commit_log.files, *store.queues[("T", 0)].files]
        assert files and all(f.volatile and type(f.mm) is _NoSync for f in files)
        store.flush()
    assert synced == []
    monkeypatch.undo()
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1_000)) as reopened:
        assert reopened.get_max_offset_in_queue("T", 0) == 40


def test_only_log_spares_get_a_new_modification_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spares = Spares[MappedFile](str(tmp_path))
    stamped: list[Any] = []
    real_utime = os.utime
    for stamp in (False, True):
        f = MappedFile.create(str(tmp_path / "q"), 0, 64, spares=spares)
        f.destroy()
        monkeypatch.setattr(os, "utime", lambda path, *a, **k: stamped.append(path))
        g = MappedFile.create(str(tmp_path / "q"), 64, 64, spares=spares, stamp=stamp)
        monkeypatch.setattr(os, "utime", real_utime)
        assert g is f and len(stamped) == int(stamp)
        g.spares = None
        g.destroy()
    spares.close()
