"""STORE-11 … STORE-14, STORE-16 — the consume-queue window scan of DefaultMessageStore.getMessage:
the per-entry steps, the scan budget, the final status and nextBeginOffset, the slave suggestion."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from pullspec.spec.batch import (
    SEEDS_GET_MESSAGE,
    BatchLimits,
    check_in_disk_by_commit_offset,
    is_the_batch_full,
    max_filter_message_count,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.rules import rule
from pullspec.spec.status import GetMessageStatus

#: A tags code at or below this is a consume-queue-ext address, not a code (MAX_ADDR).
CQ_EXT_MAX_ADDRESS = -2_147_483_649

CQEntry = tuple[int, int, int]
"""A consume-queue entry: (phys, size, tags_code)."""


@rule(
    "STORE-15",
    source="CommitLog.rollNextFile",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"),
)
def commit_log_roll_next_file(phys: int, file_size: int) -> int:
    """After a missing record the scan skips to the next commit-log file, p + F − p mod F.

    pre: phys >= 0 and file_size > 0
    post: __return__ > phys and __return__ % file_size == 0
    """
    return phys + file_size - phys % file_size


@attrs.frozen
class ScanState:
    """The running state of a window scan (STORE-11): status, skip marker and counters."""

    status: GetMessageStatus = GetMessageStatus.NO_MATCHED_MESSAGE
    next_phy_file_start_offset: int | None = None
    max_phy_offset_pulling: int = 0
    scanned: int = 0
    buffer_total: int = 0
    returned: tuple[int, ...] = ()


@rule("STORE-12", source="DefaultMessageStore.getMessage", seeds=SEEDS_GET_MESSAGE)
def scan_entry(
    state: ScanState,
    position: int,
    entry: CQEntry,
    *,
    max_msg_nums: int,
    max_offset_py: int,
    memory: int,
    limits: BatchLimits,
    commit_log_file_size: int,
    matches_consume_queue: Callable[[int | None], bool],
    record_present: Callable[[int, int], bool],
    matches_commit_log: Callable[[int], bool],
) -> tuple[ScanState, bool]:
    """Each entry is read, skipped inside a vanished commit-log file, checked against the batch
    limits (which may end the scan before it), filtered by tag code, read from the commit log,
    filtered again and returned, in that order; the flag says the scan ended before it.

    post: __return__[0].scanned == state.scanned + (0 if __return__[1] else 1)
    post: len(__return__[0].returned) - len(state.returned) in (0, 1)
    post: __return__[0].max_phy_offset_pulling == entry[0]
    """
    # crosshair: off  (CrossHair cannot build symbolic callables; Hypothesis checks the contract)
    phys, size, tags_code = entry
    state = evolve(state, max_phy_offset_pulling=phys)
    counted = evolve(state, scanned=state.scanned + 1)
    # Check that the entry is not inside a commit-log file already found missing.
    if state.next_phy_file_start_offset is not None and phys < state.next_phy_file_start_offset:
        return counted, False
    is_in_disk = check_in_disk_by_commit_offset(phys, max_offset_py, memory)
    # Check that the batch has room for this entry.
    if is_the_batch_full(
        size, max_msg_nums, state.buffer_total, len(state.returned), is_in_disk, limits
    ):
        return state, True
    nothing_yet = not state.returned
    code = None if tags_code <= CQ_EXT_MAX_ADDRESS else tags_code  # no ext unit: the code is null
    # Check that the tag code matches the subscription.
    if not matches_consume_queue(code):
        return (
            evolve(counted, status=GetMessageStatus.NO_MATCHED_MESSAGE) if nothing_yet else counted
        ), False
    # Check that the commit log can serve the entry's bytes (STORE-21).
    if not record_present(phys, size):
        skip_to = commit_log_roll_next_file(phys, commit_log_file_size)
        status = GetMessageStatus.MESSAGE_WAS_REMOVING if nothing_yet else counted.status
        return evolve(counted, status=status, next_phy_file_start_offset=skip_to), False
    # Check that the record passes the commit-log stage of the filter.
    if not matches_commit_log(phys):
        return (
            evolve(counted, status=GetMessageStatus.NO_MATCHED_MESSAGE) if nothing_yet else counted
        ), False
    return (
        evolve(
            counted,
            status=GetMessageStatus.FOUND,
            next_phy_file_start_offset=None,
            buffer_total=state.buffer_total + size,
            returned=(*state.returned, position),
        ),
        False,
    )


@rule("STORE-11", source="DefaultMessageStore.getMessage", seeds=SEEDS_GET_MESSAGE)
def scan_window(
    window: Sequence[CQEntry],
    *,
    max_msg_nums: int,
    max_offset_py: int,
    memory: int,
    limits: BatchLimits,
    commit_log_file_size: int,
    matches_consume_queue: Callable[[int | None], bool],
    record_present: Callable[[int, int], bool],
    matches_commit_log: Callable[[int], bool],
) -> ScanState:
    """The scan starts as NO_MATCHED_MESSAGE and examines window entries while within the window
    and the scan budget, stopping early only at an entry that makes the batch full.

    post: __return__.scanned <= len(window)
    post: len(__return__.returned) <= __return__.scanned
    post: (__return__.status is GetMessageStatus.FOUND) == bool(__return__.returned)
    """
    # crosshair: off  (CrossHair cannot build symbolic callables; Hypothesis checks the contract)
    budget_entries = -(-max_filter_message_count(max_msg_nums) // CQ_STORE_UNIT_SIZE)
    state = ScanState()
    for position, entry in enumerate(window):
        # Check that the scan budget is not used up.
        if position >= budget_entries:
            break
        state, stop = scan_entry(
            state,
            position,
            entry,
            max_msg_nums=max_msg_nums,
            max_offset_py=max_offset_py,
            memory=memory,
            limits=limits,
            commit_log_file_size=commit_log_file_size,
            matches_consume_queue=matches_consume_queue,
            record_present=record_present,
            matches_commit_log=matches_commit_log,
        )
        if stop:
            break
    return state


@rule("STORE-13", source="DefaultMessageStore.getMessage", seeds=("000_26b83a4251c26823.txt",))
def final_scan_status(state: ScanState) -> GetMessageStatus:
    """A scan is FOUND iff it returned a message; otherwise its status is the last of
    NO_MATCHED_MESSAGE and MESSAGE_WAS_REMOVING written.

    post: __return__ is state.status
    """
    return state.status


@rule("STORE-14", source="DefaultMessageStore.getMessage", seeds=SEEDS_GET_MESSAGE)
def scan_next_begin_offset(offset: int, scanned: int) -> int:
    """After a scan nextBeginOffset = offset + entries examined, uncorrected even on a slave.

    pre: scanned >= 0
    post: __return__ == offset + scanned
    """
    return offset + scanned


@rule(
    "STORE-16",
    source="DefaultMessageStore.getMessage",
    seeds=("000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt"),
)
def suggest_pulling_from_slave(
    max_offset_py: int, max_phy_offset_pulling: int, memory: int
) -> bool:
    """A scan suggests the slave when the last examined entry lies more than the memory share
    behind the commit-log head.

    post: __return__ == (max_offset_py - max_phy_offset_pulling > memory)
    """
    return max_offset_py - max_phy_offset_pulling > memory
