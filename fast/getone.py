"""get_message through the compiled window scan: the decision (STORE-5, STORE-9) made here, the
window scanned by fast.multiget_kernel's loop, the answer built without numpy bookkeeping.

What the loop does not model — a filter other than a tag-type ExpressionMessageFilter, a
returned record that is not readable (MESSAGE_WAS_REMOVING), every non-scan decision — goes
through get_message's numpy path (fast.getpath). Without numba that path answers everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from fast.gather import I64
from fast.multiget_compiled import CompiledMultiGet, filter_table
from fast.multiget_kernel import BAIL, FOUND, window_kernel
from fast.results import FastGetMessageResult, lazy_records
from spec.batch import max_filter_message_count
from spec.layout import CQ_STORE_UNIT_SIZE
from spec.message import StoredMessage
from spec.profiles import Profile
from spec.protocols import MessageFilter
from spec.results import GetMessageResult
from spec.status import GetMessageStatus

if TYPE_CHECKING:
    from fast.consumequeue import ConsumeQueue

#: Distinct filters whose kernel rows are kept (filters are frozen values: equal ones share).
_FILTER_ROWS_KEPT = 256


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
        files = q.files
        pos = offset * CQ_STORE_UNIT_SIZE
        fs = q.file_size
        number = q._index.get(pos - pos % fs) if files and pos >= q.min_logic_offset else None
        if (
            row is None
            or number is None
            or not -(1 << 26) < max_msg_nums < 1 << 26
            or (max_msg_nums < 0 and self.profile is not Profile.V4_7)
        ):
            return self._get(q, offset, max_msg_nums, message_filter)
        last = len(files) - 1
        readable = q.wrote if number == last else fs
        rel = pos % fs
        if rel >= readable:
            return self._get(q, offset, max_msg_nums, message_filter)
        budget = -(-max_filter_message_count(max_msg_nums) // CQ_STORE_UNIT_SIZE)
        n = min((readable - rel) // CQ_STORE_UNIT_SIZE, budget)
        cap = min(n, max(max_msg_nums, 1))
        picked_pos = np.empty(cap, dtype=np.int64)
        picked_phys = np.empty(cap, dtype=np.int64)
        facts, lim = self._kernel_facts()
        wanted, codes = row
        status, scanned, count, total, last_phys, _ = cast(Any, kernel)(
            q.addresses[number], rel // CQ_STORE_UNIT_SIZE, n, max_msg_nums, wanted, codes,
            facts, lim, picked_pos, picked_phys, 0,
        )  # fmt: skip
        if status == BAIL:
            return self._get(q, offset, max_msg_nums, message_filter)
        return self._answer(
            offset, int(status), int(scanned), int(count), int(total), int(last_phys),
            picked_pos, picked_phys, q.min_logic_offset // CQ_STORE_UNIT_SIZE,
            (files[last].start + q.wrote) // CQ_STORE_UNIT_SIZE, facts,
        )  # fmt: skip

    def _filter_row(self, message_filter: MessageFilter | None) -> tuple[int, I64] | None:
        """The kernel's (code count or ALL, codes) for a filter; None when only the entry-by-
        entry path can evaluate it."""
        cache: dict[Any, tuple[int, I64] | None] = self.__dict__.setdefault("_filter_rows", {})
        try:
            found = cache.get(message_filter, False)
        except TypeError:  # an unhashable custom filter
            return None
        if found is not False:
            return cast("tuple[int, I64] | None", found)
        codes, counts, unknown = filter_table([message_filter])
        row = None if unknown else (int(counts[0]), np.ascontiguousarray(codes[0]))
        if len(cache) >= _FILTER_ROWS_KEPT:
            cache.clear()
        cache[message_filter] = row
        return row

    def _answer(
        self,
        offset: int,
        status: int,
        scanned: int,
        count: int,
        total: int,
        last_phys: int,
        picked_pos: I64,
        picked_phys: I64,
        min_offset: int,
        max_offset: int,
        facts: I64,
    ) -> GetMessageResult:
        """The result object of a compiled scan, its records decoded from the log on access."""
        log = self.commit_log
        records = lazy_records(
            log.files, log.file_size, picked_phys[:count], self.profile, self._delay_levels
        )
        if count and int(picked_pos[count - 1]) == count - 1:  # entries returned in a row
            offsets = tuple(range(offset, offset + count))
        else:
            offsets = tuple((picked_pos[:count] + offset).tolist())
        return FastGetMessageResult(
            GetMessageStatus.FOUND if status == FOUND else GetMessageStatus.NO_MATCHED_MESSAGE,
            offset + scanned,
            min_offset,
            max_offset,
            cast(tuple[StoredMessage, ...], records),
            int(facts[4]) - last_phys > int(facts[5]),
            total_size=total,
            offsets=offsets,
        )
