"""spec.evolve: the same copies and the same errors as attrs.evolve, on every kind of field attrs
has (private, keyword-only, not in __init__, converted, validated, post-init checked)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.spec.errors import InvalidTypeError, require_int
from pullspec.spec.evolve import evolve
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.process_queue import ProcessQueueState


def _ints(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)


@attrs.frozen
class Mixed:
    """A field of every kind attrs.evolve treats differently."""

    first: int
    _private: int = 0
    converted: tuple[int, ...] = attrs.field(default=(), converter=_ints)
    checked: int = attrs.field(default=0, validator=lambda _i, _a, v: require_int("checked", v))
    later: int = attrs.field(default=1, kw_only=True)
    derived: int = attrs.field(init=False)

    @derived.default
    def _derived(self) -> int:
        return self.first + self._private

    def __attrs_post_init__(self) -> None:
        if self.first < 0:
            raise ValueError("first < 0")


@attrs.frozen
class Interleaved:
    """A keyword-only field between positional ones (__init__ takes it after them)."""

    a: int
    k: int = attrs.field(default=0, kw_only=True)
    b: int = 0


@attrs.frozen(init=False)
class OwnInit:
    """A class with its own __init__, whose arguments come in another order."""

    x: int
    y: str

    def __init__(self, y: str, x: int = 0) -> None:
        self.__attrs_init__(x, y)


@attrs.frozen
class One:
    only: str


@attrs.frozen
class Child(One):
    extra: int = 0


MIXED = Mixed(1, private=2, converted=[3], checked=4, later=5)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"first": 7},
        {"private": 9},
        {"converted": [1, 2]},
        {"checked": 8},
        {"later": 6},
        {"first": 2, "later": 3, "private": 4},
    ],
)
def test_evolve_copies_as_attrs_does(changes: dict[str, Any]) -> None:
    expected = attrs.evolve(MIXED, **changes)
    actual = evolve(MIXED, **changes)
    assert expected == actual
    assert (expected.derived, expected.converted) == (actual.derived, actual.converted)


def test_evolve_keeps_the_values_it_was_not_given() -> None:
    assert Mixed(7, private=2, converted=(3,), checked=4, later=5) == evolve(MIXED, first=7)
    assert 9 == evolve(MIXED, first=7).derived  # recomputed by __init__, as attrs.evolve does


def test_evolve_runs_validators_converters_and_post_init() -> None:
    with pytest.raises(InvalidTypeError):
        evolve(MIXED, checked="4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="first < 0"):
        evolve(MIXED, first=-1)
    assert (1, 2) == evolve(MIXED, converted=[1, 2]).converted
    assert MIXED == evolve(MIXED)  # the original is untouched by any of the above


@pytest.mark.parametrize("name", ["derived", "_private", "nope"])
def test_evolve_refuses_a_name_init_does_not_take(name: str) -> None:
    changes: dict[str, Any] = {name: 1}
    with pytest.raises(TypeError):
        attrs.evolve(MIXED, **changes)
    with pytest.raises(TypeError, match=name):
        evolve(MIXED, **changes)


def test_evolve_of_one_field_a_subclass_and_spec_values() -> None:
    assert Interleaved(1, 5, k=3) == evolve(Interleaved(1, 2, k=3), b=5)
    assert OwnInit("b", 1) == evolve(OwnInit("a", 1), y="b") == attrs.evolve(OwnInit("a", 1), y="b")
    assert Interleaved(1, 2, k=4) == evolve(Interleaved(1, 2, k=3), k=4)
    assert One("b") == evolve(One("a"), only="b")
    assert Child("a", 2) == evolve(Child("a", 1), extra=2)
    assert type(evolve(Child("a"), only="b")) is Child
    assert MessageQueue("T", "b", 1) == evolve(MessageQueue("T", "b", 0), queue_id=1)
    msg = StoredMessage(
        topic="T", queue_id=0, queue_offset=3, commitlog_offset=0, size=0, tags_code=0, body=b""
    )
    assert attrs.evolve(msg, properties={"A": "b"}) == evolve(msg, properties={"A": "b"})


def test_evolve_refuses_what_is_not_an_attrs_instance() -> None:
    with pytest.raises(attrs.exceptions.NotAnAttrsClassError):
        evolve(3)  # type: ignore[misc]


STATE_FIELDS = [a.name for a in attrs.fields(ProcessQueueState)]


@given(
    st.dictionaries(
        st.sampled_from(STATE_FIELDS),
        st.one_of(st.integers(-(2**63), 2**63 - 1), st.booleans(), st.just(())),
    )
)
def test_evolve_of_a_process_queue_state_matches_attrs(changes: dict[str, Any]) -> None:
    start = ProcessQueueState(msg_count=3, locked=True, last_pull_timestamp=9)
    assert attrs.evolve(start, **changes) == evolve(start, **changes)
