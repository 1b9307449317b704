"""Spare files: small mapped files that expiry deleted, kept mapped in the store's `.spares`
directory to become the next file of the same size.

With tiny files (the conformance campaigns' 1 KiB commit logs and 80-byte queues) a file is
created or deleted every few operations, and the system calls of creating (open, size, rename,
map, close, the first page fault) and deleting (unmap, unlink) cost more than the operations
themselves. A spare turns a delete into one rename and a create into zeroing the mapping, an
msync, a utime and a rename. Only files of at most SPARE_MAX_SIZE bytes are kept, so a
broker-sized store (GiB commit-log files) never holds one.

The store's own directories (commitlog/, consumequeue/) hold exactly the files RocketMQ would:
spares live outside them, and `close` deletes them with their directory.

Crash safety: a spare's zeros are on disk (msync) before it takes a store name, so after a crash
a file under a store name is full size and either zero or holds only what was written to it
since; a crash leaves at most a `.spares` directory, which the next writable open removes. A
file still viewed by a returned result (whose records are decoded lazily from the mapping) is
never kept: every such view is a FileLease the file counts (fast.mapped), and a file with a
lease out is deleted as before and stays mapped, readable, for its leases.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

#: Files larger than this are always deleted.
SPARE_MAX_SIZE = 64 << 10
#: Spares kept per file size.
SPARES_PER_SIZE = 8
#: The directory, under the store's, that holds the spares.
SPARES_DIR = ".spares"


class SpareFile(Protocol):
    """What a spare pool needs of a mapped file (fast.mapped.MappedFile): its name, place and
    size, whether views of it are lent out, and how to zero, flush and destroy it. A protocol,
    so the pool and the files it holds do not import each other."""

    file: str | None
    start: int
    size: int
    read_only: bool
    spares: Spares[Any] | None
    data: npt.NDArray[np.uint8]

    @property
    def lent(self) -> int: ...

    def flush(self, lo: int = 0, hi: int | None = None) -> None: ...

    def destroy(self) -> None: ...


F = TypeVar("F", bound=SpareFile)


class Spares(Generic[F]):
    """The spare files of one store (directory `store_dir`), by size."""

    def __init__(self, store_dir: str) -> None:
        self.directory = os.path.join(store_dir, SPARES_DIR)
        self._by_size: dict[int, list[F]] = {}
        self._made = False
        self._named = 0

    def keep(self, f: F) -> bool:
        """Move a file being deleted to the spares and keep it mapped; False (the caller
        deletes it) when it is too large, enough are kept, or something still views it."""
        size = f.size
        if size > SPARE_MAX_SIZE or f.file is None or f.read_only:
            return False
        kept = self._by_size.setdefault(size, [])
        if len(kept) >= SPARES_PER_SIZE or f.lent:
            return False
        if not self._made:
            os.makedirs(self.directory, exist_ok=True)
            self._made = True
        self._named += 1
        spare = f"{self.directory}/{self._named}"
        os.rename(f.file, spare)
        f.file = spare
        kept.append(f)
        return True

    def take(self, path: str, start: int, size: int, stamp: bool = True) -> F | None:
        """A kept file of `size` bytes, zeroed, its modification time set to now as a new
        file's (when `stamp`: a commit-log file's is read back at the next open) and renamed to
        `path` for a file starting at `start`; None when none is kept."""
        kept = self._by_size.get(size)
        if not kept:
            return None
        f = kept.pop()
        f.data.fill(0)
        f.flush()  # the zeros are on disk before the file takes a store name
        assert f.file is not None
        if stamp:
            os.utime(f.file)
        try:
            os.rename(f.file, path)
        except FileNotFoundError:  # the first file of its directory
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.rename(f.file, path)
        f.file = path
        f.start = start
        return f

    def close(self) -> None:
        """Unmap and delete every spare and their directory."""
        for kept in self._by_size.values():
            for f in kept:
                f.spares = None
                f.destroy()
        self._by_size.clear()
        if self._made:
            self._made = False
            remove_spares(os.path.dirname(self.directory))


def remove_spares(store_dir: str) -> None:
    """Delete the spares directory of `store_dir` (what a crash left of it)."""
    shutil.rmtree(os.path.join(store_dir, SPARES_DIR), ignore_errors=True)
