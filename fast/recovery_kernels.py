"""Compiled loops for recovery: the record-by-record walk of a commit-log file (the TOTALSIZE chain
and the header checks of LAYOUT-5 and LAYOUT-6), the fields dispatch reads, and grouping records by
identical bytes (topics, properties) so each distinct string is decoded once.

With numba (the `accel` extra) the loops of fast.numba_recovery run, loaded through
fast.kernels.load and cached on disk; without it, or with PULLSPEC_NO_NUMBA=1, `walk` and `record_fields` answer
None and callers take their numpy/Python paths, while `group_ranges` groups in Python. Both paths
give identical answers (tests/test_fast_recovery_kernels.py).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple, cast

import numpy as np

from pullspec.fast.gather import I64, U8
from pullspec.fast.kernels import load

#: Rows of `record_fields`' answer, in order.
FIELDS = (
    "size",
    "queue_id",
    "queue_offset",
    "sys_flag",
    "topic_at",
    "topic_len",
    "props_at",
    "props_len",
)


class Walk(NamedTuple):
    """The records a walk found (positions in the file, and where each body starts and how long
    it is) and where and how it ended: 1 at an end-of-file blank, −1 at a bad record or the end."""

    positions: I64
    body_at: I64
    body_len: I64
    body_crc: I64
    end: int
    how: int


class _Kernels(NamedTuple):
    walk: Callable[..., Any]
    fields: Callable[..., Any]
    group: Callable[..., Any]


def _numba_recovery() -> ModuleType:
    """Import fast.numba_recovery (the recovery walk); see fast.kernels.load."""
    return importlib.import_module("pullspec.fast.numba_recovery")


@functools.cache
def _compiled() -> _Kernels | None:
    """The compiled kernels (fast.numba_recovery), or None when numba is missing or disabled."""
    compiled = load(_numba_recovery)
    if compiled is None:
        return None
    return _Kernels(compiled.walk, compiled.fields, compiled.group)


def accelerated() -> bool:
    """Whether the compiled recovery kernels are in use."""
    return _compiled() is not None


def walk(data: U8, start: int, limit: int, file_start: int) -> Walk | None:
    """Walk the records of one file from byte `start` to the end of its readable part `limit`
    (at most len(data)), with fast.validate.walk_records' checks; None without the kernels."""
    kernels = _compiled()
    if kernels is None:
        return None
    found, body_at, body_len, crc, end, how = kernels.walk(
        data, start, min(limit, len(data)), file_start
    )
    return Walk(
        cast(I64, found),
        cast(I64, body_at),
        cast(I64, body_len),
        cast(I64, crc),
        int(end),
        int(how),
    )


def record_fields(data: U8, pos: I64) -> dict[str, I64] | None:
    """pullspec.fast.validate.dispatch_fields for validated records, or None without the kernels."""
    kernels = _compiled()
    if kernels is None:
        return None
    rows = cast(I64, kernels.fields(data, np.ascontiguousarray(pos, dtype=np.int64)))
    return {name: rows[k] for k, name in enumerate(FIELDS)}


def group_ranges(data: U8, starts: I64, lengths: I64) -> tuple[I64, I64]:
    """Group the byte strings data[starts[k] : starts[k] + lengths[k]] by content: (group of each
    range, first range of each group), groups numbered in order of first appearance."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    if len(starts) != len(lengths):
        raise ValueError(f"{len(starts)} starts but {len(lengths)} lengths")
    if len(starts) and (
        int(starts.min()) < 0 or int(lengths.min()) < 0 or int((starts + lengths).max()) > len(data)
    ):
        raise ValueError("a range lies outside the data")  # the compiled loop does not check
    kernels = _compiled()
    if kernels is not None:
        inverse, first = kernels.group(data, starts, lengths)
        return cast(I64, inverse), cast(I64, first)
    raw = np.ascontiguousarray(data).data.cast("B") if len(data) else memoryview(b"")
    seen: dict[bytes, int] = {}
    inv: list[int] = []
    firsts: list[int] = []
    for k, (s, m) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        key = raw[s : s + m].tobytes()
        g = seen.get(key)
        if g is None:
            g = seen[key] = len(firsts)
            firsts.append(k)
        inv.append(g)
    return np.array(inv, dtype=np.int64), np.array(firsts, dtype=np.int64)
