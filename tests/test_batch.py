"""BATCH (rulebook-broker §2): the scan budget, isTheBatchFull, in-disk/in-memory, maxMsgNums."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.batch import (
    BatchLimits,
    check_in_disk_by_commit_offset,
    check_result_capacity_v47,
    check_result_capacity_v49,
    is_the_batch_full,
    max_filter_message_count,
)
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.contracts import check_call
from pullspec.spec.errors import IllegalCapacityError
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import GetMessageStatus

LIMITS = BatchLimits()  # 256 KiB / 32 in memory, 64 KiB / 8 on disk
V47, V49 = Profile.V4_7, Profile.V4_9


def record_store(
    profile: Profile, count: int, *, memory: int | None = None, tags: list[str | None] | None = None
) -> ReferenceMessageStore:
    """`count` records of exactly 100 bytes in queue T/0 (phys 0, 100, 200, …).

    With `memory`, an entry is on disk when the commit-log head is more than `memory` bytes
    ahead of it (BATCH-3: total memory `memory`, ratio 100 %).
    """
    config = StoreConfig(
        total_physical_memory_size=memory if memory is not None else 24 * 2**30,
        access_message_in_memory_max_ratio=100 if memory is not None else 40,
    )
    store = ReferenceMessageStore(config, profile, clock=ManualClock(0))
    for i in range(count):
        tag = tags[i % len(tags)] if tags else None
        # 91 + body + topic(1) + properties: "TAGS\x01A" is 6 bytes (7 with 4.7's trailing \x02)
        props = 0 if tag is None else 6 + (profile is V47)
        body = bytes(100 - 92 - props)
        result = store.put_message(BrokerInnerMessage("T", 0, body, {"TAGS": tag} if tag else None))
        assert (100 * i, 100) == (result.wrote_offset, result.wrote_bytes)
    return store


# --- BATCH-1 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_msg_nums", "budget"),
    [(32, 16000), (800, 16000), (801, 16020), (0, 16000), (-5, 16000), (107_374_183, 16000)],
)
def test_batch_1_scan_budget(max_msg_nums: int, budget: int) -> None:
    # 107 374 183 × 20 = 2 147 483 660 overflows Java's int to −2 147 483 636.
    assert budget == max_filter_message_count(max_msg_nums)


@given(st.integers(-(2**31), 2**31 - 1))
def test_batch_1_contract(max_msg_nums: int) -> None:
    product = (max_msg_nums * 20 + 2**31) % 2**32 - 2**31
    assert max(16000, product) == check_call(max_filter_message_count, max_msg_nums)


@pytest.mark.parametrize(("max_msg_nums", "next_offset"), [(32, 800), (1000, 900)])
def test_batch_1_store_examines_at_most_max_800_maxmsgnums_entries(
    max_msg_nums: int, next_offset: int
) -> None:
    store = record_store(V49, 900, tags=["B"])
    result = store.get_message("G", "T", 0, 0, max_msg_nums, tag_filter("T", "A"))
    assert (GetMessageStatus.NO_MATCHED_MESSAGE, next_offset) == (
        result.status,
        result.next_begin_offset,
    )


# --- BATCH-2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "max_msg_nums", "buffer_total", "message_total", "in_disk", "full"),
    [
        # 1. nothing returned yet (either total 0) → never full
        (10**6, 0, 0, 0, True, False),
        (100, 32, 0, 5, False, False),
        (100, 32, 100, 0, True, False),
        # 2. maxMsgNums reached
        (100, 3, 300, 3, False, True),
        (100, 0, 100, 1, False, True),
        (100, -5, 100, 1, True, True),
        (100, 4, 300, 3, False, False),
        # 3. on disk: 64 KiB and 8 messages
        (537, 32, 65_000, 1, True, True),
        (536, 32, 65_000, 1, True, False),
        (100, 32, 800, 8, True, True),  # the 9th on-disk candidate
        (100, 32, 700, 7, True, False),  # the 8th is still taken
        # 4. in memory: 256 KiB and 32 messages
        (145, 64, 262_000, 1, False, True),
        (144, 64, 262_000, 1, False, False),
        (100, 64, 3200, 32, False, True),
        (100, 64, 3100, 31, False, False),
        # 5. otherwise not full; (c) memory limits apply to an in-memory candidate
        (100, 64, 500, 5, False, False),
        (100, 64, 800, 8, False, False),
    ],
)
def test_batch_2_is_the_batch_full(
    size: int, max_msg_nums: int, buffer_total: int, message_total: int, in_disk: bool, full: bool
) -> None:
    assert full == is_the_batch_full(
        size, max_msg_nums, buffer_total, message_total, in_disk, LIMITS
    )


@given(
    st.integers(0, 300_000),
    st.integers(-5, 40),
    st.integers(0, 300_000),
    st.integers(0, 40),
    st.booleans(),
)
def test_batch_2_full_iff_a_limit_of_the_candidate_is_reached(
    size: int, max_msg_nums: int, buffer_total: int, message_total: int, in_disk: bool
) -> None:
    byte_cap, count_cap = (65_536, 8) if in_disk else (262_144, 32)
    expected = (
        buffer_total > 0
        and message_total > 0
        and (
            message_total >= max_msg_nums
            or buffer_total + size > byte_cap
            or message_total >= count_cap
        )
    )
    actual = check_call(
        is_the_batch_full, size, max_msg_nums, buffer_total, message_total, in_disk, LIMITS
    )
    assert expected == actual


# --- BATCH-3 ----------------------------------------------------------------------------------


def test_batch_3_in_disk_when_more_than_memory_behind_the_head() -> None:
    assert check_in_disk_by_commit_offset(0, 401, 400) is True
    assert check_in_disk_by_commit_offset(1, 401, 400) is False  # exactly 400: in memory
    # 40 % of the 24 GiB fallback: (long)(25 769 803 776 × 0.4)
    assert 10_307_921_510 == StoreConfig().memory_residency_bytes


@given(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**40))
def test_batch_3_contract(phys: int, head: int, memory: int) -> None:
    assert (head - phys > memory) == check_call(check_in_disk_by_commit_offset, phys, head, memory)


def test_batch_3_decided_per_entry_one_batch_mixes_both_limit_sets() -> None:
    # 20 records, head 2000, memory 1500: phys 0…400 are on disk (5 entries), the rest in memory.
    store = record_store(V49, 20, memory=1500)
    result = store.get_message("G", "T", 0, 0, 32)
    assert (list(range(20)), 20) == (result.msg_offsets, result.next_begin_offset)


# --- BATCH-4 ----------------------------------------------------------------------------------


def test_batch_4_result_capacity_per_profile() -> None:
    assert [1, 1, 3] == [check_result_capacity_v47(n) for n in (0, -5, 3)]
    assert [1, 3] == [check_result_capacity_v49(n) for n in (0, 3)]
    with pytest.raises(IllegalCapacityError) as info:
        check_result_capacity_v49(-5)
    assert -5 == info.value.max_msg_nums
    assert "-5" in str(info.value)
    assert 1 == Ruleset.of(V47).check_result_capacity(-5)
    with pytest.raises(IllegalCapacityError):
        Ruleset.of(V49).check_result_capacity(-1)


@given(st.integers(-(2**31), 2**31 - 1))
def test_batch_4_contracts(max_msg_nums: int) -> None:
    assert max(1, max_msg_nums) == check_call(check_result_capacity_v47, max_msg_nums)
    if max_msg_nums < 0:
        with pytest.raises(IllegalCapacityError):
            check_call(check_result_capacity_v49, max_msg_nums)
    else:
        assert max(1, max_msg_nums) == check_call(check_result_capacity_v49, max_msg_nums)


@pytest.mark.parametrize("profile", [V47, V49])
def test_batch_4a_first_message_always_returned_max_zero_returns_one(profile: Profile) -> None:
    store = record_store(profile, 5)
    result = store.get_message("G", "T", 0, 0, 0)
    assert ([0], 1) == (result.msg_offsets, result.next_begin_offset)


def test_batch_4a_first_message_exceeds_the_byte_cap() -> None:
    config = StoreConfig(max_transfer_bytes_on_message_in_memory=150)
    store = ReferenceMessageStore(config, V49, clock=ManualClock(0))
    for _ in range(3):
        store.put_message(BrokerInnerMessage("T", 0, bytes(200)))  # 292-byte records
    result = store.get_message("G", "T", 0, 0, 32)
    assert ([0], 292, 1) == (result.msg_offsets, result.buffer_total_size, result.next_begin_offset)


def test_batch_4a_negative_max_msg_nums_4_7_behaves_like_zero() -> None:
    store = record_store(V47, 5)
    result = store.get_message("G", "T", 0, 0, -5)
    assert (GetMessageStatus.FOUND, [0], 1) == (
        result.status,
        result.msg_offsets,
        result.next_begin_offset,
    )


def test_batch_4a_negative_max_msg_nums_4_9_throws_only_with_a_window() -> None:
    store = record_store(V49, 5)
    with pytest.raises(IllegalCapacityError):
        store.get_message("G", "T", 0, 0, -5)
    # cases a, c, d are unaffected
    assert GetMessageStatus.NO_MESSAGE_IN_QUEUE == store.get_message("G", "T", 1, 0, -5).status
    assert GetMessageStatus.OFFSET_OVERFLOW_ONE == store.get_message("G", "T", 0, 5, -5).status
    assert GetMessageStatus.OFFSET_OVERFLOW_BADLY == store.get_message("G", "T", 0, 9, -5).status


def test_batch_4b_at_most_32_in_memory_and_8_on_disk() -> None:
    in_memory = record_store(V49, 40).get_message("G", "T", 0, 0, 64)
    assert (list(range(32)), 32) == (in_memory.msg_offsets, in_memory.next_begin_offset)
    on_disk = record_store(V49, 40, memory=1).get_message("G", "T", 0, 0, 64)
    assert (list(range(8)), 8) == (on_disk.msg_offsets, on_disk.next_begin_offset)
    capped = record_store(V49, 40).get_message("G", "T", 0, 0, 5)
    assert (list(range(5)), 5) == (capped.msg_offsets, capped.next_begin_offset)


def test_batch_4c_ninth_on_disk_candidate_always_ends_the_batch() -> None:
    # head 2000, memory 500: phys < 1500 (entries 0…14) on disk.
    result = record_store(V49, 20, memory=500).get_message("G", "T", 0, 0, 32)
    assert (list(range(8)), 8) == (result.msg_offsets, result.next_begin_offset)


def test_batch_4d_filtered_entries_use_only_scan_budget() -> None:
    # tags A, B, A, B, …; on disk: 8 "A" messages, the B entries between them are free. The
    # batch is full for entry 15 (a B) because isTheBatchFull runs before the filter (BATCH-2).
    store = record_store(V49, 30, memory=1, tags=["A", "B"])
    result = store.get_message("G", "T", 0, 0, 32, tag_filter("T", "A"))
    assert (list(range(0, 16, 2)), 15) == (result.msg_offsets, result.next_begin_offset)


def test_batch_4e_the_entry_that_filled_the_batch_is_pulled_next() -> None:
    store = record_store(V49, 12, memory=1)
    first = store.get_message("G", "T", 0, 0, 32)
    second = store.get_message("G", "T", 0, first.next_begin_offset, 32)
    assert (list(range(8)), [8, 9, 10, 11]) == (first.msg_offsets, second.msg_offsets)
