"""A consume queue: mapped files of 20-byte big-endian entries (LAYOUT-1, LAYOUT-2), the queue's
min logic offset, and the vectorized reads get_message needs.

Readers run beside the one writer (the store's put lock serialises appends and expiry) without a
lock of their own: entries are written before `end` moves past them, a reader reads `end` before
the files, and the files are published as one `Layout` that appends extend in place and expiry
replaces whole (fast.retired destroys the files it left out once no reader holds a Layout that
names them).
"""

from __future__ import annotations

import os
import struct
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import attrs
import numpy as np
import numpy.typing as npt

from pullspec.fast.cq_entries import (
    BLOCK,
    CQ_DTYPE,
    ENTRY,
    I64,
    PHYS,
    Block,
    BlockCache,
    address_of,
    pack_entries,
)
from pullspec.fast.mapped import MappedFile, list_mapped_files
from pullspec.fast.retired import Retired
from pullspec.fast.spares import Spares
from pullspec.spec.errors import CorruptStoreError
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE, PRE_BLANK_ENTRY, pre_blank_entries
from pullspec.spec.store import expired_consume_queue_files, queue_min_max_offsets

__all__ = ["BLOCK", "Block", "ConsumeQueue", "Layout", "Window"]

#: Written entries of a first file up to which correct_min_offset reads them one by one.
_FEW = 64
#: ENTRY.pack_into, bound once: Python 3.11 reads a method of a C object (in a `try`, where it
#: does not use its method-call form) through its generic path, making a bound method per put.
_pack_entry_into = ENTRY.pack_into


@attrs.frozen(eq=False, weakref_slot=True)
class Layout:
    """A queue's files as readers see them: each file, its entries view (which keeps the mapping
    alive while a reader holds it), the address of its first byte (for compiled loops,
    fast.numba_read) and `numbers`, each file's number by its start byte. Appending a file
    extends these in place; removing files publishes a new Layout, so a reader's numbers stay
    valid for the Layout it took, and the files it names stay mapped while anything holds it:
    expiry retires them with a weak reference to it (fast.retired)."""

    files: list[MappedFile]
    views: list[npt.NDArray[np.void]]
    addresses: list[int]
    numbers: dict[int, int]


def _empty_layout() -> Layout:
    return Layout([], [], [], {})


class Window(NamedTuple):
    """Where a pull's scan reads: the entries of one file (`view`, starting at queue byte
    `start`), from entry `first` to `end`, the file's readable entries."""

    view: npt.NDArray[np.void]
    start: int
    first: int
    end: int


class ConsumeQueue(BlockCache):
    """The files of consumequeue/<topic>/<queueId>/ and the queue's offsets."""

    def __init__(
        self,
        directory: str | Path,
        topic: str,
        queue_id: int,
        file_size: int,
        read_only: bool,
        commit_log_file_size: int = 1 << 30,
    ) -> None:
        self._dir = os.fspath(directory)
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.units = file_size // CQ_STORE_UNIT_SIZE
        self.read_only = read_only
        self.commit_log_file_size = commit_log_file_size
        self._set_layout(_empty_layout())
        #: The writer's position in the last file (appends only; readers use `end`).
        self.wrote = 0
        #: The queue byte every entry before which is written: what readers may read. Moved
        #: only after the entries are written.
        self.end = 0
        self.min_logic_offset = 0
        #: phys + size of the last entry, −1 when empty (ConsumeQueue.maxPhysicOffset).
        self.max_physic_offset = -1
        self._blocks: dict[tuple[int, int], tuple[int, Block]] = {}
        #: True when the last file was found shorter than the configured size and padded.
        self.repaired = False
        #: Append with pwrite instead of through the mapping (the store's transient_store_pool).
        self.transient = False
        #: How a file that filled is flushed: at once, or in the store's background flusher
        #: (fast.commitlog.CommitLog.flush_filled, whose `drain` the store's flush waits for).
        self.flush_filled: Callable[[MappedFile], None] = MappedFile.flush
        self._fd: tuple[int, int] | None = None
        #: Where expired files are kept for reuse (fast.spares); None deletes them.
        self.spares: Spares[MappedFile] | None = None
        #: On a RAM filesystem, where flushing protects nothing (fast.mapped.on_ram_filesystem).
        self.volatile = False
        self._retired = Retired[MappedFile]()

    @property
    def directory(self) -> Path:
        """consumequeue/<topic>/<queueId>/."""
        return Path(self._dir)

    def _set_layout(self, lay: Layout) -> None:
        """Publish `lay`. `files`, `views` and `addresses` name its lists too, for the writer
        and single-threaded callers (attributes cost less than properties on the put path); a
        reader beside the writer takes `layout` once instead."""
        self.layout = lay
        self.files: list[MappedFile] = lay.files
        self.views: list[npt.NDArray[np.void]] = lay.views
        self.addresses: list[int] = lay.addresses

    # -- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        """Map the queue's files. A non-last file of the wrong length is a CorruptStoreError;
        a last file cut short (a torn extension) is padded with zeros — on disk when writable, in
        a private copy when read-only — and its missing entries rebuilt by recovery."""
        found = list_mapped_files(self.directory)
        for n, (start, path) in enumerate(found):
            if start % self.file_size != 0:
                raise CorruptStoreError(str(path), f"start {start} is not a multiple of the size")
            length = path.stat().st_size
            if length != self.file_size and n == len(found) - 1 and length < self.file_size:
                self.repaired = True
                whole = length - length % CQ_STORE_UNIT_SIZE
                if self.read_only:
                    with path.open("rb") as fh:
                        content = fh.read(whole)
                    self._append_file(MappedFile.anonymous(start, self.file_size, content))
                    continue
                os.truncate(path, whole)
                os.truncate(path, self.file_size)
            self._append_file(
                MappedFile.open(path, start, self.file_size, self.read_only, private=True)
            )
        self._set_wrote(self.file_size if self.files else 0)

    def _append_file(self, f: MappedFile) -> None:
        f.volatile = self.volatile
        lay = self.layout
        # The view and address first: a reader finds a file by its number in `index`.
        lay.files.append(f)
        lay.views.append(np.frombuffer(f.mm, dtype=CQ_DTYPE))
        lay.addresses.append(address_of(f))
        lay.numbers[f.start] = len(lay.files) - 1

    def _set_wrote(self, wrote: int) -> None:
        """Set the writer's position in the last file and publish it as `end`."""
        self.wrote = wrote
        files = self.layout.files
        self.end = files[-1].start + wrote if files else 0

    def recover(self) -> None:
        """ConsumeQueue.recover: from the third-last file on, the written part of each file ends
        at its first entry with phys < 0 or size ≤ 0; files after that point are dropped."""
        if not self.files:
            return
        first = max(len(self.files) - 3, 0)
        end = self.files[first].start
        for i in range(first, len(self.files)):
            view = self.views[i]
            bad = (view["phys"] < 0) | (view["size"] <= 0)
            k = int(np.argmax(bad)) if bad.any() else self.units
            end = self.files[i].start + k * CQ_STORE_UNIT_SIZE
            if k < self.units:
                break
        self._truncate_files(end)
        self._refresh_max_physic()

    def _refresh_max_physic(self) -> None:
        if not self.files or self.wrote == 0:
            self.max_physic_offset = -1
            return
        last = self.views[-1][self.wrote // CQ_STORE_UNIT_SIZE - 1]
        self.max_physic_offset = int(last["phys"]) + int(last["size"])

    def _truncate_files(self, end: int) -> None:
        """MappedFileQueue.truncateDirtyFiles: `end` (a byte offset in the queue) becomes the
        written end; later files go, and the bytes after `end` are zeroed when writable. Only
        while opening: no reader runs."""
        while self.files and self.files[-1].start > end:
            self._drop_last()
        if not self.files:
            self._set_wrote(0)
            return
        last = self.files[-1]
        self._forget(last.start)
        self._set_wrote(min(end - last.start, self.file_size))
        if not self.read_only and self.wrote < self.file_size:
            tail = last.data[self.wrote :]
            if tail[:CQ_STORE_UNIT_SIZE].any():
                stop = self.wrote + int(np.flatnonzero(tail)[-1]) + 1
                last.mm[self.wrote : stop] = bytes(stop - self.wrote)

    def _drop_last(self) -> None:
        """Remove the last file (only while opening: no reader runs)."""
        self._close_fd()
        lay = self.layout
        f = lay.files.pop()
        self._forget(f.start)
        lay.views.pop()
        lay.addresses.pop()
        lay.numbers.pop(f.start, None)
        if self.read_only or f.file is None:
            f.close()
        else:
            f.destroy()

    def close(self) -> None:
        """Unmap every file (no reader may run)."""
        self._close_fd()
        files = self.layout.files
        self._set_layout(_empty_layout())
        self._retired.close()
        for f in files:
            f.close()

    def flush(self) -> None:
        """msync the written part of the last file."""
        if self.files:
            self.files[-1].flush(0, self.wrote)

    # -- offsets -----------------------------------------------------------------------------

    def min_max(self) -> tuple[int, int]:
        """STORE-4: (min offset, max offset) as indices."""
        end = self.end
        if not self.layout.files:
            return queue_min_max_offsets(self.min_logic_offset, None, 0)
        # The file holding `end` (a file is appended before entries are written into it).
        written = end % self.file_size
        return queue_min_max_offsets(self.min_logic_offset, end - written, written)

    def min_offset(self) -> int:
        """STORE-4's min offset alone: min_max()[0] without building the pair."""
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def max_offset(self) -> int:
        """STORE-4's max offset alone: min_max()[1] without building the pair."""
        return self.end // CQ_STORE_UNIT_SIZE

    def readable(self, i: int, lay: Layout | None = None) -> int:
        """The written bytes of file number `i` (of `lay`, by default the current Layout): all
        of a completed file."""
        files = (self.layout if lay is None else lay).files
        return min(max(self.end - files[i].start, 0), self.file_size)

    def entry(self, index: int) -> tuple[int, int, int] | None:
        """(phys, size, tags code) of the written entry at `index`, whatever the min offset, or
        None when no file holds it written."""
        pos = index * CQ_STORE_UNIT_SIZE
        end = self.end
        lay = self.layout
        i = lay.numbers.get(pos - pos % self.file_size) if pos >= 0 else None
        if i is None or pos >= end:
            return None
        e = lay.views[i][(pos - lay.files[i].start) // CQ_STORE_UNIT_SIZE]
        return int(e["phys"]), int(e["size"]), int(e["tags"])

    # -- append ------------------------------------------------------------------------------

    def append(self, first_index: int, phys: I64, size: I64, tags: I64) -> None:
        """Write entries for indices first_index, first_index + 1, …: the first file created for
        a first index ≠ 0 gets LAYOUT-3 pre-blank entries before it; an index below max is
        already present and skipped (ConsumeQueue.putMessagePositionInfo)."""
        n = len(phys)
        skip = self._skipped(first_index, n)
        if skip == n:
            return
        entries = pack_entries(phys[skip:], size[skip:], tags[skip:])
        self._fill(entries.view(np.uint8).data)
        self.max_physic_offset = int(phys[-1]) + int(size[-1])

    def append_entries(self, first_index: int, entries: Sequence[tuple[int, int, int]]) -> None:
        """`append` for a few entries given as (phys, size, tags code) tuples: packed one by one,
        which for a handful costs less than numpy's per-array overheads."""
        try:
            packed = [ENTRY.pack(*e) for e in entries]
        except struct.error:  # out of range: numpy's conversion raises as `append` always did
            table = np.array(entries, dtype=np.int64)
            self.append(first_index, table[:, 0], table[:, 1], table[:, 2])
            return
        n = len(entries)
        skip = self._skipped(first_index, n)
        if skip == n:
            return
        self._fill(b"".join(packed[skip:]))
        phys, size, _ = entries[-1]
        self.max_physic_offset = phys + size

    def append_one(self, index: int, phys: int, size: int, tags_code: int) -> None:
        """`append` of one entry, for put_message: packed straight into the mapping at the write
        position when it is the next entry of the last file (a pwrite per 20-byte entry costs
        more than the page fault per 204 entries it would spare), else by `append_entries`."""
        files = self.files
        wrote = self.wrote
        unit = CQ_STORE_UNIT_SIZE
        if files and wrote + unit <= self.file_size and files[-1].start + wrote == index * unit:
            try:
                _pack_entry_into(files[-1].mm, wrote, phys, size, tags_code)
            except struct.error:  # out of range: undo a partial entry; append_entries raises
                files[-1].mm[wrote : wrote + unit] = bytes(unit)
                self.append_entries(index, ((phys, size, tags_code),))
                return
            if self._blocks:
                w = wrote // unit
                self._refresh_blocks(files[-1].start, w, w + 1)
            self.wrote = wrote + unit
            self.end += unit
            self.max_physic_offset = phys + size
            return
        self.append_entries(index, ((phys, size, tags_code),))

    def _skipped(self, first_index: int, n: int) -> int:
        """How many of `n` entries from `first_index` are already present; when none are and
        the queue has no file, its first file is created (with LAYOUT-3 pre-blanks)."""
        if n == 0:
            return 0
        if self.files:
            max_offset = (self.files[-1].start + self.wrote) // CQ_STORE_UNIT_SIZE
            return min(max_offset - first_index, n) if first_index < max_offset else 0
        self._create((first_index - first_index % self.units) * CQ_STORE_UNIT_SIZE)
        blanks = pre_blank_entries(first_index, self.units)
        if first_index != 0:
            self.views[-1][:blanks] = np.array([PRE_BLANK_ENTRY] * blanks, dtype=CQ_DTYPE)
            # The min before `end`: a reader never sees the pre-blanks as entries.
            self.min_logic_offset = first_index * CQ_STORE_UNIT_SIZE
            self._set_wrote(blanks * CQ_STORE_UNIT_SIZE)
        return 0

    def _fill(self, data: bytes | memoryview) -> None:
        """Write packed entries at the write position, creating files as they fill; `end`
        moves past each part once it is written."""
        done, n = 0, len(data)
        while done < n:
            if self.wrote == self.file_size:
                self._create(self.files[-1].start + self.file_size)
            k = min(n - done, self.file_size - self.wrote)
            self._write(self.wrote, data[done : done + k])
            if self._blocks:
                w = self.wrote // CQ_STORE_UNIT_SIZE
                self._refresh_blocks(self.files[-1].start, w, w + k // CQ_STORE_UNIT_SIZE)
            self.wrote += k
            self.end += k
            done += k

    def _write(self, pos: int, data: bytes | memoryview) -> None:
        """Store packed entries at byte `pos` of the last file: through the mapping, or with
        `transient` by pwrite (no page fault per page; the mapping sees the same bytes)."""
        last = self.files[-1]
        if not self.transient or last.file is None:
            last.mm[pos : pos + len(data)] = data
            return
        if self._fd is None or self._fd[0] != last.start:
            self._close_fd()
            self._fd = (last.start, os.open(last.file, os.O_WRONLY))
        done = 0
        while done < len(data):  # pwrite may write less than asked
            done += os.pwrite(self._fd[1], data[done:], pos + done)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd[1])
            self._fd = None

    def _create(self, start: int) -> None:
        if self.files:
            self.flush_filled(self.files[-1])
        f = (
            MappedFile.anonymous(start, self.file_size)
            if self.read_only
            # The store never reads a queue file's modification time back.
            else MappedFile.create(
                self._dir, start, self.file_size, spares=self.spares, stamp=False
            )
        )
        self._append_file(f)
        self.wrote = 0  # `end` stays at the previous file's end until entries are written

    # -- expiry and recovery -----------------------------------------------------------------

    def delete_expired(self, commit_log_min: int) -> int:
        """ConsumeQueue.deleteExpiredFile: drop leading files whose last entry points below the
        commit-log min (never the last file), then correct the min offset (STORE-19)."""
        self._retired.sweep()
        at = (self.units - 1) * CQ_STORE_UNIT_SIZE
        lay = self.layout
        last_phys = [PHYS.unpack_from(f.mm, at)[0] for f in lay.files]
        drop = expired_consume_queue_files(last_phys, commit_log_min)
        if drop:
            gone = lay.files[:drop]
            files = lay.files[drop:]
            # The min first: a reader that sees the new Layout never asks for a dropped file.
            self.correct_min_offset(commit_log_min, files[0], lay.views[drop])
            self._set_layout(
                Layout(
                    files,
                    lay.views[drop:],
                    lay.addresses[drop:],
                    {f.start: i for i, f in enumerate(files)},
                )
            )
            replaced = weakref.ref(lay)
            del lay, files  # the writer's own references: the sweep must see only readers'
            for f in gone:
                self._forget(f.start)
            self._retired.add(replaced, gone)
        else:
            self.correct_min_offset(commit_log_min)
        return drop

    def correct_min_offset(
        self,
        commit_log_min: int,
        first: MappedFile | None = None,
        view: npt.NDArray[np.void] | None = None,
    ) -> None:
        """ConsumeQueue.correctMinOffset: min := the first entry of the first file (`first`
        with its entries `view`, by default the current first) whose phys is at least the
        commit-log min; unchanged when none is."""
        if first is None or view is None:
            lay = self.layout
            if not lay.files:
                return
            first, view = lay.files[0], lay.views[0]
        n = min(max(self.end - first.start, 0), self.file_size) // CQ_STORE_UNIT_SIZE
        if n <= _FEW:
            mm = first.mm
            for k in range(n):
                if PHYS.unpack_from(mm, k * CQ_STORE_UNIT_SIZE)[0] >= commit_log_min:
                    self.min_logic_offset = first.start + k * CQ_STORE_UNIT_SIZE
                    return
            return
        phys = view["phys"][:n]
        hits = np.flatnonzero(phys >= commit_log_min)
        if len(hits):
            self.min_logic_offset = first.start + int(hits[0]) * CQ_STORE_UNIT_SIZE

    def truncate_dirty(self, phys_end: int) -> None:
        """ConsumeQueue.truncateDirtyLogicFiles: remove the trailing entries that point at or
        beyond `phys_end`, the commit log's recovered end (only while opening)."""
        while self.files:
            n = self.wrote // CQ_STORE_UNIT_SIZE
            phys = self.views[-1]["phys"][:n]
            beyond = np.flatnonzero(phys >= phys_end)
            if len(beyond) == 0:
                break
            k = int(beyond[0])
            if k > 0:
                self._truncate_files(self.files[-1].start + k * CQ_STORE_UNIT_SIZE)
                break
            self._drop_last()
            self._set_wrote(self.file_size if self.files else 0)
        self._refresh_max_physic()
