"""Record checks for recovery: walking the commit log record by record (compiled when
fast.recovery_kernels is, in Python otherwise) or, along the positions the consume queues name,
in bulk with numpy; BODYCRCs of many records at once (LAYOUT-5, LAYOUT-6, LAYOUT-8)."""

from __future__ import annotations

import mmap
import struct

import numpy as np
import numpy.typing as npt

from pullspec.fast.gather import I64, U8, gather_be
from pullspec.fast.kernels import body_crcs
from pullspec.fast.mapped import MappedFile
from pullspec.fast.recovery_kernels import record_fields
from pullspec.fast.recovery_kernels import walk as walk_compiled
from pullspec.spec.layout import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
)
from pullspec.spec.record import MIN_RECORD_LENGTH, OFF_BODY_CRC, OFF_PHYSICAL_OFFSET, OFF_SYS_FLAG


def validate_headers(data: U8, pos: I64, file_start: int, limit: int) -> npt.NDArray[np.bool_]:
    """Which of the records at `pos` (positions inside one file) have well-formed headers: the
    message magic, a TOTALSIZE inside the readable part, PHYSICALOFFSET naming their own place,
    and field lengths adding up to TOTALSIZE (LAYOUT-5, LAYOUT-6)."""
    size = gather_be(data, pos, 4)
    magic = gather_be(data, pos + 4, 4)
    stamped = gather_be(data, pos + OFF_PHYSICAL_OFFSET, 8)
    sys_flag = gather_be(data, pos + OFF_SYS_FLAG, 4)
    v6 = ((sys_flag & SYSFLAG_BORNHOST_V6) != 0).astype(np.int64) + (
        (sys_flag & SYSFLAG_STOREHOST_V6) != 0
    ).astype(np.int64)
    body_at = pos + 84 + 12 * v6
    body_len = gather_be(data, body_at, 4)
    topic_at = body_at + 4 + np.maximum(body_len, 0)
    topic_len = gather_be(data, topic_at, 1)
    props_at = topic_at + 1 + np.maximum(topic_len, 0)
    props_len = gather_be(data, props_at, 2)
    computed = props_at + 2 + np.maximum(props_len, 0) - pos
    ok: npt.NDArray[np.bool_] = (
        (magic == MESSAGE_MAGIC_CODE)
        & (size >= MIN_RECORD_LENGTH)
        & (pos + size <= limit)
        & (stamped == file_start + pos)
        & (body_len >= 0)
        & (topic_len >= 0)
        & (computed == size)
    )
    return ok


_SIZE_MAGIC = struct.Struct(">ii")
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")


def walk_records(
    mm: mmap.mmap, pos: int, limit: int, file_start: int, stop_at: int
) -> tuple[list[int], int, int]:
    """Walk records one by one from `pos` with the same checks as `validate_headers`, until
    `stop_at` is reached (a hinted position, to go back to bulk checks), the end of the readable
    part, a blank or a bad record. Returns (positions, end, how): how is 1 at a blank, −1 at a
    bad record or the end, 0 at `stop_at`."""
    out: list[int] = []
    unpack_size_magic, unpack_long = _SIZE_MAGIC.unpack_from, _LONG.unpack_from
    unpack_int, unpack_short = _INT.unpack_from, _SHORT.unpack_from
    while pos < stop_at:
        if pos + 8 > limit:
            return out, pos, -1
        size, magic = unpack_size_magic(mm, pos)
        if magic == BLANK_MAGIC_CODE:
            return out, pos, 1
        if magic != MESSAGE_MAGIC_CODE or size < MIN_RECORD_LENGTH or pos + size > limit:
            return out, pos, -1
        if unpack_long(mm, pos + OFF_PHYSICAL_OFFSET)[0] != file_start + pos:
            return out, pos, -1
        flags = unpack_int(mm, pos + OFF_SYS_FLAG)[0]
        at = pos + 84 + (12 if flags & SYSFLAG_BORNHOST_V6 else 0)
        at += 12 if flags & SYSFLAG_STOREHOST_V6 else 0
        if at + 4 > pos + size:
            return out, pos, -1
        body = unpack_int(mm, at)[0]
        if body < 0 or at + 4 + body >= pos + size:
            return out, pos, -1
        at += 4 + body
        topic = mm[at]
        if topic > 127 or at + 1 + topic + 2 > pos + size:
            return out, pos, -1
        at += 1 + topic
        props = unpack_short(mm, at)[0]
        if at + 2 + max(props, 0) != pos + size:
            return out, pos, -1
        out.append(pos)
        pos += size
    return out, pos, 0


def walk_file(f: MappedFile, start: int, limit: int, hints: I64) -> tuple[I64, int, bool]:
    """The message records of `f` from byte `start`: (positions, end, ended_on_blank). Chains of
    hinted positions are confirmed in bulk; the rest is walked record by record."""
    data = f.data
    out: list[I64] = []
    pos = start
    while True:
        k = int(np.searchsorted(hints, pos))
        if k < len(hints) and hints[k] == pos:
            h = hints[k:]
            sizes = gather_be(data, h, 4)
            link = h[:-1] + sizes[:-1] == h[1:]
            m = int(np.argmin(link)) if len(link) and not link.all() else len(h) - 1
            chain = h[: m + 1]
            good = validate_headers(data, chain, f.start, limit)
            j = int(np.argmin(good)) if not good.all() else len(chain)
            if j > 0:
                out.append(chain[:j])
                pos = int(chain[j - 1] + sizes[j - 1])
                continue
        nxt = int(hints[k]) if k < len(hints) and hints[k] > pos else limit + 1
        found, pos, how = walk_records(f.mm, pos, limit, f.start, nxt)
        if found:
            out.append(np.array(found, dtype=np.int64))
        if how == 1:
            return _concat(out), pos, True
        if how == -1:
            break
        if k < len(hints) and hints[k] == pos and not found:
            break  # a hinted position that fails the bulk check also fails one by one
    return _concat(out), pos, False


def _concat(parts: list[I64]) -> I64:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def body_ranges(data: U8, positions: I64) -> tuple[I64, I64]:
    """Where the bodies of the records at `positions` start and how long they are."""
    sys_flag = gather_be(data, positions + OFF_SYS_FLAG, 4)
    v6 = ((sys_flag & SYSFLAG_BORNHOST_V6) != 0).astype(np.int64) + (
        (sys_flag & SYSFLAG_STOREHOST_V6) != 0
    ).astype(np.int64)
    body_at = positions + 88 + 12 * v6
    return body_at, gather_be(data, body_at - 4, 4)


def first_bad_crc(data: U8, stored: I64, body_at: I64, body_len: I64) -> int:
    """How many leading records (bodies at `body_at`, `body_len` long) carry a BODYCRC `stored`
    matching their body (LAYOUT-8)."""
    if len(stored) == 0:
        return 0
    bad = body_crcs(data, body_at, body_len) != stored
    return int(np.argmax(bad)) if bad.any() else len(stored)


def check_crcs(f: MappedFile, positions: I64) -> int:
    """How many leading records of `positions` carry a BODYCRC matching their body (LAYOUT-8)."""
    if len(positions) == 0:
        return 0
    stored = gather_be(f.data, positions + OFF_BODY_CRC, 4)
    return first_bad_crc(f.data, stored, *body_ranges(f.data, positions))


def scan_file(
    f: MappedFile, start: int, limit: int, hints: I64, check_crc: bool
) -> tuple[I64, int, bool]:
    """The records of `f` from byte `start` that pass the header checks and, when `check_crc`,
    the BODYCRC check: (positions, end, ended_on_blank). The scan ends at the first record that
    fails either. Compiled, one sequential walk; else `walk_file` along the hinted positions."""
    walked = walk_compiled(f.data, start, limit, f.start)
    if walked is None:
        found, stop, blank = walk_file(f, start, limit, hints)
        if not check_crc or len(found) == 0:
            return found, stop, blank
        ok = check_crcs(f, found)
    else:
        found, stop, blank = walked.positions, walked.end, walked.how == 1
        if not check_crc or len(found) == 0:
            return found, stop, blank
        ok = first_bad_crc(f.data, walked.body_crc, walked.body_at, walked.body_len)
    if ok < len(found):
        return found[:ok], int(found[ok]), False
    return found, stop, blank


def dispatch_fields(f: MappedFile, pos: I64) -> dict[str, I64]:
    """The fields dispatch reads from the records at `pos` of `f`, gathered in one pass."""
    data = f.data
    compiled = record_fields(data, pos)
    if compiled is not None:
        return compiled
    sys_flag = gather_be(data, pos + OFF_SYS_FLAG, 4)
    v6 = ((sys_flag & SYSFLAG_BORNHOST_V6) != 0).astype(np.int64) + (
        (sys_flag & SYSFLAG_STOREHOST_V6) != 0
    ).astype(np.int64)
    body_at = pos + 84 + 12 * v6
    topic_at = body_at + 4 + gather_be(data, body_at, 4)
    topic_len = gather_be(data, topic_at, 1)
    props_at = topic_at + 1 + topic_len
    return {
        "size": gather_be(data, pos, 4),
        "queue_id": gather_be(data, pos + 12, 4),
        "queue_offset": gather_be(data, pos + 20, 8),
        "sys_flag": sys_flag,
        "topic_at": topic_at + 1,
        "topic_len": topic_len,
        "props_at": props_at + 2,
        "props_len": np.maximum(gather_be(data, props_at, 2), 0),
    }
