"""The injectable clock: every timestamp the spec and the reference model use comes from one."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

import attrs

from pullspec.spec.errors import require_int, require_non_negative


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock milliseconds (Java's System.currentTimeMillis)."""

    def now_ms(self) -> int:
        """The current time in milliseconds."""
        ...


@attrs.define
class ManualClock:
    """A clock that only moves when told to: deterministic tests and simulations."""

    now: int = attrs.field(default=0, validator=lambda _i, _a, v: require_int("now", v))

    def now_ms(self) -> int:
        """The current virtual time in milliseconds."""
        return self.now

    def advance(self, ms: int) -> int:
        """Move the clock forward by `ms` ≥ 0 milliseconds and return the new time."""
        now = self.now + require_non_negative("ms", ms)
        # Both addends are checked ints, so the field's validator has nothing left to check;
        # skipping it halves the cost of the one call every lockstep op makes on both sides.
        object.__setattr__(self, "now", now)
        return now

    def jump_to(self, now: int) -> int:
        """Set the clock to `now` (may move backwards, as a wall clock can) and return it."""
        self.now = require_int("now", now)
        return self.now


class SystemClock:
    """The real wall clock."""

    def now_ms(self) -> int:
        """The current wall-clock time in milliseconds."""
        return time.time_ns() // 1_000_000
