"""Consume-queue entries outside a queue: their on-disk dtype, packing, the address of a file's
mapping, and the native-endian Blocks pulls scan instead of the big-endian files."""

from __future__ import annotations

import ctypes
import struct
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from pullspec.fast.mapped import MappedFile

#: One consume-queue entry as stored: phys (long), size (int), tags code (long), big-endian.
CQ_DTYPE = np.dtype([("phys", ">i8"), ("size", ">i4"), ("tags", ">i8")])
#: One entry and its phys field, for the few written or read at a time, where numpy's fixed
#: costs dominate.
ENTRY = struct.Struct(">qiq")
PHYS = struct.Struct(">q")

I64 = npt.NDArray[np.int64]


class Block(NamedTuple):
    """Native int64 copies of entries of one file: phys, size, tags code, phys + size, and prefix
    counts of entries whose record cannot be whole inside one commit-log file (`odd`) or that do
    not start at or after the previous entry's end (`back`), so a slice can be vetted with two
    subtractions."""

    phys: I64
    size: I64
    tags: I64
    end: I64
    odd: I64
    back: I64

    def sane(self, lo: int, hi: int) -> bool:
        """True when entries [lo, hi) name records that lie inside their files in increasing,
        non-overlapping order."""
        return bool(self.odd[hi] == self.odd[lo] and self.back[hi] == self.back[lo + 1])

    def part(self, lo: int, hi: int) -> Block:
        """Entries [lo, hi) (the prefix counts keep one extra leading slot)."""
        return Block(
            self.phys[lo:hi],
            self.size[lo:hi],
            self.tags[lo:hi],
            self.end[lo:hi],
            self.odd[lo : hi + 1],
            self.back[lo : hi + 1],
        )


def make_block(phys: I64, size: I64, tags: I64, file_size: int) -> Block:
    """A Block over native copies of entries, with its prefix counts for commit-log files of
    `file_size` bytes."""
    end = phys + size
    odd = (size <= 0) | (phys < 0) | (phys % file_size + size > file_size)
    back = np.zeros(len(phys), dtype=bool)
    back[1:] = phys[1:] < end[:-1]
    zero = np.zeros(1, dtype=np.int64)
    return Block(
        phys,
        size,
        tags,
        end,
        np.concatenate((zero, np.cumsum(odd))),
        np.concatenate((zero, np.cumsum(back))),
    )


def address_of(f: MappedFile) -> int:
    """The address of a file's first mapped byte."""
    try:
        # A ctypes view costs a third of numpy's array interface; it is dropped at once.
        return ctypes.addressof(ctypes.c_char.from_buffer(f.mm))
    except TypeError:  # a read-only mapping
        return int(f.data.ctypes.data)


def pack_entries(phys: I64, size: I64, tags: I64) -> npt.NDArray[np.void]:
    """A structured array of entries, ready to be copied into a file."""
    out = np.empty(len(phys), dtype=CQ_DTYPE)
    out["phys"] = phys
    out["size"] = size
    out["tags"] = tags
    return out


#: Entries per block of the native-endian cache that pulls read instead of the big-endian file.
BLOCK = 4096


class BlockCache:
    """Mixin of ConsumeQueue: native-endian Blocks of its files' entries, converted on first use.
    A block is kept with the number of its entries that were written when it was converted
    (readers convert beside the writer): a reader needing more converts it again."""

    if TYPE_CHECKING:
        commit_log_file_size: int
        _blocks: dict[tuple[int, int], tuple[int, Block]]

    def block(
        self, view: npt.NDArray[np.void], start: int, b: int, need: int, written: int
    ) -> Block:
        """The native copy of block `b` of the file at queue byte `start` whose entries `view`
        holds, right for at least its first `need` entries; `written` of the file's entries are
        written (so a block converted now is right for that many)."""
        key = (start, b)
        found = self._blocks.get(key)
        if found is not None and found[0] >= need:
            return found[1]
        raw = view[b * BLOCK : (b + 1) * BLOCK]
        blk = make_block(
            raw["phys"].astype(np.int64),
            raw["size"].astype(np.int64),
            raw["tags"].astype(np.int64),
            self.commit_log_file_size,
        )
        self._blocks[key] = (min(written - b * BLOCK, BLOCK), blk)
        return blk

    def native(self, view: npt.NDArray[np.void], start: int, a: int, b: int, written: int) -> Block:
        """Native copies of entries [a, b) of the file at queue byte `start` whose entries
        `view` holds, of which the first `written` (≥ b) are written."""
        first, last = a // BLOCK, (b - 1) // BLOCK
        lo, hi = a - first * BLOCK, b - first * BLOCK
        if first == last:
            return self.block(view, start, first, hi, written).part(lo, hi)
        parts = [
            self.block(view, start, k, min(BLOCK, b - k * BLOCK), written)
            for k in range(first, last + 1)
        ]
        phys, size, tags = (
            np.concatenate([getattr(p, n) for p in parts]) for n in ("phys", "size", "tags")
        )
        return make_block(phys, size, tags, self.commit_log_file_size).part(lo, hi)

    def _refresh_blocks(self, start: int, a: int, b: int) -> None:
        """Drop cached blocks that freshly written entries [a, b) of the file at `start` touch
        (a reader may convert one again meanwhile: it records how far it is right)."""
        for k in range(a // BLOCK, (b - 1) // BLOCK + 1):
            self._blocks.pop((start, k), None)

    def _forget(self, start: int) -> None:
        # list(): readers add blocks while this runs.
        for key in [k for k in list(self._blocks) if k[0] == start]:
            self._blocks.pop(key, None)
