"""Recovery on open: validate the commit log from a known-good point, cut a torn tail, drop
consume-queue entries beyond it and rebuild the ones missing (CommitLog.recoverNormally /
recoverAbnormally, ConsumeQueue.recover, ReputMessageService).

With numba (fast.recovery_kernels) each file is walked record by record in one compiled pass;
without it, header checks run vectorized over the positions the consume queues already name and
only the records they do not name are walked in Python. BODYCRCs, when check_crc_on_recover is
set, are computed for all the walked records at once (fast.kernels.body_crcs). Records to
dispatch are grouped by topic and properties bytes, so each distinct string is decoded once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs
import numpy as np
import numpy.typing as npt

from pullspec.fast.commitlog import CommitLog
from pullspec.fast.consumequeue import ConsumeQueue
from pullspec.fast.gather import I64, gather_be, member_of, sorted_unique
from pullspec.fast.mapped import MappedFile
from pullspec.fast.recovery_kernels import group_ranges
from pullspec.fast.validate import dispatch_fields, scan_file
from pullspec.spec.delay import SCHEDULE_TOPIC
from pullspec.spec.errors import CorruptStoreError
from pullspec.spec.filter import tags_string_to_tags_code
from pullspec.spec.layout import MESSAGE_MAGIC_CODE, LayoutRules, commit_log_file_start
from pullspec.spec.record import (
    check_record,
    parse_record,
    store_timestamp_offset,
)


@attrs.frozen
class RecoveryReport:
    """What recovery found and did: whether the last run ended without closing (the `abort`
    file), the commit-log range validated, and what was cut or rebuilt. A store's is
    `MmapMessageStore.recovery`.

    >>> report = RecoveryReport(False, 0, 376, 4, 376, False, 0, 0)
    >>> report.records_validated, report.torn_tail
    (4, False)
    """

    abnormal: bool
    start: int
    end: int
    records_validated: int
    bytes_validated: int
    torn_tail: bool
    dropped_entries: int
    rebuilt_entries: int


def abnormal_start(log: CommitLog, min_timestamp: int, dispatched: int | None) -> int:
    """Where abnormal recovery starts: the checkpoint's dispatched offset when it is present and
    inside the log, else the last file whose first record was stored no later than the
    checkpoint (CommitLog.isMappedFileMatchedRecover), else the first file."""
    if dispatched is not None and log.files and log.files[0].start <= dispatched:
        return min(dispatched, log.files[-1].end)
    for f in reversed(log.files):
        ts_at = store_timestamp_offset(int(gather_be(f.data, np.array([36]), 4)[0]))
        magic = int(gather_be(f.data, np.array([4]), 4)[0])
        ts = int(gather_be(f.data, np.array([ts_at]), 8)[0])
        if magic == MESSAGE_MAGIC_CODE and ts != 0 and ts <= min_timestamp:
            return f.start
    return log.files[0].start if log.files else 0


def queue_hints(queues: Iterable[ConsumeQueue], lo: int) -> I64:
    """Every phys ≥ `lo` the consume queues name, sorted and unique."""
    parts = []
    for q in queues:
        for i in range(len(q.files) - 1, -1, -1):
            n = q.readable(i) // 20
            phys = q.views[i]["phys"][:n].astype(np.int64)
            parts.append(phys[phys >= lo])
            if n and phys[0] < lo:
                break
    if not parts:
        return np.zeros(0, dtype=np.int64)
    hints = np.concatenate(parts[::-1])
    if len(hints) > 1 and (hints[1:] > hints[:-1]).all():
        return hints  # one queue's entries in order: nothing to sort (the common case)
    return sorted_unique(hints)


def recover(
    log: CommitLog,
    queues: dict[tuple[str, int], ConsumeQueue],
    make_queue: Callable[[str, int], ConsumeQueue],
    *,
    abnormal: bool,
    checkpoint_min_timestamp: int,
    checkpoint_offset: int | None,
    check_crc: bool,
    repair: bool,
    rules: LayoutRules,
    delay_levels: tuple[int, ...] = (),
) -> RecoveryReport:
    """Validate, truncate and rebuild; CorruptStoreError when intact records follow a bad one
    (unless `repair`, which truncates there as RocketMQ does)."""
    for q in queues.values():
        q.recover()
    if not log.files:
        for q in queues.values():
            q.truncate_dirty(0)
        return RecoveryReport(abnormal, 0, 0, 0, 0, False, 0, 0)
    cl_min = log.files[0].start
    if abnormal:
        validate_from = abnormal_start(log, checkpoint_min_timestamp, checkpoint_offset)
    else:
        validate_from = log.files[max(len(log.files) - 3, 0)].start
    marks = [q.max_physic_offset for q in queues.values() if q.max_physic_offset >= 0]
    watermark = max([cl_min, *marks])
    damaged = [max(q.max_physic_offset, cl_min) for q in queues.values() if q.repaired]
    start = max(
        commit_log_file_start(min(validate_from, watermark, *damaged), log.file_size), cl_min
    )
    hints = queue_hints(queues.values(), start)
    first = (start - cl_min) // log.file_size
    positions: list[tuple[MappedFile, I64]] = []
    end = start
    for i in range(first, len(log.files)):
        f = log.files[i]
        limit = log.file_size
        pos0 = max(start - f.start, 0)
        lo, hi = np.searchsorted(hints, (f.start, f.end))
        found, stop, blank = scan_file(f, pos0, limit, hints[lo:hi] - f.start, check_crc)
        positions.append((f, found))
        end = f.start + stop
        if not blank or i == len(log.files) - 1:
            break
        end = f.end
    _check_tail(log, queues, end, hints, repair)
    torn = _torn(log, end)
    # After a crash every entry from the checkpoint on is rebuilt from the validated records,
    # so an entry torn mid-write (right phys and size, half a tags code) cannot survive.
    cut = min(validate_from, end) if abnormal else end
    dropped = _truncate(log, queues, end, cut)
    rebuilt = _rebuild(log, queues, make_queue, positions, hints[hints < cut], rules, delay_levels)
    n = sum(len(p) for _, p in positions)
    return RecoveryReport(abnormal, start, end, n, end - start, torn, dropped, rebuilt)


def _torn(log: CommitLog, end: int) -> bool:
    """Whether bytes were written past `end`: a record cut short, or garbage."""
    f = log.file_of(end)
    if f is None:
        return False
    pos = end - f.start
    return bool(f.data[pos : pos + 64].any())


def _check_tail(
    log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue], end: int, hints: I64, repair: bool
) -> None:
    """Refuse to cut the log at `end` when an intact record the queues name lies beyond it, or a
    later file holds a record: that is corruption in the middle, not a torn tail."""
    if repair:
        return
    later = hints[hints > end]
    for phys in later[:16].tolist():
        f = log.file_of(phys)
        if f is not None and check_record(f.mm, phys - f.start, True) > 0:
            raise CorruptStoreError(
                str(log.directory), f"bad record at {end}, intact records after it (at {phys})"
            )
    for f in log.files:
        if f.start > end and check_record(f.mm, 0, True) > 0:
            raise CorruptStoreError(
                str(log.directory), f"bad record at {end}, intact file {f.start} after it"
            )


def _truncate(
    log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue], end: int, cut: int
) -> int:
    before = sum(q.min_max()[1] for q in queues.values())
    log.truncate(end)
    for q in queues.values():
        q.truncate_dirty(cut)
    return before - sum(q.min_max()[1] for q in queues.values())


def _missing(phys: I64, hints: I64) -> npt.NDArray[np.bool_]:
    """Which of the sorted record offsets `phys` no consume-queue entry names."""
    lo, hi = np.searchsorted(hints, (phys[0], phys[-1] + 1)) if len(phys) else (0, 0)
    if hi - lo == len(phys) and np.array_equal(hints[lo:hi], phys):
        return np.zeros(len(phys), dtype=bool)  # every record named: the clean reopen
    return ~member_of(phys, hints[lo:hi])


def _first_appearance(key: I64) -> tuple[I64, I64]:
    """Group equal keys: (group of each key, first index of each group), groups numbered in order
    of first appearance."""
    if len(key) == 0 or (key == key[0]).all():
        return np.zeros(len(key), dtype=np.int64), np.zeros(min(len(key), 1), dtype=np.int64)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], first[order]


class Dispatch:
    """Queue numbers and tags codes of the records to dispatch, each distinct topic string and
    each distinct properties string decoded once (by the profile's `rules`)."""

    def __init__(self, rules: LayoutRules, delay_levels: tuple[int, ...]) -> None:
        self.rules = rules
        self.delay_levels = delay_levels
        self.numbers: dict[tuple[bytes, int], int] = {}  # (raw topic, queue id) → queue number
        self.names: list[tuple[str, int]] = []
        self.codes: dict[bytes, int] = {}  # raw properties → tags code

    def queue_numbers(self, f: MappedFile, fields: dict[str, I64]) -> I64:
        """The queue number of every record, queues numbered in order of first appearance."""
        topic, _ = group_ranges(f.data, fields["topic_at"], fields["topic_len"])
        qid = fields["queue_id"]
        inverse, first = _first_appearance((topic << 32) | (qid & 0xFFFFFFFF))
        lut = np.empty(len(first), dtype=np.int64)
        for g, k in enumerate(first.tolist()):
            at, n = int(fields["topic_at"][k]), int(fields["topic_len"][k])
            raw = (bytes(f.mm[at : at + n]), int(qid[k]))
            number = self.numbers.get(raw)
            if number is None:
                number = self.numbers[raw] = len(self.names)
                self.names.append((raw[0].decode("utf-8", "replace"), raw[1]))
            lut[g] = number
        return lut[inverse]

    def tags_codes(self, f: MappedFile, pos: I64, fields: dict[str, I64], numbers: I64) -> I64:
        """The tags code of every record (RETRY-8: a delivery time on the schedule topic)."""
        props, first = group_ranges(f.data, fields["props_at"], fields["props_len"])
        lut = np.empty(len(first), dtype=np.int64)
        for g, k in enumerate(first.tolist()):
            at, n = int(fields["props_at"][k]), int(fields["props_len"][k])
            raw = bytes(f.mm[at : at + n])
            code = self.codes.get(raw)
            if code is None:
                text = self.rules.string_to_message_properties(raw.decode("utf-8", "replace"))
                code = self.codes[raw] = tags_string_to_tags_code(dict(text).get("TAGS"))
            lut[g] = code
        tags = lut[props]
        schedule = [n for n, (topic, _) in enumerate(self.names) if topic == SCHEDULE_TOPIC]
        if schedule:
            for k in np.flatnonzero(np.isin(numbers, schedule)).tolist():
                stored = parse_record(f.mm, int(pos[k])).to_stored_message(
                    self.rules, self.delay_levels
                )
                tags[k] = stored.tags_code
        return tags


def _rebuild(
    log: CommitLog,
    queues: dict[tuple[str, int], ConsumeQueue],
    make_queue: Callable[[str, int], ConsumeQueue],
    positions: list[tuple[MappedFile, I64]],
    hints: I64,
    rules: LayoutRules,
    delay_levels: tuple[int, ...],
) -> int:
    """Dispatch the validated records no consume-queue entry names (ReputMessageService)."""
    dispatch = Dispatch(rules, delay_levels)
    columns: list[tuple[I64, ...]] = []
    for f, pos in positions:
        missing = pos[_missing(pos + f.start, hints)]
        if len(missing) == 0:
            continue
        fields = dispatch_fields(f, missing)
        # Prepared and rolled-back records take no queue entry (STORE-18).
        kept = (fields["sys_flag"] & 0xC) % 8 == 0
        if not kept.all():
            missing = missing[kept]
            fields = {k: v[kept] for k, v in fields.items()}
        if len(missing) == 0:
            continue
        numbers = dispatch.queue_numbers(f, fields)
        tags = dispatch.tags_codes(f, missing, fields, numbers)
        columns.append((numbers, fields["queue_offset"], missing + f.start, fields["size"], tags))
    if not columns:
        return 0
    number_col, offset_col, phys_col, size_col, tags_col = (
        np.concatenate([c[k] for c in columns]) for k in range(5)
    )
    names = dispatch.names
    if len(names) == 1:
        order, bounds = None, np.array([0, len(number_col)])
    else:
        order = np.argsort(number_col, kind="stable")
        bounds = np.searchsorted(number_col[order], np.arange(len(names) + 1))
    rebuilt = 0
    for n, key in enumerate(names):
        part = slice(int(bounds[n]), int(bounds[n + 1]))
        sel = order[part] if order is not None else part
        index, phys, size, tags = (col[sel] for col in (offset_col, phys_col, size_col, tags_col))
        q = queues.get(key)
        if q is None:
            q = queues[key] = make_queue(*key)
        keep = phys + size > q.max_physic_offset
        _, max_offset = q.min_max()
        if q.files:
            keep &= index >= max_offset
        if not keep.all():
            index, phys, size, tags = index[keep], phys[keep], size[keep], tags[keep]
        if len(index) == 0:
            continue
        expected = max_offset if q.files else int(index[0])
        if index[0] != expected or not np.all(np.diff(index) == 1):
            raise CorruptStoreError(
                str(q.directory),
                f"records from {int(phys[0])} do not continue the queue at offset "
                f"{expected}: consume-queue entries are missing",
            )
        q.append(expected, phys, size, tags)
        rebuilt += len(index)
    return rebuilt
