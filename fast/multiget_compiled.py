"""get_messages through the compiled window scan (fast.multiget_kernel): each request's decision
(STORE-5, STORE-9) is made here, all windows are scanned in one call, and whatever the scan does
not model is answered by get_message's path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from pullspec.fast.gather import I64
from pullspec.fast.getpath import GetPath, check_pull_arguments
from pullspec.fast.multiget_kernel import ALL, BAIL, FOUND
from pullspec.fast.results import FileView, MultiGetResult, ScannedRows
from pullspec.spec.batch import max_filter_message_count
from pullspec.spec.errors import InvalidTypeError
from pullspec.spec.filter import SUB_ALL, ExpressionMessageFilter, is_tag_type
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult

if TYPE_CHECKING:
    from pullspec.fast.consumequeue import ConsumeQueue
    from pullspec.fast.mapped import MappedFile


@attrs.frozen
class GetRequest:
    """One pull of a get_messages batch: the arguments of get_message (a plain tuple of them
    is accepted as well).

    >>> GetRequest("G", "T", 0, 0, 32)
    GetRequest(group='G', topic='T', queue_id=0, offset=0, max_msg_nums=32, message_filter=None)
    """

    group: str
    topic: str
    queue_id: int
    offset: int
    max_msg_nums: int
    message_filter: MessageFilter | None = None


#: maxMsgNums beyond this go to get_message's path (the compiled scan counts in int64).
_BIG = 1 << 40
#: max_filter_message_count in entries, by maxMsgNums.
_BUDGETS: dict[int, int] = {}


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


def as_request(item: Any) -> GetRequest:
    """A get_messages request as a GetRequest, its fields checked as get_message checks them."""
    if type(item) is GetRequest:
        request = item
    elif isinstance(item, tuple | list) and len(item) in (5, 6):
        request = GetRequest(*item)
    elif isinstance(item, GetRequest):
        request = item
    else:
        raise InvalidTypeError("request", item, "GetRequest or a get_message argument tuple")
    r = request
    check_pull_arguments(r.group, r.topic, r.queue_id, r.offset, r.max_msg_nums, r.message_filter)
    return request


class CompiledMultiGet(GetPath):
    """Mixin: get_messages through the compiled scan."""

    if TYPE_CHECKING:
        queues: dict[tuple[str, int], ConsumeQueue]

        def _queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...

    def _get_compiled(self, kernel: Any, reqs: Sequence[Any]) -> MultiGetResult:
        """get_messages through the compiled scan: each request's decision (STORE-5, STORE-9)
        here, the windows scanned in one call, the rest by get_message's path."""
        queues = self.queues
        profile_49 = self.profile is not Profile.V4_7
        row: list[int] = []
        flat: list[int] = []
        filters: dict[int, int] = {}
        rows_of_filter: list[MessageFilter | None] = []
        slow: list[tuple[int, GetRequest]] = []
        # Each request's queue Layout, held until the kernel has read the files it names.
        held: list[Any] = []
        m = 0
        for i, r in enumerate(reqs):
            if type(r) is tuple and len(r) == 6:
                group, topic, queue_id, offset, nums, f = r
            else:
                req = as_request(r)
                group, topic, queue_id, offset, nums, f = attrs.astuple(req, recurse=False)
            if not (
                type(topic) is str
                and type(queue_id) is int
                and type(offset) is int
                and type(nums) is int
                and type(group) is str
                and (f is None or type(f) is ExpressionMessageFilter)
            ):
                req = as_request(r)  # raises on a bad field; a custom filter is fine
                slow.append((i, req))
                row.append(-1)
                continue
            q = queues.get((topic, queue_id))
            if q is None:
                q = self._queue(topic, queue_id)
            pos = offset * 20
            fs = q.file_size
            min_logic = q.min_logic_offset
            end = q.end  # before the Layout (fast.consumequeue)
            lay = q.layout
            rel = pos % fs
            number = lay.numbers.get(pos - rel) if pos >= min_logic else None
            readable = min(end - (pos - rel), fs)
            if (
                number is None
                or rel >= readable
                or (nums < 0 and profile_49)
                or not -_BIG < nums < _BIG
            ):
                slow.append((i, GetRequest(group, topic, queue_id, offset, nums, f)))
                row.append(-1)
                continue
            fid = filters.get(id(f))
            if fid is None:
                fid = filters[id(f)] = len(rows_of_filter)
                rows_of_filter.append(f)
            window = (readable - rel) // 20
            budget = nums if nums > 800 else 800
            if nums >= 1 << 26:
                budget = -(-max_filter_message_count(nums) // CQ_STORE_UNIT_SIZE)
            held.append(lay)
            flat += (
                lay.addresses[number],
                rel // 20,
                window if window < budget else budget,
                nums,
                fid,
                offset,
                min_logic // 20,
                end // 20,
            )
            row.append(m)
            m += 1
        rows_at = np.array(row, dtype=np.int64)
        rows: ScannedRows | None = None
        if m:
            codes, counts, unknown = filter_table(rows_of_filter)
            a = np.array(flat, dtype=np.int64).reshape(m, 8).T
            rows = self._scan_compiled(kernel, a, codes, counts)
            redo = rows.bail | np.isin(a[4], unknown) if unknown else rows.bail
            if redo.any():
                for i in np.flatnonzero(rows_at >= 0)[redo].tolist():
                    g, t, qid, o, nm, fl = reqs[i]
                    slow.append((i, GetRequest(g, t, qid, o, nm, fl)))
        del held  # the kernel has read the queue files
        items: list[GetMessageResult | None] = [None] * len(row)
        for i, req in slow:
            rows_at[i] = -1
            q = self._queue(req.topic, req.queue_id)
            items[i] = self._get(q, req.offset, req.max_msg_nums, req.message_filter)
        return MultiGetResult(items, rows_at, rows)

    def _kernel_facts(self) -> tuple[I64, I64, list[MappedFile]]:
        """The commit-log facts (min, last file start, written, file size, max, memory share),
        the four BATCH-2 limits (bytes and count on disk, bytes and count in memory) and the
        commit-log files they were read with (every record they call readable is in those: a
        reader decodes from them), the facts rebuilt only when the commit log has changed. The
        arrays stay writeable: numba types a read-only argument through its slow Python path on
        every call."""
        log = self.commit_log
        end = log.end  # before the files (fast.commitlog)
        files = log.files
        key = (files[0].start, end) if files else None
        cached: tuple[Any, I64, I64] | None = self.__dict__.get("_facts_cache")
        if cached is not None:
            if cached[0] == key:
                return cached[1], cached[2], files
            lim = cached[2]
        else:
            limits = self._limits
            lim = np.array(
                (
                    limits.max_transfer_bytes_on_message_in_disk,
                    limits.max_transfer_count_on_message_in_disk,
                    limits.max_transfer_bytes_on_message_in_memory,
                    limits.max_transfer_count_on_message_in_memory,
                ),
                dtype=np.int64,
            )
        if files:
            # The "last file" is the one `end` lies in: records before it must lie inside
            # their file, records in it must end by `end` (files past it are not read).
            written = end % log.file_size
            log_facts = (files[0].start, end - written, written, log.file_size)
        else:  # nothing is readable: any returned entry bails
            log_facts = (1 << 62, 1 << 62, 0, log.file_size)
        facts = np.array((*log_facts, end, self._memory), dtype=np.int64)
        self.__dict__["_facts_cache"] = (key, facts, lim)
        return facts, lim, files

    def _scan_compiled(self, kernel: Any, a: I64, codes: I64, counts: I64) -> ScannedRows:
        """Run the compiled scan over the requests' columns `a` (address, first, n,
        max nums, filter row, offset, min, max)."""
        log = self.commit_log
        m = a.shape[1]
        facts, lim, files = self._kernel_facts()
        max_offset_py = int(facts[4])
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
        kernel(
            a[0],
            a[1],
            a[2],
            a[3],
            a[4],
            codes,
            counts,
            facts,
            lim,
            status,
            scanned,
            count,
            total,
            last,
            picked_start,
            picked_pos,
            picked_phys,
        )
        return ScannedRows(
            offset=a[5],
            min_offset=a[6],
            max_offset=a[7],
            found=status == FOUND,
            bail=status == BAIL,
            scanned=scanned,
            count=count,
            total=total,
            suggest=(max_offset_py - last) > self._memory,
            picked_start=picked_start,
            picked_pos=picked_pos,
            picked_phys=picked_phys,
            log_files=tuple(FileView(f.start, f.data) for f in files),
            log_file_size=log.file_size,
            profile=self.profile,
            delay_levels=self._delay_levels,
        )
