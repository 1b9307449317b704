"""pullspec.fast.kernels: the compiled body-CRC loop answers what zlib answers, record by record."""

from __future__ import annotations

import zlib

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
