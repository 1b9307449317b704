"""get_messages: the compiled batch scan and the numpy pass answer what get_message answers, and
the columnar view agrees with the results it stands for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pullspec.fast.reader
from pullspec.fast.results import MultiGetResult
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, PullspecError
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole, GetMessageStatus


class EvenOnly:
    """A filter that is not an ExpressionMessageFilter: asked entry by entry."""

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return True

    def is_matched_by_commit_log(self, message: StoredMessage | None) -> bool:
        return message is not None and message.queue_offset % 2 == 0


FILTERS: list[Any] = [None, tag_filter("T", "*"), tag_filter("T", "A"), tag_filter("T", "B || C")]
FILTERS += [tag_filter("T", "Z"), EvenOnly()]


@pytest.fixture(scope="module", params=[Profile.V4_9, Profile.V4_7], ids=["4.9", "4.7"])
def store(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[MmapMessageStore]:
    clock = ManualClock(0)
    cfg = StoreConfig(
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=400,
        file_reserved_time=0,
        max_transfer_bytes_on_message_in_memory=1500,
        total_physical_memory_size=20_000,
    )
    s = MmapMessageStore(tmp_path_factory.mktemp("multiget"), cfg, request.param, clock)
    s.put_messages(
        [
            BrokerInnerMessage(
                topic="T",
                queue_id=k % 4,
                body=bytes(30 + k * 17 % 150),
                properties={"TAGS": "ABC"[k * 5 % 3]},
            )
            for k in range(400)
        ]
    )
    # Expire the first commit-log file: some windows now start at removed records.
    s.set_last_modified(0, -10)
    clock.jump_to(-10)
    s.delete_expired_files()
    yield s
    s.close()


requests = st.tuples(
    st.just("G"),
    st.sampled_from(["T", "T", "T", "U"]),
    st.integers(0, 4),
    st.integers(-2, 120),
    st.integers(-1, 40),
    st.sampled_from(range(len(FILTERS))).map(lambda k: FILTERS[k]),
)


def _one_by_one(s: MmapMessageStore, reqs: list[Any]) -> list[Any] | type[Exception]:
    try:
        return [s.get_message(*r) for r in reqs]
    except PullspecError as exc:
        return type(exc)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@given(reqs=st.lists(requests, max_size=30))
@settings(max_examples=60, deadline=None)
def test_batched_answers_equal_single_pulls(
    store: MmapMessageStore, compiled: bool, reqs: list[Any]
) -> None:
    expected = _one_by_one(store, reqs)
    kernel = pullspec.fast.reader.read_kernels if compiled else (lambda: None)
    with mock.patch("pullspec.fast.reader.read_kernels", kernel):
        if isinstance(expected, type):
            with pytest.raises(expected):
                store.get_messages(reqs)
            return
        actual = store.get_messages(reqs)
    assert expected == actual
    assert [r.msg_offsets for r in expected] == [r.msg_offsets for r in actual]
    assert [r.status for r in expected] == actual.statuses
    assert [r.next_begin_offset for r in expected] == actual.next_begin_offsets.tolist()
    assert [r.message_count for r in expected] == actual.message_counts.tolist()
    assert [r.buffer_total_size for r in expected] == actual.buffer_total_sizes.tolist()


def test_the_batch_meets_every_decision(store: MmapMessageStore) -> None:
    # Pulls over every offset of every queue with each filter, in one call.
    reqs = [("G", "T", q, o, 8, f) for q in range(5) for o in range(-1, 110) for f in FILTERS]
    actual = store.get_messages(reqs)
    expected = [store.get_message(*r) for r in reqs]
    assert expected == actual
    assert {
        GetMessageStatus.FOUND,
        GetMessageStatus.NO_MATCHED_MESSAGE,
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_ONE,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
    } <= set(actual.statuses)


def test_unreadable_records_go_to_the_single_pull_path(tmp_path: Any) -> None:
    s = MmapMessageStore(tmp_path, StoreConfig(), Profile.V4_9, ManualClock(0))
    put = s.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=b"x") for _ in range(6)])
    # The commit log's last three records become unreadable, as after a cut the consume
    # queue has not caught up with: the compiled scan must leave those pulls to get_message.
    s.commit_log.end = put[3].wrote_offset
    reqs = [("G", "T", 0, o, 4, None) for o in range(6)]
    actual = s.get_messages(reqs)
    assert [s.get_message(*r) for r in reqs] == actual
    assert GetMessageStatus.MESSAGE_WAS_REMOVING in actual.statuses
    s.commit_log.end = put[-1].wrote_offset + put[-1].wrote_bytes
    s.close()


def test_columns_are_read_without_building_results(store: MmapMessageStore) -> None:
    reqs = [("G", "T", q, 60, 4, None) for q in range(4)]
    actual = store.get_messages(reqs)
    assert isinstance(actual, MultiGetResult)
    assert [4, 4, 4, 4] == actual.message_counts.tolist()
    assert [64, 64, 64, 64] == actual.next_begin_offsets.tolist()
    assert actual[0].messages[0].queue_offset == 60


@pytest.mark.parametrize(
    ("request_", "name"),
    [
        (("G", "T", 0, "7", 4, None), "offset"),
        (("G", "T", True, 0, 4, None), "queue_id"),
        (("G", 5, 0, 0, 4, None), "topic"),
        (("G", "T", 0, 0, 4, "Tag3"), "message_filter"),
        ("G T 0 0 4", "request"),
    ],
)
def test_bad_requests_are_named(store: MmapMessageStore, request_: Any, name: str) -> None:
    with pytest.raises(InvalidTypeError, match=name):
        store.get_messages([("G", "T", 0, 0, 4, None), request_])


def test_a_refused_batch_makes_no_queue(store: MmapMessageStore) -> None:
    # The first request names a queue the store has never seen; the last is bad.
    before = set(store.queues)
    with pytest.raises(InvalidTypeError, match="offset"):
        store.get_messages([("G", "NEW", 7, 0, 4, None), ("G", "T", 0, "7", 4, None)])
    assert before == set(store.queues)


def _pull_loop(
    s: MmapMessageStore, queue_id: int, offset: int, nums: int, f: Any, max_calls: int | None
) -> list[Any]:
    """pull_through's contract, one get_message at a time."""
    scans = (
        GetMessageStatus.FOUND,
        GetMessageStatus.NO_MATCHED_MESSAGE,
        GetMessageStatus.MESSAGE_WAS_REMOVING,
    )
    out: list[Any] = []
    max_offset = s.get_max_offset_in_queue("T", queue_id)
    while (max_calls is None or len(out) < max_calls) and offset < max_offset:
        r = s.get_message("G", "T", queue_id, offset, nums, f)
        out.append(r)
        if r.status not in scans or r.next_begin_offset <= offset:
            break
        offset = r.next_begin_offset
    return out


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@given(
    queue_id=st.integers(0, 4),
    offset=st.integers(-2, 110),
    nums=st.integers(-1, 40),
    f=st.sampled_from(range(len(FILTERS))).map(lambda k: FILTERS[k]),
    max_calls=st.none() | st.integers(0, 5),
)
@settings(max_examples=60, deadline=None)
def test_pull_through_equals_consecutive_pulls(
    store: MmapMessageStore,
    compiled: bool,
    queue_id: int,
    offset: int,
    nums: int,
    f: Any,
    max_calls: int | None,
) -> None:
    try:
        expected = _pull_loop(store, queue_id, offset, nums, f, max_calls)
    except PullspecError as exc:
        with pytest.raises(type(exc)):
            store.pull_through("G", "T", queue_id, offset, nums, f, max_calls)
        return
    kernel = pullspec.fast.reader.read_kernels if compiled else (lambda: None)
    with mock.patch("pullspec.fast.reader.read_kernels", kernel):
        actual = store.pull_through("G", "T", queue_id, offset, nums, f, max_calls)
    assert expected == actual
    assert [r.msg_offsets for r in expected] == [r.msg_offsets for r in actual]
    assert [r.next_begin_offset for r in expected] == actual.next_begin_offsets.tolist()
    assert [r.buffer_total_size for r in expected] == actual.buffer_total_sizes.tolist()


def test_pull_through_crosses_consume_queue_files(tmp_path: Any) -> None:
    # 3 entries per consume-queue file: every pull ends at a file end, as getIndexBuffer does.
    cfg = StoreConfig(mapped_file_size_consume_queue=60)
    s = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(0))
    s.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=b"x") for _ in range(10)])
    actual = s.pull_through("G", "T", 0, 1, 32)
    assert [3, 6, 9, 10] == actual.next_begin_offsets.tolist()
    assert [2, 3, 3, 1] == actual.message_counts.tolist()
    s.close()


def test_pull_through_refuses_bad_arguments(store: MmapMessageStore) -> None:
    with pytest.raises(InvalidArgumentError, match="max_calls"):
        store.pull_through("G", "T", 0, 0, 32, None, -1)
    with pytest.raises(InvalidTypeError, match="offset"):
        store.pull_through("G", "T", 0, 1.5, 32)  # type: ignore[arg-type]


def test_batches_see_appends_between_them(tmp_path: Any) -> None:
    s = MmapMessageStore(tmp_path, StoreConfig(), Profile.V4_9, ManualClock(0))
    one = BrokerInnerMessage(topic="T", queue_id=0, body=b"x")
    s.put_messages([one] * 3)
    assert [3] == s.get_messages([("G", "T", 0, 0, 32, None)]).message_counts.tolist()
    s.put_messages([one] * 4)
    reqs = [("G", "T", 0, 0, 32, None)]
    assert [s.get_message(*r) for r in reqs] == s.get_messages(reqs)
    assert [7] == s.get_messages(reqs).message_counts.tolist()
    s.close()


@given(reqs=st.lists(requests, min_size=1, max_size=20))
@settings(max_examples=60, deadline=None)
def test_single_pulls_through_the_kernel_equal_the_numpy_path(
    store: MmapMessageStore, reqs: list[Any]
) -> None:
    for r in reqs:
        try:
            q = store.consume_queue(r[1], r[2])
            expected = store.reader.get(
                q, r[3], r[4], r[5], BrokerRole.ASYNC_MASTER, False, compiled=False
            )
        except PullspecError as exc:
            with pytest.raises(type(exc)):
                store.get_message(*r)
            continue
        actual = store.get_message(*r)
        assert expected == actual
        assert expected.msg_offsets == actual.msg_offsets
        assert expected.buffer_total_size == actual.buffer_total_size
        assert expected.suggest_pulling_from_slave == actual.suggest_pulling_from_slave


_FIRST_PULL = """
import tempfile
from pullspec.fast import numba_read
from pullspec.fast.read_plan import GetRequest
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile

store = MmapMessageStore(tempfile.mkdtemp(), StoreConfig(), Profile.V4_9, ManualClock(0))
store.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=b"x")] * 3)
assert store.get_message("G", "T", 0, 0, 32, tag_filter("T", "*")).msg_offsets == [0, 1, 2]
assert store.get_messages([GetRequest("G", "T", 0, 1, 32)])[0].msg_offsets == [1, 2]
assert len(list(store.pull_through("G", "T", 0, 0, 1, None))) == 3
store.close()
kernels = (numba_read.window_one, numba_read.window_all, numba_read.scan, numba_read.chain)
print(sum(sum(k.stats.cache_misses.values()) for k in kernels))
"""


@pytest.mark.slow
@pytest.mark.skipif(pullspec.fast.reader.read_kernels() is None, reason="numba missing or disabled")
def test_a_fresh_process_loads_the_compiled_loops_from_the_cache() -> None:
    import subprocess
    import sys

    runs = [
        subprocess.run(
            [sys.executable, "-c", _FIRST_PULL], capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[1] == ["0"]  # nothing compiled: every kernel came from numba's disk cache
