"""The compiled per-record loops of the commit log: LAYOUT-8's body CRC (CRC-32, defined once in
`crc_of`) over many records — serially or on numba's threads — and the encoder of MessageBatch
runs, which computes each body's CRC with the same `crc_of` while the body is in cache and writes
every byte of the records.

`crc_of` folds a body 16 bytes at a time by carry-less multiplication (`crc_of_folded`) where the
CPU numba compiles for has PCLMULQDQ, and otherwise looks bytes up in slicing-by-16 tables
(`crc_of_sliced`). Both answer zlib's CRC-32.

Loaded through fast.kernels.load, only when numba is installed and not disabled;
the loops are compiled at module level with numba's disk cache. numba invalidates that cache only
when this file changes: the constants imported below are compiled in. Which `crc_of` a loop was
compiled with follows the CPU, and numba keys its cache by the CPU too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import llvmlite.binding
import numba
import numpy as np
from llvmlite import ir
from numba import extending
from numba.core import cgutils

from pullspec.spec.record import OFF_BODY_V4 as HEAD_LENGTH

# numba's typing and code generation, untyped for mypy.
_config: Any = numba.config
_types: Any = numba.types
_intrinsic: Any = extending.intrinsic
_function: Any = cgutils.get_or_insert_function

#: The CRC-32 register's initial value and final xor.
_ONES = np.uint32(0xFFFFFFFF)
#: x^160 and x^96 mod the CRC-32 polynomial, bit-reflected and shifted left by one (a
#: reflected carry-less product comes out one bit short): multiplying a 16-byte block's low and
#: high 8 bytes by them moves the block 16 bytes further, which `_fold` does once per block.
#: tests/test_fast_kernels.py derives both from the polynomial.
FOLD_LOW = 0x1751997D0
FOLD_HIGH = 0xCCAA009E


def carryless_multiply(
    cpu_name: str | None, cpu_features: str | None, host: Mapping[str, bool]
) -> bool:
    """Whether the loops can fold by PCLMULQDQ: numba compiles for the host CPU (NUMBA_CPU_NAME
    and NUMBA_CPU_FEATURES unset: naming another CPU, as for a portable cache, may leave the
    instruction out) and the host has it and SSSE3's byte shuffle.

    Example: ``carryless_multiply(None, None, {"pclmul": True, "ssse3": True})`` is True."""
    if cpu_name is not None or cpu_features is not None:
        return False
    return bool(host.get("pclmul", False) and host.get("ssse3", False))


def _host_features() -> Mapping[str, bool]:
    try:
        return llvmlite.binding.get_host_cpu_features()  # type: ignore[no-any-return]
    except RuntimeError:  # LLVM could not tell on this platform: the tables, then
        return {}


#: Whether `crc_of` is `crc_of_folded` on this machine.
CARRYLESS = carryless_multiply(_config.CPU_NAME, _config.CPU_FEATURES, _host_features())


def advance_py(data: Any, start: Any, end: Any, c: Any, t: Any) -> Any:  # pragma: no cover
    """The CRC register `c` advanced over data[start:end] by the 16 × 256 slicing tables `t`
    (fast.kernels.crc_tables). Unsigned indices: numba then skips negative-index wraparound."""
    s = np.uint64(start)
    stop = np.uint64(end)
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
    return c


advance: Any = numba.njit(inline="always")(advance_py)


def crc_of_sliced_py(data: Any, start: Any, end: Any, t: Any) -> Any:  # pragma: no cover
    """CRC-32 (IEEE, reflected) of data[start:end] & 0x7FFFFFFF (LAYOUT-8), byte table lookups
    only: 16 a step, every one independent but the first four."""
    c = advance(data, start, end, _ONES, t)
    return np.int64((c ^ _ONES) & np.uint32(0x7FFFFFFF))


crc_of_sliced: Any = numba.njit(inline="always")(crc_of_sliced_py)


def _fold_py(typingctx: Any, data: Any, start: Any, end: Any, head: Any) -> Any:
    """data[start:end] (at least 32 bytes, the CRC's initial value xored into its first 4)
    folded into one 16-byte block congruent to it modulo the polynomial, as (low, high) 8 bytes.
    The first block holds the first `head` bytes (4 … 16), moved up by a byte shuffle over
    16 − head zero bytes, which leave the CRC of a message started with a zero register as it
    is; then every following 16 bytes are folded in by two carry-less products. It stops at
    the last whole block: with head = (end − start) mod 16 the fold ends at `end`, with no byte
    left for the tables' serial loop. A loop of its own in LLVM IR, so the block stays in a
    vector register from one step to the next."""
    u64 = _types.uint64
    signature = _types.UniTuple(u64, 2)(data, u64, u64, u64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        pair, bytes16 = ir.VectorType(i64, 2), ir.VectorType(i8, 16)
        clmul = _function(
            builder.module, ir.FunctionType(pair, [pair, pair, i8]), "llvm.x86.pclmulqdq"
        )
        shuffle = _function(
            builder.module,
            ir.FunctionType(bytes16, [bytes16, bytes16]),
            "llvm.x86.ssse3.pshuf.b.128",
        )
        base = builder.bitcast(
            context.make_array(sig.args[0])(context, builder, args[0]).data, i8.as_pointer()
        )
        start, end, head = args[1], args[2], args[3]

        def block(at: Any) -> Any:
            return builder.load(
                builder.bitcast(builder.gep(base, [at]), pair.as_pointer()), align=1
            )

        def const_pair(low: int, high: int) -> Any:
            return ir.Constant(pair, [ir.Constant(i64, low), ir.Constant(i64, high)])

        sixteen = ir.Constant(i64, 16)
        first = builder.xor(block(start), const_pair(0xFFFFFFFF, 0))
        # pshufb writes a zero where the index's top bit is set: index i − (16 − head) is
        # negative below 16 − head.
        up = builder.trunc(builder.sub(sixteen, head), i8)
        up = builder.insert_element(ir.Constant(bytes16, None), up, ir.Constant(i32, 0))
        up = builder.shuffle_vector(
            up, ir.Constant(bytes16, None), ir.Constant(ir.VectorType(i32, 16), [0] * 16)
        )
        index = builder.sub(ir.Constant(bytes16, list(range(16))), up)
        first = builder.bitcast(
            builder.call(shuffle, [builder.bitcast(first, bytes16), index]), pair
        )
        begin = builder.add(start, head)
        entry = builder.block
        loop = builder.append_basic_block("fold")
        done = builder.append_basic_block("folded")
        builder.branch(loop)
        builder.position_at_end(loop)
        x = builder.phi(pair)
        at = builder.phi(i64)
        x.add_incoming(first, entry)
        at.add_incoming(begin, entry)
        k = const_pair(FOLD_LOW, FOLD_HIGH)
        low = builder.call(clmul, [x, k, ir.Constant(i8, 0x00)])
        high = builder.call(clmul, [x, k, ir.Constant(i8, 0x11)])
        y = builder.xor(builder.xor(low, high), block(at))
        after = builder.add(at, sixteen)
        x.add_incoming(y, loop)
        at.add_incoming(after, loop)
        builder.cbranch(builder.icmp_unsigned("<=", builder.add(after, sixteen), end), loop, done)
        builder.position_at_end(done)
        halves = [builder.extract_element(y, ir.Constant(i32, i)) for i in (0, 1)]
        return context.make_tuple(builder, sig.return_type, halves)

    return signature, codegen


_fold: Any = _intrinsic(_fold_py)


def crc_of_folded_py(data: Any, start: Any, end: Any, t: Any) -> Any:  # pragma: no cover
    """`crc_of_sliced`'s answer, bodies of 32 bytes and more folded by carry-less products
    (`_fold`: about 15 ns for a W1 body of 100 bytes against 39 by the tables alone). The
    folded block's CRC from a zero register is the prefix's: 16 independent table lookups."""
    s = np.uint64(start)
    stop = np.uint64(end)
    if stop < s + np.uint64(32):
        return crc_of_sliced(data, s, stop, t)
    rest = (stop - s) & np.uint64(15)
    # Heads of 1 to 3 bytes would split the initial value's 4 bytes over two blocks: those
    # bodies fold from a whole first block and leave their last 1 to 3 bytes to the tables.
    head = rest if rest >= np.uint64(4) else np.uint64(16)
    low, high = _fold(data, s, stop, head)
    c = np.uint32(0)
    for i in range(8):
        c ^= t[15 - i, (low >> np.uint64(8 * i)) & np.uint64(0xFF)]
        c ^= t[7 - i, (high >> np.uint64(8 * i)) & np.uint64(0xFF)]
    c = advance(data, s + head + ((stop - s - head) & ~np.uint64(15)), stop, c, t)
    return np.int64((c ^ _ONES) & np.uint32(0x7FFFFFFF))


crc_of_folded: Any = numba.njit(inline="always")(crc_of_folded_py)

#: CRC-32 (IEEE, reflected) of data[start:end] & 0x7FFFFFFF (LAYOUT-8), given the tables `t`.
crc_of: Any = crc_of_folded if CARRYLESS else crc_of_sliced


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
