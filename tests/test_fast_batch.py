"""fast.MessageBatch and the vectorized append: a batch, its messages() put as a list, and the
per-message path all write byte-identical stores with equal results; bad columns raise typed
errors naming the value and leave the store untouched."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pullspec.fast.putpath
from pullspec.fast import MessageBatch, PutResults, encode_kernels
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import (
    IllegalTopicError,
    InvalidArgumentError,
    InvalidTypeError,
    MessageIllegalError,
    PullspecError,
    ReadOnlyStoreError,
)
from pullspec.spec.message import BrokerInnerMessage, HostAddress
from pullspec.spec.profiles import Profile
from pullspec.spec.results import PutMessageResult
from pullspec.spec.status import BrokerRole, PutMessageStatus

HOST = HostAddress(b"\x0a\x00\x00\x07", 8123)
PROPERTY_POOL: list[dict[str, str]] = [
    {},
    {"TAGS": "A"},
    {"TAGS": "Tag3", "KEYS": "k1 k2"},
    {"KEYS": "only"},
    {"TAGS": ""},  # an empty value: the tags code comes from the parsed string
    {"TAGS": "x\x01y", "UNIQ_KEY": "u"},  # a separator inside a value
    {"DELAY": "2", "TAGS": "later"},  # the delay rewrite: left to the per-message path
]
SYS_FLAGS = [0, 0x1, 0x2, 0x8, 0x4, 0xC]


def tree_digest(root: Path) -> dict[str, str]:
    """The digest of every file under `root` but the abort marker, by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "abort"
    }


class TickClock:
    """A clock that moves 1 ms every time it is read: store times differ record by record."""

    def __init__(self) -> None:
        self.now = 1_000

    def now_ms(self) -> int:
        """The time, then one millisecond later."""
        self.now += 1
        return self.now


@contextlib.contextmanager
def encoder(accelerated: bool) -> Iterator[None]:
    """Run with the compiled encoder, or with it disabled (the numpy fallback)."""
    if accelerated:
        yield
        return
    with mock.patch.object(encode_kernels, "_compiled", lambda: None):
        yield


@st.composite
def batches(draw: st.DrawFn) -> MessageBatch:
    """A random batch: a few topics, queues and property sets, bodies of 0–60 bytes."""
    n = draw(st.integers(0, 24))
    topics = draw(st.lists(st.sampled_from(["T", "UU", "a_b%c"]), min_size=1, max_size=3))
    sets = draw(st.lists(st.sampled_from(PROPERTY_POOL[:-1]), min_size=1, max_size=3))
    if draw(st.integers(0, 9)) == 0:
        sets.append(PROPERTY_POOL[-1])
    bodies = draw(st.lists(st.binary(max_size=60), min_size=n, max_size=n))
    ints = st.integers(-(1 << 31), (1 << 31) - 1)

    def column(values: st.SearchStrategy[int]) -> Any:
        if draw(st.booleans()):
            return draw(values)
        return np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.int64)

    return MessageBatch.from_bodies(
        topics,
        bodies,
        queue_ids=column(st.integers(0, 3)),
        topic_index=column(st.integers(0, len(topics) - 1)),
        property_sets=sets,
        property_index=column(st.integers(0, len(sets) - 1)),
        flags=column(ints),
        born_timestamps=column(st.integers(-(1 << 63), (1 << 63) - 1)),
        reconsume_times=column(st.integers(0, 16)),
        sys_flag=draw(st.sampled_from(SYS_FLAGS)),
        prepared_transaction_offset=draw(st.sampled_from([0, 12345, -1])),
        born_host=HOST,
    )


def put_three_ways(
    root: Path, parts: list[MessageBatch], profile: Profile, file_size: int, clock_kind: str
) -> list[tuple[dict[str, str], list[PutMessageResult], int]]:
    """Put `parts` into three fresh stores — by put_batch, by put_messages(messages()) through
    the vectorized list path, and by the per-message path — and return what each holds."""
    config = StoreConfig(mapped_file_size_commit_log=file_size, mapped_file_size_consume_queue=80)
    out = []
    for way in ("batch", "list", "each"):
        clock: Any = ManualClock(7) if clock_kind == "manual" else TickClock()
        store = MmapMessageStore(root / way, config, profile, clock)
        results: list[PutMessageResult] = []
        for part in parts:
            if way == "batch":
                results += store.put_batch(part)
            elif way == "list":
                with mock.patch.object(pullspec.fast.putpath, "VECTOR_MIN", 1):
                    results += store.put_messages(part.messages())
            else:
                results += store._put_each(part.messages())
            if clock_kind == "manual":
                clock.advance(3)
        timestamp = store._last_store_timestamp
        store.close()
        out.append((tree_digest(root / way), results, timestamp))
    return out


@pytest.mark.parametrize("accelerated", [True, False], ids=["numba", "numpy"])
@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(batches(), min_size=1, max_size=3),
    profile=st.sampled_from([Profile.V4_9, Profile.V4_7]),
    file_size=st.sampled_from([300, 512, 1024]),
    clock_kind=st.sampled_from(["manual", "tick"]),
)
def test_batch_list_and_each_write_the_same_store(
    tmp_path_factory: pytest.TempPathFactory,
    accelerated: bool,
    parts: list[MessageBatch],
    profile: Profile,
    file_size: int,
    clock_kind: str,
) -> None:
    root = tmp_path_factory.mktemp("stores")
    with encoder(accelerated):
        by_batch, by_list, by_each = put_three_ways(root, parts, profile, file_size, clock_kind)
    assert by_each == by_batch
    assert by_each == by_list


def test_w1_shape_rolls_files_like_the_per_message_path(tmp_path: Path) -> None:
    # The bench's W1 shape (uniform 201-byte records, 10 tags) over many small files.
    n = 2_000
    k = np.arange(n)
    bodies = [b"%010d" % i * 10 for i in range(n)]
    batch = MessageBatch.from_bodies(
        "T",
        bodies,
        property_sets=[{"TAGS": f"Tag{d}"} for d in range(10)],
        property_index=k % 10,
        born_timestamps=1_700_000_000_000,
        born_host=HOST,
    )
    for accelerated in (True, False):
        with encoder(accelerated):
            ways = put_three_ways(
                tmp_path / str(accelerated), [batch], Profile.V4_9, 4096, "manual"
            )
        assert ways[2] == ways[0]
        assert ways[2] == ways[1]
    results = ways[0][1]
    assert [201] * n == [r.wrote_bytes for r in results]


def test_messages_round_trip_through_from_messages() -> None:
    msgs = [
        BrokerInnerMessage(
            topic="T" if i % 2 else "U",
            queue_id=i % 3,
            body=bytes([i]) * i,
            properties={"TAGS": str(i % 4)},
            flag=i,
            born_timestamp=100 + i,
            reconsume_times=i % 2,
        )
        for i in range(12)
    ]
    batch = MessageBatch.from_messages(msgs)
    assert 12 == len(batch)
    assert msgs == batch.messages()
    assert batch == MessageBatch.from_messages(batch.messages())
    assert b"\x05" * 5 == batch.body(5)


def test_from_messages_refuses_what_columns_cannot_share() -> None:
    a = BrokerInnerMessage(topic="T", queue_id=0, body=b"")
    with pytest.raises(InvalidArgumentError) as e:
        MessageBatch.from_messages(
            [a, BrokerInnerMessage(topic="T", queue_id=0, body=b"", sys_flag=1)]
        )
    assert "msgs" == e.value.name
    with pytest.raises(InvalidTypeError) as t:
        MessageBatch.from_messages([a, "not a message"])  # type: ignore[list-item]
    assert "msgs[1]" == t.value.name


GOOD: dict[str, Any] = {"topics": "T", "body_data": b"abcdef", "body_offsets": [0, 2, 6]}


@pytest.mark.parametrize(
    ("change", "error", "name"),
    [
        ({"topics": 5}, InvalidTypeError, "topics"),
        ({"topics": []}, InvalidTypeError, "topics"),
        ({"topics": ["T", 3]}, InvalidTypeError, "topics[1]"),
        ({"body_data": "text"}, InvalidTypeError, "body_data"),
        ({"body_data": np.zeros(6, dtype=np.int32)}, InvalidTypeError, "body_data"),
        ({"body_offsets": [0, 4, 2]}, InvalidArgumentError, "body_offsets[2]"),
        ({"body_offsets": [0, 2, 7]}, InvalidArgumentError, "body_offsets"),
        ({"body_offsets": []}, InvalidArgumentError, "body_offsets"),
        ({"body_offsets": [0.0, 6.0]}, InvalidTypeError, "body_offsets"),
        ({"queue_ids": [1, 2, 3]}, InvalidArgumentError, "queue_ids"),
        ({"queue_ids": [[1, 2]]}, InvalidArgumentError, "queue_ids"),
        ({"flags": 1.5}, InvalidTypeError, "flags"),
        ({"flags": True}, InvalidTypeError, "flags"),
        ({"flags": [1 << 70, 0]}, InvalidArgumentError, "flags"),
        ({"born_timestamps": np.array([True, False])}, InvalidTypeError, "born_timestamps"),
        ({"topic_index": 1}, InvalidArgumentError, "topic_index"),
        ({"property_index": [0, -1]}, InvalidArgumentError, "property_index"),
        ({"property_sets": [{"TAGS": 3}]}, InvalidTypeError, "property TAGS"),
        ({"property_sets": []}, InvalidTypeError, "property_sets"),
        ({"property_sets": ["TAGS"]}, InvalidTypeError, "property_sets[0]"),
        ({"sys_flag": "0"}, InvalidTypeError, "sys_flag"),
        ({"born_host": "127.0.0.1:1"}, InvalidTypeError, "born_host"),
    ],
)
def test_bad_columns_raise_typed_errors_naming_them(
    change: dict[str, Any], error: type[PullspecError], name: str
) -> None:
    with pytest.raises(error) as e:
        MessageBatch(**{**GOOD, **change})
    assert name == e.value.name  # type: ignore[attr-defined]


def test_a_batch_is_a_value() -> None:
    data = np.frombuffer(b"abcdef", dtype=np.uint8).copy()
    queues = np.array([1, 2])
    batch = MessageBatch("T", data, [0, 2, 6], queue_ids=queues)
    data[0] = ord("z")
    queues[0] = 9
    assert b"ab" == batch.body(0)
    assert [1, 2] == batch.queue_ids.tolist()
    with pytest.raises(ValueError, match="read-only"):
        batch.queue_ids[0] = 5


@pytest.mark.parametrize(
    ("columns", "error", "name"),
    [
        ({"topics": "bad topic!"}, IllegalTopicError, "topic"),
        ({"queue_ids": [0, 1 << 40]}, MessageIllegalError, "queue_id"),
        ({"body_data": bytes(600), "body_offsets": [0, 1, 600]}, MessageIllegalError, "msg"),
        ({"property_sets": [{"DELAY": "soon"}]}, InvalidArgumentError, "DELAY"),
        ({"sys_flag": 0x10}, InvalidArgumentError, "sys_flag"),
    ],
)
@pytest.mark.parametrize("accelerated", [True, False], ids=["numba", "numpy"])
def test_a_refused_batch_raises_as_the_list_and_leaves_the_store_untouched(
    tmp_path: Path,
    columns: dict[str, Any],
    error: type[PullspecError],
    name: str,
    accelerated: bool,
) -> None:
    config = StoreConfig(mapped_file_size_commit_log=512, mapped_file_size_consume_queue=80)
    batch = MessageBatch(**{**GOOD, **columns})
    with (
        encoder(accelerated),
        MmapMessageStore(tmp_path, config, Profile.V4_9, ManualClock(1)) as store,
    ):
        store.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=b"x" * 150)] * 2)
        before = (tree_digest(tmp_path), store.get_max_phy_offset(), dict(store._counters))
        for put in (
            store.put_batch,
            store.put_messages,
            lambda b: store.put_messages(b.messages()),
        ):
            with pytest.raises(error) as e:
                put(batch)
            assert name == e.value.name  # type: ignore[attr-defined]
            assert before == (tree_digest(tmp_path), store.get_max_phy_offset(), store._counters)


def test_put_batch_refuses_other_types_and_read_only_stores(tmp_path: Path) -> None:
    config = StoreConfig(mapped_file_size_commit_log=512)
    batch = MessageBatch(**GOOD)
    with MmapMessageStore(tmp_path, config, Profile.V4_9, ManualClock(1)) as store:
        with pytest.raises(InvalidTypeError) as e:
            store.put_batch(batch.messages())  # type: ignore[arg-type]
        assert "batch" == e.value.name
        assert [PutMessageStatus.PUT_OK] * 2 == [r.status for r in store.put_messages(batch)]
    read_only = MmapMessageStore(tmp_path, config, Profile.V4_9, ManualClock(1), read_only=True)
    with read_only, pytest.raises(ReadOnlyStoreError):
        read_only.put_batch(batch)


def test_a_slave_answers_service_not_available_by_columns(tmp_path: Path) -> None:
    config = StoreConfig(mapped_file_size_commit_log=512, broker_role=BrokerRole.SLAVE)
    with MmapMessageStore(tmp_path, config, Profile.V4_9, ManualClock(1)) as store:
        results = store.put_batch(MessageBatch(**GOOD))
        assert [PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)] * 2 == list(results)
        assert 0 == store.get_max_phy_offset()


def test_put_results_read_as_a_sequence() -> None:
    results = PutResults(
        PutMessageStatus.PUT_OK, np.array([0, 1]), np.array([0, 150]), np.array([150, 160])
    )
    expected = [
        PutMessageResult(PutMessageStatus.PUT_OK, 0, 0, 150),
        PutMessageResult(PutMessageStatus.PUT_OK, 1, 150, 160),
    ]
    assert 2 == len(results)
    assert expected[1] == results[1]
    assert expected[1:] == results[1:]
    assert expected == results
    assert results == PutResults.of(expected)
    with pytest.raises(ValueError, match="read-only"):
        results.wrote_offsets[0] = 3


def test_encoders_agree_on_irregular_runs() -> None:
    # Records of different lengths and scattered bodies: the numpy gather path, not 2-D views.
    rng = np.random.default_rng(5)
    n = 40
    body = rng.integers(0, 256, 2_000, dtype=np.uint8)
    body_lengths = rng.integers(0, 30, n)
    body_starts = rng.integers(0, 1_900, n)
    tails = encode_kernels.make_tails([b"T", b"TOPIC"], [b"", b"A\x01b", b"KEYS\x01x y"])
    topic_index, prop_index = rng.integers(0, 2, n), rng.integers(0, 3, n)
    lengths = 91 + body_lengths + tails.topic_lengths[topic_index] - 1
    lengths += tails.prop_lengths[prop_index] - 2
    rel = np.r_[0, np.cumsum(lengths)[:-1]]
    cols = [rng.integers(-(1 << 31), 1 << 31, n) for _ in range(7)]
    run = encode_kernels.Run._make(
        [rel, lengths, *cols, body_starts, body_lengths, topic_index, prop_index]
    )
    host = encode_kernels.host_bytes(b"\x01\x02\x03\x04", 9)
    outs = []
    for accelerated in (True, False):
        out = np.zeros(int(lengths.sum()) + 10, dtype=np.uint8)
        with encoder(accelerated):
            encode_kernels.encode_run(out, 10 - 10, run, body, tails, 3, -5, host, host)
        outs.append(out.tobytes())
    assert outs[0] == outs[1]


def test_warm_up_leaves_the_encoder_ready() -> None:
    encode_kernels.warm_up()
    assert (encode_kernels._compiled() is not None) == encode_kernels.accelerated()
