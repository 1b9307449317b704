"""Compiled record encoding: many v1 message records (LAYOUT-5, IPv4 hosts) written straight
into a mapped commit-log file.

A record is an 88-byte head of fixed-width big-endian fields up to BODYLENGTH, the body, then a
tail that depends only on the topic ([1-byte length][topic]) and the property set ([2-byte
length][properties string]). With numba (the `accel` extra) one compiled loop computes each body
CRC (LAYOUT-8) and writes every byte; without it, or with PULLSPEC_NO_NUMBA=1, numpy does: CRCs
by fast.kernels.body_crcs, a structured big-endian array of heads scattered by fancy indexing
and the variable parts copied by gather indices (or by 2-D views when every record of a run has
the same shape, the common case of a uniform workload).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np

from pullspec.fast.gather import I64, U8
from pullspec.fast.kernels import SMALL, body_crcs, crc_tables, load, numba_records
from pullspec.spec.layout import MESSAGE_MAGIC_CODE

#: Bytes of a record before its body (IPv4 hosts).
from pullspec.spec.record import OFF_BODY_V4 as HEAD_LENGTH

#: The head as stored: packed big-endian fields, hosts as their 8 raw bytes.
HEAD_DTYPE = np.dtype(
    [
        ("total", ">i4"),
        ("magic", ">i4"),
        ("crc", ">i4"),
        ("queue_id", ">i4"),
        ("flag", ">i4"),
        ("queue_offset", ">i8"),
        ("phys", ">i8"),
        ("sys_flag", ">i4"),
        ("born_ts", ">i8"),
        ("born_host", "u1", (8,)),
        ("store_ts", ">i8"),
        ("store_host", "u1", (8,)),
        ("reconsume", ">i4"),
        ("prepared", ">i8"),
        ("body_len", ">i4"),
    ]
)
#: Records per numpy gather chunk: bounds the int64 index arrays to a few tens of MB.
_CHUNK = 1 << 16


class Tails(NamedTuple):
    """The encoded tails of a batch: topic pieces [len][topic] and property pieces [len16][props]
    laid end to end in `data`, each table addressed by (starts, lengths)."""

    data: U8
    topic_starts: I64
    topic_lengths: I64
    prop_starts: I64
    prop_lengths: I64


class Run(NamedTuple):
    """The per-record columns of one run of records written contiguously into one file."""

    rel: I64  # where each record starts, relative to the run's first byte
    lengths: I64
    queue_ids: I64
    flags: I64
    queue_offsets: I64
    phys: I64
    born_ts: I64
    store_ts: I64
    reconsume: I64
    body_starts: I64
    body_lengths: I64
    topic_index: I64
    prop_index: I64


def make_tails(topics: list[bytes], props: list[bytes]) -> Tails:
    """The Tails of encoded topics (each ≤ 127 bytes) and property strings (each ≤ 32767)."""
    pieces = [bytes((len(t),)) + t for t in topics] + [len(p).to_bytes(2, "big") + p for p in props]
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    starts = np.zeros(len(pieces), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    data = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    k = len(topics)
    return Tails(data, starts[:k], lengths[:k], starts[k:], lengths[k:])


def host_bytes(ip: bytes, port: int) -> U8:
    """The 8 stored bytes of an IPv4 host: address then big-endian port."""
    return np.frombuffer(ip + port.to_bytes(4, "big", signed=True), dtype=np.uint8).copy()


EncodeKernel = Callable[..., None]


@functools.cache
def _compiled() -> EncodeKernel | None:
    """The compiled encoder (fast.numba_records), or None when numba is missing or disabled."""
    compiled = load(numba_records)
    return None if compiled is None else cast(EncodeKernel, compiled.encode)


@functools.cache
def crc_table() -> Any:
    """The slicing-by-16 CRC-32 tables, read-only (one numba type)."""
    return _readonly(crc_tables(), np.uint32)


def accelerated() -> bool:
    """Whether the compiled encoder is in use (numba importable and not disabled)."""
    return _compiled() is not None


def warm_up() -> None:
    """Load (or compile, the first time) the compiled encoder, so that a timed first append
    does not pay for it."""
    n = SMALL
    zero = np.zeros(n, dtype=np.int64)
    lengths = np.full(n, HEAD_LENGTH + 4, dtype=np.int64)
    run = Run(np.arange(n, dtype=np.int64) * lengths[0], lengths, *([zero] * 11))
    tails = make_tails([b"T"], [b""])
    # Batches hold read-only arrays (another numba type than writable ones): warm that one.
    body = np.frombuffer(bytes(1), dtype=np.uint8)
    host = host_bytes(bytes(4), 0)
    encode_run(np.zeros(n * int(lengths[0]), dtype=np.uint8), 0, run, body, tails, 0, 0, host, host)


def encode_run(
    out: U8,
    base: int,
    run: Run,
    body: U8,
    tails: Tails,
    sys_flag: int,
    prepared: int,
    born_host: U8,
    store_host: U8,
) -> None:
    """Write the records of `run` into `out` from byte `base` on. Every column must be int64 and
    every range must lie inside its buffer (the caller validated the batch)."""
    kernel = _compiled()
    if kernel is not None and len(run.rel):
        first = Run(*(c[:1] for c in run))
        template = _heads(first, first.rel, sys_flag, prepared, born_host, store_host).reshape(-1)
        # One array type for every argument (read-only, contiguous int64 or uint8), so the
        # kernel is compiled once, whatever mix of views and copies the caller hands in.
        columns = [_readonly(c, np.int64) for c in run]
        u8 = [_readonly(c, np.uint8) for c in (template, body, tails.data)]
        tables = [_readonly(c, np.int64) for c in tails[1:]]
        kernel(out, base, *columns, *u8, *tables, crc_table())
        return
    _encode_numpy(out, base, run, body, tails, sys_flag, prepared, born_host, store_host)


def _readonly(a: Any, dtype: type[Any]) -> Any:
    view = np.ascontiguousarray(a, dtype=dtype).view()
    view.flags.writeable = False
    return view


def _heads(run: Run, crcs: I64, sys_flag: int, prepared: int, born_host: U8, store_host: U8) -> Any:
    head = np.empty(len(run.rel), dtype=HEAD_DTYPE)
    head["total"] = run.lengths
    head["magic"] = MESSAGE_MAGIC_CODE
    head["crc"] = crcs
    head["queue_id"] = run.queue_ids
    head["flag"] = run.flags
    head["queue_offset"] = run.queue_offsets
    head["phys"] = run.phys
    head["sys_flag"] = sys_flag
    head["born_ts"] = run.born_ts
    head["born_host"] = born_host
    head["store_ts"] = run.store_ts
    head["store_host"] = store_host
    head["reconsume"] = run.reconsume
    head["prepared"] = prepared
    head["body_len"] = run.body_lengths
    return head.view(np.uint8).reshape(len(run.rel), HEAD_LENGTH)


def _encode_numpy(
    out: U8,
    base: int,
    run: Run,
    body: U8,
    tails: Tails,
    sys_flag: int,
    prepared: int,
    born_host: U8,
    store_host: U8,
) -> None:
    n = len(run.rel)
    if n > _CHUNK:
        # Chunks bound the temporaries (a gather index per byte); `rel` is relative to `base`.
        for lo in range(0, n, _CHUNK):
            part = Run(*(c[lo : lo + _CHUNK] for c in run))
            _encode_numpy(out, base, part, body, tails, sys_flag, prepared, born_host, store_host)
        return
    if n == 0:
        return
    crcs = body_crcs(body, run.body_starts, run.body_lengths)
    heads = _heads(run, crcs, sys_flag, prepared, born_host, store_host)
    topic_len = tails.topic_lengths[run.topic_index]
    prop_len = tails.prop_lengths[run.prop_index]
    length = int(run.lengths[0])
    b = int(run.body_lengths[0])
    tail = int(topic_len[0] + prop_len[0])
    s0 = int(run.body_starts[0])
    uniform = (
        bool((run.lengths == length).all())
        and bool((run.body_lengths == b).all())
        and bool((run.body_starts == s0 + b * np.arange(n)).all())
    )
    if uniform:
        # Every record has the same shape and the bodies lie back to back: 2-D views.
        rows = out[base : base + n * length].reshape(n, length)
        rows[:, :HEAD_LENGTH] = heads
        rows[:, HEAD_LENGTH : HEAD_LENGTH + b] = body[s0 : s0 + n * b].reshape(n, b)
        pieces = _tail_rows(tails, tail)
        if pieces is not None:
            ti, pi = run.topic_index, run.prop_index
            rows[:, HEAD_LENGTH + b :] = pieces[ti * len(tails.prop_starts) + pi]
            return
        at = base + run.rel + HEAD_LENGTH + b
    else:
        starts = base + run.rel
        out[starts[:, None] + np.arange(HEAD_LENGTH)] = heads
        at = starts + HEAD_LENGTH
        _copy_ranges(out, at, body, run.body_starts, run.body_lengths)
        at = at + run.body_lengths
    _copy_ranges(out, at, tails.data, tails.topic_starts[run.topic_index], topic_len)
    _copy_ranges(out, at + topic_len, tails.data, tails.prop_starts[run.prop_index], prop_len)


def _tail_rows(tails: Tails, width: int) -> U8 | None:
    """Every (topic, property set) tail as one row when they are all `width` bytes and few."""
    t, p = len(tails.topic_starts), len(tails.prop_starts)
    if (
        t * p > 256
        or not ((tails.topic_lengths[:, None] + tails.prop_lengths[None, :]) == width).all()
    ):
        return None
    rows = np.empty((t, p, width), dtype=np.uint8)
    for i in range(t):
        ts, tl = int(tails.topic_starts[i]), int(tails.topic_lengths[i])
        rows[i, :, :tl] = tails.data[ts : ts + tl]
        for j in range(p):
            ps = int(tails.prop_starts[j])
            rows[i, j, tl:] = tails.data[ps : ps + width - tl]
    return rows.reshape(t * p, width)


def _copy_ranges(out: U8, dst: I64, src: U8, starts: I64, lengths: I64) -> None:
    """out[dst[k] : dst[k] + lengths[k]] = src[starts[k] : starts[k] + lengths[k]] for every k,
    by gather indices built chunk by chunk."""
    for lo in range(0, len(dst), _CHUNK):
        d, s, n = dst[lo : lo + _CHUNK], starts[lo : lo + _CHUNK], lengths[lo : lo + _CHUNK]
        total = int(n.sum())
        if total == 0:
            continue
        ends = np.cumsum(n)
        offsets = np.arange(total, dtype=np.int64) - np.repeat(ends - n, n)
        out[np.repeat(d, n) + offsets] = src[np.repeat(s, n) + offsets]
