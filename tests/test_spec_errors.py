"""spec.errors' checks: `require_int` and `require_str` by type, and `conforms`: isinstance,
remembered per type, for the runtime-checkable protocols the reference checks its collaborators
against on every pull."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pytest

from pullspec.spec.clock import Clock, ManualClock
from pullspec.spec.errors import InvalidTypeError, conforms, require_int, require_str
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue


class Count(int):
    """An int subclass: an int to require_int (only bool is refused among them)."""


@pytest.mark.parametrize("value", [0, -(2**63), 2**70, Count(4)])
def test_require_int_answers_an_int(value: int) -> None:
    assert value is require_int("n", value)


@pytest.mark.parametrize("value", [True, False, 3.0, "3", None, b"3"])
def test_require_int_refuses_anything_else_and_bool(value: object) -> None:
    with pytest.raises(InvalidTypeError):
        require_int("n", value)


def test_require_str() -> None:
    assert "a" == require_str("s", "a")
    for value in (b"a", 1, None):
        with pytest.raises(InvalidTypeError):
            require_str("s", value)


@runtime_checkable
class Sized(Protocol):
    """A protocol with a data member (`size`) and a method."""

    size: int

    def grow(self) -> None: ...


class SetsSize:
    """Conforms through an attribute each instance sets itself."""

    def __init__(self, size: int | None) -> None:
        if size is not None:
            self.size = size

    def grow(self) -> None:
        self.size += 1


class NoGrow:
    size = 3


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (3, int, True),
        (True, int, True),
        (True, str, False),
        (ManualClock(), Clock, True),
        (object(), Clock, False),
        (NoGrow(), Sized, False),
    ],
)
def test_conforms_answers_as_isinstance(value: object, kind: type, expected: bool) -> None:
    # Twice: the second answer comes from what the first remembered.
    assert [expected, expected] == [conforms(value, kind), conforms(value, kind)]
    assert expected == isinstance(value, kind)


def test_conforms_still_looks_up_the_members_an_instance_sets_itself() -> None:
    # The first instance of SetsSize conforms and its type is remembered; one without `size`
    # must still be refused, and one with it accepted, as isinstance does.
    assert [True, False, True] == [
        conforms(SetsSize(1), Sized),
        conforms(SetsSize(None), Sized),
        conforms(SetsSize(2), Sized),
    ]
    assert [True, False] == [isinstance(SetsSize(1), Sized), isinstance(SetsSize(None), Sized)]


def test_conforms_remembers_no_refusal() -> None:
    # A refused instance first: a later conforming one of the same type is accepted.
    class Late:
        def __init__(self, size: int | None) -> None:
            if size is not None:
                self.size = size

        def grow(self) -> None: ...

    assert [False, True] == [conforms(Late(None), Sized), conforms(Late(5), Sized)]


def test_the_process_queues_conform_to_the_protocol() -> None:
    from pullspec.fast.process_queue import FastProcessQueue
    from pullspec.reference.process_queue import ReferenceProcessQueue

    queues = [
        cls(ManualClock(0), Profile.V4_9) for cls in (ReferenceProcessQueue, FastProcessQueue)
    ]
    assert [True, True, True, True] == [conforms(q, ProcessQueue) for q in queues * 2]
