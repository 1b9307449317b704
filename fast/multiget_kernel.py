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
#: A filter row whose code count is ALL matches every entry (a null filter, `*`, class mode).
ALL = -1
#: The ext-address bound: a tags code at or below it has no ext unit here and matches.
CQ_EXT_MAX_ADDRESS = -(1 << 31) - 1

ScanKernel = Callable[..., Any]


@functools.cache
def scan_kernel() -> ScanKernel | None:
    """The compiled batch scan, or None when numba is missing or disabled."""
    if os.environ.get(NO_NUMBA_ENV) == "1":
        return None
    try:
        import numba
        import numpy as np
        from numba import types
        from numba.core import cgutils
        from numba.extending import intrinsic
    except ImportError:
        return None

    @intrinsic
    def as_pointer_intrinsic(typingctx: Any, address: Any) -> Any:  # pragma: no cover - compiled
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return types.voidptr(types.int64), codegen

    def be_py(data: Any, p: int, width: int) -> Any:  # pragma: no cover - compiled
        # int64 shifts wrap, so eight bytes assemble into the two's-complement value.
        v = np.int64(0)
        for k in range(width):
            v = (v << np.int64(8)) | np.int64(data[p + k])
        return v

    be = numba.njit(inline="always")(be_py)
    as_pointer: Any = as_pointer_intrinsic
    carray: Any = numba.carray  # type: ignore[attr-defined]

    def scan(  # pragma: no cover - compiled
        address: Any,
        file_bytes: Any,
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
        log_min, last_start, wrote, f_size, max_offset_py, memory = (
            log[0],
            log[1],
            log[2],
            log[3],
            log[4],
            log[5],
        )
        bytes_disk, count_disk, bytes_mem, count_mem = limits[0], limits[1], limits[2], limits[3]
        for r in range(len(address)):
            data = carray(as_pointer(address[r]), (file_bytes[r],), np.uint8)
            row = filter_row[r]
            wanted = code_counts[row]
            status = NO_MATCH
            count = 0
            total = 0
            scanned = 0
            last = 0
            out = picked_start[r]
            for j in range(n[r]):
                p = (first[r] + j) * 20
                phys = be(data, p, 8)
                size = be(data, p + 8, 4)
                if size >= 2147483648:
                    size -= 4294967296
                tags = be(data, p + 12, 8)
                last = phys
                # BATCH-2 before the filter: the entry that makes the batch full ends the scan.
                if total != 0 and count != 0:
                    if nums[r] <= count:
                        break
                    if max_offset_py - phys > memory:
                        if total + size > bytes_disk or count > count_disk - 1:
                            break
                    elif total + size > bytes_mem or count > count_mem - 1:
                        break
                scanned += 1
                matched = wanted == ALL or tags <= CQ_EXT_MAX_ADDRESS
                if not matched:
                    low = tags & 4294967295
                    if low >= 2147483648:
                        low -= 4294967296
                    for c in range(wanted):
                        if codes[row, c] == low:
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
            out_status[r] = status
            out_scanned[r] = scanned
            out_count[r] = count
            out_total[r] = total
            out_last[r] = last

    return cast(ScanKernel, numba.njit(nogil=True)(scan))
