"""The language-neutral model: ops and observations to and from JSON, error kinds, rule maps,
and the comparison that classifies divergences."""

from __future__ import annotations

import pytest

import pullspec.reference.factories as reference
from pullspec.conformance.observe import DivergenceKind, Session, compare
from pullspec.conformance.ops import (
    AREAS,
    OP_RULES,
    Observation,
    Op,
    error_kind,
    field_names,
    rules_for,
)
from pullspec.spec import rules
from pullspec.spec.errors import (
    JAVA_EXCEPTION_KINDS,
    ErrorKind,
    InvalidArgumentError,
    PullspecError,
)
from pullspec.spec.profiles import Profile


def test_op_round_trips_through_a_vector_step() -> None:
    step = {"op": "get_message", "args": {"queueId": 0, "offset": 3}, "expect": {"status": "X"}}
    op = Op.from_json(step)
    assert Op("get_message", {"queueId": 0, "offset": 3}) == op
    assert {"op": "get_message", "args": {"queueId": 0, "offset": 3}} == op.to_json()


def test_observation_splits_result_error_and_state_and_joins_them_back() -> None:
    flat = {"error": "NoSuchElementException", "state": [0, 0], "result": None}
    seen = Observation.from_json("process_queue", flat)
    assert ErrorKind.NO_SUCH_ELEMENT == seen.error
    assert {"state": [0, 0]} == dict(seen.state)
    assert {"result": None} == dict(seen.fields)
    assert {"result": None, "state": [0, 0], "error": "NO_SUCH_ELEMENT"} == seen.to_json()


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("ILLEGAL_CAPACITY", ErrorKind.INVALID_ARGUMENT),
        ("IllegalArgumentException", ErrorKind.INVALID_ARGUMENT),
        ("IndexOutOfBoundsException", ErrorKind.INVALID_ARGUMENT),
        ("RejectedExecutionException", ErrorKind.REJECTED_EXECUTION),
        ("NullPointerException", ErrorKind.NULL_POINTER),
        ("NumberFormatException", ErrorKind.INVALID_ARGUMENT),
    ],
)
def test_error_values_map_to_the_closed_kinds(value: str, kind: ErrorKind) -> None:
    assert kind == error_kind(value)


def _subclasses(cls: type[PullspecError]) -> list[type[PullspecError]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def test_an_error_standing_for_a_java_exception_has_that_exception_s_kind() -> None:
    standing = [c for c in _subclasses(PullspecError) if c.java_exception is not None]
    assert {"IllegalCapacityError", "IndexOutOfBoundsError", "RejectedExecutionError"} <= {
        c.__name__ for c in standing
    }
    assert [] == [
        c.__name__ for c in standing if JAVA_EXCEPTION_KINDS[c.java_exception or ""] is not c.kind
    ]


def test_an_error_outside_the_closed_set_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        error_kind("it broke")


def test_every_rule_the_maps_name_is_in_the_catalogue() -> None:
    known = {r.id for r in rules.catalogue()}
    named = {r for area in OP_RULES.values() for ids in area.values() for r in ids}
    assert set() == named - known


def test_field_paths_name_positional_state_and_lock_expiry() -> None:
    fields = ("msgCount", "msgSize", "maxSpan")
    assert ["maxSpan", "state"] == field_names("state[2]", fields)
    assert ["expired", "G1", "table"] == field_names("table.G1.0[2]")
    assert ["wroteOffset", "results"] == field_names("results[1].wroteOffset")


def test_rules_narrow_to_the_field_and_the_expected_status() -> None:
    expected = {"status": "OFFSET_OVERFLOW_BADLY"}
    assert ("STORE-6", "STORE-8") == rules_for(
        "store", "get_message", "nextBeginOffset", (), expected
    )
    assert ("PQ-6",) == rules_for(
        "process_queue", "put_messages", "state[2]", ("a", "b", "maxSpan")
    )
    assert OP_RULES["lock_manager"]["is_locked"] == rules_for("lock_manager", "is_locked", "result")


def test_compare_classifies_error_result_and_state_differences() -> None:
    base = Observation({"result": 1}, None, {"state": [1]})
    assert compare(base, base) is None
    error = compare(base, Observation(error=ErrorKind.NO_SUCH_ELEMENT))
    assert error is not None and DivergenceKind.ERROR == error.kind
    result = compare(base, Observation({"result": 2}, None, {"state": [1]}))
    assert result is not None and (DivergenceKind.RESULT, "result") == (result.kind, result.field)
    state = compare(base, Observation({"result": 1}, None, {"state": [2]}))
    assert state is not None and (DivergenceKind.STATE, 1, 2) == (
        state.kind,
        state.expected,
        state.actual,
    )


def test_a_session_turns_a_raised_spec_error_into_an_error_observation() -> None:
    config = {"mappedFileSizeCommitLog": 1024, "mappedFileSizeConsumeQueue": 80}
    session = Session(reference, "store", config, Profile.V4_9)
    session.apply(Op("put", {"msgs": [{"queueId": 0, "tags": "A", "bodySize": 1}]}))
    seen = session.apply(
        Op("get_message", {"queueId": 0, "offset": 0, "maxMsgNums": -1, "subscription": None})
    )
    assert Observation(error=ErrorKind.INVALID_ARGUMENT) == seen


def test_every_area_has_ops_and_state_fields() -> None:
    assert ("store", "pull_code", "process_queue", "lock_manager", "send_back") == AREAS
    assert all("create" in OP_RULES[a] and len(OP_RULES[a]) > 2 for a in AREAS)
