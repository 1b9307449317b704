"""Vectorized reads of big-endian integers at many byte positions of a mapped file at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


_DTYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("i1"),
    2: np.dtype(">i2"),
    4: np.dtype(">i4"),
    8: np.dtype(">i8"),
}
_UDTYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("u1"),
    2: np.dtype(">u2"),
    4: np.dtype(">u4"),
    8: np.dtype(">i8"),
}


def gather_be(data: U8, positions: I64, width: int, signed: bool = True) -> I64:
    """The big-endian integers of `width` bytes (1, 2, 4 or 8) at `positions` of `data`, as
    int64. Positions whose bytes would overrun `data` read as 0 (callers mask them)."""
    n = len(data)
    pos = np.asarray(positions, dtype=np.int64)
    if len(pos) == 0 or n < width:
        return np.zeros(len(pos), dtype=np.int64)
    ok = (pos >= 0) & (pos + width <= n)
    safe = pos if ok.all() else np.where(ok, pos, 0)
    # One fancy index over a zero-copy view of every `width`-byte window of the data.
    windows = np.lib.stride_tricks.as_strided(data, shape=(n - width + 1, width), strides=(1, 1))
    picked = windows[safe]
    dtype = _DTYPES[width] if signed else _UDTYPES[width]
    out = picked.view(dtype).reshape(-1).astype(np.int64)
    return out if ok.all() else np.where(ok, out, 0)


def inside(data: U8, positions: I64, width: int) -> npt.NDArray[np.bool_]:
    """Which positions have `width` readable bytes in `data`."""
    return (positions >= 0) & (positions + width <= len(data))


def sorted_unique(values: I64) -> I64:
    """`values` sorted without duplicates (np.unique without its hashing detour)."""
    values = np.sort(values)
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def member_of(values: I64, sorted_set: I64) -> npt.NDArray[np.bool_]:
    """Which of `values` are in the sorted array `sorted_set`."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    found: npt.NDArray[np.bool_] = sorted_set[at] == values
    return found
