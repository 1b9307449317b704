"""`pullspec demo` runs the documented tour on both profiles."""

from __future__ import annotations

from click.testing import CliRunner

from pullspec.conformance.cli import main


def test_demo_shows_the_offset_corrections_and_long_polling() -> None:
    result = CliRunner().invoke(main, ["demo", "--profile", "4.9"])
    assert 0 == result.exit_code, result.output
    lines = result.output.splitlines()
    below_min = next(line for line in lines if "below min" in line)
    assert "PULL_OFFSET_MOVED" in below_min and "next   0" in below_min
    slave = next(line for line in lines if "on a slave" in line)
    assert "PULL_RETRY_IMMEDIATELY" in slave and "next   0" in slave
    assert any("answered SUCCESS [12]" in line for line in lines)
    assert any("PULL_NOT_FOUND (timeout)" in line for line in lines)


def test_demo_4_7_restarts_from_zero_past_max() -> None:
    result = CliRunner().invoke(main, ["demo", "--profile", "4.7"])
    assert 0 == result.exit_code, result.output
    past_max = next(line for line in result.output.splitlines() if "past max" in line)
    assert "next   0" in past_max  # STORE-8: 4.7 restarts from 0 when minOffset is 0
