"""The compiled window scans of the read path: one window (get_message's, fast.read_compiled),
every request's window of a get_messages batch, and consecutive pulls of one queue
(pull_through, fast.read_through). Each examines entries as spec.scan.scan_entry does.

Loaded through fast.kernels.load, only when numba is installed and not disabled.
The loops are defined at module level so that numba caches their machine code on disk: a fresh
process (a campaign's Spark worker, a test run) loads them instead of compiling them for about a
second on its first pull. Each request names its consume-queue file by the address of its
mapping (the caller holds the queue's Layout, so the mapping stays open for the call). A scan
that meets what the loop does not model — a returned entry whose record is not readable in the
commit log (STORE-12's MESSAGE_WAS_REMOVING branch) — ends with BAIL and the pull is answered
by the numpy or entry-by-entry scan (fast.read_numpy).
"""

from __future__ import annotations

from typing import Any

import numba
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from pullspec.fast.read_compiled import ALL
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.scan import CQ_EXT_MAX_ADDRESS

# The codes are defined here, the one module that compiles them in (numba invalidates its cache
# of a function only when the function's own file changes); callers read them from this module.
#: Kernel status codes per window.
NO_MATCH, FOUND, BAIL = 0, 1, 2
#: Why a chain stopped: it reached max_offset, a pull needs the Python path, buffers full.
STOP_DONE, STOP_ASK, STOP_FULL = 0, 1, 2


def _load_be64(typingctx: Any, address: Any) -> Any:  # pragma: no cover - compiled
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i64 = ir.IntType(64)
        value = builder.load(builder.inttoptr(args[0], i64.as_pointer()), align=1)
        return builder.bswap(value)

    return types.int64(types.int64), codegen


def _load_be32(typingctx: Any, address: Any) -> Any:  # pragma: no cover - compiled
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32 = ir.IntType(32)
        value = builder.load(builder.inttoptr(args[0], i32.as_pointer()), align=1)
        return builder.sext(builder.bswap(value), ir.IntType(64))

    return types.int64(types.int64), codegen


# Big-endian loads at an address inside a mapping the store holds open for the call.
load_be64: Any = intrinsic(_load_be64)
load_be32: Any = intrinsic(_load_be32)


def window_py(  # pragma: no cover - compiled
    base: int,
    first: int,
    n: int,
    nums: int,
    wanted: int,
    codes: Any,
    log: Any,
    picked_pos: Any,
    picked_phys: Any,
    out: int,
) -> Any:
    """STORE-11/12 over entries [first, first + n) of one consume-queue file: (status,
    scanned, count, total, last phys, next free picked slot). `log` holds the commit-log facts
    and the BATCH-2 limits (fast.read_compiled.LogFacts). With `out` = −1 nothing is picked."""
    log_min, last_start, wrote, f_size, max_offset_py, memory = (
        log[0],
        log[1],
        log[2],
        log[3],
        log[4],
        log[5],
    )
    bytes_disk, count_disk, bytes_mem, count_mem = log[6], log[7], log[8], log[9]
    code0 = codes[0] & 4294967295 if wanted >= 1 else -1
    status = NO_MATCH
    count = 0
    total = 0
    scanned = 0
    last = 0
    for j in range(n):
        p = base + (first + j) * CQ_STORE_UNIT_SIZE
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
        if out >= 0:  # -1: nothing is picked (window_all)
            picked_pos[out] = j
            picked_phys[out] = phys
            out += 1
        count += 1
        total += size
    return status, scanned, count, total, last, out


window: Any = numba.njit(inline="always")(window_py)


def scan_py(  # pragma: no cover - compiled
    address: Any,
    first: Any,
    n: Any,
    nums: Any,
    filter_row: Any,
    codes: Any,
    code_counts: Any,
    log: Any,
    out_status: Any,
    out_scanned: Any,
    out_count: Any,
    out_total: Any,
    out_last: Any,
    picked_start: Any,
    picked_pos: Any,
    picked_phys: Any,
) -> None:
    """Every request's window (row r of the columns), each with its filter row: get_messages'
    batch scan."""
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
            picked_pos,
            picked_phys,
            picked_start[r],
        )
        out_status[r] = status
        out_scanned[r] = scanned
        out_count[r] = count
        out_total[r] = total
        out_last[r] = last


def chain_py(  # pragma: no cover - compiled
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
        pos = offset * CQ_STORE_UNIT_SIZE
        k = (pos - starts[0]) // f_size
        if k < 0 or k >= len(starts) or starts[k] != pos - pos % f_size:
            return row, out, offset, STOP_ASK
        rel = pos - starts[k]
        if rel >= readable[k]:
            return row, out, offset, STOP_ASK
        n = (readable[k] - rel) // CQ_STORE_UNIT_SIZE
        n = min(n, budget)
        if row >= len(out_offset) or out + min(n, per_call) > len(picked_pos):
            return row, out, offset, STOP_FULL
        status, scanned, count, total, last, end = window(
            addresses[k], rel // CQ_STORE_UNIT_SIZE, n, nums, wanted, codes, log, picked_pos,
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


def window_one_py(  # pragma: no cover - compiled
    base: int,
    first: int,
    n: int,
    nums: int,
    wanted: int,
    codes: Any,
    log: Any,
    picked: Any,
) -> Any:
    """One window scan called from Python (get_message's): `window_py` with the picked
    positions and phys in the two rows of `picked` (fewer arguments to type on each call)."""
    return window(base, first, n, nums, wanted, codes, log, picked[0], picked[1], 0)


def window_all_py(  # pragma: no cover - compiled
    base: int,
    first: int,
    n: int,
    nums: int,
    log: Any,
) -> Any:
    """`window_one_py` for a filter that matches every entry (none, `*`, class mode), the usual
    pull, picking nothing: its returned entries are the first `count` examined, in order
    (fast.read_compiled). Three arguments fewer to type and unbox on each call; the facts
    stand in for the codes and the picked rows, which it never reads or writes."""
    return window(base, first, n, nums, ALL, log, log, log, log, -1)


#: The batch scan of get_messages.
scan: Any = numba.njit(cache=True, nogil=True)(scan_py)
#: Consecutive pulls of one queue (pull_through).
chain: Any = numba.njit(cache=True, nogil=True)(chain_py)
#: One window (get_message).
window_one: Any = numba.njit(cache=True, nogil=True)(window_one_py)
#: One window of a match-all filter (get_message).
window_all: Any = numba.njit(cache=True, nogil=True)(window_all_py)
