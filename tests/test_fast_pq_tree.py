"""pullspec.fast.pq_tree.OffsetTree against a TreeMap model, and FastProcessQueue against the reference on
deep caches, with batches shaped to reach every path of the tree: the bulk ones (append past
the last key, prepend before the first, drop the oldest prefix) and the per-message bisect loop
(interior keys, duplicates, unordered batches), in any order after one another."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pullspec.fast.pq_tree import OffsetTree, validate_batch
from pullspec.fast.process_queue import FastProcessQueue
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.spec.clock import ManualClock
from pullspec.spec.errors import InvalidTypeError
from pullspec.spec.message import StoredMessage
from pullspec.spec.profiles import Profile


def msg(offset: int, size: int = 1) -> StoredMessage:
    """A message at `offset` with a body of `size` zero bytes (a new object every call)."""
    return StoredMessage("T", 0, offset, 0, 0, 0, bytes(size))


class TreeModel:
    """Java's TreeMap<Long, MessageExt> as a dict, looped over message by message."""

    def __init__(self) -> None:
        self.map: dict[int, StoredMessage] = {}

    def put(self, msgs: list[StoredMessage]) -> list[StoredMessage]:
        new = [m for m in msgs if self.map.setdefault(m.queue_offset, m) is m]
        self.map.update((m.queue_offset, m) for m in msgs)
        return new

    def remove(self, msgs: list[StoredMessage]) -> list[StoredMessage]:
        return [m for m in msgs if self.map.pop(m.queue_offset, None) is not None]

    def pop_first(self, n: int) -> list[StoredMessage]:
        keys = sorted(self.map)[:n]
        return [self.map.pop(k) for k in keys]


# A batch relative to the tree: (shape, start, length, stride) picks its offsets.
SHAPES = ("append", "prepend", "to_first", "from_last", "inside", "reversed_append", "duplicates",
          "anywhere")  # fmt: skip
shaped = st.tuples(
    st.sampled_from(SHAPES), st.integers(0, 5), st.integers(0, 12), st.integers(1, 3)
)


def _offsets(keys: list[int], shape: str, start: int, length: int, stride: int) -> list[int]:
    first, last = (keys[0], keys[-1]) if keys else (0, 0)
    if shape == "append":
        return [last + 1 + start + i * stride for i in range(length)]
    if shape == "prepend":
        return [first - 1 - start - (length - 1 - i) * stride for i in range(length)]
    if shape == "to_first":  # increasing up to the first key itself: not a prepend
        return [first - (length - 1 - i) * stride for i in range(length)]
    if shape == "from_last":  # increasing from the last key itself: not an append
        return [last + i * stride for i in range(length)]
    if shape == "reversed_append":
        return [last + 1 + start + i * stride for i in reversed(range(length))]
    if shape == "inside":
        return [first + (start + i * stride) % max(1, last - first + 1) for i in range(length)]
    if shape == "duplicates":
        return [first + (start + i // 2) % max(1, len(keys) + 2) for i in range(length)]
    return [(start * 7 + i * stride * 5) % 40 - 5 for i in range(length)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("put"), shaped, st.integers(0, 3)),
            st.tuples(st.just("remove"), shaped, st.integers(0, 3)),
            st.tuples(st.just("remove_prefix"), st.integers(0, 15), st.booleans()),
            st.tuples(st.just("pop_first"), st.integers(0, 15), st.booleans()),
            st.tuples(st.just("clear"), st.none(), st.none()),
        ),
        max_size=40,
    )
)
def test_offset_tree_is_a_treemap(ops: list[tuple[str, Any, Any]]) -> None:
    tree, model = OffsetTree(), TreeModel()
    for op, arg, extra in ops:
        if op in ("put", "remove"):
            msgs = [msg(o, extra) for o in _offsets(tree.keys, *arg)]
            offsets = [m.queue_offset for m in msgs]
            got = tree.put(msgs, offsets) if op == "put" else tree.remove(msgs, offsets)
            want = model.put(msgs) if op == "put" else model.remove(msgs)
            assert [id(m) for m in got] == [id(m) for m in want]
        elif op == "remove_prefix":
            # The oldest entries, as an acknowledgement names them (or in another order).
            msgs = [msg(o) for o in tree.keys[:arg]]
            if extra:
                msgs.reverse()
            got = tree.remove(msgs, [m.queue_offset for m in msgs])
            assert [id(m) for m in got] == [id(m) for m in model.remove(msgs)]
        elif op == "pop_first":
            keys, popped = tree.pop_first(arg)
            assert popped == model.pop_first(arg) and keys == [m.queue_offset for m in popped]
            if extra:  # rollback: they go back in front
                tree.put(popped, keys)
                model.put(popped)
        else:
            tree.clear()
            model.map.clear()
        assert tree.keys == sorted(model.map)
        assert [id(m) for m in tree.msgs] == [id(model.map[k]) for k in tree.keys]
        assert len(tree) == len(model.map) and tree.values() == tuple(tree.msgs)
        assert tree.head() == tuple(tree.msgs[:1])


def test_validate_batch_falls_back_to_the_spec_for_anything_unusual() -> None:
    class Offset(int):
        pass

    odd = StoredMessage("T", 0, Offset(3), 0, 0, 0, b"")
    assert validate_batch("msgs", [msg(1), odd]) == ((msg(1), odd), [1, 3])
    assert validate_batch("msgs", ()) == ((), [])
    for bad in ([msg(1), "x"], [StoredMessage("T", 0, 1.5, 0, 0, 0, b"")], {1: 2}):  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError):
            validate_batch("msgs", bad)


class DeepDifferential(RuleBasedStateMachine):
    """FastProcessQueue and ReferenceProcessQueue on caches of hundreds of messages, driven the
    way the consume services drive them (pulls, acknowledgements, take/commit/rollback) and
    out of order: identical results and snapshots after every step."""

    def __init__(self) -> None:
        super().__init__()
        clock = ManualClock(0)
        self.fast = FastProcessQueue(clock, Profile.V4_9)
        self.ref = ReferenceProcessQueue(clock, Profile.V4_9)

    def both(self, name: str, *args: Any) -> None:
        outcomes = []
        for q in (self.fast, self.ref):
            try:
                outcomes.append(("ok", getattr(q, name)(*args)))
            except Exception as exc:
                outcomes.append(("error", type(exc)))
        assert outcomes[0] == outcomes[1]

    @rule(arg=shaped, pull=st.booleans(), size=st.integers(0, 3))
    def put(self, arg: tuple[str, int, int, int], pull: bool, size: int) -> None:
        keys = self.ref.cached_offsets
        if pull:  # a pull of up to 40 past the last offset
            arg = ("append", 0, arg[2] * 3 + arg[1], 1)
        self.both("put_messages", [msg(o, size) for o in _offsets(keys, *arg)])

    @rule(arg=shaped, size=st.integers(0, 3))
    def remove(self, arg: tuple[str, int, int, int], size: int) -> None:
        keys = self.ref.cached_offsets
        self.both("remove_messages", [msg(o, size) for o in _offsets(keys, *arg)])

    @rule(n=st.integers(0, 40), size=st.integers(0, 3))
    def acknowledge_oldest(self, n: int, size: int) -> None:
        self.both("remove_messages", [msg(o, size) for o in self.ref.cached_offsets[:n]])

    @rule(n=st.integers(0, 40))
    def take(self, n: int) -> None:
        self.both("take_messages", n)

    @rule(op=st.sampled_from(["commit", "rollback", "clear"]))
    def no_arg(self, op: str) -> None:
        self.both(op)

    @rule(arg=shaped, size=st.integers(0, 3))
    def again(self, arg: tuple[str, int, int, int], size: int) -> None:
        keys = self.ref.consuming_offsets
        self.both("make_messages_to_consume_again", [msg(o, size) for o in _offsets(keys, *arg)])

    @invariant()
    def identical(self) -> None:
        assert self.fast.snapshot() == self.ref.snapshot()
        assert (self.fast.max_span, self.fast.cached_offsets, self.fast.consuming_offsets) == (
            self.ref.max_span,
            self.ref.cached_offsets,
            self.ref.consuming_offsets,
        )


DeepDifferential.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestDeepDifferential = DeepDifferential.TestCase
