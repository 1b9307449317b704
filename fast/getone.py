"""get_message through the compiled window scan: the decision (STORE-5, STORE-9) made here, the
window scanned by fast.multiget_kernel's loop, the answer built without numpy bookkeeping.

What the loop does not model — a filter other than a tag-type ExpressionMessageFilter, a
returned record that is not readable (MESSAGE_WAS_REMOVING), every non-scan decision — goes
through get_message's numpy path (fast.getpath). Without numba that path answers everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from pullspec.fast.gather import I64
from pullspec.fast.multiget_compiled import CompiledMultiGet, filter_table
from pullspec.fast.multiget_kernel import ALL, BAIL, FOUND, window_kernel
from pullspec.fast.results import FastGetMessageResult, LazyMessages, lazy_records
from pullspec.spec.batch import max_filter_message_count
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.message import StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult
from pullspec.spec.status import GetMessageStatus

if TYPE_CHECKING:
    from pullspec.fast.consumequeue import ConsumeQueue
    from pullspec.fast.mapped import MappedFile

#: Distinct filters whose kernel rows are kept (filters are frozen values: equal ones share).
_FILTER_ROWS_KEPT = 256
Row = tuple[int, I64]
#: The kernel row of no filter: every entry matches. (Writeable, as every kernel argument:
#: numba types a read-only array through its slow Python path.)
_MATCH_ALL: Row = (ALL, np.zeros(1, dtype=np.int64))
#: Kernel rows by filter identity: a caller that reuses its filter objects skips hashing them
#: (a frozen filter's hash walks its subscription). Each entry holds its filter, so the id is
#: not reused while cached. Rows depend on the filter alone, so every store shares them.
_ROWS_BY_ID: dict[int, tuple[Any, Row | None]] = {}
#: Kernel rows by filter value.
_ROWS: dict[Any, Row | None] = {}
#: Entries a pull examines at most, by maxMsgNums (max_filter_message_count in entries).
_BUDGETS: dict[int, int] = {}
_FOUND, _NO_MATCH = GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE


def window_budget(max_msg_nums: int) -> int:
    """max_filter_message_count(max_msg_nums) in whole consume-queue entries."""
    found = _BUDGETS.get(max_msg_nums)
    if found is None:
        if len(_BUDGETS) >= 1024:
            _BUDGETS.clear()
        found = _BUDGETS[max_msg_nums] = -(
            -max_filter_message_count(max_msg_nums) // CQ_STORE_UNIT_SIZE
        )
    return found


class SingleGetPath(CompiledMultiGet):
    """Mixin: one pull through the compiled scan."""

    def _get_one(
        self,
        q: ConsumeQueue,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None,
    ) -> GetMessageResult:
        """get_message's answer for a validated request on queue `q`."""
        kernel = window_kernel()
        row = None if kernel is None else self._filter_row(message_filter)
        pos = offset * CQ_STORE_UNIT_SIZE
        fs = q.file_size
        min_logic = q.min_logic_offset
        # The published end before the files (fast.consumequeue): the Layout holds every file
        # below it, and holding the Layout keeps the kernel's mapping alive.
        end = q.end
        lay = q.layout
        rel = pos % fs
        number = lay.numbers.get(pos - rel) if pos >= min_logic else None
        if (
            row is None
            or number is None
            or pos >= end
            or not -(1 << 26) < max_msg_nums < 1 << 26
            or (max_msg_nums < 0 and self.profile is not Profile.V4_7)
        ):
            return self._get(q, offset, max_msg_nums, message_filter)
        readable = min(end - (pos - rel), fs)
        n = min((readable - rel) // CQ_STORE_UNIT_SIZE, window_budget(max_msg_nums))
        cap = min(n, max(max_msg_nums, 1))
        picked_pos = np.empty(cap, dtype=np.int64)
        picked_phys = np.empty(cap, dtype=np.int64)
        facts, lim, log_files = self._kernel_facts()
        wanted, codes = row
        status, scanned, count, total, last_phys, _ = cast(Any, kernel)(
            lay.addresses[number], rel // CQ_STORE_UNIT_SIZE, n, max_msg_nums, wanted, codes,
            facts, lim, picked_pos, picked_phys, 0,
        )  # fmt: skip
        del lay  # held through the kernel's reads
        if status == BAIL:  # the numpy scan would meet the same unreadable record
            return self._get(q, offset, max_msg_nums, message_filter, vectorized=False)
        phys = picked_phys[:count].tolist()
        if count and picked_pos[count - 1] == count - 1:  # entries returned in a row
            offsets = tuple(range(offset, offset + count))
        else:
            offsets = tuple((picked_pos[:count] + offset).tolist())
        return FastGetMessageResult(
            _FOUND if status == FOUND else _NO_MATCH,
            offset + scanned,
            min_logic // CQ_STORE_UNIT_SIZE,
            end // CQ_STORE_UNIT_SIZE,
            cast(tuple[StoredMessage, ...], self._records(phys, log_files)),
            int(facts[4]) - last_phys > self._memory,
            total_size=total,
            offsets=offsets,
        )

    def _records(self, phys: list[int], files: list[MappedFile]) -> LazyMessages:
        """The records at commit-log offsets `phys`, all readable in the commit-log `files`
        (the list the kernel's facts were read with), decoded on access."""
        log = self.commit_log
        if phys:
            size = log.file_size
            base = files[0].start
            first = (phys[0] - base) // size
            if first == (phys[-1] - base) // size:  # the usual case: all in one file
                f = files[first]
                start = f.start
                return LazyMessages(
                    f.data, [p - start for p in phys], self.profile, self._delay_levels
                )
        return lazy_records(
            files, log.file_size, np.array(phys, dtype=np.int64), self.profile,
            self._delay_levels,
        )  # fmt: skip

    def _filter_row(self, message_filter: MessageFilter | None) -> Row | None:
        """The kernel's (code count or ALL, codes) for a filter; None when only the entry-by-
        entry path can evaluate it."""
        if message_filter is None:
            return _MATCH_ALL
        hit = _ROWS_BY_ID.get(id(message_filter))
        if hit is not None and hit[0] is message_filter:
            return hit[1]
        row = filter_row(message_filter)
        if len(_ROWS_BY_ID) >= _FILTER_ROWS_KEPT:
            _ROWS_BY_ID.clear()
        _ROWS_BY_ID[id(message_filter)] = (message_filter, row)
        return row


def filter_row(message_filter: MessageFilter) -> Row | None:
    """The kernel row of a filter by value (equal filters share it), or None."""
    try:
        found = _ROWS.get(message_filter, False)
    except TypeError:  # an unhashable custom filter
        return None
    if found is not False:
        return cast("Row | None", found)
    codes, counts, unknown = filter_table([message_filter])
    row = None if unknown else (int(counts[0]), np.ascontiguousarray(codes[0]))
    if len(_ROWS) >= _FILTER_ROWS_KEPT:
        _ROWS.clear()
    _ROWS[message_filter] = row
    return row
