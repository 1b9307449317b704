"""Message properties as the spec normalises them, and the client areas' JSON of spec values
(`reference.areas._vocab.value_json`): hand-written expectations."""

from __future__ import annotations

import attrs
import pytest

from pullspec.reference.areas._vocab import value_json
from pullspec.spec.consumer_config import ConsumeMode
from pullspec.spec.errors import InvalidTypeError
from pullspec.spec.message import MessageQueue, to_properties
from pullspec.spec.pull_actions import Delay, DelayReason, Pull


def test_to_properties_keeps_a_normalised_tuple_and_normalises_the_rest() -> None:
    pairs = (("TAGS", "a"), ("KEYS", "k"))
    assert pairs is to_properties(pairs)
    assert pairs == to_properties({"TAGS": "a", "KEYS": "k"})
    assert pairs == to_properties([("TAGS", "a"), ("KEYS", "k")])
    assert () == to_properties(None)


@pytest.mark.parametrize(
    "bad",
    [
        (("TAGS", 1),),
        ((1, "a"),),
        (("TAGS", "a"), ("KEYS", b"k")),
        (("TAGS", "a", "b"),),
    ],
)
def test_to_properties_refuses_a_tuple_that_is_not_pairs_of_strings(bad: object) -> None:
    with pytest.raises((InvalidTypeError, ValueError)):
        to_properties(bad)  # type: ignore[arg-type]


@attrs.frozen
class Sample:
    next_begin_offset: int
    queue: MessageQueue
    reasons: frozenset[DelayReason] = frozenset()


def test_value_json_of_leaves_enums_actions_queues_and_attrs_values() -> None:
    assert [True, 1, "x", None, 1.5] == value_json((True, 1, "x", None, 1.5))
    assert type(value_json(True)) is bool
    assert "ORDERLY" == value_json(ConsumeMode.ORDERLY)
    assert {"kind": "PULL", "requestOffset": 4} == value_json(Pull(4))
    assert {"topic": "T", "brokerName": "b", "queueId": 2} == value_json(MessageQueue("T", "b", 2))
    assert {"0": {"kind": "DELAY", "delayMs": 50, "reason": "MAX_SPAN"}} == value_json(
        {0: Delay(50, DelayReason.MAX_SPAN)}
    )
    assert {
        "nextBeginOffset": 3,
        "queue": {"topic": "T", "brokerName": "b", "queueId": 0},
        "reasons": ["MAX_SPAN", "PAUSED"],
    } == value_json(
        Sample(3, MessageQueue("T", "b", 0), frozenset({DelayReason.PAUSED, DelayReason.MAX_SPAN}))
    )
