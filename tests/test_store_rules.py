"""STORE (rulebook-broker §1): the getMessage rules as pure functions.

Scenario tests of the reference store (expiry, roles, file rolls) are in test_reference_store.py;
here every rule gets a hand-computed example and, where it has a domain, a Hypothesis property
checked against its contracts and against a straightforward model written from the rulebook.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.batch import BatchLimits
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.contracts import check_call
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import BrokerRole, GetMessageStatus
from pullspec.spec.store import (
    CQ_EXT_MAX_ADDRESS,
    ScanState,
    assign_queue_offset,
    buffer_total_size,
    classify_offset,
    commit_log_read_position,
    commit_log_roll_next_file,
    consume_queue_roll_next_file,
    corrected_min_logic_offset,
    expired_consume_queue_files,
    final_scan_status,
    find_consume_queue,
    index_window,
    initial_get_message_values,
    looked_up_record,
    max_phy_offset,
    next_offset_correction,
    overflow_badly_target_v47,
    overflow_badly_target_v49,
    overflow_one_next_offset,
    queue_min_max_offsets,
    scan_entry,
    scan_next_begin_offset,
    scan_window,
    store_can_serve,
    suggest_pulling_from_slave,
)

S = GetMessageStatus
MASTER, SLAVE = BrokerRole.ASYNC_MASTER, BrokerRole.SLAVE
V47, V49 = Profile.V4_7, Profile.V4_9
LIMITS = BatchLimits()
roles = st.sampled_from(list(BrokerRole))
profiles = st.sampled_from(ALL_PROFILES)


def always(_: object) -> bool:
    return True


def present(_phys: int, _size: int) -> bool:
    return True


# --- STORE-1 / 2 / 3 / 4 ----------------------------------------------------------------------


def test_store_1_no_result_when_shut_down_or_flags_unreadable() -> None:
    assert [True, False, False, False] == [
        store_can_serve(False, True),
        store_can_serve(True, True),
        store_can_serve(False, False),
        store_can_serve(True, False),
    ]


def test_store_2_initial_values() -> None:
    assert (S.NO_MESSAGE_IN_QUEUE, 7, 0, 0, False) == initial_get_message_values(7)
    assert (S.NO_MESSAGE_IN_QUEUE, -3, 0, 0, False) == check_call(initial_get_message_values, -3)


def test_store_3_the_consume_queue_always_exists() -> None:
    created: list[str] = []

    def create() -> str:
        created.append("new")
        return "new"

    assert ("old", []) == (find_consume_queue("old", create), created)
    assert ("new", ["new"]) == (find_consume_queue(None, create), created)


def test_store_3_never_written_queue_is_no_message_in_queue() -> None:
    store = ReferenceMessageStore(StoreConfig(), V49, clock=ManualClock(0))
    result = store.get_message("G", "never-written", 3, 5, 32)
    assert (S.NO_MESSAGE_IN_QUEUE, 0, 0, 0) == (
        result.status,
        result.next_begin_offset,
        result.min_offset,
        result.max_offset,
    )


def test_store_4_min_and_max_are_indices() -> None:
    assert (0, 0) == queue_min_max_offsets(0, None, 0)
    assert (4, 7) == queue_min_max_offsets(80, 80, 60)  # (80 + 60) / 20
    assert (0, 300_001) == queue_min_max_offsets(0, 6_000_000, 20)


@given(st.integers(0, 10**9), st.none() | st.integers(0, 10**9), st.integers(0, 10**6))
def test_store_4_contract(min_logic: int, last_start: int | None, written: int) -> None:
    expected_max = 0 if last_start is None else (last_start + written) // 20
    assert (min_logic // 20, expected_max) == check_call(
        queue_min_max_offsets, min_logic, last_start, written
    )


# --- STORE-5 / 6 / 7 / 8 ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "min_offset", "max_offset", "expected"),
    [
        (5, 0, 0, (S.NO_MESSAGE_IN_QUEUE, 0)),  # a
        (-1, 0, 0, (S.NO_MESSAGE_IN_QUEUE, 0)),  # a precedes b
        (0, 0, 0, (S.NO_MESSAGE_IN_QUEUE, 0)),
        (1, 2, 6, (S.OFFSET_TOO_SMALL, 2)),  # b
        (-1, 0, 6, (S.OFFSET_TOO_SMALL, 0)),  # negative on a non-empty queue
        (6, 0, 6, (S.OFFSET_OVERFLOW_ONE, 6)),  # c
        (7, 2, 6, (S.OFFSET_OVERFLOW_BADLY, 6)),  # d (min != 0: both profiles)
        (0, 0, 6, None),  # e includes offset == min
        (2, 2, 6, None),
        (5, 2, 6, None),
    ],
)
@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_store_5_decision_chain_on_a_master(
    offset: int,
    min_offset: int,
    max_offset: int,
    expected: tuple[GetMessageStatus, int] | None,
    profile: Profile,
) -> None:
    assert expected == classify_offset(
        offset, min_offset, max_offset, MASTER, False, Ruleset.of(profile)
    )


@pytest.mark.parametrize(
    ("profile", "expected"),
    [(V47, (S.OFFSET_OVERFLOW_BADLY, 0)), (V49, (S.OFFSET_OVERFLOW_BADLY, 6))],
)
def test_store_5_row_d_with_min_zero_per_profile(
    profile: Profile, expected: tuple[GetMessageStatus, int]
) -> None:
    assert expected == classify_offset(9, 0, 6, MASTER, False, Ruleset.of(profile))


@pytest.mark.parametrize(
    ("offset", "min_offset", "max_offset", "status"),
    [
        (5, 0, 0, S.NO_MESSAGE_IN_QUEUE),
        (1, 2, 6, S.OFFSET_TOO_SMALL),
        (6, 0, 6, S.OFFSET_OVERFLOW_ONE),
        (9, 0, 6, S.OFFSET_OVERFLOW_BADLY),
    ],
)
def test_store_5_slave_without_offset_check_keeps_the_offset(
    offset: int, min_offset: int, max_offset: int, status: GetMessageStatus
) -> None:
    for profile in ALL_PROFILES:
        assert (status, offset) == classify_offset(
            offset, min_offset, max_offset, SLAVE, False, Ruleset.of(profile)
        )


@given(st.integers(-5, 40), st.integers(0, 20), st.integers(0, 40), roles, st.booleans(), profiles)
def test_store_5_contracts_and_model(
    offset: int, min_offset: int, max_offset: int, role: BrokerRole, check: bool, profile: Profile
) -> None:
    corrects = role is not SLAVE or check
    if max_offset == 0:
        expected: tuple[GetMessageStatus, int] | None = (S.NO_MESSAGE_IN_QUEUE, 0)
    elif offset < min_offset:
        expected = (S.OFFSET_TOO_SMALL, min_offset)
    elif offset == max_offset:
        expected = (S.OFFSET_OVERFLOW_ONE, offset)
    elif offset > max_offset:
        target = 0 if profile is V47 and min_offset == 0 else max_offset
        expected = (S.OFFSET_OVERFLOW_BADLY, target)
    else:
        expected = None
    if expected is not None and not corrects:
        expected = (expected[0], offset)
    actual = check_call(
        classify_offset, offset, min_offset, max_offset, role, check, Ruleset.of(profile)
    )
    assert expected == actual
    # None exactly for min <= offset < max on a non-empty queue
    assert (actual is None) == (max_offset != 0 and min_offset <= offset < max_offset)


@pytest.mark.parametrize(
    ("role", "check", "expected"),
    [
        (BrokerRole.ASYNC_MASTER, False, 9),
        (BrokerRole.SYNC_MASTER, False, 9),
        (BrokerRole.SLAVE, False, 3),
        (BrokerRole.SLAVE, True, 9),
        (BrokerRole.ASYNC_MASTER, True, 9),
    ],
)
def test_store_6_next_offset_correction(role: BrokerRole, check: bool, expected: int) -> None:
    assert expected == next_offset_correction(3, 9, role, check)


@given(st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40), roles, st.booleans())
def test_store_6_contract(old: int, new: int, role: BrokerRole, check: bool) -> None:
    expected = old if role is SLAVE and not check else new
    assert expected == check_call(next_offset_correction, old, new, role, check)


def test_store_7_overflow_one_keeps_the_offset() -> None:
    assert 6 == overflow_one_next_offset(6)
    assert -2 == check_call(overflow_one_next_offset, -2)


def test_store_8_overflow_badly_target_per_profile() -> None:
    assert [0, 6, 6, 6] == [
        overflow_badly_target_v47(0, 6),
        overflow_badly_target_v47(2, 6),
        overflow_badly_target_v49(0, 6),
        overflow_badly_target_v49(2, 6),
    ]


@given(st.integers(0, 100), st.integers(0, 100))
def test_store_8_contracts(min_offset: int, max_offset: int) -> None:
    v47 = check_call(overflow_badly_target_v47, min_offset, max_offset)
    assert (0 if min_offset == 0 else max_offset) == v47
    assert max_offset == check_call(overflow_badly_target_v49, min_offset, max_offset)


# --- STORE-9 / 10 -----------------------------------------------------------------------------


def test_store_9_window_is_bounded_by_the_one_file() -> None:
    files = [(0, 80), (80, 40)]  # a full 4-entry file and a file holding 2 entries
    assert (0, 20, 80) == index_window(1, 0, files, 80)  # entries 1..3, never into file 1
    assert (1, 20, 40) == index_window(5, 0, files, 80)
    assert index_window(6, 0, files, 80) is None  # not written yet
    assert index_window(1, 40, files, 80) is None  # below minLogicOffset
    assert index_window(0, 0, [(80, 80)], 80) is None  # the covering file is gone


@given(
    st.integers(0, 30),
    st.integers(0, 3),
    st.integers(1, 6),
    st.integers(0, 6),
    st.integers(0, 6),
)
def test_store_9_contract(
    offset: int, first_file: int, files: int, last: int, min_idx: int
) -> None:
    units = 6
    layout = [((first_file + n) * units * 20, units * 20) for n in range(files - 1)]
    layout.append(((first_file + files - 1) * units * 20, last * 20))
    window = check_call(index_window, offset, min_idx * 20, layout, units * 20)
    file_no = offset // units - first_file
    readable = (
        offset >= min_idx and 0 <= file_no < files and offset % units < layout[file_no][1] // 20
    )
    assert readable == (window is not None)
    if window is not None:
        assert (file_no, offset % units * 20, layout[file_no][1]) == window


@pytest.mark.parametrize(
    ("index", "units", "expected"),
    [(5, 4, 8), (4, 4, 8), (0, 4, 4), (0, 300_000, 300_000), (299_999, 300_000, 300_000)],
)
def test_store_10_consume_queue_roll_next_file(index: int, units: int, expected: int) -> None:
    assert expected == consume_queue_roll_next_file(index, units)


@given(st.integers(0, 2**40), st.integers(1, 2**20))
def test_store_10_contract(index: int, units: int) -> None:
    assert (index // units + 1) * units == check_call(consume_queue_roll_next_file, index, units)


# --- STORE-11 … STORE-14: the window scan ------------------------------------------------------


def scan(
    window: list[tuple[int, int, int]],
    max_msg_nums: int = 32,
    *,
    max_offset_py: int = 10**6,
    memory: int = 10**9,
    file_size: int = 1024,
    matches: Callable[[int | None], bool] = always,
    is_present: Callable[[int, int], bool] = present,
) -> ScanState:
    return scan_window(
        window,
        max_msg_nums=max_msg_nums,
        max_offset_py=max_offset_py,
        memory=memory,
        limits=LIMITS,
        commit_log_file_size=file_size,
        matches_consume_queue=matches,
        record_present=is_present,
        matches_commit_log=always,
    )


def test_store_11_scan_starts_as_no_matched_message() -> None:
    state = scan([])
    assert (S.NO_MATCHED_MESSAGE, None, 0, 0, ()) == (
        state.status,
        state.next_phy_file_start_offset,
        state.max_phy_offset_pulling,
        state.scanned,
        state.returned,
    )


def test_store_11_budget_of_800_entries() -> None:
    window = [(i * 100, 100, 1) for i in range(1000)]
    assert 800 == scan(window, matches=lambda code: code == 2).scanned
    assert 900 == scan(window, 900, matches=lambda code: code == 2).scanned


def entry_step(
    state: ScanState,
    entry: tuple[int, int, int],
    *,
    max_msg_nums: int = 32,
    matches: Callable[[int | None], bool] = always,
    is_present: Callable[[int, int], bool] = present,
    commit_log_matches: Callable[[int], bool] = always,
) -> tuple[ScanState, bool]:
    return scan_entry(
        state,
        state.scanned,
        entry,
        max_msg_nums=max_msg_nums,
        max_offset_py=10**6,
        memory=10**9,
        limits=LIMITS,
        commit_log_file_size=1024,
        matches_consume_queue=matches,
        record_present=is_present,
        matches_commit_log=commit_log_matches,
    )


def test_store_12_step_2_skips_inside_a_vanished_file_before_anything_else() -> None:
    calls: list[str] = []

    def spy_match(code: int | None) -> bool:
        calls.append("filter")
        return False

    state = ScanState(S.MESSAGE_WAS_REMOVING, next_phy_file_start_offset=1024, scanned=1)
    after, stop = entry_step(state, (200, 100, 7), matches=spy_match)
    assert (False, [], S.MESSAGE_WAS_REMOVING, 2, 200) == (
        stop,
        calls,
        after.status,
        after.scanned,
        after.max_phy_offset_pulling,
    )


def test_store_12_step_4_batch_full_breaks_before_the_filter() -> None:
    calls: list[str] = []

    def spy_match(code: int | None) -> bool:
        calls.append("filter")
        return True

    state = ScanState(S.FOUND, scanned=1, buffer_total=100, returned=(0,))
    after, stop = entry_step(state, (500, 100, 7), max_msg_nums=1, matches=spy_match)
    # not counted, not consumed, but maxPhyOffsetPulling is this entry's phys (STORE-16)
    assert (True, [], 1, (0,), 500) == (
        stop,
        calls,
        after.scanned,
        after.returned,
        after.max_phy_offset_pulling,
    )


def test_store_12_step_5_unreadable_ext_address_gives_the_filter_null() -> None:
    seen: list[int | None] = []

    def spy_match(code: int | None) -> bool:
        seen.append(code)
        return True

    entry_step(ScanState(), (0, 100, CQ_EXT_MAX_ADDRESS), matches=spy_match)
    entry_step(ScanState(), (0, 100, CQ_EXT_MAX_ADDRESS + 1), matches=spy_match)
    assert [None, CQ_EXT_MAX_ADDRESS + 1] == seen
    assert -2_147_483_649 == CQ_EXT_MAX_ADDRESS


def test_store_12_steps_6_to_9() -> None:
    nothing = ScanState()
    found = ScanState(S.FOUND, scanned=1, buffer_total=100, returned=(0,))
    filtered, _ = entry_step(nothing, (0, 100, 1), matches=lambda c: False)
    assert (S.NO_MATCHED_MESSAGE, 1) == (filtered.status, filtered.scanned)
    after_found, _ = entry_step(found, (100, 100, 1), matches=lambda c: False)
    assert (S.FOUND, 2, (0,)) == (after_found.status, after_found.scanned, after_found.returned)
    missing, _ = entry_step(nothing, (200, 100, 1), is_present=lambda p, s: False)
    assert (S.MESSAGE_WAS_REMOVING, 1024, 1) == (
        missing.status,
        missing.next_phy_file_start_offset,
        missing.scanned,
    )
    rejected, _ = entry_step(nothing, (0, 100, 1), commit_log_matches=lambda p: False)
    assert (S.NO_MATCHED_MESSAGE, ()) == (rejected.status, rejected.returned)
    marked = ScanState(S.MESSAGE_WAS_REMOVING, next_phy_file_start_offset=1024, scanned=3)
    taken, stop = entry_step(marked, (1024, 100, 1))
    assert (False, S.FOUND, None, 100, (3,)) == (
        stop,
        taken.status,
        taken.next_phy_file_start_offset,
        taken.buffer_total,
        taken.returned,
    )


def test_store_13_status_is_the_last_written_and_found_sticks() -> None:
    missing_file0 = lambda p, s: p >= 1024  # noqa: E731
    # missing (file 0), then skipped: stays MESSAGE_WAS_REMOVING
    window = [(0, 100, 1), (100, 100, 2)]
    only_1 = lambda code: code == 1  # noqa: E731
    assert S.MESSAGE_WAS_REMOVING == scan(window, matches=only_1, is_present=missing_file0).status
    # filtered after a missing entry in another file: NO_MATCHED_MESSAGE is the last written
    window = [(0, 100, 1), (1024, 100, 2)]
    assert S.NO_MATCHED_MESSAGE == scan(window, matches=only_1, is_present=missing_file0).status
    # filtered, then missing: MESSAGE_WAS_REMOVING
    window = [(0, 100, 2), (100, 100, 1)]
    assert S.MESSAGE_WAS_REMOVING == scan(window, matches=only_1, is_present=missing_file0).status
    # found, then filtered: FOUND
    assert S.FOUND == scan([(1024, 100, 1), (1124, 100, 2)], matches=only_1).status
    state = ScanState(S.NO_MATCHED_MESSAGE)
    assert state.status is check_call(final_scan_status, state)


def test_store_14_next_is_offset_plus_entries_examined() -> None:
    assert 8 == scan_next_begin_offset(5, 3)
    assert 5 == check_call(scan_next_begin_offset, 5, 0)
    window = [(i * 100, 100, 1) for i in range(10)]
    assert 4 == scan(window, 4).scanned  # the 5th entry made the batch full


# --- STORE-15 … STORE-20 ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phys", "size", "expected"),
    [(200, 1024, 1024), (0, 1024, 1024), (1024, 1024, 2048), (2**30 - 1, 2**30, 2**30)],
)
def test_store_15_commit_log_roll_next_file(phys: int, size: int, expected: int) -> None:
    assert expected == commit_log_roll_next_file(phys, size)


@given(st.integers(0, 2**50), st.integers(1, 2**31))
def test_store_15_contract(phys: int, size: int) -> None:
    assert (phys // size + 1) * size == check_call(commit_log_roll_next_file, phys, size)


def test_store_15_skip_continues_in_the_next_file() -> None:
    # file 1 (1024…2047) vanished: entry at 1024 is missing, 1524 skipped, 2048 returned.
    window = [(1024, 100, 1), (1524, 100, 1), (2048, 100, 1)]
    state = scan(window, is_present=lambda p, s: not 1024 <= p < 2048)
    assert (S.FOUND, (2,), 3) == (state.status, state.returned, state.scanned)


def test_store_16_suggest_pulling_from_slave() -> None:
    assert suggest_pulling_from_slave(2000, 400, 1500) is True
    assert suggest_pulling_from_slave(2000, 500, 1500) is False
    # the break entry counts: entry 0 lags 2000 bytes, the break entry (1) only 1900
    state = scan([(0, 100, 1), (100, 100, 1)], 1, max_offset_py=2000, memory=1950)
    assert (100, False) == (
        state.max_phy_offset_pulling,
        suggest_pulling_from_slave(2000, state.max_phy_offset_pulling, 1950),
    )


@given(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**40))
def test_store_16_contract(head: int, pulling: int, memory: int) -> None:
    assert (head - pulling > memory) == check_call(
        suggest_pulling_from_slave, head, pulling, memory
    )


def test_store_17_buffer_total_size() -> None:
    assert 300 == buffer_total_size([100, 200])
    assert 0 == check_call(buffer_total_size, [])


@pytest.mark.parametrize(
    ("sys_flag", "expected"), [(0, (5, 6)), (0x8, (5, 6)), (0x4, (0, 5)), (0xC, (0, 5))]
)
def test_store_18_queue_offsets_assigned_at_append(
    sys_flag: int, expected: tuple[int, int]
) -> None:
    assert expected == check_call(assign_queue_offset, 5, sys_flag)


def test_store_19_min_moves_to_first_backed_entry() -> None:
    entries = [(500, 100, 0), (900, 100, 0), (1100, 100, 0), (1300, 100, 0)]
    assert 120 == corrected_min_logic_offset(80, entries, 1024, 0)  # entry 2 of file at 80
    assert 40 == corrected_min_logic_offset(80, entries[:2], 1024, 40)  # none: unchanged
    assert 2 == expired_consume_queue_files([600, 1424, 2248], 2048)  # never the last file
    assert 1 == expired_consume_queue_files([600, 3000, 5000], 2048)
    assert 0 == expired_consume_queue_files([600], 2048)


@given(
    st.integers(0, 100),
    st.lists(st.integers(0, 5000), max_size=6).map(sorted),
    st.integers(0, 6000),
    st.integers(0, 100),
)
def test_store_19_contract(first_file: int, phys: list[int], commit_log_min: int, cur: int) -> None:
    entries = [(p, 100, 0) for p in phys]
    actual = check_call(corrected_min_logic_offset, first_file * 80, entries, commit_log_min, cur)
    backed = [i for i, p in enumerate(phys) if p >= commit_log_min]
    assert (first_file * 80 + backed[0] * 20 if backed else cur) == actual


def test_store_20_physical_max_offset() -> None:
    assert 0 == max_phy_offset(None, 0)
    assert 1224 == max_phy_offset(1024, 200)
    assert 1224 == check_call(max_phy_offset, 1024, 200)


# --- a model of the window scan written from STORE-11 … STORE-14 and BATCH-2 ------------------


@attrs.frozen
class ModelScan:
    status: GetMessageStatus
    scanned: int
    returned: tuple[int, ...]
    max_phy_offset_pulling: int


def model_scan(
    window: list[tuple[int, int, int]],
    max_msg_nums: int,
    head: int,
    memory: int,
    file_size: int,
    wanted: frozenset[int] | None,
    missing_files: frozenset[int],
) -> ModelScan:
    budget = max(16000, (max_msg_nums * 20 + 2**31) % 2**32 - 2**31)
    status, skip_below, pulling, i = S.NO_MATCHED_MESSAGE, None, 0, 0
    returned: list[int] = []
    total = 0
    while i * 20 < budget and i < len(window):
        phys, size, code = window[i]
        pulling = phys
        if skip_below is not None and phys < skip_below:
            i += 1
            continue
        byte_cap, count_cap = (65_536, 8) if head - phys > memory else (262_144, 32)
        if returned and (
            len(returned) >= max_msg_nums or total + size > byte_cap or len(returned) >= count_cap
        ):
            break
        if wanted is not None and code not in wanted:
            status = status if returned else S.NO_MATCHED_MESSAGE
        elif phys // file_size in missing_files:
            status = status if returned else S.MESSAGE_WAS_REMOVING
            skip_below = (phys // file_size + 1) * file_size
        else:
            returned.append(i)
            total += size
            status, skip_below = S.FOUND, None
        i += 1
    return ModelScan(status, i, tuple(returned), pulling)


@st.composite
def windows(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    sizes = draw(st.lists(st.integers(1, 2000) | st.integers(1, 70_000), max_size=60))
    gaps = draw(st.lists(st.integers(0, 3000), min_size=len(sizes), max_size=len(sizes)))
    codes = draw(st.lists(st.integers(0, 3), min_size=len(sizes), max_size=len(sizes)))
    out, phys = [], draw(st.integers(0, 5000))
    for size, gap, code in zip(sizes, gaps, codes, strict=True):
        out.append((phys, size, code))
        phys += size + gap
    return out


@given(
    windows(),
    st.integers(-3, 40),
    st.integers(0, 2**22),
    st.integers(1 << 12, 1 << 18),
    st.none() | st.frozensets(st.integers(0, 3)),
    st.frozensets(st.integers(0, 12), max_size=4),
)
@example(  # a filtered entry inside a vanished file is skipped, not filtered (STORE-12 step 2)
    window=[(0, 1, 1), (1, 1, 0)],
    max_msg_nums=0,
    memory=0,
    file_size=4096,
    wanted=frozenset([1]),
    missing=frozenset([0]),
)
def test_scan_window_matches_the_rulebook_model(
    window: list[tuple[int, int, int]],
    max_msg_nums: int,
    memory: int,
    file_size: int,
    wanted: frozenset[int] | None,
    missing: frozenset[int],
) -> None:
    head = window[-1][0] + window[-1][1] if window else 0
    state = scan(
        window,
        max_msg_nums,
        max_offset_py=head,
        memory=memory,
        file_size=file_size,
        matches=lambda code: wanted is None or code is None or code in wanted,
        is_present=lambda phys, size: phys // file_size not in missing,
    )
    expected = model_scan(window, max_msg_nums, head, memory, file_size, wanted, missing)
    assert expected == ModelScan(
        state.status, state.scanned, state.returned, state.max_phy_offset_pulling
    )
    # the bounds the rulebook states
    assert len(state.returned) <= min(max(max_msg_nums, 1), 32)
    if all(head - phys > memory for phys, _, _ in window):
        assert len(state.returned) <= min(max(max_msg_nums, 1), 8)
    assert state.scanned <= min(len(window), max(800, max_msg_nums))
    assert (state.status is S.FOUND) == bool(state.returned)
    assert sum(window[p][1] for p in state.returned) == state.buffer_total
    if len(state.returned) > 1:
        assert state.buffer_total <= 262_144


# --- STORE-21, STORE-22 -------------------------------------------------------------------------

# (phys, size, files start at first … last, the last written up to) → where the bytes are read;
# 512-byte files.
STORE_21_TABLE = [
    (0, 248, 0, 0, 248, 0),  # nothing deleted: read where the entry says
    (0, 248, 1024, 1536, 300, 1024),  # file 0 deleted: the first remaining file's start serves
    (0, 512, 1024, 1536, 300, 1024),  # a full file before the last is readable to its end
    (0, 513, 1024, 1536, 300, None),
    (0, 248, 1024, 1024, 100, None),  # the only file holds 100 bytes: not enough
    (0, 100, 1024, 1024, 100, 1024),
    (248, 248, 1024, 1536, 300, None),  # any other offset of a deleted file reads nothing
    (1030, 10, 1024, 1536, 300, 1030),
    (1536 + 290, 10, 1024, 1536, 300, 1536 + 290),
    (1536 + 291, 10, 1024, 1536, 300, None),  # past the written bytes
    (2048, 4, 1024, 1536, 300, None),  # past the last file
]


@pytest.mark.parametrize(("phys", "size", "first", "last", "written", "at"), STORE_21_TABLE)
def test_store_21_reads_are_served_where_find_mapped_file_by_offset_says(
    phys: int, size: int, first: int, last: int, written: int, at: int | None
) -> None:
    assert at == check_call(commit_log_read_position, phys, size, 512, first, last, written)


def test_store_21_without_a_file_nothing_is_read() -> None:
    assert None is check_call(commit_log_read_position, 0, 4, 512, None, None, 0)


@pytest.mark.parametrize(
    ("position", "record_start", "found"),
    [(None, False, None), (1024, True, 1024), (1024, False, None), (0, True, 0)],
)
def test_store_22_a_lookup_finds_only_a_record_that_starts_where_it_reads(
    position: int | None, record_start: bool, found: int | None
) -> None:
    assert found == check_call(looked_up_record, position, record_start)
