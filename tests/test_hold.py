"""HOLD (rulebook-broker §6): long-polling rules as pure functions.

The reference broker's long polling on the manual clock is tested in test_reference_broker.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.spec.contracts import check_call
from pullspec.spec.hold import (
    HoldDecision,
    held_request_decision,
    hold_check_interval,
    hold_key,
    hold_timeout_millis,
    notifies_on_arrival,
    periodic_check_queue,
    rerun_allows_suspend,
    short_polling_notifications,
    slave_notifications,
    timeout_answer_time,
    woken_at_next_check,
)
from pullspec.spec.status import BrokerRole, GetMessageStatus

WAKE, TIMEOUT, KEEP = HoldDecision.WAKE, HoldDecision.TIMEOUT, HoldDecision.KEEP
roles = st.sampled_from(list(BrokerRole))


def test_hold_1_hold_time() -> None:
    assert [15_000, 20_000, 1000] == [
        hold_timeout_millis(True, 15_000, 1000),
        hold_timeout_millis(True, 20_000, 1000),
        hold_timeout_millis(False, 15_000, 1000),  # the header is ignored without long polling
    ]


@given(st.booleans(), st.integers(0, 10**6), st.integers(1, 10**6))
def test_hold_1_contract(long_polling: bool, suspend: int, short: int) -> None:
    expected = suspend if long_polling else short
    assert expected == check_call(hold_timeout_millis, long_polling, suspend, short)


def test_hold_2_check_interval() -> None:
    assert [5000, 5000, 1000, 250] == [
        hold_check_interval(True, 1000),
        hold_check_interval(True, 250),
        hold_check_interval(False, 1000),
        check_call(hold_check_interval, False, 250),
    ]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("T@1", ("T", 1)),
        ("%RETRY%G@0", ("%RETRY%G", 0)),
        ("T@", None),
        ("T@x", None),
        ("a@b@1", None),
        ("T", None),
    ],
)
def test_hold_3_periodic_check_keys(key: str, expected: tuple[str, int] | None) -> None:
    assert expected == check_call(periodic_check_queue, key)


@given(st.text(alphabet="T_%-", min_size=1, max_size=8), st.integers(0, 10**6))
def test_hold_3_keys_built_by_the_hold_service_round_trip(topic: str, queue: int) -> None:
    assert (topic, queue) == check_call(periodic_check_queue, hold_key(topic, queue))


@pytest.mark.parametrize(
    ("max_offset", "current_max", "pull_from", "matches", "now", "expected"),
    [
        (1, 1, 0, True, 100, WAKE),  # arrival past the offset, matching
        (1, 1, 0, False, 100, KEEP),  # non-matching arrival, not timed out
        (1, 1, 0, False, 15_000, TIMEOUT),  # non-strict: now == suspend + timeout
        (1, 1, 0, False, 14_999, KEEP),
        (0, 0, 0, True, 15_000, TIMEOUT),  # queue not past the offset: match is irrelevant
        (0, 0, 0, True, 14_999, KEEP),
        (3, 5, 4, True, 100, WAKE),  # maxOffset <= offset: the queue's current max is used
        (3, 4, 4, True, 100, KEEP),
        (5, 0, 4, True, 100, WAKE),  # maxOffset > offset: the current max is not consulted
    ],
)
def test_hold_4_wake_timeout_keep(
    max_offset: int,
    current_max: int,
    pull_from: int,
    matches: bool,
    now: int,
    expected: HoldDecision,
) -> None:
    actual = held_request_decision(max_offset, current_max, pull_from, matches, now, 0, 15_000)
    assert expected == actual


@given(
    st.integers(0, 20),
    st.integers(0, 20),
    st.integers(0, 20),
    st.booleans(),
    st.integers(0, 40_000),
    st.integers(0, 20_000),
    st.integers(0, 20_000),
)
def test_hold_4_contract_and_definition(
    max_offset: int,
    current_max: int,
    pull_from: int,
    matches: bool,
    now: int,
    suspended: int,
    timeout: int,
) -> None:
    newest = max_offset if max_offset > pull_from else current_max
    if newest > pull_from and matches:
        expected = WAKE
    elif now >= suspended + timeout:
        expected = TIMEOUT
    else:
        expected = KEEP
    actual = check_call(
        held_request_decision, max_offset, current_max, pull_from, matches, now, suspended, timeout
    )
    assert expected == actual


@pytest.mark.parametrize(
    ("role", "long_polling", "notifies"),
    [
        (BrokerRole.ASYNC_MASTER, True, True),
        (BrokerRole.SYNC_MASTER, True, True),
        (BrokerRole.SLAVE, True, False),
        (BrokerRole.ASYNC_MASTER, False, False),
    ],
)
def test_hold_5_arrival_notifications(role: BrokerRole, long_polling: bool, notifies: bool) -> None:
    assert notifies == check_call(notifies_on_arrival, role, long_polling)


def test_hold_6_rerun_never_suspends() -> None:
    assert check_call(rerun_allows_suspend) is False


@pytest.mark.parametrize(
    ("suspended", "first_check", "answered"),
    [
        (1000, 5000, 20_000),  # usually the 4th check after suspension: 5, 10, 15, 20 s
        (4999, 5000, 20_000),
        (5001, 10_000, 25_000),  # 4th check: 10, 15, 20, 25 s
        (5000, 10_000, 20_000),  # suspended at a check: the 3rd (10, 15, 20 s)
        (0, 5000, 15_000),  # coincides with a check: non-strict
    ],
)
def test_hold_7_answer_at_the_first_check_at_or_after_the_timeout(
    suspended: int, first_check: int, answered: int
) -> None:
    assert answered == timeout_answer_time(suspended, 15_000, first_check, 5000)
    assert 15_000 <= answered - suspended <= 20_000


@given(st.integers(0, 10**6), st.integers(0, 60_000), st.integers(0, 10**6), st.integers(1, 10_000))
def test_hold_7_contract_and_minimality(
    suspended: int, timeout: int, first_check: int, interval: int
) -> None:
    answered = check_call(timeout_answer_time, suspended, timeout, first_check, interval)
    due = suspended + timeout
    assert 0 == (answered - first_check) % interval  # a check time
    assert answered >= max(due, first_check)
    assert answered == first_check or answered - interval < due  # the first such check


def test_hold_8_short_polling_sends_no_notifications() -> None:
    assert [True, False] == [short_polling_notifications(True), short_polling_notifications(False)]
    assert hold_check_interval(False, 1000) == hold_timeout_millis(False, 15_000, 1000)


@given(roles)
def test_hold_9_slaves_never_notify(role: BrokerRole) -> None:
    assert (role is not BrokerRole.SLAVE) == check_call(slave_notifications, role)


@pytest.mark.parametrize(
    ("status", "woken"),
    [
        (GetMessageStatus.OFFSET_FOUND_NULL, True),
        (GetMessageStatus.OFFSET_OVERFLOW_ONE, False),
        (GetMessageStatus.NO_MESSAGE_IN_QUEUE, False),
    ],
)
def test_hold_10_found_null_woken_at_the_next_check(status: GetMessageStatus, woken: bool) -> None:
    assert woken == check_call(woken_at_next_check, status)
