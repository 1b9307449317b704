"""COMMIT (rulebook-broker §7): the consumer offset table, piggy-backed commits, queries.

Piggy-backed commits through the reference broker's pull path are in test_reference_broker.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pullspec.reference.factories
from pullspec.reference.broker import ReferenceBroker
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from pullspec.spec.commit import (
    commit_offset,
    commits_piggy_backed_offset,
    offset_table_key,
    persist_due,
    query_consumer_offset,
    update_consumer_offset_code,
)
from pullspec.spec.config import BrokerConfig, StoreConfig
from pullspec.spec.contracts import check_call
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole, ResponseCode

R = ResponseCode
MASTER, SLAVE = BrokerRole.ASYNC_MASTER, BrokerRole.SLAVE
roles = st.sampled_from(list(BrokerRole))


def broker_with_records(
    count: int, *, memory: int | None = None, config: StoreConfig | None = None
) -> ReferenceBroker:
    """A 4.9 broker whose T/0 holds `count` records of 100 bytes (phys 0, 100, …).

    With `memory`, an entry is on disk when the commit-log head is more than `memory` bytes ahead.
    """
    if config is None:
        config = (
            StoreConfig()
            if memory is None
            else StoreConfig(
                total_physical_memory_size=memory, access_message_in_memory_max_ratio=100
            )
        )
    broker: ReferenceBroker = pullspec.reference.factories.broker(
        config, BrokerConfig(), Profile.V4_9, ManualClock(0)
    )
    broker.create_topic("T")
    for _ in range(count):
        assert 100 == broker.send_message(BrokerInnerMessage("T", 0, bytes(8))).wrote_bytes
    return broker


# --- COMMIT-1 ---------------------------------------------------------------------------------


def test_commit_1_not_increase_only() -> None:
    assert [3, -5, 7] == [commit_offset(10, 3), commit_offset(None, -5), commit_offset(3, 7)]
    assert "T@G" == offset_table_key("T", "G")


@given(st.none() | st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_commit_1_contract(stored: int | None, offset: int) -> None:
    assert offset == check_call(commit_offset, stored, offset)


def test_commit_1_broker_replaces_unconditionally() -> None:
    broker = broker_with_records(3)
    answers = []
    for offset in (10, 3, -7, 1000):
        broker.commit_offset("G", "T", 0, offset)
        answers.append(broker.query_offset("G", "T", 0))
    assert [10, 3, -7, 1000] == answers
    assert {"T@G": {0: 1000}} == broker.offsets


# --- COMMIT-2 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allow_suspend", "sys_flag", "role", "passed", "commits"),
    [
        (True, FLAG_COMMIT_OFFSET, MASTER, True, True),
        (True, FLAG_COMMIT_OFFSET | FLAG_SUSPEND | FLAG_SUBSCRIPTION, BrokerRole.SYNC_MASTER, True, True),
        (True, FLAG_SUSPEND | FLAG_SUBSCRIPTION, MASTER, True, False),  # no commit flag
        (False, FLAG_COMMIT_OFFSET, MASTER, True, False),  # re-run of a held request
        (True, FLAG_COMMIT_OFFSET, SLAVE, True, False),
        (True, FLAG_COMMIT_OFFSET, MASTER, False, False),  # an early return of CODE-2
    ],
)  # fmt: skip
def test_commit_2_piggy_backed_commit(
    allow_suspend: bool, sys_flag: int, role: BrokerRole, passed: bool, commits: bool
) -> None:
    assert commits == commits_piggy_backed_offset(allow_suspend, sys_flag, role, passed)


@given(st.booleans(), st.integers(0, 0x1F), roles, st.booleans())
def test_commit_2_contract(allow: bool, sys_flag: int, role: BrokerRole, passed: bool) -> None:
    expected = allow and bool(sys_flag & 1) and role is not SLAVE and passed
    assert expected == check_call(commits_piggy_backed_offset, allow, sys_flag, role, passed)


# --- COMMIT-3 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("role", list(BrokerRole))
def test_commit_3_explicit_commit_succeeds_on_any_role(role: BrokerRole) -> None:
    broker = broker_with_records(1)
    broker.store.set_role(role, False)
    assert R.SUCCESS == broker.update_consumer_offset("G", "T", 0, 5)
    assert R.SUCCESS == check_call(update_consumer_offset_code)
    assert 5 == broker.query_offset("G", "T", 0)


# --- COMMIT-4 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "min_offset", "in_disk", "expected"),
    [
        (5, 0, True, (R.SUCCESS, 5)),
        (0, 10, True, (R.SUCCESS, 0)),  # a stored 0 is an offset
        (-1, 0, False, (R.SUCCESS, 0)),  # a new group on a young queue starts at 0
        (-1, -1, False, (R.SUCCESS, 0)),
        (-1, 0, True, (R.QUERY_NOT_FOUND, None)),
        (-1, 3, False, (R.QUERY_NOT_FOUND, None)),
    ],
)
def test_commit_4_query(
    stored: int, min_offset: int, in_disk: bool, expected: tuple[ResponseCode, int | None]
) -> None:
    assert expected == check_call(query_consumer_offset, stored, min_offset, in_disk)


@given(st.integers(-3, 10**9), st.integers(-3, 50), st.booleans())
def test_commit_4_contract(stored: int, min_offset: int, in_disk: bool) -> None:
    if stored >= 0:
        expected: tuple[ResponseCode, int | None] = (R.SUCCESS, stored)
    elif min_offset <= 0 and not in_disk:
        expected = (R.SUCCESS, 0)
    else:
        expected = (R.QUERY_NOT_FOUND, None)
    assert expected == check_call(query_consumer_offset, stored, min_offset, in_disk)


def test_commit_4_broker_query_offset_is_minus_one_when_unknown() -> None:
    broker = broker_with_records(0)
    assert -1 == broker.query_offset("G", "T", 0)
    assert (R.SUCCESS, 0) == broker.query_consumer_offset("G", "T", 0)  # empty queue


def test_commit_4_broker_stored_offset_wins() -> None:
    broker = broker_with_records(3, memory=1)  # every entry on disk
    broker.commit_offset("G", "T", 0, 2)
    assert (R.SUCCESS, 2) == broker.query_consumer_offset("G", "T", 0)


@pytest.mark.parametrize(
    ("count", "memory", "expected"),
    [
        (5, 1000, (R.SUCCESS, 0)),  # head 500: entry 0 lags 500 <= 1000, in memory
        (5, 100, (R.QUERY_NOT_FOUND, None)),  # entries 0 and 1 on disk
        (1, 50, (R.QUERY_NOT_FOUND, None)),  # the only entry lags 100 > 50
    ],
)
def test_commit_4_broker_new_group_depends_on_entry_0(
    count: int, memory: int, expected: tuple[ResponseCode, int | None]
) -> None:
    assert expected == broker_with_records(count, memory=memory).query_consumer_offset("G", "T", 0)


def test_commit_4_broker_reads_entry_0_not_entry_1() -> None:
    # head 500, memory 400: entry 0 lags 500 (> 400, on disk), entry 1 lags 400 (in memory).
    broker = broker_with_records(5, memory=400)
    assert (R.QUERY_NOT_FOUND, None) == broker.query_consumer_offset("G", "T", 0)


def test_commit_4_broker_queue_with_min_above_zero_is_not_found() -> None:
    config = StoreConfig(
        mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
    )
    broker = broker_with_records(12, config=config)  # 100-byte records, 10 per 1 KiB file
    broker.store.delete_expired_files()  # commit-log min 1024: the min moves to index 10
    assert 10 == broker.store.get_min_offset_in_queue("T", 0)
    assert (R.QUERY_NOT_FOUND, None) == broker.query_consumer_offset("G", "T", 0)


# --- COMMIT-5 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("elapsed", "due"),
    [(0, False), (9999, False), (10_000, True), (12_500, False), (15_000, True), (20_000, True)],
)
def test_commit_5_persisted_at_10s_then_every_5s(elapsed: int, due: bool) -> None:
    assert due == persist_due(elapsed, BrokerConfig().flush_consumer_offset_interval)


@given(st.integers(0, 10**7), st.integers(1, 60_000))
def test_commit_5_contract(elapsed: int, interval: int) -> None:
    expected = elapsed >= 10_000 and (elapsed - 10_000) % interval == 0
    assert expected == check_call(persist_due, elapsed, interval)
