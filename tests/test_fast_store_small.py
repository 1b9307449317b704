"""The fast store's shortcuts for small operations answer exactly what the general paths do:
entries packed one by one, the queue offsets read alone, few-entry min corrections, the
per-message record encoder, the filter rows cached by identity, the argument fast checks."""

from __future__ import annotations

import copy
import functools
import gc
import pickle
import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
import numpy as np
import pytest

import pullspec.fast.consumequeue
from pullspec.fast.batch import MessageBatch
from pullspec.fast.consumequeue import ConsumeQueue
from pullspec.fast.mapped import MappedFile
from pullspec.fast.results import PlacedResult
from pullspec.fast.store import MmapMessageStore
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.delay import SCHEDULE_TOPIC
from pullspec.spec.errors import (
    InvalidArgumentError,
    InvalidTypeError,
    MessageIllegalError,
    PullspecError,
)
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage, HostAddress
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.results import PutMessageResult
from pullspec.spec.status import BrokerRole, PutMessageStatus

CFG = StoreConfig(mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80)
MASTER = BrokerRole.ASYNC_MASTER


def _queue(root: Path, units: int = 4) -> ConsumeQueue:
    return ConsumeQueue(root, "T", 0, units * 20, read_only=False)


def _bytes(q: ConsumeQueue) -> list[bytes]:
    return [bytes(f.mm) for f in q.files]


@pytest.mark.parametrize("first", [0, 3, 6])
def test_append_entries_writes_what_append_writes(tmp_path: Path, first: int) -> None:
    rows = [(100 * k, 50 + k, k - 2) for k in range(9)]
    by_rows, by_columns = _queue(tmp_path / "rows"), _queue(tmp_path / "columns")
    table = np.array(rows, dtype=np.int64)
    # Two appends each, the second overlapping the first (present indices are skipped).
    by_rows.append_entries(first, rows[:5])
    by_rows.append_entries(first + 3, rows[3:])
    by_columns.append(first, table[:5, 0], table[:5, 1], table[:5, 2])
    by_columns.append(first + 3, table[3:, 0], table[3:, 1], table[3:, 2])
    assert _bytes(by_rows) == _bytes(by_columns)
    assert by_rows.min_max() == by_columns.min_max()
    assert by_rows.max_physic_offset == by_columns.max_physic_offset == 800 + 58
    for q in (by_rows, by_columns):
        q.close()


def test_append_entries_out_of_range_raises_as_append(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    with pytest.raises(OverflowError):
        q.append_entries(0, [(1 << 64, 10, 0)])
    assert q.files == [] and q.max_offset() == 0
    q.close()


def test_min_and_max_offsets_alone_equal_the_pair(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    assert (q.min_offset(), q.max_offset()) == q.min_max() == (0, 0)
    q.append_entries(0, [(10 * k, 10, 0) for k in range(6)])
    assert (q.min_offset(), q.max_offset()) == q.min_max() == (0, 6)
    q.delete_expired(25)
    assert (q.min_offset(), q.max_offset()) == q.min_max() == (3, 6)
    q.close()


@pytest.mark.parametrize("few", [0, 64], ids=["numpy", "one-by-one"])
@pytest.mark.parametrize("cl_min", [0, 150, 301, 10_000])
def test_min_correction_ways_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, few: int, cl_min: int
) -> None:
    monkeypatch.setattr(pullspec.fast.consumequeue, "_FEW", few)
    q = _queue(tmp_path)
    q.append_entries(0, [(100 * k, 100, 0) for k in range(10)])
    dropped = q.delete_expired(cl_min)
    expected = {0: (0, 0), 150: (0, 2), 301: (1, 4), 10_000: (2, 0)}[cl_min]
    assert (dropped, q.min_offset()) == expected
    q.close()


def test_created_files_make_their_directory_and_go(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b"
    f = MappedFile.create(str(directory), 2048, 64)
    assert f.path == directory / f"{2048:020d}" and f.file == str(f.path)
    assert f.path.stat().st_size == 64 and not list(directory.glob("*.creating"))
    f.touch(5_000)
    assert f.path.stat().st_mtime_ns == 5_000_000_000
    path = f.path
    f.destroy()
    assert not path.exists()
    f.destroy()  # already gone: nothing to do
    assert MappedFile.anonymous(0, 16).path is None


def _pair(profile: Profile, config: StoreConfig = CFG) -> tuple[Any, Any]:
    import pullspec.fast.factories

    return (
        ReferenceMessageStore(config, profile, clock=ManualClock(1_000)),
        pullspec.fast.factories.message_store(config, profile, ManualClock(1_000)),
    )


def _observe(store: Any, topic: str = "T") -> Any:
    return [
        (store.get_min_offset_in_queue(topic, q), store.get_max_offset_in_queue(topic, q))
        for q in range(2)
    ] + [store.get_min_phy_offset(), store.get_max_phy_offset()]


def _both(stores: tuple[Any, Any], call: Any) -> Any:
    answers = []
    for s in stores:
        try:
            answers.append(("ok", call(s)))
        except PullspecError as exc:
            answers.append(("error", exc.kind))
    assert answers[0] == answers[1]
    return answers[0]


V6 = HostAddress(bytes(range(16)), 9)


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_repeated_messages_keep_their_delay_and_stored_properties(profile: Profile) -> None:
    delayed = BrokerInnerMessage(topic="T", queue_id=0, body=b"x", properties={"DELAY": "2"})
    stored = BrokerInnerMessage(
        topic="T", queue_id=1, body=b"y", properties={"TAGS": "A"}, stored_properties={}
    )
    plain = BrokerInnerMessage(topic="T", queue_id=1, body=b"z", properties={"TAGS": "A"})
    stores = _pair(profile)
    try:
        # Each twice: the second put meets the cached encoding of its topic and properties.
        for batch in ([delayed, plain], [delayed], [stored, plain], [plain, stored]):
            _both(stores, lambda s, b=batch: s.put_messages(b))
            for topic in ("T", SCHEDULE_TOPIC):
                _both(stores, lambda s, t=topic: _observe(s, t))
        for topic, queue_id in (("T", 0), ("T", 1), (SCHEDULE_TOPIC, 1)):
            _both(stores, lambda s, t=topic, q=queue_id: s.get_message("G", t, q, 0, 32, None))
    finally:
        stores[1].close()


def test_ipv6_hosts_are_encoded_by_the_spec_encoder(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(7))
    v6 = BrokerInnerMessage(topic="T", queue_id=0, body=b"w", born_host=V6, store_host=V6)
    v4 = BrokerInnerMessage(topic="T", queue_id=0, body=b"w")
    results = store.put_messages([v6, v4, v6])
    assert [r.wrote_bytes for r in results] == [117, 93, 117]
    for r in results:
        found = store.look_message_by_offset(r.wrote_offset)
        assert found is not None and found.queue_offset == r.queue_offset
        assert found.born_host == (V6 if r.wrote_bytes == 117 else v4.born_host)
    store.close()


def test_a_field_out_of_range_is_named_by_the_spec_encoder(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1 << 63))
    with pytest.raises(InvalidArgumentError, match="store_timestamp"):
        store.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=b"x")])
    store.close()


def test_filter_rows_are_cached_by_identity_and_value(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(0))
    f, same = tag_filter("T", "A || B"), tag_filter("T", "A || B")
    rows = store.reader.compiled.rows
    row = rows.row(f)
    assert row is not None and rows.row(f) is row
    assert rows.row(same) is row  # an equal filter shares the row
    everything = rows.row(None)
    assert everything is not None and everything[0] == -1
    assert rows.row(tag_filter("T", "*")) == (everything[0], everything[1])
    store.close()


class StrTopic(str):
    """A str subclass: accepted as a topic, though not by the exact-type shortcut."""


def test_arguments_outside_the_shortcuts_are_still_checked(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(0))
    store.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=b"x")])
    assert store.get_message("G", StrTopic("T"), 0, 0, 4).message_count == 1
    assert store.get_max_offset_in_queue(StrTopic("T"), 0) == 1
    for bad in ({"queue_id": True}, {"topic": b"T"}, {"max_msg_nums": 1.0}):
        args: dict[str, Any] = {"topic": "T", "queue_id": 0, "max_msg_nums": 4, **bad}
        with pytest.raises(InvalidTypeError):
            store.get_message("G", args["topic"], args["queue_id"], 0, args["max_msg_nums"])
    with pytest.raises(InvalidTypeError):
        store.get_min_offset_in_queue("T", True)
    store.close()


def test_a_first_file_for_a_later_index_starts_at_its_byte_offset(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    q.append_entries(5, [(0, 10, 0), (10, 10, 0), (20, 10, 0), (30, 10, 0)])
    assert [f.start for f in q.files] == [80, 160]  # files of 4 entries: 4–7, 8–11
    assert (q.min_offset(), q.max_offset()) == q.min_max() == (5, 9)
    q.close()


def test_a_queue_rebuilt_after_expiry_answers_as_before(tmp_path: Path) -> None:
    config = StoreConfig(
        mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
    )
    clock = ManualClock(1_000)
    store = MmapMessageStore(tmp_path, config, Profile.V4_9, clock)
    store.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=bytes(200))] * 20)
    store.delete_expired_files()

    def observe(s: MmapMessageStore) -> Any:
        pulls = [s.get_message("G", "T", 0, o, 4) for o in range(16, 21)]
        return _observe(s), [(r.status, r.next_begin_offset, r.msg_offsets) for r in pulls]

    before = observe(store)
    assert before[0][0] == (18, 20)
    store.close()
    shutil.rmtree(tmp_path / "consumequeue")  # rebuilt from the commit log at the next open
    with MmapMessageStore(tmp_path, config, Profile.V4_9, clock) as reopened:
        assert observe(reopened) == before


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_the_entry_by_entry_scan_answers_as_the_numpy_scan(
    tmp_path: Path, profile: Profile
) -> None:
    config = StoreConfig(
        mapped_file_size_commit_log=1024,
        mapped_file_size_consume_queue=160,
        file_reserved_time=0,
        max_transfer_count_on_message_in_memory=3,
    )
    store = MmapMessageStore(tmp_path, config, profile, ManualClock(1_000))
    store.put_messages(
        [
            BrokerInnerMessage(topic="T", queue_id=0, body=bytes(40 + k), properties={"TAGS": t})
            for k, t in enumerate("ABCA" * 12)
        ]
    )
    store.delete_expired_files()
    q = store.queues[("T", 0)]
    for offset in range(q.min_offset() - 1, q.max_offset() + 2):
        for nums in (1, 2, 32):
            for f in (None, tag_filter("T", "A"), tag_filter("T", "B || C")):
                read = functools.partial(
                    store.reader.get, q, offset, nums, f, MASTER, False, compiled=False
                )
                fast_answer = read()
                slow_answer = read(vectorized=False)
                assert fast_answer == slow_answer, (offset, nums, f)
                assert fast_answer.msg_offsets == slow_answer.msg_offsets
    store.close()


def test_a_message_put_again_is_validated_once(tmp_path: Path) -> None:
    import pullspec.fast.putsmall

    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(1_000))
    m = BrokerInnerMessage(topic="T", queue_id=0, body=b"x", properties={"TAGS": "A"})
    twin = BrokerInnerMessage(topic="T", queue_id=0, body=b"x", properties={"TAGS": "A"})
    with mock.patch.object(
        pullspec.fast.putsmall.SmallPut,
        "_validate",
        autospec=True,
        side_effect=pullspec.fast.putsmall.SmallPut._validate,
    ) as validate:
        first = store.put_messages([m, m, twin])
        store.put_messages([m, twin])
    assert validate.call_count == 2  # m and twin once each: the cache goes by identity
    assert [r.queue_offset for r in first] == [0, 1, 2]
    roomy = StoreConfig(mapped_file_size_commit_log=1 << 16, mapped_file_size_consume_queue=80)
    big = BrokerInnerMessage(
        topic="T", queue_id=0, body=bytes(pullspec.fast.putsmall._PREPARED_BODY_MAX + 1)
    )
    with (
        MmapMessageStore(tmp_path / "roomy", roomy, Profile.V4_9, ManualClock(0)) as large,
        mock.patch.object(
            pullspec.fast.putsmall.SmallPut,
            "_validate",
            autospec=True,
            side_effect=pullspec.fast.putsmall.SmallPut._validate,
        ) as validate,
    ):
        large.put_messages([big, big])
    assert validate.call_count == 2  # large bodies are not kept alive by the cache
    # Another configuration validates for itself: fitting a file depends on its size.
    small = StoreConfig(mapped_file_size_commit_log=128, mapped_file_size_consume_queue=80)
    with MmapMessageStore(tmp_path / "small", small, Profile.V4_9, ManualClock(0)) as other:
        with pytest.raises(MessageIllegalError):
            other.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=bytes(60))])
        assert other.put_messages([m])[0].wrote_offset == 0
    store.close()


def test_validated_messages_are_kept_for_a_bounded_number_of_configurations(
    tmp_path: Path,
) -> None:
    import pullspec.fast.putsmall

    m = BrokerInnerMessage(topic="T", queue_id=0, body=b"x")
    for k in range(pullspec.fast.putsmall._PREPARED_CONFIGS + 4):
        config = StoreConfig(mapped_file_size_commit_log=1024 + 4 * k)
        with MmapMessageStore(tmp_path / str(k), config, Profile.V4_9, ManualClock(0)) as store:
            assert store.put_messages([m])[0].wrote_offset == 0
        assert 0 < len(pullspec.fast.putsmall._PREPARED) <= pullspec.fast.putsmall._PREPARED_CONFIGS


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_put_message_one_pass_answers_as_the_reference(profile: Profile) -> None:
    # Shapes met again take put_message's one-pass path (STORE-18 queue offsets, LAYOUT-5
    # records, LAYOUT-7 file ends): it must answer, store and refuse exactly as the reference.
    def msg(k: int, **kw: Any) -> BrokerInnerMessage:
        fields: dict[str, Any] = {
            "topic": "T",
            "queue_id": k % 2,
            "body": b"%03d" % k,
            "properties": {"TAGS": f"Tag{k % 3}"},
            "born_timestamp": 5,
        }
        fields.update(kw)
        return BrokerInnerMessage(**fields)

    sequence = [msg(k) for k in range(30)]  # 1024-byte files: several file ends, 4-entry CQ files
    sequence[7] = msg(7, sys_flag=4)  # prepared: stored without a queue offset or an entry
    sequence[11] = msg(11, body=b"longer body")  # a body length not seen yet
    sequence[13] = msg(13, queue_id=5, flag=-1)  # a queue not seen yet
    sequence[17] = msg(17, properties={"TAGS": "Tag1", "DELAY": "1"})
    sequence[19] = msg(19, born_host=V6)
    sequence[23] = msg(23, topic="T!")  # refused by TopicValidator
    stores = _pair(profile)
    try:
        answers = [_both(stores, lambda s, m=m: s.put_message(m)) for m in sequence]
        # k = 2 … 9 by queue 0, 1 alternately; the prepared k = 7 takes no offset (0).
        offsets = [a[1].queue_offset for a in answers[2:10]]
        assert offsets == [1, 1, 2, 2, 3, 0, 4, 3]
        assert [k for k, a in enumerate(answers) if a[0] == "error"] == [23]
        for topic in ("T", SCHEDULE_TOPIC):
            _both(stores, lambda s, t=topic: _observe(s, t))
        for queue_id in (0, 1, 5):
            for f in (None, tag_filter("T", "Tag1")):
                _both(stores, lambda s, q=queue_id, f=f: s.get_message("G", "T", q, 0, 32, f))
        for a in answers:
            if a[0] == "ok":
                _both(stores, lambda s, at=a[1].wrote_offset: s.look_message_by_offset(at))
    finally:
        stores[1].close()


def test_put_message_out_of_a_java_field_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    with MmapMessageStore(tmp_path, CFG, Profile.V4_9, ManualClock(3)) as store:
        base: dict[str, Any] = {"topic": "T", "queue_id": 0, "body": b"x"}
        assert store.put_message(BrokerInnerMessage(**base)).wrote_offset == 0
        assert store.put_message(BrokerInnerMessage(**base)).wrote_offset == 93
        bads: list[dict[str, Any]] = [
            {"flag": 1 << 31},
            {"reconsume_times": -(1 << 31) - 1},
            {"born_timestamp": 1 << 63},
        ]
        for bad in bads:
            with pytest.raises(MessageIllegalError, match=next(iter(bad))):
                store.put_message(BrokerInnerMessage(**base, **bad))
            assert (store.get_max_phy_offset(), store.get_max_offset_in_queue("T", 0)) == (186, 2)
            # The one-pass path packs the record straight into the mapping: a refused one
            # leaves no byte of it past the write position (a recovery would scan them).
            assert bytes(93) == bytes(store.commit_log.files[-1].mm[186 : 186 + 93])
        assert store.put_message(BrokerInnerMessage(**base)).queue_offset == 2


def test_a_one_pass_put_answers_as_a_plain_put_result(tmp_path: Path) -> None:
    # The one-pass put answers a PlacedResult (one slot for its three numbers): it must read,
    # compare, hash, show, pickle and copy as the PutMessageResult it stands for.
    store = MmapMessageStore(tmp_path, StoreConfig(), Profile.V4_9, ManualClock(0))
    msg = BrokerInnerMessage(topic="T", queue_id=0, body=b"x")
    store.put_message(msg)  # the first of its shape takes the general path
    answer = store.put_message(msg)
    store.close()
    # A record of topic "T", a 1-byte body and no properties is 93 bytes (LAYOUT-5).
    expected = PutMessageResult(PutMessageStatus.PUT_OK, 1, 93, 93)
    assert PlacedResult is type(answer)
    for result in (answer, pickle.loads(pickle.dumps(answer)), copy.copy(answer)):
        assert expected == result
        assert result == expected
        assert hash(expected) == hash(result)
        assert repr(expected) == repr(result)
        assert attrs.asdict(expected) == attrs.asdict(result)
    assert PutMessageResult is type(pickle.loads(pickle.dumps(answer)))
    assert {expected} == {answer}
    for other in (
        PutMessageResult(PutMessageStatus.PUT_OK, 2, 93, 93),
        PutMessageResult(PutMessageStatus.PUT_OK, 1, 94, 93),
        PutMessageResult(PutMessageStatus.PUT_OK, 1, 93, 94),
        PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, 1, 93, 93),
    ):
        assert other != answer
        assert answer != other


def _dict_materialized(obj: object) -> bool:
    # CPython 3.11 keeps an instance's attributes inline until something asks for its
    # `__dict__` (a cached_property, `vars`, a write through `__dict__`); from then on the
    # interpreter no longer specializes reads of them. The garbage collector sees the
    # materialized dict as one of the object's referents (asking for it would make one).
    names = set(type(obj).__init__.__code__.co_names)
    return any(isinstance(r, dict) and names & set(r) for r in gc.get_referents(obj))


def test_the_store_keeps_its_attributes_inline_through_puts_and_pulls(tmp_path: Path) -> None:
    # Every `self.x` of the one-message put and pull reads the store, its reader or its commit
    # log: an attribute cache kept in `__dict__` (a cached_property) made each read about four
    # times slower, a tenth of a put. Every put and read path runs here, then none of those
    # objects may have a materialized `__dict__`.
    config = StoreConfig(mapped_file_size_commit_log=1 << 16)
    store = MmapMessageStore(tmp_path, config, Profile.V4_9, ManualClock(1_000))
    msgs = [
        BrokerInnerMessage(topic="T", queue_id=k % 2, body=b"x" * k, properties={"TAGS": "A"})
        for k in range(40)
    ]
    store.put_message(msgs[0])
    store.put_message(msgs[1])  # the one-pass path
    store.put_messages(msgs[:3])  # message by message
    store.put_messages(msgs)  # by columns
    store.put_batch(MessageBatch.from_messages(msgs[:4]))
    store.get_message("G", "T", 0, 0, 32)
    store.get_message("G", "T", 0, 0, 32, tag_filter("T", "A"))
    store.get_messages([("G", "T", 1, 0, 32)])
    store.pull_through("G", "T", 0, 0, 4)
    touched = [store, store.reader, store.commit_log, *store.queues.values()]
    assert [] == [type(o).__name__ for o in touched if _dict_materialized(o)]
    store.close()
