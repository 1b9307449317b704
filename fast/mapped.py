"""Fixed-size memory-mapped files, the unit both the commit log and the consume queues are made of
(RocketMQ's MappedFile): created at full size, named by their 20-digit start offset."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import mmap
import os
import struct
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pullspec.fast.spares import Spares
from pullspec.spec.errors import CorruptStoreError

PAGE = mmap.PAGESIZE
#: What `data` becomes once a file is closed (shared: nothing writes to it).
_CLOSED = np.empty(0, dtype=np.uint8)
_CLOSED.flags.writeable = False
_CREATE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_TRUNC


#: statfs f_type of the RAM filesystems: tmpfs, ramfs.
_RAM_FILESYSTEMS = frozenset((0x01021994, 0x858458F6))


def on_ram_filesystem(path: str) -> bool:
    """Whether `path` lies on a RAM filesystem (tmpfs, ramfs: /dev/shm, where campaigns keep
    their stores). There msync and fsync protect nothing: what they guard against (a kernel
    crash, a power loss) loses the whole filesystem, while a process crash loses nothing, the
    written pages being the page cache itself. False when it cannot be told."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        statfs = _libc().statfs
        buf = ctypes.create_string_buffer(256)  # struct statfs, f_type first
        if statfs(os.fsencode(path), buf) != 0:
            return False
        return struct.unpack_from("l", buf.raw)[0] & 0xFFFFFFFF in _RAM_FILESYSTEMS
    except (OSError, AttributeError):
        return False


def fdatasync_file(path: Path) -> None:
    """Write a file's dirty pages (those written through a mapping included) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: str | Path) -> None:
    """fsync a directory so created and deleted file names are durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True))
    return _LIBC[0]


def parse_file_name(name: str) -> int | None:
    """The start offset a 20-digit file name stands for, or None for any other name."""
    if len(name) == 20 and name.isdigit():
        return int(name)
    return None


def list_mapped_files(directory: Path) -> list[tuple[int, Path]]:
    """(start offset, path) of every 20-digit file in `directory`, in offset order."""
    if not directory.is_dir():
        return []
    out = []
    for entry in directory.iterdir():
        start = parse_file_name(entry.name)
        if start is not None and entry.is_file():
            out.append((start, entry))
    out.sort()
    return out


class FileLease:
    """A view of a mapped file's bytes handed out beyond the call that read it (a result's
    records decode from it later), counted by the file until the lease is released or
    collected: while any is out, the file is not kept for reuse (fast.spares), and when it is
    deleted its mapping lives on for the lease.

    >>> f = MappedFile.anonymous(0, 4096, b"hi")
    >>> lease = f.lend()
    >>> bytes(lease.data[:2]), f.lent
    (b'hi', 1)
    >>> lease.release()
    >>> f.lent
    0
    """

    __slots__ = ("_count", "data")

    def __init__(self, data: npt.NDArray[np.uint8], count: list[None]) -> None:
        #: The file's bytes (the view pins the mapping).
        self.data = data
        self._count: list[None] | None = count
        count.append(None)  # atomic under the GIL, as the pop in `release`

    def release(self) -> None:
        """Give the view back (once; later calls do nothing)."""
        count, self._count = self._count, None
        if count is not None:
            count.pop()

    def __del__(self) -> None:
        self.release()


class MappedFile:
    """One file of `size` bytes mapped whole; `data` is a uint8 numpy view of the mapping.

    A file is backed by disk (`file`, its path as a string, set) or, when a read-only store must
    repair it in memory, by an anonymous mapping holding a private copy (`file` None).

    `data` is for use within a call; a view kept beyond it (a result's lazily decoded records)
    is taken with `lend`, which the file counts (`lent`), so that nothing reuses the file while
    it is viewed.
    """

    __slots__ = (
        "_leases",
        "data",
        "file",
        "mm",
        "read_only",
        "size",
        "spares",
        "start",
        "volatile",
    )

    def __init__(
        self, path: str | Path | None, start: int, size: int, mm: mmap.mmap, read_only: bool
    ) -> None:
        # A str: the hot paths (create, delete, touch) hand it to os without a pathlib round trip.
        self.file = None if path is None else os.fspath(path)
        self.start = start
        self.size = size
        self.mm = mm
        self.read_only = read_only
        #: Where `destroy` may keep the file for reuse instead of deleting it.
        self.spares: Spares[MappedFile] | None = None
        #: On a RAM filesystem: `flush` has nothing to do (on_ram_filesystem).
        self.volatile = False
        self.data: npt.NDArray[np.uint8] = np.frombuffer(mm, dtype=np.uint8)
        #: One item per FileLease out (a list: its append and pop are atomic under the GIL).
        self._leases: list[None] = []

    def lend(self, view: npt.NDArray[np.uint8] | None = None) -> FileLease:
        """A counted view of the file's bytes, to keep beyond this call: `data`, or `view`, a
        view of them taken earlier (which outlives `close`)."""
        return FileLease(self.data if view is None else view, self._leases)

    @property
    def lent(self) -> int:
        """How many leases of this file's bytes are out."""
        return len(self._leases)

    @property
    def path(self) -> Path | None:
        """The file's path, or None for an anonymous file."""
        return None if self.file is None else Path(self.file)

    @property
    def end(self) -> int:
        """The offset just past this file."""
        return self.start + self.size

    @classmethod
    def create(
        cls,
        directory: str | Path,
        start: int,
        size: int,
        warm: bool = False,
        spares: Spares[MappedFile] | None = None,
        stamp: bool = True,
    ) -> MappedFile:
        """Create a zero-filled file of `size` bytes named after `start` in `directory` (made
        when missing) and map it — or rename a spare to it; `warm` allocates its blocks now,
        which makes first writes through the mapping much cheaper. The file's `destroy` may
        later keep it in `spares`; a spare's modification time is set to now unless not
        `stamp`."""
        path = f"{os.fspath(directory)}/{start:020d}"
        if spares is not None:
            found = spares.take(path, start, size, stamp)
            if found is not None:
                return found
        # Sized under a temporary name, then renamed: a crash never leaves a short file.
        staging = path + ".creating"
        try:
            fd = os.open(staging, _CREATE_FLAGS, 0o644)
        except FileNotFoundError:  # the first file of its directory: no mkdir per file
            os.makedirs(directory, exist_ok=True)
            fd = os.open(staging, _CREATE_FLAGS, 0o644)
        try:
            os.ftruncate(fd, size)
            if warm:
                # Reserve the blocks now: on ext4 and xfs a first write through the mapping
                # then costs a fraction of allocating page by page in a sparse file.
                with contextlib.suppress(OSError, AttributeError):
                    os.posix_fallocate(fd, 0, size)
            os.rename(staging, path)
            mm = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        f = cls(path, start, size, mm, read_only=False)
        f.spares = spares
        return f

    @classmethod
    def open(
        cls, path: Path, start: int, size: int, read_only: bool, private: bool = False
    ) -> MappedFile:
        """Map an existing file; CorruptStoreError when its length is not `size`. A `private`
        read-only mapping is copy-on-write: repairs change memory, never the file."""
        actual = path.stat().st_size
        if actual != size:
            raise CorruptStoreError(str(path), f"length {actual}, configured file size {size}")
        fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
        try:
            access = mmap.ACCESS_WRITE
            if read_only:
                access = mmap.ACCESS_COPY if private else mmap.ACCESS_READ
            mm = mmap.mmap(fd, size, access=access)
        finally:
            os.close(fd)
        return cls(path, start, size, mm, read_only)

    @classmethod
    def anonymous(cls, start: int, size: int, content: bytes | memoryview = b"") -> MappedFile:
        """A private in-memory file of `size` bytes starting with `content` (zeros after it)."""
        mm = mmap.mmap(-1, size)
        mm[: len(content)] = content
        return cls(None, start, size, mm, read_only=False)

    def flush(self, lo: int = 0, hi: int | None = None) -> None:
        """msync bytes [lo, hi) of the mapping to disk (no-op for anonymous and volatile
        files)."""
        if self.file is None or self.read_only or self.volatile:
            return
        hi = self.size if hi is None else hi
        lo -= lo % PAGE
        if hi > lo:
            self.mm.flush(lo, hi - lo)

    def close(self) -> None:
        """Unmap; a mapping still viewed by a live array stays mapped until that array dies."""
        self.data = _CLOSED
        try:
            self.mm.close()
        except (BufferError, ValueError):
            return  # unmapped when the last view of it dies

    def destroy(self) -> None:
        """Unmap and delete the file (RocketMQ's MappedFile.destroy), or keep it as a spare."""
        if self.spares is not None and self.spares.keep(self):
            return
        self.close()
        if self.file is not None:
            try:
                os.unlink(self.file)
            except FileNotFoundError:
                return

    def touch(self, ms: int) -> None:
        """Set the file's modification time to `ms` (the store's clock), as fileReservedTime
        measures from the last write."""
        if self.file is not None and not self.read_only:
            try:
                os.utime(self.file, ns=(ms * 1_000_000, ms * 1_000_000))
            except OSError:
                return  # the in-memory time still decides expiry
