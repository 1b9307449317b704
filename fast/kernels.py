"""How fast's compiled loops are loaded (`load`), and the body CRC of many records.

Every compiled loop lives in a module of the numba_* family — fast.numba_read (the window scans of
pulls), fast.numba_records (body CRCs and the MessageBatch encoder), fast.numba_recovery (the
recovery walk) — compiled at import with numba's disk cache and imported only through `load`,
so `import fast` never imports numba and PULLSPEC_NO_NUMBA=1 turns every one off.

LAYOUT-8's BODYCRC is one CRC-32 per record; called once per record from Python it costs more
than the rest of an append or a recovery. With numba installed (the `accel` extra) the loop runs
compiled (16 bytes a step by carry-less multiplication where the CPU has it, else slicing-by-16
tables; several records per thread); without it the same answers come from `zlib.crc32` record
by record.
"""

from __future__ import annotations

import functools
import importlib
import os
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

import numpy as np

from pullspec.fast.gather import I64, U8

#: Environment variable that, when set to 1, keeps the kernels on the pure-Python fallback.
NO_NUMBA_ENV = "PULLSPEC_NO_NUMBA"
#: Records per call below which the fallback is used anyway (compiled dispatch costs ~µs).
SMALL = 16
#: Records per call from which the CRCs are spread over threads: below it, waking the threads
#: costs more than it saves, and several processes sharing the cores (a Spark campaign's
#: workers) would keep them spinning.
PARALLEL_FROM = 1 << 16

_POLY = 0xEDB88320


@functools.cache
def load(importer: Callable[[], ModuleType]) -> ModuleType | None:
    """The compiled kernel module `importer` imports (fast.numba_read, …), or None when numba is
    missing or disabled (PULLSPEC_NO_NUMBA=1): the one way every compiled loop is loaded. Each
    such module compiles its loops at import with numba's disk cache, so a fresh process loads
    their machine code instead of compiling it; importing `fast` itself never imports numba.
    `importer` is a function of the module that needs the loops, naming them literally, so the
    import graph shows who needs which loops (and that no loop imports back).

    Example: ``load(numba_records)`` is fast.numba_records, or None without numba."""
    if os.environ.get(NO_NUMBA_ENV) == "1":
        return None
    try:
        return importer()
    except ImportError:
        return None


def numba_records() -> ModuleType:
    """Import fast.numba_records (body CRCs and the MessageBatch encoder); see `load`."""
    return importlib.import_module("pullspec.fast.numba_records")


CrcKernel = Callable[[U8, I64, I64, Any], Any]


def crc_tables() -> Any:
    """The 16 × 256 slicing-by-16 tables of CRC-32 (IEEE, reflected): row 0 is the byte table,
    row s advances a CRC by s more zero bytes."""
    t = np.zeros((16, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (_POLY ^ (c >> 1)) if c & 1 else c >> 1
        t[0, i] = c
    for s in range(1, 16):
        t[s] = (t[s - 1] >> 8) ^ t[0][t[s - 1] & 0xFF]
    return t


def _compiled(records: int = 0) -> CrcKernel | None:
    """The compiled CRC kernel for `records` records (fast.numba_records) — on numba's threads
    from PARALLEL_FROM on — or None when numba is missing or disabled."""
    compiled = load(numba_records)
    if compiled is None:
        return None
    return cast(CrcKernel, compiled.crcs_parallel if records >= PARALLEL_FROM else compiled.crcs)


@functools.cache
def _tables() -> Any:
    return crc_tables()


def accelerated() -> bool:
    """Whether the compiled kernels are in use (numba importable and not disabled)."""
    return _compiled() is not None


def body_crcs(data: U8, starts: I64, lengths: I64) -> I64:
    """LAYOUT-8 for many records: CRC-32 & 0x7FFFFFFF of data[starts[k] : starts[k] +
    lengths[k]] for every k, as int64. Every range must lie inside `data`."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    if len(starts) != len(lengths):
        raise ValueError(f"{len(starts)} starts but {len(lengths)} lengths")
    if len(starts) and (
        int(starts.min()) < 0 or int(lengths.min()) < 0 or int((starts + lengths).max()) > len(data)
    ):
        raise ValueError("a CRC range lies outside the data")
    kernel = _compiled(len(starts)) if len(starts) >= SMALL else None
    if kernel is None:
        view = np.ascontiguousarray(data).data.cast("B") if len(data) else memoryview(b"")
        crc = zlib.crc32
        return np.array(
            [
                crc(view[s : s + n]) & 0x7FFFFFFF
                for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)
            ],
            dtype=np.int64,
        )
    return cast(I64, kernel(data, starts, lengths, _tables()))
