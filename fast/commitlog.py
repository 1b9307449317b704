"""The commit log: fixed-size mapped files of v1 records, each completed file closed by an
end-of-file blank (LAYOUT-4, LAYOUT-7).

One writer at a time (the store's put lock) appends; readers run beside it without a lock: a
record is written before `end` (the max offset readers see) moves past it, new files are
appended to `files` in place (a file past `end` is not read), and expiry publishes a new list,
destroying the files it left out once no reader holds a list they are in (fast.retired). A
reader takes `end` first, then `files`, once per call, and holds that list while it reads."""

from __future__ import annotations

import contextlib
import mmap
import os
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pullspec.fast.gather import I64
from pullspec.fast.mapped import MappedFile, fdatasync_file, list_mapped_files
from pullspec.fast.retired import FileList, Retired
from pullspec.fast.spares import Spares
from pullspec.spec.errors import CorruptStoreError
from pullspec.spec.layout import (
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    commit_log_file_start,
    needs_end_of_file_blank,
)
from pullspec.spec.record import OFF_PHYSICAL_OFFSET, RecordRules
from pullspec.spec.store import commit_log_read_position, max_phy_offset

#: A commit log as one reader sees it: (max offset, files), from CommitLog.snapshot.
LogView = tuple[int, list[MappedFile]]

_BE_I32 = np.dtype(">i4")
_BE_I64 = np.dtype(">i8")


#: Bytes appended between two background write-backs of the file being appended to.
FLUSH_EVERY = 32 << 20
#: Files at least this large are flushed in the background when they fill.
BACKGROUND_FLUSH_MIN = 4 << 20
#: With `transient`, a region of at least twice this many bytes is written to its file in parts
#: of about this size by a committer thread while the writer encodes the next part, as
#: CommitRealTimeService commits the pool beside the writer: encoding (which holds no GIL) and
#: the kernel's copy into the page cache then take two cores instead of one after the other.
COMMIT_PART = 1 << 20


class CommitLog:
    """The commit-log files of one store, the write position of the last one, and the clock time
    each file was last written (what fileReservedTime measures from)."""

    def __init__(
        self, directory: Path, file_size: int, rules: RecordRules, read_only: bool
    ) -> None:
        self.directory = directory
        self._dir = os.fspath(directory)
        self.file_size = file_size
        #: The profile's end-of-file blank (LAYOUT-7).
        self.rules = rules
        self.read_only = read_only
        #: The files in order, as readers take them: appended to in place, replaced whole when
        #: files are removed (fast.retired).
        self.files: FileList[MappedFile] = FileList()
        #: The writer's position in the last file: reserved bytes, maybe not written yet.
        self.wrote = 0
        #: The max offset readers see (STORE-20): every byte before it is written. `publish`
        #: moves it once reserved records are written.
        self.end = 0
        self.last_modified: dict[int, int] = {}
        #: Preallocate each new file's blocks (RocketMQ's warmMapedFileEnable).
        self.warm = False
        #: Encode appends into a reused buffer and write them to the file with pwrite instead of
        #: through the mapping (RocketMQ's transientStorePoolEnable); reads still use the mapping.
        self.transient = False
        #: Where expired small files are kept for reuse (fast.spares); None deletes them.
        self.spares: Spares[MappedFile] | None = None
        #: On a RAM filesystem, where flushing protects nothing (fast.mapped.on_ram_filesystem).
        self.volatile = False
        self._staging = np.empty(0, dtype=np.uint8)
        self._fds: dict[int, int] = {}
        #: The directory, open for fsync after deletions (one open per log, not per round).
        self._dir_fd: int | None = None
        self._dir_fd_closer: weakref.finalize[Any, Any] | None = None
        # Files that filled are flushed in the background, as FlushCommitLogService does.
        self._flusher: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        # Parts of the region being encoded that the committer is writing (commit_part).
        self._committer: ThreadPoolExecutor | None = None
        self._parts: list[Future[None]] = []
        self._since_flush = 0
        self._retired = Retired[MappedFile]()

    # -- files -------------------------------------------------------------------------------

    def load(self) -> None:
        """Map every commit-log file on disk; CorruptStoreError for a wrong length or a gap."""
        for start, path in list_mapped_files(self.directory):
            if start % self.file_size != 0:
                raise CorruptStoreError(str(path), f"start {start} is not a multiple of the size")
            if self.files and start != self.files[-1].end:
                raise CorruptStoreError(str(path), "commit-log files are not contiguous")
            f = MappedFile.open(path, start, self.file_size, self.read_only)
            f.volatile = self.volatile
            self.files.append(f)
            self.last_modified[start] = path.stat().st_mtime_ns // 1_000_000
        self.wrote = self.file_size if self.files else 0
        self.publish()

    def close(self) -> None:
        """Finish the background flushes and unmap every file."""
        try:
            self.drain()
        finally:
            for executor in (self._flusher, self._committer):
                if executor is not None:
                    executor.shutdown(wait=True)
            self._flusher = self._committer = None
            for start in list(self._fds):
                self._close_fd(start)
            if self._dir_fd_closer is not None:
                self._dir_fd_closer()
                self._dir_fd = self._dir_fd_closer = None
            self._retired.close()
            for f in self.files:
                f.close()

    def flush_filled(self, f: MappedFile) -> None:
        """Start flushing a file that just filled — the log's own, or a consume queue's (the
        store hands them here) — in a background thread: appends go on into the next file
        meanwhile. `drain` waits for it (and raises what it raised)."""
        if f.file is None or f.read_only or f.volatile:
            return
        if f.size < BACKGROUND_FLUSH_MIN:
            f.flush(0, f.size)  # a hand-off to a thread costs more than this msync
            return
        if self._flusher is None:
            self._flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pullspec-flush")
        self._pending.append(self._flusher.submit(_fdatasync, Path(f.file)))

    def drain(self) -> None:
        """Wait until every file that filled is on disk."""
        pending, self._pending = self._pending, []
        for done in pending:
            done.result()

    def flush(self) -> None:
        """Make the commit log durable: the files that filled (flushed in the background since)
        and the written part of the last one; stamp the last one's mtime."""
        self.drain()
        if self.files:
            last = self.files[-1]
            last.flush(0, self.wrote)
            last.touch(self.last_modified.get(last.start, 0))

    def min_offset(self) -> int:
        """CommitLog.getMinOffset: the first file's start, or −1 without a file."""
        files = self.files
        return files[0].start if files else -1

    def max_offset(self) -> int:
        """STORE-20: the last file's start plus its written bytes, or 0 without a file (as
        published: records being written are not counted yet)."""
        return self.end

    def snapshot(self) -> tuple[int, list[MappedFile]]:
        """(max offset, files) as one reader sees them: every byte below the max offset lies in
        one of these files, which stay mapped while the reader holds the list."""
        end = self.end  # before the files: every file below it is in the list read after
        return end, self.files

    def publish(self) -> None:
        """Let readers see every reserved record (the writer calls it once they are written)."""
        files = self.files
        self.end = max_phy_offset(files[-1].start if files else None, self.wrote)

    def file_of(self, phys: int) -> MappedFile | None:
        """The file holding byte `phys`, or None."""
        files = self.files
        if not files or phys < files[0].start:
            return None
        i = (phys - files[0].start) // self.file_size
        return files[i] if i < len(files) else None

    def read_position(self, f: MappedFile, end: int | None = None) -> int:
        """How many bytes of `f` are readable below `end` (by default the published max
        offset): all of a completed file, the written part of the last."""
        written = (self.end if end is None else end) - f.start
        return written if written < self.file_size else self.file_size

    def record_at(
        self, phys: int, size: int, log_view: LogView | None = None
    ) -> tuple[MappedFile, int] | None:
        """(file, position) where the commit log serves the `size` bytes at `phys` when they are
        all readable (in `log_view`, by default the log as it is now), else None (STORE-21: the
        record's file was deleted or not written yet; at phys 0 once its file is deleted, the
        first remaining file's start serves instead)."""
        end, files = self.snapshot() if log_view is None else log_view
        if not files or size <= 0 or phys < 0:
            return None
        first, last = files[0].start, files[-1]
        at = commit_log_read_position(
            phys, size, self.file_size, first, last.start, self.read_position(last, end)
        )
        if at is None:
            return None
        f = files[(at - first) // self.file_size]
        return f, at - f.start

    def is_record_start(self, phys: int, log_view: LogView | None = None) -> int:
        """The TOTALSIZE of the message record starting exactly at `phys` (in `log_view`, by
        default the log as it is now), or 0 when none does (its PHYSICALOFFSET field names its
        own position)."""
        end, files = self.snapshot() if log_view is None else log_view
        if not files or phys < files[0].start:
            return 0
        i = (phys - files[0].start) // self.file_size
        if i >= len(files):
            return 0
        f = files[i]
        pos = phys - f.start
        readable = self.read_position(f, end)
        if pos + 36 > readable:
            return 0
        head = f.data[pos : pos + 36]
        size = int(head[0:4].view(_BE_I32)[0])
        magic = int(head[4:8].view(_BE_I32)[0])
        stamped = int(head[OFF_PHYSICAL_OFFSET : OFF_PHYSICAL_OFFSET + 8].view(_BE_I64)[0])
        if magic != MESSAGE_MAGIC_CODE or stamped != phys or size <= 0 or pos + size > readable:
            return 0
        return size

    # -- append ------------------------------------------------------------------------------

    def _new_file(self, now_ms: int) -> MappedFile:
        start = self.files[-1].end if self.files else 0
        f = MappedFile.create(self._dir, start, self.file_size, self.warm, self.spares)
        f.volatile = self.volatile
        self.files.append(f)  # in place: readers do not read past `end`, which is before it
        self.wrote = 0
        self.last_modified[start] = now_ms
        return f

    def reserve(self, length: int, now_ms: int) -> int:
        """The phys where a record of `length` bytes goes: at the write position, or — writing the
        end-of-file blank first when it does not fit with 8 bytes to spare (LAYOUT-7) — at the
        start of a new file. The caller then writes it with `write` and, once every record it
        reserved is written, calls `publish`."""
        if not self.files:
            self._new_file(now_ms)
        last = self.files[-1]
        if self.wrote >= self.file_size:
            self.flush_filled(last)
            last = self._new_file(now_ms)
        elif needs_end_of_file_blank(length, self.wrote, self.file_size):
            blank = self.rules.encode_blank(self.file_size - self.wrote)
            last.mm[self.wrote : self.wrote + len(blank)] = blank
            self.last_modified[last.start] = now_ms
            self.flush_filled(last)
            last.touch(now_ms)
            self.wrote = self.file_size
            last = self._new_file(now_ms)
        phys = last.start + self.wrote
        self.wrote += length
        self._since_flush += length
        if self._since_flush >= FLUSH_EVERY:
            self._flush_early(last)
        return phys

    def room(self, length: int) -> tuple[mmap.mmap, int, int] | None:
        """Where a record of `length` bytes goes when it fits the last file (with 8 bytes to
        spare for its end-of-file blank, LAYOUT-7): (that file's mapping, the write position in
        it, the record's phys), else None: `reserve` then places it. The writer encodes the
        record there, straight into the mapping (for a single record a pwrite costs more than
        the page faults it spares, even with `transient`), then calls `appended`."""
        files = self.files
        wrote = self.wrote
        if files and length + END_FILE_MIN_BLANK_LENGTH <= self.file_size - wrote:
            last = files[-1]
            return last.mm, wrote, last.start + wrote
        return None

    def appended(self, length: int, now_ms: int) -> None:
        """Publish the record of `length` bytes the writer encoded where `room` said: the write
        position and `end` move past it (every byte before `end` is written)."""
        start = self.files[-1].start
        stop = self.wrote + length
        self.wrote = stop
        self.last_modified[start] = now_ms
        self.end = start + stop
        self._since_flush += length
        if self._since_flush >= FLUSH_EVERY:
            self._flush_early(self.files[-1])

    def _flush_early(self, f: MappedFile) -> None:
        """Start writing back the file being appended to, as FlushRealTimeService does every
        interval, so that little is left to write when a flush must wait for the disk."""
        self._since_flush = 0
        if self.file_size < BACKGROUND_FLUSH_MIN or (
            self._pending and not self._pending[-1].done()
        ):
            return
        self.flush_filled(f)

    def runs(self, lengths: I64) -> list[tuple[int, int]]:
        """Split records of `lengths` (each > 0 and, with 8 bytes to spare, no longer than a
        file), appended in order from the write position, into runs [i, j) that each lie
        contiguously in one file: a run ends where the next record needs a new file (LAYOUT-7).
        Pure: `reserve` of each run's total length then places it exactly there."""
        ends = np.cumsum(lengths)
        size = self.file_size
        # Without a file the first record starts one, as when the last file is full.
        w = self.wrote if self.files else size
        out: list[tuple[int, int]] = []
        i, before = 0, 0
        while i < len(lengths):
            j = int(np.searchsorted(ends, size - END_FILE_MIN_BLANK_LENGTH - w + before, "right"))
            if j <= i:
                if w == 0:
                    raise CorruptStoreError(str(self.directory), "a record longer than a file")
                w = 0
                continue
            out.append((i, j))
            w += int(ends[j - 1]) - before
            before = int(ends[j - 1])
            i = j
        return out

    def region(self, phys: int, size: int, now_ms: int) -> tuple[npt.NDArray[np.uint8], int]:
        """Where to encode the reserved records [phys, phys + size): (buffer, position of phys in
        it) — the file's mapping itself, or with `transient` a staging buffer — stamping the
        file's write time as `write` does. `commit_region` then makes them part of the file."""
        f = self.file_of(phys)
        if f is None or phys + size > f.end:
            raise CorruptStoreError(str(self.directory), f"no reserved room at {phys}")
        self.last_modified[f.start] = now_ms
        if not self.transient or f.file is None:
            return f.data, phys - f.start
        if len(self._staging) < size:
            # Touched once here, so encoding into it never faults.
            self._staging = np.zeros(max(size, 2 * len(self._staging)), dtype=np.uint8)
            self._staging.fill(0)
        return self._staging, 0

    def commit_parts(self, rel: I64, size: int) -> list[int]:
        """Where to cut a region of `size` bytes, whose records start at `rel` (bytes from its
        start), into parts for `commit_part`: the index after each part's last record, the
        last one `len(rel)`; a part ends before the first record that starts at or after each
        multiple of COMMIT_PART. One part when the region is encoded into the mapping or is too
        small for a hand-off to the committer to pay (under 2 × COMMIT_PART bytes)."""
        n = len(rel)
        if not self.transient or size < 2 * COMMIT_PART:
            return [n]
        marks = np.arange(COMMIT_PART, size, COMMIT_PART, dtype=np.int64)
        cuts = np.unique(np.searchsorted(rel, marks, "left"))
        return [int(c) for c in cuts[cuts < n]] + [n]

    def commit_part(self, phys: int, lo: int, hi: int) -> None:
        """Start writing bytes [lo, hi) of the region encoded for the records at `phys` into the
        file, in the committer thread; the writer encodes the next part meanwhile, never into
        these bytes. `commit_region` (or, when encoding fails, `wait_parts`) waits for every
        part."""
        f = self.file_of(phys)
        if not self.transient or f is None or f.file is None:
            return
        if self._committer is None:
            self._committer = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="pullspec-commit"
            )
        # The descriptor is opened here, by the writer: the committer only writes.
        fd, part = self._fd(f), self._staging[lo:hi].data
        self._parts.append(self._committer.submit(_pwrite, fd, part, phys - f.start + lo))

    def wait_parts(self) -> BaseException | None:
        """Wait until no part handed to `commit_part` is being written (none then still reads
        the staging buffer); the first error of any, or None."""
        parts, self._parts = self._parts, []
        errors = [e for e in (p.exception() for p in parts) if e is not None]
        return errors[0] if errors else None

    def commit_region(self, phys: int, size: int, start: int = 0) -> None:
        """Write the records encoded by `region` into the file: bytes [start, size) here, beside
        the parts before `start` handed to `commit_part`, then wait for those (nothing to do
        for the mapping: they are already there). Raises the first error of any part."""
        try:
            f = self.file_of(phys)
            if self.transient and f is not None and f.file is not None and start < size:
                _pwrite(self._fd(f), self._staging[start:size].data, phys - f.start + start)
        finally:
            error = self.wait_parts()
        if error is not None:
            raise error

    def _fd(self, f: MappedFile) -> int:
        fd = self._fds.get(f.start)
        if fd is None:
            fd = self._fds[f.start] = os.open(f.file or "", os.O_WRONLY)
        return fd

    def _close_fd(self, start: int) -> None:
        fd = self._fds.pop(start, None)
        if fd is not None:
            os.close(fd)

    def write(self, phys: int, data: bytes | bytearray, now_ms: int) -> None:
        """Copy reserved records (contiguous, inside one file) into the mapping."""
        f = self.file_of(phys)
        if f is None or phys + len(data) > f.end:
            raise CorruptStoreError(str(self.directory), f"no reserved room at {phys}")
        pos = phys - f.start
        if self.transient and f.file is not None:
            _pwrite(self._fd(f), data, pos)
        else:
            f.mm[pos : pos + len(data)] = data
        self.last_modified[f.start] = now_ms

    def sync(self, lo_phys: int) -> None:
        """msync everything written from `lo_phys` to the write position."""
        self.drain()
        hi = self.max_offset()
        for f in self.files:
            if f.end > lo_phys and f.start < hi:
                f.flush(max(lo_phys - f.start, 0), min(hi - f.start, self.file_size))

    def truncate(self, end: int) -> None:
        """Make `end` the max offset: zero the bytes after it in its file (a later recovery must
        not take stale bytes for records) and delete the files after that one (recovery, while
        opening: no reader runs)."""
        self.drain()
        keep = FileList(f for f in self.files if f.start <= end)
        for f in self.files[len(keep) :]:
            self.last_modified.pop(f.start, None)
            self._close_fd(f.start)
            if self.read_only:
                f.close()
            else:
                f.destroy()
        self.files = keep
        if not keep:
            self.wrote = 0
            self.publish()
            return
        last = keep[-1]
        self.wrote = end - last.start
        self.publish()
        tail = last.data[self.wrote :]
        # Appends are sequential, so bytes written past the end start right at it.
        if not self.read_only and tail[:64].any():
            # Zero only up to the last written byte: untouched pages of a sparse file stay holes.
            stop = self.wrote + int(np.flatnonzero(tail)[-1]) + 1
            last.mm[self.wrote : stop] = bytes(stop - self.wrote)
            last.flush(self.wrote, stop)

    # -- expiry ------------------------------------------------------------------------------

    def delete_expired(self, now_ms: int, reserved_ms: int, batch_max: int) -> int:
        """MappedFileQueue.deleteExpiredFileByTime: delete files oldest first, never the last,
        at most `batch_max`, stopping at the first not yet expired (STORE-19)."""
        self.drain()
        self._retired.sweep()
        files = self.files
        deleted = 0
        while (
            len(files) - deleted > 1
            and deleted < batch_max
            and now_ms >= self.last_modified.get(files[deleted].start, 0) + reserved_ms
        ):
            deleted += 1
        if deleted:
            gone = files[:deleted]
            # A new list: a reader holding the old one may still read the files it names.
            self.files = FileList(files[deleted:])
            replaced = weakref.ref(files)
            del files  # the writer's own reference: the sweep must see only readers'
            for f in gone:
                self.last_modified.pop(f.start, None)
                self._close_fd(f.start)
            self._retired.add(replaced, gone)
        return deleted

    def sync_directory(self) -> None:
        """fsync the log's directory so that deleted and created file names are durable."""
        if self.volatile:
            return
        if self._dir_fd is None:
            try:
                fd = os.open(self._dir, os.O_RDONLY)
            except OSError:
                return
            self._dir_fd = fd
            # Closed by close(), or with the log when its store is dropped unclosed.
            self._dir_fd_closer = weakref.finalize(self, os.close, fd)
        os.fsync(self._dir_fd)

    def set_last_modified(self, file_start: int, ms: int) -> bool:
        """Set a file's last-write time (as touching it on disk would); False if no such file."""
        for f in self.files:
            if f.start == file_start:
                self.last_modified[file_start] = ms
                f.touch(ms)
                return True
        return False

    def starts(self) -> Sequence[int]:
        """The start offsets of the files, in order."""
        return [f.start for f in self.files]


def file_start(phys: int, file_size: int) -> int:
    """LAYOUT-4: the start of the commit-log file holding `phys`."""
    return commit_log_file_start(phys, file_size)


def _pwrite(fd: int, data: memoryview | bytes | bytearray, pos: int) -> None:
    done = 0
    view = memoryview(data).cast("B")
    while done < len(view):  # pwrite may write less than asked
        done += os.pwrite(fd, view[done:], pos + done)


def _fdatasync(path: Path) -> None:
    # The background flusher's call, by a name tests can replace. A file removed before its
    # turn (an expired consume-queue file, or one kept as a spare under another name) has
    # nothing left to make durable.
    with contextlib.suppress(FileNotFoundError):
        fdatasync_file(path)
