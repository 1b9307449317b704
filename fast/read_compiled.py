"""The compiled scanners of ScanPlans (fast.read_plan): one pull's window (get_message, planned
and scanned in one call) and every request's window of a get_messages batch, by
fast.numba_read's loops.

What the loops do not model — a filter other than a tag-type ExpressionMessageFilter, a maxMsgNums
beyond COMPILED_NUMS, a returned record that is not readable (MESSAGE_WAS_REMOVING) — is left
to the numpy scanner (fast.read_numpy): `pull` answers the ScanPlan, a batch row is redone.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

import numpy as np

from pullspec.fast.commitlog import CommitLog
from pullspec.fast.consumequeue import ConsumeQueue
from pullspec.fast.gather import I64, U8
from pullspec.fast.mapped import MappedFile
from pullspec.fast.read_plan import SCAN_COLUMNS, PlannedPulls, Pull, ReadPlanner, ScanPlan
from pullspec.fast.results import (
    FileView,
    LazyMessages,
    Picked,
    ScannedResult,
    ScannedRows,
    lazy_records,
    set_scanned,
)
from pullspec.spec.filter import SUB_ALL, ExpressionMessageFilter, is_tag_type
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult
from pullspec.spec.status import BrokerRole, GetMessageStatus

#: Distinct filters whose kernel rows are kept (filters are frozen values: equal ones share).
_FILTER_ROWS_KEPT = 256
#: A kernel filter row: (code count, or the kernel's ALL for match-everything; the codes).
Row = tuple[int, I64]
_FOUND, _NO_MATCH = GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE
_new = object.__new__
#: A ScanPlan from a tuple of its fields, without the named constructor's Python-level call.
_new_plan = tuple.__new__
#: LogFacts.cached: (first file's start, max offset, the facts array, the files' views).
Facts = tuple[int, int, I64, tuple[U8, ...]]
#: int64 as a dtype: np.empty converts the scalar type to one on every call (about 80 ns).
_INT64 = np.dtype(np.int64)
#: The code count of a filter row that matches every entry (a null filter, `*`, class mode).
#: fast.numba_read compiles it in: numba's disk cache does not see a change made here.
ALL = -1


def filter_table(filters: list[MessageFilter | None]) -> tuple[I64, I64, list[int]]:
    """The kernel's filter rows: (codes, code counts with ALL for match-everything, rows the
    kernel cannot evaluate — any filter but a tag-type ExpressionMessageFilter)."""
    width = 1
    rows: list[list[int] | None] = []
    unknown: list[int] = []
    for k, f in enumerate(filters):
        if f is None:
            rows.append(None)
            continue
        if type(f) is not ExpressionMessageFilter:
            unknown.append(k)
            rows.append([])
            continue
        sub = f.subscription
        if (
            sub is None
            or sub.class_filter_mode
            or not is_tag_type(sub.expression_type)
            or sub.sub_string == SUB_ALL
        ):
            rows.append(None)
            continue
        codes = sorted(sub.code_set)
        width = max(width, len(codes))
        rows.append(codes)
    table = np.zeros((len(filters), width), dtype=np.int64)
    counts = np.zeros(len(filters), dtype=np.int64)
    for k, row in enumerate(rows):
        if row is None:
            counts[k] = ALL
        else:
            counts[k] = len(row)
            table[k, : len(row)] = row
    return table, counts, unknown


class FilterRows:
    """Kernel rows of filters, cached by identity (a caller that reuses its filter objects skips
    hashing them: a frozen filter's hash walks its subscription) and by value (equal filters
    share a row). Each identity entry holds its filter, so the id is not reused while cached."""

    def __init__(self) -> None:
        #: The row of no filter: every entry matches. (Writeable, as every kernel argument:
        #: numba types a read-only array through its slow Python path.)
        self.match_all: Row = (ALL, np.zeros(1, dtype=np.int64))
        self._by_id: dict[int, tuple[Any, Row | None]] = {}
        self._by_value: dict[Any, Row | None] = {}

    def row(self, message_filter: MessageFilter | None) -> Row | None:
        """The kernel's (code count or ALL, codes) for a filter; None when only the numpy or
        entry-by-entry scan can evaluate it."""
        if message_filter is None:
            return self.match_all
        hit = self._by_id.get(id(message_filter))
        if hit is not None and hit[0] is message_filter:
            return hit[1]
        row = self._row_by_value(message_filter)
        if len(self._by_id) >= _FILTER_ROWS_KEPT:
            self._by_id.clear()
        self._by_id[id(message_filter)] = (message_filter, row)
        return row

    def _row_by_value(self, message_filter: MessageFilter) -> Row | None:
        try:
            found = self._by_value.get(message_filter, False)
        except TypeError:  # an unhashable custom filter
            return None
        if found is not False:
            return cast("Row | None", found)
        codes, counts, unknown = filter_table([message_filter])
        row = None if unknown else (int(counts[0]), np.ascontiguousarray(codes[0]))
        if len(self._by_value) >= _FILTER_ROWS_KEPT:
            self._by_value.clear()
        self._by_value[message_filter] = row
        return row


class LogFacts:
    """What the compiled loops read of the commit log, as one int64 array rebuilt only when the
    log changes: its min, the start of the file holding the max offset, the bytes written in
    that file, the file size, the max offset, the memory share (BATCH-3), then the four BATCH-2
    limits (bytes and count on disk, bytes and count in memory). The array stays writeable:
    numba types a read-only argument through its slow Python path on every call.

    `cached` holds the facts last read as one tuple (the first file's start, −1 without files;
    the max offset; the array; the files' views), replaced whole: readers on other threads take
    it in one read, so they never pair one reading's key with another's array or views. The
    single pull checks it inline instead of calling `current`."""

    def __init__(self, commit_log: CommitLog, planner: ReadPlanner) -> None:
        self._log = commit_log
        limits = planner.limits
        self._memory = planner.memory
        self._limits = (
            limits.max_transfer_bytes_on_message_in_disk,
            limits.max_transfer_count_on_message_in_disk,
            limits.max_transfer_bytes_on_message_in_memory,
            limits.max_transfer_count_on_message_in_memory,
        )
        # The key is (first file's start, max offset), not the file list: holding the list
        # would keep expired files (fast.retired).
        self.cached: Facts = (-2, -1, np.zeros(0, dtype=np.int64), ())

    def current(self) -> tuple[I64, list[MappedFile], int, tuple[U8, ...]]:
        """The facts, the commit-log files they were read with (every record they call
        readable is in those: a reader decodes from them), the max offset among them and the
        files' bytes as they were mapped then (a view pins its mapping, so a result decodes its
        records from it even after the store is closed)."""
        log = self._log
        end = log.end  # before the files (fast.commitlog)
        files = log.files
        facts = self.cached
        if end != facts[1] or (files[0].start if files else -1) != facts[0]:
            facts = self.read(end, files)
        return facts[2], files, end, facts[3]

    def read(self, end: int, files: list[MappedFile]) -> Facts:
        """Read (and keep as `cached`) the facts of the log at max offset `end` with `files`."""
        log = self._log
        if files:
            # The "last file" is the one `end` lies in: records before it must lie inside
            # their file, records in it must end by `end` (files past it are not read).
            written = end % log.file_size
            log_facts = (files[0].start, end - written, written, log.file_size)
        else:  # nothing is readable: any returned entry bails
            log_facts = (1 << 62, 1 << 62, 0, log.file_size)
        array = np.array((*log_facts, end, self._memory, *self._limits), dtype=np.int64)
        facts = (files[0].start if files else -1, end, array, tuple(f.data for f in files))
        self.cached = facts
        return facts


class CompiledScanner:
    """Scans ScanPlans with the compiled loops of fast.numba_read."""

    def __init__(
        self, commit_log: CommitLog, planner: ReadPlanner, delay_levels: tuple[int, ...]
    ) -> None:
        self._log = commit_log
        self._planner = planner
        self._delay_levels = delay_levels
        self.rows = FilterRows()
        self.facts = LogFacts(commit_log, planner)
        self._budgets = planner.compiled_budgets
        self._memory = planner.memory

    def pull(
        self,
        kernels: ModuleType,
        q: ConsumeQueue,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None,
        role: BrokerRole,
        offset_check_in_slave: bool,
    ) -> GetMessageResult | ScanPlan:
        """One pull (get_message's validated arguments on queue `q`) planned and scanned in one
        call: its answer, or the ScanPlan of a scan the loop does not model (the caller's numpy
        scanner answers it). The planner's fast path (ReadPlanner.plan, whose test checks it
        against the spec) is taken inline when the maxMsgNums has a compiled budget: a ScanPlan
        built and taken apart again, and the calls between, were about 8 % of a warm pull."""
        row = self.rows.match_all if message_filter is None else self.rows.row(message_filter)
        nums = max_msg_nums
        budget = self._budgets.get(nums)
        min_logic = q.min_logic_offset
        # The published end before the Layout, as ReadPlanner.plan reads them.
        q_end = q.end
        lay = q.layout
        pos = offset * CQ_STORE_UNIT_SIZE
        number = None
        if budget is not None and min_logic <= pos < q_end:
            fs = q.file_size
            rel = pos % fs
            number = lay.numbers.get(pos - rel)
            if number is not None:
                readable = q_end - (pos - rel)
                n = ((readable if readable < fs else fs) - rel) // CQ_STORE_UNIT_SIZE
                n = min(n, budget)
                first = rel // CQ_STORE_UNIT_SIZE
                min_offset = min_logic // CQ_STORE_UNIT_SIZE
                max_offset = q_end // CQ_STORE_UNIT_SIZE
        if number is None:
            plan = self._planner.plan(q, offset, nums, role, offset_check_in_slave)
            if type(plan) is not ScanPlan:
                return plan
            _, lay, number, first, n, _, _, min_offset, max_offset, compiled = plan
            if not compiled:
                return plan
        if row is None:
            return _new_plan(
                ScanPlan, (q, lay, number, first, n, offset, nums, min_offset, max_offset, True)
            )
        # LogFacts.current inlined: one call fewer on every pull.
        end = self._log.end  # before the files (fast.commitlog)
        files = self._log.files
        facts = self.facts.cached  # one read: another reader may replace it meanwhile
        if end != facts[1] or (files[0].start if files else -1) != facts[0]:
            facts = self.facts.read(end, files)
        wanted, codes = row
        picked: Picked
        if wanted == ALL:
            # Every examined entry is returned, in order: the result reads their commit-log
            # offsets from the queue's file when its records are first read, holding the
            # Layout (fast.retired) so that the file stays as it was. No array of picked
            # positions per pull and three arguments fewer to the kernel than window_one takes:
            # together about a sixth of a warm pull.
            status, scanned, count, total, last_phys, _ = kernels.window_all(
                lay.addresses[number], first, n, nums, facts[2]
            )
            picked = (lay, number, first)
        else:
            cap = nums if nums > 1 else 1
            picked = np.empty((2, n if n < cap else cap), _INT64)
            status, scanned, count, total, last_phys, _ = kernels.window_one(
                lay.addresses[number], first, n, nums, wanted, codes, facts[2], picked
            )
        if status == kernels.BAIL:  # a returned record is not readable: numpy answers
            return _new_plan(
                ScanPlan, (q, lay, number, first, n, offset, nums, min_offset, max_offset, True)
            )
        del lay  # held through the kernel's reads
        # Made without a Python-level __init__ (fast.results.set_scanned), for the same reason.
        result: ScannedResult = _new(ScannedResult)
        set_scanned(
            result,
            (
                _FOUND if status == kernels.FOUND else _NO_MATCH,
                offset + scanned,
                min_offset,
                max_offset,
                count,
                total,
                offset,
                picked,
                end,
                last_phys,
                self._memory,
                self,
                files,
                facts[3],
            ),
        )
        return result

    def records(self, files: list[MappedFile], views: tuple[U8, ...], phys: I64) -> LazyMessages:
        """The records at commit-log offsets `phys`, all readable in the commit-log `files`
        (the list the kernel's facts were read with, `views` their bytes then), decoded on
        access through leases of those files."""
        size = self._log.file_size
        rules = self._planner.rules
        if len(phys):
            base = files[0].start
            first = (int(phys[0]) - base) // size
            if first == (int(phys[-1]) - base) // size:  # the usual case: all in one file
                f = files[first]
                return LazyMessages(f.lend(views[first]), phys, rules, self._delay_levels, f.start)
        # The live list may have grown since (appends extend it in place): the records lie in
        # the files the views were taken of, its first len(views).
        leased = [FileView(f.start, f.lend(v)) for f, v in zip(files, views, strict=False)]
        return lazy_records(leased, size, phys, rules, self._delay_levels)

    # -- get_messages ------------------------------------------------------------------------

    def scan_many(
        self,
        kernels: ModuleType,
        planned: PlannedPulls,
        answer: Callable[[Pull], GetMessageResult],
    ) -> tuple[list[GetMessageResult | None], I64, ScannedRows | None]:
        """get_messages' scan rows in one kernel call: (answers of the requests not scanned by
        the kernel, each request's kernel row or −1, the rows). A request the kernel does not
        model is answered by `answer` (get_message's path)."""
        items = planned.answers
        row_of = np.array(planned.rows, dtype=np.int64)
        redo = list(planned.uncompiled)
        rows: ScannedRows | None = None
        m = len(planned.held)
        if m:
            codes, counts, unknown = filter_table(planned.filters)
            a = np.array(planned.columns, dtype=np.int64).reshape(m, len(SCAN_COLUMNS)).T
            rows = self._scan_rows(kernels, a, codes, counts)
            bad = rows.bail | np.isin(a[4], unknown) if unknown else rows.bail
            if bad.any():
                redo += np.flatnonzero(row_of >= 0)[bad].tolist()
        # The kernel has read the queue files: their Layouts may go.
        planned.held.clear()
        for i in redo:
            row_of[i] = -1
            items[i] = answer(planned.pulls[i])
        return items, row_of, rows

    def _scan_rows(self, kernels: ModuleType, a: I64, codes: I64, counts: I64) -> ScannedRows:
        """Run the compiled batch scan over the requests' columns `a` (address, first, n,
        max nums, filter row, offset, min, max)."""
        m = a.shape[1]
        log, files, max_offset_py, _ = self.facts.current()
        caps = np.minimum(a[2], np.maximum(a[3], 1) + 1)
        picked_start = np.zeros(m, dtype=np.int64)
        np.cumsum(caps[:-1], out=picked_start[1:])
        total_cap = int(picked_start[-1] + caps[-1])
        status = np.empty(m, dtype=np.int64)
        scanned = np.empty(m, dtype=np.int64)
        count = np.empty(m, dtype=np.int64)
        total = np.empty(m, dtype=np.int64)
        last = np.empty(m, dtype=np.int64)
        picked_pos = np.empty(total_cap, dtype=np.int64)
        picked_phys = np.empty(total_cap, dtype=np.int64)
        kernels.scan(
            a[0], a[1], a[2], a[3], a[4], codes, counts, log, status, scanned, count, total,
            last, picked_start, picked_pos, picked_phys,
        )  # fmt: skip
        return ScannedRows(
            offset=a[5],
            min_offset=a[6],
            max_offset=a[7],
            found=status == kernels.FOUND,
            bail=status == kernels.BAIL,
            scanned=scanned,
            count=count,
            total=total,
            suggest=(max_offset_py - last) > self._planner.memory,
            picked_start=picked_start,
            picked_pos=picked_pos,
            picked_phys=picked_phys,
            log_files=tuple(FileView(f.start, f.lend()) for f in files),
            **self.row_context(),
        )

    def row_context(self) -> dict[str, Any]:
        """What ScannedRows needs besides the rows to decode their records."""
        return {
            "log_file_size": self._log.file_size,
            "rules": self._planner.rules,
            "delay_levels": self._delay_levels,
        }
