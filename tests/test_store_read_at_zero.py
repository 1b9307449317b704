"""STORE-21, STORE-22 and LAYOUT-13 end to end, on the reference store and on the fast store.

CommitLog.getMessage(offset, size) asks findMappedFileByOffset(offset, offset == 0): once commit-log
file 0 is deleted, a read at offset 0 is served from the start of the first remaining file. Every
expectation below is computed by hand from the record sizes: a record with a one-letter tag is
98 + body bytes in 4.9 and 99 + body in 4.7 (LAYOUT-5, LAYOUT-9).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pullspec.fast.factories
import pullspec.reference.factories
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.status import GetMessageStatus

V47, V49 = Profile.V4_7, Profile.V4_9
FOUND, NO_MATCH = GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE
IMPLS = {"reference": pullspec.reference.factories, "fast": pullspec.fast.factories}
CONFIG = StoreConfig(
    mapped_file_size_commit_log=512, mapped_file_size_consume_queue=160, file_reserved_time=0
)


@pytest.fixture(params=[(i, p) for i in IMPLS for p in (V49, V47)], ids=lambda v: f"{v[0]}-{v[1]}")
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    impl, profile = request.param
    made = IMPLS[impl].message_store(CONFIG, profile, ManualClock(0))
    yield made
    close = getattr(made, "close", None)
    if close is not None:
        close()


def put(store: Any, queue: int, tags: str | None, body: int) -> int:
    properties = None if tags is None else {"TAGS": tags}
    result = store.put_message(BrokerInnerMessage("T", queue, bytes(body), properties))
    assert result.ok
    return int(result.wrote_offset)


def get(store: Any, queue: int, offset: int, tags: str | None = None) -> Any:
    return store.get_message("G", "T", queue, offset, 32, tags and tag_filter("T", tags))


def test_store_21_a_read_at_0_runs_on_into_the_records_of_the_first_remaining_file(
    store: Any,
) -> None:
    extra = store.profile is V47  # 4.7.1 records with a property are one byte longer
    # file 0: T/1#0 (248) at 0, T/0#0 (248) at 248; file 512: T/0#1 (148), T/0#2 (148)
    wrote = [put(store, 1, "A", 150), put(store, 0, "B", 150), put(store, 0, "B", 50)]
    wrote.append(put(store, 0, "C", 50))
    assert [0, 248 + extra, 512, 660 + extra] == wrote
    store.delete_expired_files()
    assert (512, 0) == (store.get_min_phy_offset(), store.get_min_offset_in_queue("T", 1))
    # T/1#0 names 248 bytes at 0: they are T/0#1 whole and 100 bytes of T/0#2
    result = get(store, 1, 0)
    assert (FOUND, 1, [1, 2], 248 + extra) == (
        result.status,
        result.next_begin_offset,
        result.msg_offsets,
        result.buffer_total_size,
    )
    assert [(0, 1, 512)] == [
        (m.queue_id, m.queue_offset, m.commitlog_offset) for m in result.messages
    ]
    assert [248 + extra] == [len(b) for b in result.bodies]
    # the consume-queue tag (A) decides the filter, before the bytes are read
    assert (FOUND, [1, 2]) == (get(store, 1, 0, "A").status, get(store, 1, 0, "A").msg_offsets)
    assert (NO_MATCH, []) == (get(store, 1, 0, "B").status, get(store, 1, 0, "B").msg_offsets)
    # the lookup by offset 0 finds the record starting that file (STORE-22)
    first = store.look_message_by_offset(0)
    assert first is not None and (0, 1, 512) == (
        first.queue_id,
        first.queue_offset,
        first.size and 512,
    )
    assert None is store.look_message_by_offset(248)  # a deleted offset other than 0


def test_store_21_a_read_at_0_is_cut_when_the_first_remaining_record_is_longer(store: Any) -> None:
    extra = store.profile is V47
    put(store, 1, "A", 150)  # T/1#0: 248 bytes at 0
    put(store, 0, "B", 150)
    # two 398-byte records, each starting a new file: 512 and 1024
    assert [512, 1024] == [put(store, 0, "A", 300), put(store, 0, "A", 300)]
    store.delete_expired_files()
    assert 1024 == store.get_min_phy_offset()
    result = get(store, 1, 0)
    assert (FOUND, [2], 248 + extra) == (
        result.status,
        result.msg_offsets,
        result.buffer_total_size,
    )
    assert [1024] == [m.commitlog_offset for m in result.messages]


def test_store_21_a_read_at_0_into_an_end_of_file_blank_shows_what_each_release_left_there(
    store: Any,
) -> None:
    extra = store.profile is V47
    config = StoreConfig(
        mapped_file_size_commit_log=512, mapped_file_size_consume_queue=160, file_reserved_time=1
    )
    clock = ManualClock(0)
    impl = IMPLS["fast" if type(store).__module__.startswith("pullspec.fast") else "reference"]
    s = impl.message_store(config, store.profile, clock)
    # file 0 (its blank included) is written at 0: T/1#0 (398), T/0#0 (98); T/0#1 starts 512
    assert [0, 398 + extra, 512] == [put(s, 1, "A", 300), put(s, 0, "C", 0), put(s, 0, "B", 150)]
    clock.advance(2 * 3_600_000)
    # file 512 ends at 2 h with a blank of 264 bytes (T/0#2 does not fit with 8 to spare)
    assert 1024 == put(s, 0, "B", 200)
    s.delete_expired_files()  # file 0 only: file 512 was written at 2 h, kept 1 h
    assert 512 == s.get_min_phy_offset()
    # T/1#0's 398 bytes at 512: T/0#1, then 150 bytes of the blank, whose bytes 20–27 are zeros
    # in 4.9.7 and, in 4.7.1, T/0#1's queue offset again (its encode buffer's leftovers)
    result = get(s, 1, 0)
    assert (FOUND, [1, 1 if extra else 0], 398 + extra) == (
        result.status,
        result.msg_offsets,
        result.buffer_total_size,
    )
    getattr(s, "close", lambda: None)()


def test_store_21_an_entry_longer_than_the_first_remaining_file_holds_reads_nothing(
    store: Any,
) -> None:
    put(store, 1, "A", 300)  # T/1#0: 398 bytes at 0
    put(store, 0, "B", 10)  # 108 bytes at 512 (398 + 108 overruns file 0)
    store.delete_expired_files()
    # 398 bytes at 512 would run past the 108 written: MESSAGE_WAS_REMOVING, skip to 512
    result = get(store, 1, 0)
    assert (GetMessageStatus.MESSAGE_WAS_REMOVING, 1, []) == (
        result.status,
        result.next_begin_offset,
        result.msg_offsets,
    )


def test_layout_13_a_tag_stored_empty_reads_back_absent(store: Any) -> None:
    extra = store.profile is V47
    # the properties string TAGS␁ (4.9) or TAGS␁␂ (4.7) is stored: 91 + 10 + 1 + 5 (+ 1) bytes
    assert 0 == put(store, 0, "", 10)
    assert 107 + extra == store.get_max_phy_offset()
    record = store.look_message_by_offset(0)
    assert record is not None
    assert ((), None, 0) == (record.properties, record.tags, record.tags_code)


def test_store_22_an_offset_inside_a_record_finds_nothing(store: Any) -> None:
    put(store, 0, "A", 10)
    assert [None, None, None] == [store.look_message_by_offset(o) for o in (1, 4, 108)]
    assert store.look_message_by_offset(0) is not None


def test_store_21_reference_and_fast_read_the_same_bytes() -> None:
    bodies = []
    for impl in IMPLS.values():
        s = impl.message_store(CONFIG, V49, ManualClock(0))
        for queue, tags, body in ((1, "A", 150), (0, "B", 150), (0, "B", 50), (0, "", 50)):
            put(s, queue, tags, body)
        s.delete_expired_files()
        bodies.append(get(s, 1, 0).bodies)
        getattr(s, "close", lambda: None)()
    assert bodies[0] is not None and bodies[0] == bodies[1]
