"""fast.MmapMessageStore: appends and file rolls on disk, expiry, roles, the real 4.9.7 store
directories, batched pulls, typed errors, and properties of every pull answer."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pullspec.fast.factories
from pullspec.conformance.adapters._config import store_config
from pullspec.conformance.vectors import Verdict, load_cases, run_case
from pullspec.fast.batch import MessageBatch
from pullspec.fast.read_plan import GetRequest
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import (
    IllegalCapacityError,
    IllegalTopicError,
    InvalidTypeError,
    MessageIllegalError,
    PullspecError,
    ReadOnlyStoreError,
)
from pullspec.spec.filter import ExpressionMessageFilter, tag_filter, tags_string_to_tags_code
from pullspec.spec.layout import BLANK_MAGIC_CODE, pack_cq_entry
from pullspec.spec.message import BrokerInnerMessage, StoredMessage
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.results import GetMessageResult
from pullspec.spec.status import BrokerRole, GetMessageStatus, PutMessageStatus

CFG = StoreConfig(mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80)


def msg(queue_id: int = 0, tags: str | None = "A", body: int = 100, topic: str = "T") -> Any:
    """A message like the vectors': topic T, TAGS only, a body of zeros."""
    return BrokerInnerMessage(
        topic=topic,
        queue_id=queue_id,
        body=bytes(body),
        properties={"TAGS": tags} if tags is not None else None,
    )


def tree_digest(root: Path) -> str:
    """A digest of every file name and content under `root`."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "abort":
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_appends_roll_files_with_the_blank(tmp_path: Path, profile: Profile) -> None:
    clock = ManualClock(5)
    with MmapMessageStore(tmp_path, CFG, profile, clock) as store:
        results = store.put_messages([msg(k % 2, "A" if k % 3 else None, 150) for k in range(20)])
        assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 20
        # Queue offsets count per queue; records are contiguous except across a blank.
        assert [r.queue_offset for r in results] == [k // 2 for k in range(20)]
        ends = {}
        for prev, cur in itertools.pairwise(results):
            end = prev.wrote_offset + prev.wrote_bytes
            if cur.wrote_offset != end:
                assert cur.wrote_offset % 1024 == 0 and end + cur.wrote_bytes + 8 > cur.wrote_offset
                ends[cur.wrote_offset - 1024] = end
        last = results[-1]
        assert ends and store.get_max_phy_offset() == last.wrote_offset + last.wrote_bytes
        assert store.get_max_offset_in_queue("T", 0) == 10
    for start, end in ends.items():
        raw = (tmp_path / "commitlog" / f"{start:020d}").read_bytes()
        w = end - start
        assert struct.unpack_from(">ii", raw, w) == (1024 - w, BLANK_MAGIC_CODE)
        assert raw[w + 8 :] == bytes(1024 - w - 8)
    cq = sorted((tmp_path / "consumequeue" / "T" / "0").iterdir())
    assert [p.name for p in cq] == [f"{i * 80:020d}" for i in range(3)]
    entries = b"".join(p.read_bytes() for p in cq)
    for r in results[0::2]:
        code = 0 if results.index(r) % 3 == 0 else tags_string_to_tags_code("A")
        at = r.queue_offset * 20
        assert entries[at : at + 20] == pack_cq_entry(r.wrote_offset, r.wrote_bytes, code)
    checkpoint = (tmp_path / "checkpoint").read_bytes()
    assert len(checkpoint) == 4096 and struct.unpack_from(">qq", checkpoint) == (5, 5)
    assert not (tmp_path / "abort").exists()


def test_reopen_answers_the_same(tmp_path: Path) -> None:
    clock = ManualClock(0)
    f = tag_filter("T", "A || C")
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, clock) as store:
        store.put_messages([msg(0, "ABC"[k % 3], 50 + k) for k in range(40)])
        before = [store.get_message("G", "T", 0, o, 8, f) for o in range(-1, 42)]
        firsts = [r.messages[:1] for r in before]
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, clock, read_only=True) as store:
        after = [store.get_message("G", "T", 0, o, 8, f) for o in range(-1, 42)]
        assert after == before and [r.messages[:1] for r in after] == firsts
        report = store.recovery
        assert not report.torn_tail and report.dropped_entries == report.rebuilt_entries == 0


def test_expiry_moves_min_offsets(tmp_path: Path) -> None:
    clock = ManualClock(0)
    cfg = StoreConfig(
        mapped_file_size_commit_log=1024,
        mapped_file_size_consume_queue=80,
        file_reserved_time=1,
        delete_files_batch_max=2,
    )
    with MmapMessageStore(tmp_path, cfg, Profile.V4_9, clock) as store:
        store.put_messages([msg(k % 2, None, 200) for k in range(30)])
        files = len(list((tmp_path / "commitlog").iterdir()))
        assert store.delete_expired_files() == 0
        clock.advance(3_600_000)
        assert store.delete_expired_files() == 2  # at most deleteFilesBatchMax per round
        assert store.get_min_phy_offset() == 2048
        assert store.delete_expired_files() == 2
        while store.delete_expired_files():
            pass
        assert len(list((tmp_path / "commitlog").iterdir())) == 1 < files
        cl_min = store.get_min_phy_offset()
        assert cl_min == store.get_max_phy_offset() - store.get_max_phy_offset() % 1024
        for q in (0, 1):
            low = store.get_min_offset_in_queue("T", q)
            r = store.get_message("G", "T", q, low - 1, 32)
            assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == low
            found = store.get_message("G", "T", q, low, 32)
            assert found.status is GetMessageStatus.FOUND
            assert all(m.commitlog_offset >= cl_min for m in found.messages)
        # STORE-21/22: offset 0's file is gone, so the lookup reads the first remaining file
        first = store.look_message_by_offset(0)
        assert first is not None and first.commitlog_offset == cl_min
        assert store.look_message_by_offset(1) is None


def test_roles(tmp_path: Path) -> None:
    clock = ManualClock(0)
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, clock) as store:
        store.put_messages([msg() for _ in range(3)])
        store.set_role(BrokerRole.SLAVE, False)
        digest = tree_digest(tmp_path)
        assert [r.status for r in store.put_messages([msg(), msg(1)])] == [
            PutMessageStatus.SERVICE_NOT_AVAILABLE
        ] * 2
        assert tree_digest(tmp_path) == digest and store.get_max_offset_in_queue("T", 1) == 0
        assert store.get_message("G", "T", 0, 9, 32).next_begin_offset == 9  # STORE-6
        assert store.get_message("G", "T", 0, 1, 32).next_begin_offset == 3  # scan: uncorrected
        store.set_role(BrokerRole.SLAVE, True)
        assert store.get_message("G", "T", 0, 9, 32).next_begin_offset == 3
        with pytest.raises(InvalidTypeError):
            store.set_role("SLAVE", True)  # type: ignore[arg-type]


def test_bad_input_raises_typed_errors_store_unchanged(tmp_path: Path) -> None:
    clock = ManualClock(0)
    main = tmp_path / "a"
    with MmapMessageStore(main, CFG, Profile.V4_9, clock) as store:
        store.put_messages([msg() for _ in range(3)])
        store.flush()
        digest = tree_digest(main)
        bad: list[Any] = [
            [msg(), msg(topic="bad topic")],
            [msg(topic="x" * 128)],
            [msg(), msg(body=2000)],  # larger than a commit-log file
            [BrokerInnerMessage(topic="T", queue_id=0, body=b"", properties={"K": "v" * 40000})],
            [msg(), "not a message"],
            msg(),
        ]
        for batch in bad:
            with pytest.raises(PullspecError) as info:
                store.put_messages(batch)
            assert isinstance(
                info.value, IllegalTopicError | MessageIllegalError | InvalidTypeError
            )
        store.flush()
        assert tree_digest(main) == digest and store.get_max_offset_in_queue("T", 0) == 3
        big = StoreConfig(mapped_file_size_commit_log=1 << 20, max_message_size=100)
    with MmapMessageStore(tmp_path / "b", big, Profile.V4_9, clock) as store:
        with pytest.raises(MessageIllegalError) as err:
            store.put_message(msg(body=101))
        assert err.value.status == "MESSAGE_ILLEGAL" and store.get_max_phy_offset() == 0
        bad_args: list[tuple[Any, ...]] = [
            ("G", "T", 0, "1", 32),
            ("G", "T", 0, 1, 3.0),
            (None, "T", 0, 0, 1),
        ]
        for args in bad_args:
            with pytest.raises(InvalidTypeError):
                store.get_message(*args)
        with pytest.raises(InvalidTypeError):
            store.get_message("G", "T", 0, 0, 1, "TagA")  # type: ignore[arg-type]
    with MmapMessageStore(main, CFG, Profile.V4_9, clock, read_only=True) as store:
        for call in (lambda: store.put_message(msg()), store.delete_expired_files):
            with pytest.raises(ReadOnlyStoreError):
                call()
    assert tree_digest(main) == digest
    # A closed store refuses every put path too, and writes nothing.
    closed = MmapMessageStore(main, CFG, Profile.V4_9, clock)
    closed.close()
    digest = tree_digest(main)
    calls: list[Callable[[], object]] = [
        lambda: closed.put_message(msg()),
        lambda: closed.put_messages([msg(), msg(queue_id=1)]),
        lambda: closed.put_batch(MessageBatch.from_messages([msg()])),
        closed.delete_expired_files,
    ]
    for put in calls:
        with pytest.raises(ReadOnlyStoreError, match="closed"):
            put()
    assert tree_digest(main) == digest


def _answer(result: GetMessageResult) -> dict[str, Any]:
    return {
        "status": result.status.value,
        "nextBeginOffset": result.next_begin_offset,
        "minOffset": result.min_offset,
        "maxOffset": result.max_offset,
        "msgOffsets": result.msg_offsets,
        "suggestPullingFromSlave": result.suggest_pulling_from_slave,
    }


@pytest.mark.parametrize("name", ["basic", "expired"])
def test_shared_store_answers(stores_dir: Path, name: str) -> None:
    """Every answer a real 4.9.7 broker gave on its own directory, opened read-only here."""
    root = stores_dir / name
    cases = [json.loads(line) for line in (root / "answers.jsonl").open()]
    assert len(cases) in (59, 61)
    clock = ManualClock(0)
    config = store_config(cases[0]["config"])
    with pullspec.fast.factories.open_store(root, config, Profile.V4_9, clock) as store:
        for case in cases:
            cfg = case["config"]
            store.set_role(BrokerRole(cfg["brokerRole"]), cfg["offsetCheckInSlave"])
            for step in case["steps"]:
                a = step["args"]
                result = store.get_message(
                    a["group"],
                    a["topic"],
                    a["queueId"],
                    a["offset"],
                    a["maxMsgNums"],
                    tag_filter(a["topic"], a["subscription"]),
                )
                assert _answer(result) == step["expect"], case["id"]
                assert [m.queue_offset for m in result.messages] == step["expect"]["msgOffsets"]


@pytest.mark.parametrize("name", ["basic", "expired"])
def test_shared_store_messages(stores_dir: Path, name: str) -> None:
    """Every message of messages.jsonl, read back through the store field by field."""
    root = stores_dir / name
    rows = [json.loads(line) for line in (root / "messages.jsonl").open()]
    cfg = StoreConfig(mapped_file_size_commit_log=16384, mapped_file_size_consume_queue=400)
    with pullspec.fast.factories.open_store(root, cfg, Profile.V4_9, ManualClock(0)) as store:
        assert store.get_max_phy_offset() == 129466
        by_queue: dict[tuple[str, int], list[StoredMessage]] = {}
        for key in {(r["topic"], r["queue_id"]) for r in rows}:
            offset, got = store.get_min_offset_in_queue(*key), by_queue.setdefault(key, [])
            while offset < store.get_max_offset_in_queue(*key):
                result = store.get_message("G", key[0], key[1], offset, 32)
                got.extend(result.messages)
                offset = result.next_begin_offset
        for row in rows:
            m = store.look_message_by_offset(row["commitlog_offset"])
            if row.get("on_disk") is False:
                # STORE-21: offset 0 alone is read at the first remaining file (65536)
                assert (m and m.commitlog_offset) == (
                    65536 if row["commitlog_offset"] == 0 else None
                )
                continue
            assert m is not None and m in by_queue[(row["topic"], row["queue_id"])]
            assert (m.topic, m.queue_id, m.queue_offset, m.size) == (
                row["topic"],
                row["queue_id"],
                row["queue_offset"],
                row["size"],
            )
            assert m.body == base64.b64decode(row["body_base64"])
            assert dict(m.properties) == row["properties"] and m.tags_code == row["tags_code"]
            assert (m.body_crc, m.born_timestamp, m.store_timestamp) == (
                row["body_crc"],
                row["born_timestamp"],
                row["store_timestamp"],
            )
            assert str(m.born_host) == row["born_host"] and m.msg_id == row["msg_id"]


@pytest.mark.parametrize("version", ["4.9.7", "4.7.1"])
def test_store_vectors(vectors_dir: Path, version: str) -> None:
    profile = Profile.parse(version)
    path = vectors_dir / f"rocketmq-{version}" / "store.jsonl"
    results = [
        run_case(pullspec.fast.factories, c, profile, path) for c in load_cases(path, ["store"])
    ]
    assert len(results) == 30
    assert [r for r in results if r.verdict is not Verdict.PASS] == []


class OddPhysRejected:
    """A MessageFilter that is not an ExpressionMessageFilter (exercises the per-entry path)."""

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return tags_code != tags_string_to_tags_code("B")

    def is_matched_by_commit_log(self, message: StoredMessage | None) -> bool:
        return message is not None and message.queue_offset % 3 != 1


FILTERS: list[Any] = [None, "*", "A", "B || C", "Z", OddPhysRejected()]


@pytest.fixture(scope="module", params=[10_000, 1 << 34], ids=["disk-and-memory", "memory"])
def populated(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    clock = ManualClock(0)
    cfg = StoreConfig(
        mapped_file_size_commit_log=2048,
        mapped_file_size_consume_queue=200,
        file_reserved_time=0,
        max_transfer_bytes_on_message_in_memory=1500,
        total_physical_memory_size=request.param,
    )
    store = MmapMessageStore(tmp_path_factory.mktemp("populated"), cfg, Profile.V4_9, clock)
    store.put_messages([msg(k % 3, "ABC"[k * 7 % 3], 40 + k * 13 % 200) for k in range(300)])
    store.set_last_modified(0, -10)  # only the first file is old enough
    clock.jump_to(-10)
    store.delete_expired_files()
    yield store
    store.close()


def _filter(f: Any) -> Any:
    return tag_filter("T", f) if isinstance(f, str) else f


requests = st.builds(
    GetRequest,
    group=st.just("G"),
    topic=st.sampled_from(["T", "T", "U"]),
    queue_id=st.integers(0, 3),
    offset=st.integers(-2, 110),
    max_msg_nums=st.integers(-1, 40),
    message_filter=st.sampled_from(FILTERS).map(_filter),
)


@given(reqs=st.lists(requests, max_size=40))
@settings(max_examples=max(30, settings().max_examples // 2))
def test_get_messages_equals_get_message(populated: MmapMessageStore, reqs: list[Any]) -> None:
    one: list[GetMessageResult] = []
    try:
        for r in reqs:
            one.append(
                populated.get_message(
                    r.group, r.topic, r.queue_id, r.offset, r.max_msg_nums, r.message_filter
                )
            )
    except PullspecError as exc:
        with pytest.raises(type(exc)):
            populated.get_messages(reqs)
        return
    many = populated.get_messages(reqs)
    assert many == one
    assert [r.msg_offsets for r in many] == [r.msg_offsets for r in one]
    assert [r.buffer_total_size for r in many] == [r.buffer_total_size for r in one]


@given(req=requests)
@settings(max_examples=max(50, settings().max_examples))
def test_pull_answer_properties(populated: MmapMessageStore, req: GetRequest) -> None:
    try:
        r = populated.get_message(
            req.group, req.topic, req.queue_id, req.offset, req.max_msg_nums, req.message_filter
        )
    except IllegalCapacityError:
        assert req.max_msg_nums < 0  # BATCH-4, profile 4.9, once a window exists
        return
    offsets = [m.queue_offset for m in r.messages]
    assert offsets == r.msg_offsets == sorted(offsets)
    assert r.buffer_total_size == sum(m.size for m in r.messages)
    assert (r.status is GetMessageStatus.FOUND) == bool(r.messages)
    if r.status in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
        assert req.offset < r.next_begin_offset <= r.max_offset
        assert all(req.offset <= o < r.next_begin_offset for o in offsets)
        assert len(offsets) <= max(1, min(req.max_msg_nums, 32))
    if isinstance(req.message_filter, ExpressionMessageFilter) and r.messages:
        assert all(req.message_filter.is_matched_by_consume_queue(m.tags_code) for m in r.messages)
