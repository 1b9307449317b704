"""How the generators draw (`Draw`: `HypothesisDraw` in the machines, `RandomDraw` in seeded
traces) and what they know of the reference's state (`Context`); conformance.machines.gen and
client_gen draw through these.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

import attrs
from hypothesis import strategies as st

from pullspec.conformance.jsontypes import (
    JSONValue,
    as_array,
    as_object,
    is_array,
    is_object,
    to_int,
)
from pullspec.conformance.ops import (
    DEFAULT_STATE_FIELDS,
    STATE_FIELDS,
    Observation,
    Op,
    check_area,
)

T = TypeVar("T")


class Draw(Protocol):
    """A source of choices."""

    def integer(self, low: int, high: int) -> int:
        """An int in [low, high]."""
        ...

    def choice(self, options: Sequence[T]) -> T:
        """One of `options` (the first is the simplest)."""
        ...

    def boolean(self) -> bool:
        """True or False."""
        ...


@attrs.define
class HypothesisDraw:
    """Draws from a Hypothesis `data()` object (the machines' examples)."""

    data: st.DataObject

    def integer(self, low: int, high: int) -> int:
        """An int in [low, high]."""
        return self.data.draw(st.integers(low, high))

    def choice(self, options: Sequence[T]) -> T:
        """One of `options`."""
        return self.data.draw(st.sampled_from(options))

    def boolean(self) -> bool:
        """True or False."""
        return self.data.draw(st.booleans())


class RandomDraw:
    """Draws from a seeded `random.Random`: deterministic traces without Hypothesis.

    The draws are exactly `rng.randint(low, high)`, `options[rng.randrange(len(options))]` and
    `rng.random() < 0.5`; the first two skip randrange's argument checks (CPython's
    `_randbelow_with_getrandbits`, inlined), which were a fifth of a campaign's generator time."""

    __slots__ = ("_bits", "_random", "rng")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._bits = rng.getrandbits
        self._random = rng.random

    def __repr__(self) -> str:
        return f"RandomDraw(rng={self.rng!r})"

    def integer(self, low: int, high: int) -> int:
        """An int in [low, high]."""
        n = high - low + 1
        if n <= 0:
            raise ValueError(f"empty range for integer({low}, {high})")
        # Random._randbelow_with_getrandbits, inlined here and in `choice`: a campaign op draws
        # about ten times, and a method call was a sixth of a draw.
        k = n.bit_length()
        r = self._bits(k)
        while r >= n:
            r = self._bits(k)
        return low + r

    def choice(self, options: Sequence[T]) -> T:
        """One of `options`."""
        n = len(options)
        if not n:
            raise IndexError("cannot choose from an empty sequence")
        k = n.bit_length()
        r = self._bits(k)
        while r >= n:
            r = self._bits(k)
        return options[r]

    def boolean(self) -> bool:
        """True or False."""
        return self._random() < 0.5


@attrs.define
class Context:
    """What the generators know of the reference's state, updated after every op."""

    area: str
    state_fields: tuple[str, ...] = DEFAULT_STATE_FIELDS
    now: int = 0
    queues: dict[str, tuple[int, int]] = attrs.Factory(dict)
    offsets: list[int] = attrs.Factory(list)
    wrote: list[int] = attrs.Factory(list)
    #: offset_store: whether the store is the local file one (BROADCASTING).
    local: bool = False
    #: Client areas: the seeded case steps still to run, and the once-only ops already run.
    script: list[Op] = attrs.field(factory=list, eq=False)
    started: set[str] = attrs.field(factory=set, eq=False)
    #: ((state_fields, state length), the offsets' positions), computed on the first state.
    _positions: tuple[tuple[tuple[str, ...], int], tuple[int, ...]] | None = attrs.field(
        default=None, init=False, repr=False, eq=False
    )

    @classmethod
    def start(cls, area: str, config: Mapping[str, JSONValue]) -> Context:
        """The context of a fresh instance made from `config`."""
        fields = config.get("stateFields")
        names = tuple(str(f) for f in fields) if is_array(fields) else DEFAULT_STATE_FIELDS
        ctx = cls(check_area(area), names, to_int(config.get("clockStart", 0)))
        ctx.local = config.get("messageModel") == "BROADCASTING"
        return ctx

    def _offset_positions(self, n: int) -> tuple[int, ...]:
        """Where cachedOffsets and consumingOffsets sit in a positional state of `n` values."""
        key = (self.state_fields, n)
        if self._positions is None or self._positions[0] != key:
            wanted = ("cachedOffsets", "consumingOffsets")
            at = tuple(i for i, f in enumerate(self.state_fields[:n]) if f in wanted)
            self._positions = (key, at)
        return self._positions[1]

    def note(self, op: Op, seen: Observation) -> None:
        """Learn from the reference's observation of `op`."""
        self.note_raw(op, {**seen.fields, **seen.state})

    def note_raw(self, op: Op, raw: Mapping[str, JSONValue]) -> None:
        """Learn from the reference's flat observation of `op`, as Observation.from_json reads
        it: only the area's STATE_FIELDS keys are state. The campaign's loop calls this one,
        so that a trace whose sides agree never builds an Observation."""
        state_keys = STATE_FIELDS[self.area]
        if "now" in state_keys and "now" in raw:
            self.now = to_int(raw["now"])
        queues = raw.get("queues") if "queues" in state_keys else None
        for qid, bounds in queues.items() if is_object(queues) else ():
            if type(bounds) is not dict:
                bounds = as_object(bounds)
            low, high = bounds["minOffset"], bounds["maxOffset"]
            # The reference's str keys and exact ints skip the conversions: a store op learns
            # two or more queues, and this loop was most of its note.
            self.queues[qid if type(qid) is str else str(qid)] = (
                low if type(low) is int else to_int(low),
                high if type(high) is int else to_int(high),
            )
        # maxOffset, minOffset and results are result fields in every area.
        if raw.get("maxOffset") is not None and "queueId" in op.args:
            bounds = (to_int(raw["minOffset"]), to_int(raw["maxOffset"]))
            self.queues[str(op.args["queueId"])] = bounds
        state = raw.get("state") if "state" in state_keys else None
        if isinstance(state, list):
            self.offsets = sorted(
                {
                    o
                    for at in self._offset_positions(len(state))
                    for o in as_array(state[at])
                    if isinstance(o, int)
                }
            )
        results = raw.get("results")
        for r in results if is_array(results) else ():
            if is_object(r) and "wroteOffset" in r:
                self.wrote.append(to_int(r["wroteOffset"]))
        table = raw.get("table") if "table" in state_keys else None
        if self.area == "offset_store" and isinstance(table, list):
            self.offsets = sorted({to_int(as_object(e)["offset"]) for e in table})
