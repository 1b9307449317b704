"""FastProcessQueue: both versions' recorded vectors, a Hypothesis differential machine against
ReferenceProcessQueue (identical results, errors and snapshots after every step, bad input
included), and concurrent put/remove/take from several threads."""

from __future__ import annotations

import contextlib
import enum
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import pullspec.fast.factories
from pullspec.conformance.vectors import Verdict, load_cases, run_case
from pullspec.fast.process_queue import FastProcessQueue
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.spec.clock import ManualClock
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, NoSuchElementError
from pullspec.spec.message import PROPERTY_CONSUME_START_TIME, PROPERTY_MAX_OFFSET, StoredMessage
from pullspec.spec.process_queue import ProcessQueueState
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.protocols import ProcessQueue

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"
VERSIONS = {"rocketmq-4.7.1": Profile.V4_7, "rocketmq-4.9.7": Profile.V4_9}
T0 = 10_000_000
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def msg(offset: Any, size: int = 1, props: dict[str, str] | None = None) -> StoredMessage:
    """A message at `offset` (anything, to build bad input) with a body of `size` zero bytes."""
    return StoredMessage("T", 0, offset, 0, 0, 0, bytes(size), tuple((props or {}).items()))


# --- the recorded vectors of both versions -----------------------------------------------------


@pytest.mark.parametrize("folder", sorted(VERSIONS))
def test_vectors_pass(folder: str) -> None:
    directory = VECTORS / folder
    if not directory.is_dir():
        pytest.fail(f"shared vectors missing: {directory} (expected beside the project)")
    cases = list(load_cases(directory, ["process_queue"]))
    assert len(cases) == 200, f"expected 200 process_queue cases in {directory}"
    results = [run_case(pullspec.fast.factories, c, VERSIONS[folder], directory) for c in cases]
    assert [] == [r.to_json() for r in results if r.verdict is not Verdict.PASS]


# --- examples ------------------------------------------------------------------------------------


def test_is_a_process_queue_and_starts_like_the_reference() -> None:
    q = pullspec.fast.factories.process_queue(ManualClock(T0), Profile.V4_9)
    assert isinstance(q, ProcessQueue) and isinstance(q, FastProcessQueue)
    assert (
        ProcessQueueState(last_lock_timestamp=T0, last_pull_timestamp=T0, last_consume_timestamp=T0)
        == q.snapshot()
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((object(), Profile.V4_9), InvalidTypeError),
        ((ManualClock(0), "5.0"), InvalidArgumentError),
        ((ManualClock(0), "4.7", 1.5), InvalidTypeError),
        ((ManualClock(0), "4.7", 1, None), InvalidTypeError),
    ],
)
def test_constructor_rejects_like_the_reference(args: tuple[Any, ...], error: type) -> None:
    with pytest.raises(error):
        ReferenceProcessQueue(*args)
    with pytest.raises(error):
        FastProcessQueue(*args)


def test_offsets_outside_java_long_range() -> None:
    """The one input the reference takes and fast refuses: no Java long can hold such an offset
    (and no int64 array). A remove just does not find it, exactly as the reference."""
    q = FastProcessQueue(ManualClock(T0), Profile.V4_9)
    q.put_messages([msg(1), msg(LONG_MAX, 3), msg(LONG_MIN, 2)])
    before = q.snapshot()
    with pytest.raises(InvalidArgumentError):
        q.put_messages([msg(2), msg(LONG_MAX + 1)])
    with pytest.raises(InvalidArgumentError):
        q.make_messages_to_consume_again([msg(LONG_MIN - 1)])
    assert before == q.snapshot()
    assert q.max_span == LONG_MAX - LONG_MIN
    assert q.remove_messages([msg(2**70), msg(LONG_MAX, 3)]) == LONG_MIN
    assert (2, [LONG_MIN, 1]) == (q.msg_count, q.cached_offsets)


# --- Hypothesis: fast and reference side by side -----------------------------------------------


class BigInt(int):
    """An int subclass: valid, but not the exact type the fast validation path expects."""


class BytesBody(bytes):
    """A bytes subclass body, likewise."""


class ListBatch(list[Any]):
    """A list subclass batch, likewise."""


def _message(offset: int, size: int, max_offset: int | str | None, start: int | str | None) -> Any:
    props: dict[str, str] = {}
    if max_offset is not None:
        props[PROPERTY_MAX_OFFSET] = str(max_offset)
    if start is not None:
        props[PROPERTY_CONSUME_START_TIME] = str(start)
    return msg(offset, size, props)


offsets = st.one_of(
    st.integers(0, 30),
    st.integers(0, 30),
    st.integers(-3, -1),
    st.sampled_from([LONG_MIN, LONG_MAX, 2**40]),
)
good_messages = st.builds(
    _message,
    offsets,
    st.integers(0, 4),
    st.sampled_from([None, None, None, 0, 31, 45, 60, -5, "x9"]),
    # CONSUME_START_TIME, as CONC-4 sets it: mostly a time (often long expired), sometimes
    # absent, empty or unparsable (PQ-18's version difference).
    st.one_of(
        st.integers(T0 - 40 * 60_000, T0 + 60_000),
        st.integers(T0 - 40 * 60_000, T0 + 60_000),
        st.sampled_from([None, "", "t"]),
    ),
)
odd_but_valid = st.one_of(
    st.builds(lambda m: msg(BigInt(m.queue_offset), len(m.body)), good_messages),
    st.builds(
        lambda m: StoredMessage("T", 0, m.queue_offset, 0, 0, 0, BytesBody(b"ab")), good_messages
    ),
)
bad_messages = st.sampled_from(
    [
        msg(True),
        msg(1.5),
        msg("7"),
        StoredMessage("T", 0, 3, 0, 0, 0, "body"),  # type: ignore[arg-type]
        StoredMessage("T", 0, 3, 0, 0, 0, bytearray(b"x")),  # type: ignore[arg-type]
        "not a message",
        None,
    ]
)
batches = st.one_of(
    st.lists(good_messages, max_size=7),
    st.lists(good_messages, max_size=7).map(tuple),
    st.lists(st.one_of(good_messages, odd_but_valid), max_size=5).map(ListBatch),
    st.lists(st.one_of(good_messages, bad_messages), min_size=1, max_size=4),
    st.sampled_from([None, "abc", 7, {1: 2}, frozenset()]),
    # A pull's batch: consecutive offsets, without or with consume start times.
    st.tuples(st.integers(0, 40), st.integers(1, 33), st.sampled_from([None, 20, 1])).map(
        lambda t: [
            _message(o, o % 3, None, None if t[2] is None else T0 - t[2] * 60_000 + o)
            for o in range(t[0], t[0] + t[1])
        ]
    ),
)
batch_sizes = st.one_of(
    st.integers(-2, 9), st.sampled_from([2**31 - 1, 2**31, "2", 1.0, True, None])
)


class Sender(enum.Enum):
    """What the stand-in for sendMessageBack does with an expired message."""

    OK = "ok"
    RAISE = "raise"
    REMOVE = "remove"  # the listener finishes meanwhile and removes the message itself
    PUT_LOWER = "put_lower"  # a re-pull meanwhile caches a lower offset: the head changes


def _sender(q: Any, mode: Sender, sent: list[tuple[int, int]]) -> Callable[[Any, int], None]:
    def send(m: StoredMessage, delay_level: int) -> None:
        sent.append((m.queue_offset, delay_level))
        if mode is Sender.RAISE:
            raise RuntimeError("broker unreachable")
        if mode is Sender.REMOVE:
            q.remove_messages([m])
        if mode is Sender.PUT_LOWER:
            q.put_messages([msg(max(m.queue_offset - 1, LONG_MIN), 2)])

    return send


def _kind(value: object) -> type:
    """The type that matters: numpy scalars must not leak out where Java has a long or boolean
    (an int subclass the caller passed in may come back as itself or as an int)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int
    return type(value)


def _outcome(call: Callable[[Any], Any], q: Any) -> tuple[str, Any]:
    """("ok", the value and its kind) or ("error", the exception type)."""
    try:
        value = call(q)
    except Exception as exc:
        return "error", type(exc)
    kinds = [_kind(v) for v in value] if isinstance(value, list) else _kind(value)
    return "ok", (value, kinds)


@pytest.fixture(autouse=True, scope="module")
def _quiet_sends() -> Iterator[None]:
    """The failing sends of clean_expired are logged with a traceback by both queues."""
    loggers = [
        logging.getLogger(n)
        for n in ("pullspec.fast.process_queue", "pullspec.reference.process_queue")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    yield
    for lg, level in zip(loggers, levels, strict=True):
        lg.setLevel(level)


PROPERTIES = ("msg_count", "msg_size", "max_span", "queue_offset_max", "msg_acc_cnt",
              "consuming", "cached_offsets", "consuming_offsets", "last_consume_timestamp",
              "try_unlock_times", "dropped", "locked", "last_lock_timestamp",
              "last_pull_timestamp")  # fmt: skip


class DifferentialMachine(RuleBasedStateMachine):
    """Random call sequences on FastProcessQueue and ReferenceProcessQueue with one clock: every
    result, error type and snapshot must be identical."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(T0)
        self.fast: FastProcessQueue = FastProcessQueue(self.clock, Profile.V4_9)
        self.ref: ReferenceProcessQueue = ReferenceProcessQueue(self.clock, Profile.V4_9)

    @initialize(
        profile=st.sampled_from(ALL_PROFILES),
        lock_ttl=st.sampled_from([30_000, 0, 5]),
        pull_idle=st.sampled_from([120_000, 0, 7]),
    )
    def start(self, profile: Profile, lock_ttl: int, pull_idle: int) -> None:
        self.fast = FastProcessQueue(self.clock, profile, lock_ttl, pull_idle)
        self.ref = ReferenceProcessQueue(self.clock, profile, lock_ttl, pull_idle)

    def both(self, call: Callable[[Any], Any]) -> None:
        fast_outcome = _outcome(call, self.fast)
        assert fast_outcome == _outcome(call, self.ref)

    @rule(
        op=st.sampled_from(["put_messages", "remove_messages", "make_messages_to_consume_again"]),
        batch=batches,
    )
    def batch_op(self, op: str, batch: Any) -> None:
        self.both(lambda q: getattr(q, op)(batch))

    @precondition(lambda self: bool(self.ref.cached_offsets))
    @rule(data=st.data())
    def remove_cached(self, data: st.DataObject) -> None:
        """Remove some cached messages (sometimes with other body lengths: size drift)."""
        cached = list(self.ref.snapshot().msg_tree)
        picked = data.draw(st.lists(st.sampled_from(cached), min_size=1, max_size=6))
        if data.draw(st.booleans()):
            picked = [msg(m.queue_offset, len(m.body) + 1) for m in picked]
        self.both(lambda q: q.remove_messages(picked))

    @rule(n=batch_sizes)
    def take(self, n: Any) -> None:
        self.both(lambda q: q.take_messages(n))

    @precondition(lambda self: bool(self.ref.consuming_offsets))
    @rule(data=st.data())
    def again_taken(self, data: st.DataObject) -> None:
        taken = list(self.ref.snapshot().consuming_tree)
        picked = data.draw(st.lists(st.sampled_from(taken), min_size=1, max_size=6))
        self.both(lambda q: q.make_messages_to_consume_again(picked))

    @rule(op=st.sampled_from(["commit", "commit", "rollback", "clear", "inc_try_unlock_times"]))
    def no_arg_op(self, op: str) -> None:
        self.both(lambda q: getattr(q, op)())

    @rule(
        mode=st.sampled_from(Sender),
        timeout=st.one_of(st.sampled_from([0, 1, 15, 30, -1, "15"])),
        orderly=st.sampled_from([False, False, True, 0]),
    )
    def clean_expired(self, mode: Sender, timeout: Any, orderly: Any) -> None:
        sent: dict[int, list[tuple[int, int]]] = {id(self.fast): [], id(self.ref): []}
        self.both(lambda q: q.clean_expired_msg(_sender(q, mode, sent[id(q)]), timeout, orderly))
        assert sent[id(self.fast)] == sent[id(self.ref)]

    @rule(
        field=st.sampled_from(["locked", "dropped", "last_lock_timestamp", "last_pull_timestamp"]),
        value=st.one_of(st.booleans(), st.integers(T0 - 200_000, T0 + 200_000), st.just("1")),
    )
    def set_field(self, field: str, value: Any) -> None:
        self.both(lambda q: setattr(q, field, value))

    @rule(ms=st.integers(0, 200_000))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(now=st.integers(T0 - 200_000, T0 + 10_000_000))
    def jump(self, now: int) -> None:
        self.clock.jump_to(now)

    @invariant()
    def identical(self) -> None:
        assert self.fast.snapshot() == self.ref.snapshot()
        for name in PROPERTIES:
            f, r = getattr(self.fast, name), getattr(self.ref, name)
            assert (f, _kind(f)) == (r, _kind(r)), name
        assert self.fast.profile is self.ref.profile
        for method in ("is_lock_expired", "is_pull_expired", "has_temp_message"):
            assert getattr(self.fast, method)() is getattr(self.ref, method)(), method


DifferentialMachine.TestCase.settings = settings(
    max_examples=250, stateful_step_count=30, deadline=None
)
TestDifferential = DifferentialMachine.TestCase


# --- several threads at once ----------------------------------------------------------------------

PRODUCERS, PER_PRODUCER, BATCH = 4, 1500, 32


def test_concurrent_put_remove_take_commit_loses_and_duplicates_nothing() -> None:
    """Producers put disjoint offset ranges in batches while removers acknowledge what was put
    and takers take and commit; at the end every offset is in exactly one place."""
    q = FastProcessQueue(ManualClock(T0), Profile.V4_9)
    published: list[list[StoredMessage]] = []  # batches put so far (list.append is atomic)
    attempted: list[set[int]] = []
    taken: list[list[int]] = []
    producers_done, stop = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return run

    def producer(p: int) -> None:
        base = p * 1_000_000
        for start in range(base, base + PER_PRODUCER, BATCH):
            batch = [msg(o, o % 7) for o in range(start, min(start + BATCH, base + PER_PRODUCER))]
            q.put_messages(batch)
            published.append(batch)

    def remover(r: int) -> None:
        mine: set[int] = set()
        attempted.append(mine)
        i = r
        while (not producers_done.is_set() or i < len(published)) and not stop.is_set():
            if i < len(published):
                batch = published[i][::2]  # half of a batch: the rest is left to the takers
                mine.update(m.queue_offset for m in batch)
                q.remove_messages(batch)
                i += 2
            else:
                q.remove_messages([])

    def taker(t: int) -> None:
        mine: list[int] = []
        taken.append(mine)
        while (not producers_done.is_set() or q.has_temp_message()) and not stop.is_set():
            mine.extend(m.queue_offset for m in q.take_messages(3 + t))
            if t % 2 and q.consuming_offsets:
                # Another taker may have committed the shared consuming tree first.
                with contextlib.suppress(NoSuchElementError):
                    q.commit()

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, to interleave inside operations
    try:
        workers = [threading.Thread(target=guarded(partial(remover, r))) for r in range(2)]
        workers += [threading.Thread(target=guarded(partial(taker, t))) for t in range(3)]
        makers = [threading.Thread(target=guarded(partial(producer, p))) for p in range(PRODUCERS)]
        for th in workers + makers:
            th.start()
        for th in makers:
            th.join(timeout=60)
        producers_done.set()
        for th in workers:
            th.join(timeout=60)
    finally:
        stop.set()  # a worker still running here means the queue never drained
        sys.setswitchinterval(old_interval)
    assert errors == [] and not any(th.is_alive() for th in makers + workers)

    put = {m.queue_offset for b in published for m in b}
    assert len(put) == PRODUCERS * PER_PRODUCER
    cached, consuming = q.cached_offsets, q.consuming_offsets
    all_taken = [o for t in taken for o in t]
    assert cached == [] and consuming == sorted(set(consuming))
    assert len(all_taken) == len(set(all_taken)), "an offset was taken twice"
    assert set(consuming) <= set(all_taken) <= put
    # Whatever was neither taken nor left in the cache was removed, by a call that named it.
    removed = put - set(all_taken) - set(cached)
    assert removed <= set[int]().union(*attempted)
    assert q.msg_count == len(cached) + len(consuming)
    sizes = {o: o % 7 for o in put}
    assert q.msg_size == sum(sizes[o] for o in cached + consuming)
