"""The compiled per-record loops of the commit log: LAYOUT-8's body CRC (slicing-by-16 CRC-32,
defined once in `crc_of`) over many records — serially or on numba's threads — and the encoder
of MessageBatch runs, which computes each body's CRC with the same `crc_of` while the body is in
cache and writes every byte of the records.

Loaded through fast.kernels.load, only when numba is installed and not disabled;
the loops are compiled at module level with numba's disk cache. numba invalidates that cache only
when this file changes: the constants imported below are compiled in.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from pullspec.spec.record import OFF_BODY_V4 as HEAD_LENGTH


def crc_of_py(data: Any, start: Any, end: Any, t: Any) -> Any:  # pragma: no cover - compiled
    """CRC-32 (IEEE, reflected) of data[start:end] & 0x7FFFFFFF (LAYOUT-8), by the 16 × 256
    slicing tables `t` (fast.kernels.crc_tables). Unsigned indices: numba then skips
    negative-index wraparound."""
    s = np.uint64(start)
    stop = np.uint64(end)
    c = np.uint32(0xFFFFFFFF)
    while s + np.uint64(16) <= stop:
        c = (
            t[15, (c ^ data[s]) & 0xFF]
            ^ t[14, ((c >> 8) ^ data[s + np.uint64(1)]) & 0xFF]
            ^ t[13, ((c >> 16) ^ data[s + np.uint64(2)]) & 0xFF]
            ^ t[12, ((c >> 24) ^ data[s + np.uint64(3)]) & 0xFF]
            ^ t[11, data[s + np.uint64(4)]]
            ^ t[10, data[s + np.uint64(5)]]
            ^ t[9, data[s + np.uint64(6)]]
            ^ t[8, data[s + np.uint64(7)]]
            ^ t[7, data[s + np.uint64(8)]]
            ^ t[6, data[s + np.uint64(9)]]
            ^ t[5, data[s + np.uint64(10)]]
            ^ t[4, data[s + np.uint64(11)]]
            ^ t[3, data[s + np.uint64(12)]]
            ^ t[2, data[s + np.uint64(13)]]
            ^ t[1, data[s + np.uint64(14)]]
            ^ t[0, data[s + np.uint64(15)]]
        )
        s += np.uint64(16)
    while s < stop:
        c = t[0, (c ^ data[s]) & 0xFF] ^ (c >> np.uint32(8))
        s += np.uint64(1)
    return np.int64((c ^ np.uint32(0xFFFFFFFF)) & np.uint32(0x7FFFFFFF))


crc_of: Any = numba.njit(inline="always")(crc_of_py)


def crcs_py(data: Any, starts: Any, lengths: Any, t: Any) -> Any:  # pragma: no cover - compiled
    """`crc_of` of data[starts[k] : starts[k] + lengths[k]] for every k."""
    out = np.empty(len(starts), dtype=np.int64)
    for k in numba.prange(len(starts)):
        out[k] = crc_of(data, starts[k], starts[k] + lengths[k], t)
    return out


#: Body CRCs of many records, one after another.
crcs: Any = numba.njit(cache=True, nogil=True)(crcs_py)
#: Body CRCs of many records, spread over numba's threads.
crcs_parallel: Any = numba.njit(cache=True, nogil=True, parallel=True)(crcs_py)


def copy_bytes_py(out: Any, q: Any, src: Any, start: int, n: int) -> Any:  # pragma: no cover
    """Copy src[start : start + n] to out[q:], answering where the copy ends."""
    s = np.uint64(start)
    m = np.uint64(n)
    for b in range(m):
        out[q + b] = src[s + b]
    return q + m


copy_bytes: Any = numba.njit(inline="always")(copy_bytes_py)


def put_be32_py(out: Any, q: Any, v: Any) -> None:  # pragma: no cover - compiled
    """Store the low 32 bits of `v` big-endian at out[q:q + 4]. Four stores written out, never
    a loop: LLVM then merges them into one byte-swapped store (a loop over the bytes stayed
    four stores, a sixth of a record's encoding)."""
    out[q] = (v >> 24) & 0xFF
    out[q + np.uint64(1)] = (v >> 16) & 0xFF
    out[q + np.uint64(2)] = (v >> 8) & 0xFF
    out[q + np.uint64(3)] = v & 0xFF


put_be32: Any = numba.njit(inline="always")(put_be32_py)


def put_be64_py(out: Any, q: Any, v: Any) -> None:  # pragma: no cover - compiled
    """Store `v` big-endian at out[q:q + 8], as `put_be32` does."""
    put_be32(out, q, v >> 32)
    put_be32(out, q + np.uint64(4), v)


put_be64: Any = numba.njit(inline="always")(put_be64_py)


def encode_py(  # pragma: no cover - compiled
    out: Any,
    base: int,
    rel: Any,
    lengths: Any,
    queue_ids: Any,
    flags: Any,
    queue_offsets: Any,
    phys: Any,
    born_ts: Any,
    store_ts: Any,
    reconsume: Any,
    body_starts: Any,
    body_lengths: Any,
    topic_index: Any,
    prop_index: Any,
    template: Any,
    body: Any,
    tails: Any,
    topic_starts: Any,
    topic_lengths: Any,
    prop_starts: Any,
    prop_lengths: Any,
    crc_table: Any,
) -> None:
    # Unsigned indices: numba then skips negative-index wraparound and the copies vectorize.
    width = np.uint64(HEAD_LENGTH)
    for k in range(len(rel)):
        q = np.uint64(base + rel[k])
        # LAYOUT-8 fused in, so the body is read once while in cache (`body_crcs` runs the same
        # loop on threads, which costs ms per call on a busy 2-core machine: threads waiting
        # for a core — more than a 1000-message put).
        s = np.uint64(body_starts[k])
        end = s + np.uint64(body_lengths[k])
        crc = crc_of(body, s, end, crc_table)
        # The head's constant fields (magic, sysflag, hosts, prepared offset) come from the
        # template; the others are stored big-endian over it.
        for b in range(width):
            out[q + b] = template[b]
        put_be32(out, q, lengths[k])
        put_be32(out, q + np.uint64(8), crc)
        put_be32(out, q + np.uint64(12), queue_ids[k])
        put_be32(out, q + np.uint64(16), flags[k])
        put_be64(out, q + np.uint64(20), queue_offsets[k])
        put_be64(out, q + np.uint64(28), phys[k])
        put_be64(out, q + np.uint64(40), born_ts[k])
        put_be64(out, q + np.uint64(56), store_ts[k])
        put_be32(out, q + np.uint64(72), reconsume[k])
        put_be32(out, q + np.uint64(84), body_lengths[k])
        q += width
        q = copy_bytes(out, q, body, body_starts[k], body_lengths[k])
        t = topic_index[k]
        q = copy_bytes(out, q, tails, topic_starts[t], topic_lengths[t])
        t = prop_index[k]
        copy_bytes(out, q, tails, prop_starts[t], prop_lengths[t])


#: The MessageBatch run encoder (fast.encode_kernels.encode_run).
encode: Any = numba.njit(cache=True, nogil=True)(encode_py)
