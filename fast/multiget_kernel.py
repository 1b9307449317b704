"""The compiled window scan of get_messages: every request's consume-queue window examined entry
by entry, as spec.scan.scan_entry does, in one call for the whole batch.

Each request names its consume-queue file by the address of its mapping (the store holds the
mapping open for the call), so no array of arrays has to be built per batch. A request whose scan
meets what the loop does not model — a returned entry whose record is not readable in the commit
log (STORE-12's MESSAGE_WAS_REMOVING branch) — is marked BAIL and answered by get_message's path.
Without numba (or with PULLSPEC_NO_NUMBA=1) `scan_kernel()` is None and get_messages keeps its
numpy pass.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, cast

from fast.kernels import NO_NUMBA_ENV

#: Kernel status codes per request.
NO_MATCH, FOUND, BAIL = 0, 1, 2
#: Why a chain stopped: it reached max_offset, a pull needs get_message's path, buffers full.
STOP_DONE, STOP_ASK, STOP_FULL = 0, 1, 2
#: A filter row whose code count is ALL matches every entry (a null filter, `*`, class mode).
ALL = -1
#: The ext-address bound: a tags code at or below it has no ext unit here and matches.
CQ_EXT_MAX_ADDRESS = -(1 << 31) - 1

ScanKernel = Callable[..., Any]


@functools.cache
def _kernels() -> tuple[ScanKernel, ScanKernel, ScanKernel] | None:
    """The compiled batch scan, chain and single window scan, or None when numba is missing or
    disabled."""
    if os.environ.get(NO_NUMBA_ENV) == "1":
        return None
    try:
        import numba
        from llvmlite import ir
        from numba import types
        from numba.extending import intrinsic
    except ImportError:
        return None

    @intrinsic
    def load_be64_intrinsic(typingctx: Any, address: Any) -> Any:  # pragma: no cover - compiled
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            i64 = ir.IntType(64)
            value = builder.load(builder.inttoptr(args[0], i64.as_pointer()), align=1)
            return builder.bswap(value)

        return types.int64(types.int64), codegen

    @intrinsic
    def load_be32_intrinsic(typingctx: Any, address: Any) -> Any:  # pragma: no cover - compiled
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            i32 = ir.IntType(32)
            value = builder.load(builder.inttoptr(args[0], i32.as_pointer()), align=1)
            return builder.sext(builder.bswap(value), ir.IntType(64))

        return types.int64(types.int64), codegen

    # Big-endian loads at an address inside a mapping the store holds open for the call.
    load_be64: Any = load_be64_intrinsic
    load_be32: Any = load_be32_intrinsic

    def window_py(  # pragma: no cover - compiled
        base: int,
        first: int,
        n: int,
        nums: int,
        wanted: int,
        codes: Any,
        log: Any,
        limits: Any,
        picked_pos: Any,
        picked_phys: Any,
        out: int,
    ) -> Any:
        """STORE-11/12 over entries [first, first + n) of one consume-queue file: (status,
        scanned, count, total, last phys, next free picked slot)."""
        log_min, last_start, wrote, f_size, max_offset_py, memory = (
            log[0],
            log[1],
            log[2],
            log[3],
            log[4],
            log[5],
        )
        bytes_disk, count_disk, bytes_mem, count_mem = limits[0], limits[1], limits[2], limits[3]
        code0 = codes[0] & 4294967295 if wanted >= 1 else -1
        status = NO_MATCH
        count = 0
        total = 0
        scanned = 0
        last = 0
        for j in range(n):
            p = base + (first + j) * 20
            phys = load_be64(p)
            size = load_be32(p + 8)
            tags = load_be64(p + 12)
            last = phys
            # BATCH-2 before the filter: the entry that makes the batch full ends the scan.
            if total != 0 and count != 0:
                if nums <= count:
                    break
                if max_offset_py - phys > memory:
                    if total + size > bytes_disk or count > count_disk - 1:
                        break
                elif total + size > bytes_mem or count > count_mem - 1:
                    break
            scanned += 1
            # FILTER-4 on Long.intValue(): compared as unsigned 32-bit patterns.
            low = tags & 4294967295
            if wanted == 1:
                matched = low == code0 or tags <= CQ_EXT_MAX_ADDRESS
            else:
                matched = wanted == ALL or tags <= CQ_EXT_MAX_ADDRESS
                if not matched:
                    for c in range(wanted):
                        if codes[c] & 4294967295 == low:
                            matched = True
                            break
            if not matched:
                continue
            present = size > 0 and phys >= log_min
            if present:
                if phys < last_start:
                    present = phys % f_size + size <= f_size
                else:
                    present = phys - last_start + size <= wrote
            if not present:
                status = BAIL
                break
            status = FOUND
            picked_pos[out] = j
            picked_phys[out] = phys
            out += 1
            count += 1
            total += size
        return status, scanned, count, total, last, out

    window = numba.njit(inline="always")(window_py)

    def scan(  # pragma: no cover - compiled
        address: Any,
        first: Any,
        n: Any,
        nums: Any,
        filter_row: Any,
        codes: Any,
        code_counts: Any,
        log: Any,
        limits: Any,
        out_status: Any,
        out_scanned: Any,
        out_count: Any,
        out_total: Any,
        out_last: Any,
        picked_start: Any,
        picked_pos: Any,
        picked_phys: Any,
    ) -> None:
        for r in range(len(address)):
            row = filter_row[r]
            status, scanned, count, total, last, _ = window(
                address[r],
                first[r],
                n[r],
                nums[r],
                code_counts[row],
                codes[row],
                log,
                limits,
                picked_pos,
                picked_phys,
                picked_start[r],
            )
            out_status[r] = status
            out_scanned[r] = scanned
            out_count[r] = count
            out_total[r] = total
            out_last[r] = last

    def chain(  # pragma: no cover - compiled
        addresses: Any,
        starts: Any,
        readable: Any,
        f_size: int,
        offset: int,
        max_offset: int,
        nums: int,
        budget: int,
        wanted: int,
        codes: Any,
        log: Any,
        limits: Any,
        row: int,
        out: int,
        out_offset: Any,
        out_status: Any,
        out_scanned: Any,
        out_count: Any,
        out_total: Any,
        out_last: Any,
        picked_start: Any,
        picked_pos: Any,
        picked_phys: Any,
    ) -> Any:
        """Consecutive pulls of one queue from `offset`, each at the previous one's end, until
        max_offset: (rows written, picked slots used, offset reached, why it stopped)."""
        per_call = nums if nums > 1 else 1
        while offset < max_offset:
            pos = offset * 20
            k = (pos - starts[0]) // f_size
            if k < 0 or k >= len(starts) or starts[k] != pos - pos % f_size:
                return row, out, offset, STOP_ASK
            rel = pos - starts[k]
            if rel >= readable[k]:
                return row, out, offset, STOP_ASK
            n = (readable[k] - rel) // 20
            n = min(n, budget)
            if row >= len(out_offset) or out + min(n, per_call) > len(picked_pos):
                return row, out, offset, STOP_FULL
            status, scanned, count, total, last, end = window(
                addresses[k], rel // 20, n, nums, wanted, codes, log, limits, picked_pos,
                picked_phys, out,
            )  # fmt: skip
            if status == BAIL:
                return row, out, offset, STOP_ASK
            out_offset[row] = offset
            out_status[row] = status
            out_scanned[row] = scanned
            out_count[row] = count
            out_total[row] = total
            out_last[row] = last
            picked_start[row] = out
            out = end
            row += 1
            offset += scanned
        return row, out, offset, STOP_DONE

    return (
        cast(ScanKernel, numba.njit(nogil=True)(scan)),
        cast(ScanKernel, numba.njit(nogil=True)(chain)),
        cast(ScanKernel, numba.njit(nogil=True)(window_py)),
    )


def scan_kernel() -> ScanKernel | None:
    """The compiled batch scan, or None when numba is missing or disabled."""
    kernels = _kernels()
    return None if kernels is None else kernels[0]


def chain_kernel() -> ScanKernel | None:
    """The compiled run of consecutive pulls on one queue, or None without numba."""
    kernels = _kernels()
    return None if kernels is None else kernels[1]


def window_kernel() -> ScanKernel | None:
    """The compiled scan of one window (get_message's), or None without numba."""
    kernels = _kernels()
    return None if kernels is None else kernels[2]
