"""The campaign loop's shortcuts keep its meaning: the same draws, the same generator context,
inputs shared only when equal and frozen, and every answer that differs in type compared."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pullspec.conformance import vectors
from pullspec.conformance.adapters import process_queue as pq_adapter
from pullspec.conformance.adapters import store as store_adapter
from pullspec.conformance.campaign import run as campaign
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.machines import gen
from pullspec.conformance.machines.draw import Context, RandomDraw
from pullspec.conformance.observe import Session, compare
from pullspec.conformance.ops import MACHINE_AREAS, Observation, Op
from pullspec.spec.errors import PullspecError
from pullspec.spec.profiles import Profile


def test_random_draw_draws_what_random_would() -> None:
    for seed in range(300):
        draw, rng = RandomDraw(random.Random(seed)), random.Random(seed)
        options = list(range(1 + seed % 37))
        low = seed % 7 - 3
        assert rng.randint(low, low + seed) == draw.integer(low, low + seed)
        assert options[rng.randrange(len(options))] == draw.choice(options)
        assert (rng.random() < 0.5) == draw.boolean()
        assert rng.randint(5, 5) == draw.integer(5, 5)
    with pytest.raises(ValueError):
        RandomDraw(random.Random(0)).integer(2, 1)


@pytest.mark.parametrize("area", MACHINE_AREAS)
def test_note_raw_learns_what_note_learns(area: str) -> None:
    import pullspec.reference.factories as reference

    draw = RandomDraw(random.Random(f"note-{area}"))
    config = gen.config(area, draw)
    session = Session(reference, area, config, Profile.V4_9)
    by_observation, by_raw = Context.start(area, config), Context.start(area, config)
    adapter = vectors.adapter(area)
    instance = adapter.create(reference, dict(config), Profile.V4_9, Path("."))
    for _ in range(60):
        op = gen.op(area, draw, by_observation)
        by_observation.note(op, session.apply(op))
        try:
            raw = adapter.apply(instance, op.name, dict(op.args))
        except PullspecError as exc:
            raw = {"error": exc.kind.value}
        by_raw.note_raw(op, raw)
        assert by_observation == by_raw


@pytest.mark.parametrize(
    ("queues", "expected"),
    [
        ({"0": {"minOffset": 0, "maxOffset": 3}}, {"0": (0, 3)}),
        # Values the reference never answers are still converted: the key to a str, the
        # bounds to ints.
        ({1: {"minOffset": 2.0, "maxOffset": "5"}}, {"1": (2, 5)}),
        ({"4": {"minOffset": True, "maxOffset": 7}}, {"4": (1, 7)}),
    ],
)
def test_note_raw_learns_each_queues_bounds(
    queues: dict[Any, Any], expected: dict[str, tuple[int, int]]
) -> None:
    ctx = Context.start("store", {})
    ctx.queues["9"] = (1, 2)  # a queue the observation does not name keeps what was learnt
    ctx.note_raw(Op("put", {}), {"queues": queues, "commitLogMaxOffset": 0})
    assert {**expected, "9": (1, 2)} == ctx.queues
    for low, high in ctx.queues.values():
        assert (int, int) == (type(low), type(high))


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ({"locked": True}, {"locked": 1}),
        ({"state": [0, False]}, {"state": [0, 0]}),
        ({"offset": 3}, {"offset": np.int64(3)}),
        ({"ok": np.True_}, {"ok": True}),
    ],
)
def test_equal_answers_of_other_types_are_left_to_compare(
    expected: dict[str, Any], actual: dict[str, Any]
) -> None:
    assert expected == actual
    assert not campaign._same(expected, actual)


def test_identical_answers_are_the_same() -> None:
    raw: JSONObject = {"status": "FOUND", "msgOffsets": [1, 2], "queues": {"0": {"minOffset": 0}}}
    assert campaign._same(
        raw, {"status": "FOUND", "msgOffsets": [1, 2], "queues": {"0": {"minOffset": 0}}}
    )


def test_a_type_divergence_equal_by_value_is_still_found() -> None:
    expected = Observation.from_json("process_queue", {"result": True, "state": []})
    actual = Observation.from_json("process_queue", {"result": 1, "state": []})
    diff = compare(expected, actual)
    assert diff is not None and "result" == diff.field


def test_shared_messages_are_equal_frozen_and_only_for_exact_types() -> None:
    spec: JSONObject = {"queueId": 1, "tags": "A", "bodySize": 12}
    first, second = store_adapter.message("T", spec), store_adapter.message("T", dict(spec))
    assert first == second and first is second
    assert store_adapter._message("T", 1, "A", 12, 0) == first
    with pytest.raises(PullspecError):
        store_adapter.message("T", {"queueId": True, "tags": None, "bodySize": 1})
    assert pq_adapter.to_message([3, 4, 9]) is pq_adapter.to_message([3, 4, 9])
    assert pq_adapter._message(3, 4, 9) == pq_adapter.to_message([3, 4, 9])
    with pytest.raises(PullspecError):
        pq_adapter.to_message([True, 4])
