"""pull_through: the pulls a consumer makes through one queue — each at the previous answer's
nextBeginOffset — answered in one compiled pass (the filtered scan of a whole queue).

Pull k equals get_message(group, topic, queue_id, offsets[k], max_msg_nums, filter). The run
stops once nextBeginOffset reaches the queue's max offset (the caught-up OFFSET_OVERFLOW_ONE pull
is not made), after a pull that was not a window scan (its answer included), or after
`max_calls` pulls. A pull the compiled scan does not model is answered by
get_message's path and the run goes on after it; without numba every pull is.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np

from pullspec.fast.consumequeue import ConsumeQueue
from pullspec.fast.gather import I64
from pullspec.fast.mapped import MappedFile
from pullspec.fast.read_compiled import CompiledScanner, filter_table
from pullspec.fast.read_plan import ReadPlanner
from pullspec.fast.results import FileView, MultiGetResult, ScannedRows
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult
from pullspec.spec.status import GetMessageStatus

#: Statuses after which the run goes on at nextBeginOffset (a scan answered the pull).
_SCANNED = (
    GetMessageStatus.FOUND,
    GetMessageStatus.NO_MATCHED_MESSAGE,
    GetMessageStatus.MESSAGE_WAS_REMOVING,
)
#: Rows and picked slots the first buffers hold; they double when a run needs more.
_FIRST_ROWS = 4096

Columns = tuple[I64, I64, I64, I64, I64, I64, I64, I64, I64]


def pull_through(
    kernels: ModuleType | None,
    compiled: CompiledScanner,
    planner: ReadPlanner,
    q: ConsumeQueue,
    offset: int,
    max_msg_nums: int,
    message_filter: MessageFilter | None,
    limit: int,
    answer: Callable[[int], GetMessageResult],
) -> MultiGetResult:
    """The pulls of queue `q` from `offset` on, at most `limit`, each at the previous
    nextBeginOffset: runs of the compiled chain (`kernels`, None without numba) and, for a pull
    the chain does not model, `answer(offset)` (get_message's path)."""
    codes, counts, unknown = filter_table([message_filter])
    # The chain restates, inside its loop, the scan case the planner decides for its first pull:
    # min ≤ offset < max (STORE-5), the window in the file covering offset (STORE-9), cut to the
    # planner's BATCH-1 budget. A pull outside that case goes through `answer`.
    usable = kernels is not None and not unknown and planner.compiled_nums(max_msg_nums)
    _, max_offset = q.min_max()
    min_offset = q.min_logic_offset // CQ_STORE_UNIT_SIZE
    cols = _new_columns(_FIRST_ROWS)
    rows = out = 0
    order: list[GetMessageResult | int] = []
    facts, log_files, _, _ = compiled.facts.current()
    budget = planner.budget(max_msg_nums)
    while len(order) < limit and offset < max_offset:
        if usable and q.files and offset >= min_offset:
            assert kernels is not None
            before = rows
            rows, out, offset, why = _run(
                kernels, q, offset, max_offset, max_msg_nums, budget, int(counts[0]),
                codes[0], facts, rows, out, cols, limit - len(order),
            )  # fmt: skip
            order.extend(range(before, rows))
            if why == kernels.STOP_DONE or len(order) >= limit:
                break
            if why != kernels.STOP_ASK:
                cols = _grow(cols, rows, out)
                continue
        r = answer(offset)
        order.append(r)
        if r.status not in _SCANNED or r.next_begin_offset <= offset:
            break
        offset = r.next_begin_offset
    # Without a kernel there are no rows, whose status codes would need its FOUND and BAIL.
    found, bail = (kernels.FOUND, kernels.BAIL) if kernels is not None else (0, 0)
    return _assemble(
        compiled, order, cols, rows, min_offset, max_offset, facts, log_files, found, bail
    )


def _new_columns(n: int) -> Columns:
    """Empty row columns (offset, status, scanned, count, total, last, picked start) for n rows
    and picked columns (positions, phys) for 32 n slots."""
    rows = tuple(np.empty(n, dtype=np.int64) for _ in range(7))
    picked = tuple(np.empty(32 * n, dtype=np.int64) for _ in range(2))
    return (*rows, *picked)  # type: ignore[return-value]


def _grow(cols: Columns, rows: int, out: int) -> Columns:
    """Columns twice as large holding the first `rows` rows and `out` picked slots."""
    bigger = _new_columns(2 * len(cols[0]))
    for old, new, used in zip(cols, bigger, (rows,) * 7 + (out, out), strict=True):
        new[:used] = old[:used]
    return bigger


def _run(
    kernels: ModuleType,
    q: ConsumeQueue,
    offset: int,
    max_offset: int,
    nums: int,
    budget: int,
    wanted: int,
    codes: I64,
    facts: I64,
    rows: int,
    out: int,
    cols: Columns,
    calls_left: int,
) -> tuple[int, int, int, int]:
    """One kernel run from `offset`, writing rows from `rows` on, capped at `calls_left`."""
    end = q.end  # before the Layout (fast.consumequeue), which is held through the kernel
    lay = q.layout
    starts = np.array([f.start for f in lay.files], dtype=np.int64)
    readable = np.clip(end - starts, 0, q.file_size)
    addresses = np.array(lay.addresses, dtype=np.int64)
    cap = min(len(cols[0]), rows + calls_left)
    r, o, at, why = kernels.chain(
        addresses, starts, readable, q.file_size, offset, max_offset, nums, budget, wanted,
        codes, facts, rows, out, cols[0][:cap], *cols[1:6], *cols[6:],
    )  # fmt: skip
    del lay
    if why != kernels.STOP_DONE and r == cap and cap < len(cols[0]):
        why = kernels.STOP_DONE  # the calls asked for are made
    return int(r), int(o), int(at), int(why)


def _assemble(
    compiled: CompiledScanner,
    order: list[GetMessageResult | int],
    cols: Columns,
    rows: int,
    min_offset: int,
    max_offset: int,
    facts: I64,
    log_files: list[MappedFile],
    found_code: int,
    bail_code: int,
) -> MultiGetResult:
    """The MultiGetResult of a run: kernel rows and get_message answers in pull order;
    `log_files` are the commit-log files the kernel's `facts` were read with."""
    offset, status, scanned, count, total, last, picked_start, picked_pos, picked_phys = cols
    found = status[:rows] == found_code
    scanned_rows = ScannedRows(
        offset=offset[:rows].copy(),
        min_offset=np.full(rows, min_offset, dtype=np.int64),
        max_offset=np.full(rows, max_offset, dtype=np.int64),
        found=found,
        bail=status[:rows] == bail_code,
        scanned=scanned[:rows].copy(),
        count=count[:rows].copy(),
        total=total[:rows].copy(),
        suggest=(int(facts[4]) - last[:rows]) > int(facts[5]),
        picked_start=picked_start[:rows].copy(),
        picked_pos=picked_pos,
        picked_phys=picked_phys,
        log_files=tuple(FileView(f.start, f.lend()) for f in log_files),
        **compiled.row_context(),
    )
    if len(order) == rows:  # every pull was the kernel's, in order
        return MultiGetResult([None] * rows, np.arange(rows, dtype=np.int64), scanned_rows)
    items: list[GetMessageResult | None] = [None if isinstance(x, int) else x for x in order]
    row = np.array([x if isinstance(x, int) else -1 for x in order], dtype=np.int64)
    return MultiGetResult(items, row, scanned_rows)
