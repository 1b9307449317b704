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

from pullspec.fast.kernels import NO_NUMBA_ENV

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
    """The compiled batch scan, chain and single window scan (fast.multiget_numba, loaded from
    numba's disk cache after the first compilation), or None when numba is missing or
    disabled."""
    if os.environ.get(NO_NUMBA_ENV) == "1":
        return None
    try:
        from pullspec.fast import multiget_numba
    except ImportError:
        return None
    return (
        cast(ScanKernel, multiget_numba.scan),
        cast(ScanKernel, multiget_numba.chain),
        cast(ScanKernel, multiget_numba.window_one),
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
