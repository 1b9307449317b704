"""Compiled loops for recovery: the record-by-record walk of a commit-log file (the TOTALSIZE chain
and the header checks of LAYOUT-5 and LAYOUT-6), the fields dispatch reads, and grouping records by
identical bytes (topics, properties) so each distinct string is decoded once.

Same pattern as fast.kernels: with numba (the `accel` extra) the loops are compiled on first use
and cached on disk; without it, or with PULLSPEC_NO_NUMBA=1, `walk` and `record_fields` answer
None and callers take their numpy/Python paths, while `group_ranges` groups in Python. Both paths
give identical answers (tests/test_fast_recovery_kernels.py).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np

from pullspec.fast.gather import I64, U8
from pullspec.fast.kernels import NO_NUMBA_ENV
from pullspec.spec.layout import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
)
from pullspec.spec.record import MIN_RECORD_LENGTH, OFF_PHYSICAL_OFFSET, OFF_SYS_FLAG

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


@functools.cache
def _compiled() -> _Kernels | None:
    """The compiled kernels, or None when numba is missing or disabled."""
    if os.environ.get(NO_NUMBA_ENV) == "1":
        return None
    try:
        import numba
    except ImportError:
        return None
    jit = numba.njit(cache=True, nogil=True)
    message, blank, min_length = MESSAGE_MAGIC_CODE, BLANK_MAGIC_CODE, MIN_RECORD_LENGTH
    born_v6, store_v6 = SYSFLAG_BORNHOST_V6, SYSFLAG_STOREHOST_V6
    off_phys, off_flag = OFF_PHYSICAL_OFFSET, OFF_SYS_FLAG

    def walk(data: Any, pos: Any, limit: Any, file_start: Any) -> Any:  # pragma: no cover
        def be32(i: Any) -> Any:
            v = (
                (np.int64(data[i]) << 24)
                | (np.int64(data[i + 1]) << 16)
                | (np.int64(data[i + 2]) << 8)
                | np.int64(data[i + 3])
            )
            return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v

        def be64(i: Any) -> Any:
            low = be32(i + 4)
            return (be32(i) << 32) | (low + (np.int64(1) << 32) if low < 0 else low)

        cap = max(limit - pos, 0) // min_length + 1
        found = np.empty(cap, dtype=np.int64)
        body_at = np.empty(cap, dtype=np.int64)
        body_len = np.empty(cap, dtype=np.int64)
        body_crc = np.empty(cap, dtype=np.int64)
        n = 0
        how = -1
        while True:
            if pos + 8 > limit:
                break
            size = be32(pos)
            magic = be32(pos + 4)
            if magic == blank:
                how = 1
                break
            if magic != message or size < min_length or pos + size > limit:
                break
            if be64(pos + off_phys) != file_start + pos:
                break
            flags = be32(pos + off_flag)
            at = pos + 84 + (12 if flags & born_v6 else 0) + (12 if flags & store_v6 else 0)
            if at + 4 > pos + size:
                break
            body = be32(at)
            if body < 0 or at + 4 + body >= pos + size:
                break
            topic_at = at + 4 + body
            topic = np.int64(data[topic_at])
            if topic > 127 or topic_at + 1 + topic + 2 > pos + size:
                break
            props_at = topic_at + 1 + topic
            props = (np.int64(data[props_at]) << 8) | np.int64(data[props_at + 1])
            props = props - 65536 if props >= 32768 else props
            if props_at + 2 + max(props, 0) != pos + size:
                break
            found[n] = pos
            body_at[n] = at + 4
            body_len[n] = body
            body_crc[n] = be32(pos + 8)
            n += 1
            pos += size
        return found[:n], body_at[:n], body_len[:n], body_crc[:n], pos, how

    def fields(data: Any, pos: Any) -> Any:  # pragma: no cover - compiled
        def be32(i: Any) -> Any:
            v = (
                (np.int64(data[i]) << 24)
                | (np.int64(data[i + 1]) << 16)
                | (np.int64(data[i + 2]) << 8)
                | np.int64(data[i + 3])
            )
            return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v

        def be64(i: Any) -> Any:
            low = be32(i + 4)
            return (be32(i) << 32) | (low + (np.int64(1) << 32) if low < 0 else low)

        out = np.empty((8, len(pos)), dtype=np.int64)
        for k in range(len(pos)):
            p = pos[k]
            flags = be32(p + off_flag)
            at = p + 84 + (12 if flags & born_v6 else 0) + (12 if flags & store_v6 else 0)
            topic_at = at + 4 + be32(at)
            topic_len = np.int64(data[topic_at])
            topic_len = topic_len - 256 if topic_len >= 128 else topic_len
            props_at = topic_at + 1 + topic_len
            props = (np.int64(data[props_at]) << 8) | np.int64(data[props_at + 1])
            props = props - 65536 if props >= 32768 else props
            out[0, k] = be32(p)
            out[1, k] = be32(p + 12)
            out[2, k] = be64(p + 20)
            out[3, k] = flags
            out[4, k] = topic_at + 1
            out[5, k] = topic_len
            out[6, k] = props_at + 2
            out[7, k] = props if props > 0 else 0
        return out

    def group(data: Any, starts: Any, lengths: Any) -> Any:  # pragma: no cover - compiled
        # Open addressing on an FNV-1a hash, the table sized by the groups found so far (few, so
        # it stays in cache); equal hashes are confirmed byte by byte, so groups are exact.
        n = len(starts)
        size = 64
        table = np.full(size, -1, dtype=np.int64)
        group_hash = np.empty(n, dtype=np.uint64)
        inverse = np.empty(n, dtype=np.int64)
        first = np.empty(n, dtype=np.int64)
        groups = 0
        for k in range(n):
            s, m = starts[k], lengths[k]
            h = np.uint64(14695981039346656037) ^ np.uint64(m)
            for i in range(s, s + m):
                h = (h ^ np.uint64(data[i])) * np.uint64(1099511628211)
            slot = np.int64(h & np.uint64(size - 1))
            while True:
                g = table[slot]
                if g < 0:
                    break
                r = first[g]
                if group_hash[g] == h and lengths[r] == m:
                    a = starts[r]
                    same = True
                    for i in range(m):
                        if data[a + i] != data[s + i]:
                            same = False
                            break
                    if same:
                        break
                slot = (slot + 1) & (size - 1)
            if g < 0:
                g = groups
                groups += 1
                first[g] = k
                group_hash[g] = h
                table[slot] = g
                if 2 * groups > size:
                    size *= 2
                    table = np.full(size, -1, dtype=np.int64)
                    for e in range(groups):
                        at = np.int64(group_hash[e] & np.uint64(size - 1))
                        while table[at] >= 0:
                            at = (at + 1) & (size - 1)
                        table[at] = e
            inverse[k] = g
        return inverse, first[:groups]

    return _Kernels(jit(walk), jit(fields), jit(group))


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
