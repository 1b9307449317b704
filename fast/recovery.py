"""Recovery on open: validate the commit log from a known-good point, cut a torn tail, drop
consume-queue entries beyond it and rebuild the ones missing (CommitLog.recoverNormally /
recoverAbnormally, ConsumeQueue.recover, ReputMessageService).

Header checks run vectorized over the record positions the consume queues already name (a chain
of TOTALSIZEs is confirmed with one numpy pass); only records the queues do not name are walked
one by one. BODYCRC is checked per record when check_crc_on_recover is set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs
import numpy as np

from fast.commitlog import CommitLog
from fast.consumequeue import ConsumeQueue
from fast.gather import I64, gather_be, member_of, sorted_unique
from fast.mapped import MappedFile
from fast.validate import check_crcs, dispatch_fields, walk_file
from spec.delay import SCHEDULE_TOPIC
from spec.errors import CorruptStoreError
from spec.filter import tags_string_to_tags_code
from spec.layout import (
    MESSAGE_MAGIC_CODE,
    commit_log_file_start,
    string_to_message_properties,
)
from spec.profiles import Profile
from spec.record import (
    check_record,
    parse_record,
    store_timestamp_offset,
)


@attrs.frozen
class RecoveryReport:
    """What recovery found and did."""

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
    return sorted_unique(np.concatenate(parts))


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
    profile: Profile,
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
        local = hints[(hints >= f.start) & (hints < f.end)] - f.start
        found, stop, blank = walk_file(f, pos0, limit, local)
        if check_crc and len(found):
            ok = check_crcs(f, found)
            if ok < len(found):
                stop, blank = int(found[ok]), False
                found = found[:ok]
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
    rebuilt = _rebuild(
        log, queues, make_queue, positions, hints[hints < cut], profile, delay_levels
    )
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


def _rebuild(
    log: CommitLog,
    queues: dict[tuple[str, int], ConsumeQueue],
    make_queue: Callable[[str, int], ConsumeQueue],
    positions: list[tuple[MappedFile, I64]],
    hints: I64,
    profile: Profile,
    delay_levels: tuple[int, ...],
) -> int:
    """Dispatch the validated records no consume-queue entry names (ReputMessageService)."""
    keys: dict[tuple[bytes, int], int] = {}  # (raw topic, queue id) → queue number
    names: list[tuple[str, int]] = []
    codes: dict[bytes, int] = {}
    columns: list[tuple[I64, ...]] = []
    for f, pos in positions:
        missing = pos[~member_of(pos + f.start, hints)]
        fields = dispatch_fields(f, missing)
        # Prepared and rolled-back records take no queue entry (STORE-18).
        kept = (fields["sys_flag"] & 0xC) % 8 == 0
        missing = missing[kept]
        fields = {k: v[kept] for k, v in fields.items()}
        if len(missing) == 0:
            continue
        mm = f.mm
        numbers: list[int] = []
        tags: list[int] = []
        for p, qid, ta, tl, pa, pl in zip(
            missing.tolist(),
            fields["queue_id"].tolist(),
            fields["topic_at"].tolist(),
            fields["topic_len"].tolist(),
            fields["props_at"].tolist(),
            fields["props_len"].tolist(),
            strict=True,
        ):
            raw = (mm[ta : ta + tl], qid)
            number = keys.get(raw)
            if number is None:
                number = keys[raw] = len(names)
                names.append((raw[0].decode("utf-8", "replace"), qid))
            numbers.append(number)
            if names[number][0] == SCHEDULE_TOPIC:  # the code is a delivery time (RETRY-8)
                tags.append(parse_record(mm, p).to_stored_message(profile, delay_levels).tags_code)
                continue
            raw_props = mm[pa : pa + pl]
            code = codes.get(raw_props)
            if code is None:
                props = string_to_message_properties(raw_props.decode("utf-8", "replace"), profile)
                code = codes[raw_props] = tags_string_to_tags_code(dict(props).get("TAGS"))
            tags.append(code)
        columns.append(
            (
                np.array(numbers, dtype=np.int64),
                fields["queue_offset"],
                missing + f.start,
                fields["size"],
                np.array(tags, dtype=np.int64),
            )
        )
    if not columns:
        return 0
    number_col, offset_col, phys_col, size_col, tags_col = (
        np.concatenate([c[k] for c in columns]) for k in range(5)
    )
    order = np.argsort(number_col, kind="stable")
    bounds = np.searchsorted(number_col[order], np.arange(len(names) + 1))
    pending = {
        names[n]: np.stack(
            [
                col[order[bounds[n] : bounds[n + 1]]]
                for col in (offset_col, phys_col, size_col, tags_col)
            ],
            axis=1,
        )
        for n in range(len(names))
    }
    rebuilt = 0
    for key, table in pending.items():
        q = queues.get(key)
        if q is None:
            q = queues[key] = make_queue(*key)
        table = table[table[:, 1] + table[:, 2] > q.max_physic_offset]
        _, max_offset = q.min_max()
        if q.files:
            table = table[table[:, 0] >= max_offset]
        if len(table) == 0:
            continue
        index = table[:, 0]
        expected = max_offset if q.files else int(index[0])
        if index[0] != expected or not np.all(np.diff(index) == 1):
            raise CorruptStoreError(
                str(q.directory),
                f"records from {int(table[0, 1])} do not continue the queue at offset "
                f"{expected}: consume-queue entries are missing",
            )
        q.append(expected, table[:, 1], table[:, 2], table[:, 3])
        rebuilt += len(table)
    return rebuilt
