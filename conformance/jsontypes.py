"""The JSON the suite reads and writes, typed: one recursive alias for open JSON and the checks
that narrow it.

Vector files, ops' arguments, observations, the subprocess protocol and the reports are JSON.
Where a shape is known it has its own TypedDict beside the code that owns it (`vectors.Case`,
`remote.channel.Request`, …); where it is open (an op's arguments, an observation) it is a
`JSONObject` of `JSONValue`s, narrowed with `is_object` / `is_array` before a value is used as
something more precise.

`JSONValue` is written with the read-only `Sequence` and `Mapping`, so that a ``list[int]`` or a
``dict[str, int]`` a driver builds is already one (a ``list[JSONValue]`` would refuse it: lists are
invariant); `JSONObject` is the ``dict`` an op's arguments and an observation travel as.

Example::

    observation: JSONObject = {"status": "FOUND", "msgOffsets": [0, 1]}
    offsets = observation["msgOffsets"]
    if is_array(offsets):
        first = offsets[0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias, TypeGuard, TypeVar, cast

#: Any JSON value: null, a boolean, a number, a string, an array or an object.
JSONValue: TypeAlias = (
    "bool | int | float | str | Sequence[JSONValue] | Mapping[str, JSONValue] | None"
)

#: A JSON object as the suite passes it: an op's arguments, an observation, a case's config.
JSONObject: TypeAlias = dict[str, JSONValue]

T = TypeVar("T")

# isinstance against a tuple: a `list | tuple` written in the call builds a union on every call,
# which took three times as long (these checks run several times per diffed op).
_ARRAYS = (list, tuple)
_NUMBERS = (int, float, str)


def is_object(value: object) -> TypeGuard[JSONObject]:
    """Whether `value` is a JSON object (a dict, as `json.loads` answers one).

    Example: ``is_object({"a": 1})`` is True, ``is_object([1])`` False.
    """
    return isinstance(value, dict)


def is_array(value: object) -> TypeGuard[Sequence[JSONValue]]:
    """Whether `value` is a JSON array (a list, as `json.loads` answers one, or a tuple, which
    `json.dumps` writes as one).

    Example: ``is_array([1, 2])`` is True, ``is_array("12")`` False.
    """
    return isinstance(value, _ARRAYS)


def as_object(value: JSONValue) -> Mapping[str, JSONValue]:
    """`value`, which must be a JSON object: TypeError otherwise, as indexing it by a key would
    raise (a missing key stays the KeyError the vector runner reports as the vector's fault).

    Example: ``as_object({"queueId": 3})["queueId"]`` is 3; ``as_object(3)`` raises TypeError.
    """
    if isinstance(value, Mapping):
        return value
    raise TypeError(f"expected a JSON object, not {value!r}")


def as_array(value: JSONValue) -> Sequence[JSONValue]:
    """`value`, which must be a JSON array: TypeError otherwise.

    Example: ``as_array([0, 1])[1]`` is 1; ``as_array(None)`` raises TypeError.
    """
    if is_array(value):
        return value
    raise TypeError(f"expected a JSON array, not {value!r}")


def to_int(value: JSONValue) -> int:
    """``int(value)`` of a JSON number (or numeric string); TypeError for anything else, as
    ``int()`` raises it.

    Example: ``to_int(7)`` is 7; ``to_int([7])`` raises TypeError.
    """
    if isinstance(value, _NUMBERS):
        return int(value)
    raise TypeError(f"expected a number, not {value!r}")


def as_given(kind: type[T], value: JSONValue) -> T:
    """`value` handed on as the `kind` a candidate's method declares, unchecked: the vectors
    give some arguments of the wrong type on purpose, and the candidate's own argument check
    (`spec.errors.InvalidTypeError`) is what they test, so the suite must not refuse them first.

    Example: ``as_given(int, args["offset"])`` passes ``"5"`` on to ``get_message`` as it is.
    """
    return cast(T, value)
