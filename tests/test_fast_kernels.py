"""pullspec.fast.kernels: the compiled body-CRC loop answers what zlib answers, record by record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.fast import kernels


def _zlib_crcs(data: bytes, starts: list[int], lengths: list[int]) -> list[int]:
    return [zlib.crc32(data[s : s + n]) & 0x7FFFFFFF for s, n in zip(starts, lengths, strict=True)]


def test_slicing_tables_advance_by_zero_bytes() -> None:
    t = kernels.crc_tables()
    # Row 0 is the classic byte table; row s is row s-1 advanced by one zero byte.
    assert 0x77073096 == int(t[0, 1])
    for s in range(1, 16):
        expected = (t[s - 1] >> 8) ^ t[0][t[s - 1] & 0xFF]
        assert expected.tolist() == t[s].tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.binary(min_size=0, max_size=600),
    st.lists(st.tuples(st.integers(0, 600), st.integers(0, 40)), min_size=0, max_size=40),
)
def test_body_crcs_equal_zlib(blob: bytes, ranges: list[tuple[int, int]]) -> None:
    ranges = [(s, n) for s, n in ranges if s + n <= len(blob)]
    starts = [s for s, _ in ranges]
    lengths = [n for _, n in ranges]
    data = np.frombuffer(blob, dtype=np.uint8)
    got = kernels.body_crcs(data, np.array(starts, dtype=np.int64), np.array(lengths, np.int64))
    assert _zlib_crcs(blob, starts, lengths) == got.tolist()


@pytest.mark.parametrize("path", ["serial", "threads", "zlib"])
def test_many_records_every_path(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "zlib":
        monkeypatch.setattr(kernels, "_compiled", lambda *_: None)
    if path == "threads":
        monkeypatch.setattr(kernels, "PARALLEL_FROM", 100)
    rng = np.random.default_rng(7)
    blob = rng.integers(0, 256, 50_000, dtype=np.uint8)
    lengths = rng.integers(0, 200, 300)
    starts = np.array([rng.integers(0, len(blob) - n) for n in lengths], dtype=np.int64)
    got = kernels.body_crcs(blob, starts, lengths)
    assert _zlib_crcs(blob.tobytes(), starts.tolist(), lengths.tolist()) == got.tolist()


def test_ranges_outside_the_data_are_refused() -> None:
    data = np.zeros(10, dtype=np.uint8)
    with pytest.raises(ValueError, match="outside"):
        kernels.body_crcs(data, np.array([5]), np.array([6]))
    with pytest.raises(ValueError, match="1 starts but 2 lengths"):
        kernels.body_crcs(data, np.array([0]), np.array([1, 2]))


def _x_to_the(n: int) -> int:
    """x^n mod the CRC-32 polynomial x^32 + x^26 + … + 1 (0x104C11DB7), shift and subtract."""
    r = 1
    for _ in range(n):
        r <<= 1
        if r & (1 << 32):
            r ^= 0x104C11DB7
    return r


def _reflected(v: int, bits: int) -> int:
    return int(format(v, f"0{bits}b")[::-1], 2)


def _records() -> ModuleType:
    compiled = kernels.load(kernels.numba_records)
    if compiled is None:
        pytest.skip("numba missing or disabled: no compiled CRC")
    return compiled


def test_fold_constants_move_a_block_sixteen_bytes() -> None:
    records = _records()
    # The low 8 bytes of a reflected block are its high-degree half: they move by x^(128 + 32),
    # the high 8 bytes by x^(128 - 32); reflected, each product comes out one bit short.
    assert _reflected(_x_to_the(160), 32) << 1 == records.FOLD_LOW
    assert _reflected(_x_to_the(96), 32) << 1 == records.FOLD_HIGH


@pytest.mark.parametrize(
    ("cpu_name", "cpu_features", "host", "expected"),
    [
        (None, None, {"pclmul": True, "ssse3": True}, True),
        (None, None, {"pclmul": False, "ssse3": True}, False),
        (None, None, {"pclmul": True}, False),
        (None, None, {"neon": True}, False),
        ("generic", None, {"pclmul": True, "ssse3": True}, False),
        (None, "+sse2", {"pclmul": True, "ssse3": True}, False),
    ],
)
def test_carryless_multiply_only_for_the_host_with_pclmul(
    cpu_name: str | None, cpu_features: str | None, host: dict[str, bool], expected: bool
) -> None:
    records = _records()
    assert expected == records.carryless_multiply(cpu_name, cpu_features, host)


def test_a_host_llvm_cannot_describe_gets_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    records = _records()

    def unknown() -> dict[str, bool]:
        raise RuntimeError("failed to get host cpu features")

    monkeypatch.setattr(records.llvmlite.binding, "get_host_cpu_features", unknown)
    assert not records.carryless_multiply(None, None, records._host_features())


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.integers(0, 300), st.integers(0, 300))
def test_both_crcs_equal_zlib_at_every_length(blob: bytes, start: int, length: int) -> None:
    records = _records()
    start = min(start, len(blob))
    end = min(start + length, len(blob))
    data = np.frombuffer(blob, dtype=np.uint8)
    expected = zlib.crc32(blob[start:end]) & 0x7FFFFFFF
    t = kernels.crc_tables()
    assert expected == records.crc_of_sliced(data, start, end, t)
    if records.CARRYLESS:
        assert expected == records.crc_of_folded(data, start, end, t)


def test_folded_crc_every_head_and_tail() -> None:
    records = _records()
    if not records.CARRYLESS:
        pytest.skip("this CPU has no PCLMULQDQ: crc_of is crc_of_sliced")
    rng = np.random.default_rng(11)
    blob = rng.integers(0, 256, 400, dtype=np.uint8)
    t = kernels.crc_tables()
    # Every length from 0 to 80 (the heads 4 … 16 and the 1 to 3 bytes left to the tables),
    # at every alignment of a 16-byte block.
    for length in range(81):
        for start in range(16):
            expected = zlib.crc32(blob[start : start + length].tobytes()) & 0x7FFFFFFF
            assert expected == records.crc_of_folded(blob, start, start + length, t), (
                start,
                length,
            )


#: Run where numba compiles for a CPU without PCLMULQDQ: the body CRCs and the batch encoder,
#: each record's CRC field read back from the encoded bytes.
_GENERIC_CPU = """
import json, sys, zlib
import numpy as np
from pullspec.fast import kernels
from pullspec.fast.encode_kernels import HEAD_LENGTH, Run, encode_run, host_bytes, make_tails

records = kernels.load(kernels.numba_records)
rng = np.random.default_rng(5)
body = rng.integers(0, 256, 8000, dtype=np.uint8)
n = 120
body_lengths = np.arange(n, dtype=np.int64)
body_starts = np.concatenate(([0], np.cumsum(body_lengths)[:-1])).astype(np.int64)
expected = [zlib.crc32(body[s : s + k].tobytes()) & 0x7FFFFFFF
            for s, k in zip(body_starts, body_lengths)]
crcs = kernels.body_crcs(body, body_starts, body_lengths).tolist()
lengths = HEAD_LENGTH + body_lengths + 4  # [1]T and an empty properties string
rel = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
zero = np.zeros(n, dtype=np.int64)
run = Run(rel, lengths, zero, zero, zero, rel, zero, zero, zero, body_starts, body_lengths,
          zero, zero)
out = np.zeros(int(lengths.sum()), dtype=np.uint8)
host = host_bytes(bytes(4), 0)
encode_run(out, 0, run, body, make_tails([b"T"], [b""]), 0, 0, host, host)
stored = [int.from_bytes(out[r + 8 : r + 12].tobytes(), "big") for r in rel]
json.dump({"carryless": records.CARRYLESS, "crcs": crcs == expected,
           "encoded": stored == expected}, sys.stdout)
"""


def test_without_pclmul_the_loops_use_the_tables(tmp_path: Path) -> None:
    _records()
    # A CPU named for numba may lack the instruction: `crc_of` is then the sliced one, and the
    # loops that call it must compile and answer zlib's CRCs (a cache of their own).
    env = {**os.environ, "NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _GENERIC_CPU], env=env, capture_output=True, text=True, check=False
    )
    assert 0 == done.returncode, done.stderr
    assert {"carryless": False, "crcs": True, "encoded": True} == json.loads(done.stdout)
