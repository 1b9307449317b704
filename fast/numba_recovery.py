"""The compiled loops of recovery (fast.recovery_kernels): the record-by-record walk of a
commit-log file, the fields dispatch reads, grouping byte strings by content.

Loaded through fast.kernels.load, only when numba is installed and not
disabled; the loops are compiled at module level with numba's disk cache. numba invalidates that
cache only when this file changes: the constants below are compiled in.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from pullspec.spec.layout import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
)
from pullspec.spec.record import MIN_RECORD_LENGTH, OFF_PHYSICAL_OFFSET, OFF_SYS_FLAG

message, blank, min_length = MESSAGE_MAGIC_CODE, BLANK_MAGIC_CODE, MIN_RECORD_LENGTH
born_v6, store_v6 = SYSFLAG_BORNHOST_V6, SYSFLAG_STOREHOST_V6
off_phys, off_flag = OFF_PHYSICAL_OFFSET, OFF_SYS_FLAG


def load_be32_py(data: Any, i: Any) -> Any:  # pragma: no cover - compiled
    """The big-endian int at data[i : i + 4]."""
    v = (
        (np.int64(data[i]) << 24)
        | (np.int64(data[i + 1]) << 16)
        | (np.int64(data[i + 2]) << 8)
        | np.int64(data[i + 3])
    )
    return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v


load_be32: Any = numba.njit(inline="always")(load_be32_py)


def load_be64_py(data: Any, i: Any) -> Any:  # pragma: no cover - compiled
    """The big-endian long at data[i : i + 8]."""
    low = load_be32(data, i + 4)
    return (load_be32(data, i) << 32) | (low + (np.int64(1) << 32) if low < 0 else low)


load_be64: Any = numba.njit(inline="always")(load_be64_py)


def walk_py(data: Any, pos: Any, limit: Any, file_start: Any) -> Any:  # pragma: no cover
    def be32(i: Any) -> Any:
        return load_be32(data, i)

    def be64(i: Any) -> Any:
        return load_be64(data, i)

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


def fields_py(data: Any, pos: Any) -> Any:  # pragma: no cover - compiled
    def be32(i: Any) -> Any:
        return load_be32(data, i)

    def be64(i: Any) -> Any:
        return load_be64(data, i)

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


def group_py(data: Any, starts: Any, lengths: Any) -> Any:  # pragma: no cover - compiled
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


_jit = numba.njit(cache=True, nogil=True)
#: The walk of one file's records (fast.recovery_kernels.walk).
walk: Any = _jit(walk_py)
#: The fields dispatch reads, per record (fast.recovery_kernels.record_fields).
fields: Any = _jit(fields_py)
#: Byte strings grouped by content (fast.recovery_kernels.group_ranges).
group: Any = _jit(group_py)
