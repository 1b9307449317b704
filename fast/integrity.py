"""Verify a store directory byte by byte: every commit-log record and every consume-queue entry.

RocketMQ checks records only where recovery walks (the last files, or from the checkpoint after a
crash) and serves whatever bytes lie elsewhere. `verify_store` (the `pullspec store verify`
command) and MmapMessageStore.verify walk all of it and report each problem with its file, the
byte position in that file and what is wrong:

- the commit log, record by record from its first file: the magic code, TOTALSIZE against the
  lengths of the record's own fields (LAYOUT-5, LAYOUT-6), PHYSICALOFFSET naming the record's
  place, the body's CRC (LAYOUT-8), sysFlag bits RocketMQ 4.x does not define, negative queue
  ids, queue offsets and reconsume times, host ports outside 0–65535, a topic TopicValidator
  refuses, topic or properties bytes that are not UTF-8; each completed file closed by an
  end-of-file blank of the right length followed by zeros (LAYOUT-7), and only zeros after the
  last record (a torn write leaves other bytes);
- each consume queue, entry by entry: the entry points at the start of a record, in increasing
  commit-log order, of the queue's topic and queue id, whose queue offset is the entry's index,
  whose size is the entry's size and whose tags code is the entry's (FILTER-1, RETRY-8); no
  empty entry inside a completed file, only zeros after the last; entries pointing below the
  commit log's min offset (their file was expired) are not read;
- and back: every record that takes a queue offset (STORE-18) is named by its queue's entry.

File sizes are inferred from the files (the length most of them have). What RocketMQ's format
gives no redundancy for cannot be checked: a changed FLAG, timestamp, host address, the two low
sysFlag bits, or a property other than TAGS (changed to other valid text) goes unnoticed.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import numpy as np

from pullspec.fast.cq_entries import CQ_DTYPE
from pullspec.fast.gather import I64, gather_be
from pullspec.fast.kernels import body_crcs
from pullspec.fast.mapped import MappedFile, list_mapped_files
from pullspec.fast.recovery import Dispatch
from pullspec.fast.recovery_kernels import group_ranges
from pullspec.fast.recovery_kernels import walk as walk_compiled
from pullspec.fast.validate import body_ranges, dispatch_fields, walk_records
from pullspec.spec.config import DEFAULT_MESSAGE_DELAY_LEVEL
from pullspec.spec.delay import parse_delay_levels
from pullspec.spec.errors import CorruptStoreError, InvalidArgumentError
from pullspec.spec.layout import (
    BLANK_MAGIC_CODE,
    CQ_STORE_UNIT_SIZE,
    MESSAGE_MAGIC_CODE,
    PRE_BLANK_ENTRY,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    LayoutRules,
    calc_msg_length,
    validate_topic,
)
from pullspec.spec.profiles import Profile
from pullspec.spec.record import (
    MIN_RECORD_LENGTH,
    OFF_BODY_CRC,
    OFF_PHYSICAL_OFFSET,
    OFF_SYS_FLAG,
)
from pullspec.spec.ruleset import Ruleset

#: The sysFlag bits RocketMQ 4.x defines: compressed, multi tags, the transaction type (two
#: bits), IPv6 born and store hosts.
KNOWN_SYS_FLAGS = 0x3F
_NO_BLANK = (
    "zeros to the end of the file, which no end-of-file blank closes (later files hold records)"
)
_MESSAGE = MESSAGE_MAGIC_CODE.to_bytes(4, "big", signed=True)
_BLANK = BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True)


@attrs.frozen
class Problem:
    """One thing wrong in a store: the file (relative to the store directory), the byte position
    in it and what is wrong there."""

    file: str
    position: int
    what: str

    def to_json(self) -> dict[str, Any]:
        """The problem as a JSON object."""
        return {"file": self.file, "position": self.position, "what": self.what}

    def __str__(self) -> str:
        return f"{self.file}@{self.position}: {self.what}"


@attrs.frozen
class VerifyReport:
    """What `verify_store` read and every problem it found, in file order."""

    store_dir: str
    commit_log_file_size: int
    consume_queue_file_size: int
    commit_log_files: int
    records: int
    consume_queues: int
    entries: int
    problems: tuple[Problem, ...]
    #: Facts worth knowing that are not problems (a crash marker, preallocated files, expiry).
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object."""
        return {
            "store_dir": self.store_dir,
            "ok": self.ok,
            "commit_log_file_size": self.commit_log_file_size,
            "consume_queue_file_size": self.consume_queue_file_size,
            "commit_log_files": self.commit_log_files,
            "records": self.records,
            "consume_queues": self.consume_queues,
            "entries": self.entries,
            "problems": [p.to_json() for p in self.problems],
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """One line: what was read and how many problems were found."""
        found = "no problem" if self.ok else f"{len(self.problems)} problem(s)"
        return (
            f"{self.records} records in {self.commit_log_files} commit-log files of "
            f"{self.commit_log_file_size} bytes, {self.entries} entries in "
            f"{self.consume_queues} consume queues: {found}"
        )


class QueueFiles(NamedTuple):
    """A consume queue to verify: its topic, queue id, files (relative name, mapped file) in
    order, and the byte where its written entries end when known (an open store's), else None
    (found from the files)."""

    topic: str
    queue_id: int
    files: list[tuple[str, MappedFile]]
    end: int | None


class _Records(NamedTuple):
    """Every record the commit-log walk found, sorted by commit-log offset."""

    phys: I64
    size: I64
    queue: I64  # index into names
    queue_offset: I64
    tags: I64
    dispatched: np.ndarray[Any, np.dtype[np.bool_]]
    names: list[tuple[str, int]]


def verify_store(
    store_dir: str | Path,
    profile: Profile = Profile.V4_9,
    delay_levels: tuple[int, ...] | None = None,
) -> VerifyReport:
    """Verify the store directory `store_dir` as it is on disk (it need not open: this reads
    the files read-only, sizes inferred from them). InvalidArgumentError when it is not a store
    (no directory, or neither commitlog/ nor consumequeue/ in it)."""
    root = Path(store_dir)
    if not root.is_dir():
        raise InvalidArgumentError("store_dir", str(store_dir), "no such directory")
    if not (root / "commitlog").is_dir() and not (root / "consumequeue").is_dir():
        raise InvalidArgumentError(
            "store_dir", str(store_dir), "not a store: neither commitlog/ nor consumequeue/"
        )
    problems: list[Problem] = []
    opened: list[MappedFile] = []
    try:
        found = list_mapped_files(root / "commitlog")
        cl_size = _inferred_size([p.stat().st_size for _, p in found], 1 << 30)
        cl_files = _open_all(root, found, cl_size, problems, opened)
        cq_found: list[tuple[str, int, list[tuple[int, Path]]]] = []
        lengths: list[int] = []
        for topic, queue_id, directory in _queue_dirs(root):
            files = list_mapped_files(directory)
            cq_found.append((topic, queue_id, files))
            lengths += [p.stat().st_size for _, p in files]
        cq_size = _inferred_size(lengths, 6_000_000)
        queues = [
            QueueFiles(topic, qid, _open_all(root, files, cq_size, problems, opened), None)
            for topic, qid, files in cq_found
        ]
        notes = []
        if (root / "abort").exists():
            notes.append("abort marker present: the last writer did not close cleanly")
        return verify_files(
            str(root),
            cl_files,
            cl_size,
            None,
            queues,
            cq_size,
            Ruleset.of(profile),
            delay_levels if delay_levels is not None else _DEFAULT_DELAY_LEVELS,
            problems,
            notes,
        )
    finally:
        for f in opened:
            f.close()


_DEFAULT_DELAY_LEVELS = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)


def _queue_dirs(root: Path) -> list[tuple[str, int, Path]]:
    """(topic, queue id, directory) of every consumequeue/<topic>/<queueId>/ in name order."""
    base = root / "consumequeue"
    if not base.is_dir():
        return []
    out = []
    for topic_dir in sorted(base.iterdir()):
        if topic_dir.is_dir():
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.lstrip("-").isdigit():
                    out.append((topic_dir.name, int(queue_dir.name), queue_dir))
    return out


def _inferred_size(lengths: Sequence[int], default: int) -> int:
    """The file size most files have (the largest among equally common ones)."""
    if not lengths:
        return default
    counts = collections.Counter(lengths)
    return max(counts, key=lambda n: (counts[n], n))


def _open_all(
    root: Path,
    found: list[tuple[int, Path]],
    size: int,
    problems: list[Problem],
    opened: list[MappedFile],
) -> list[tuple[str, MappedFile]]:
    """Map the files of one directory read-only; a file of another length than `size` is a
    problem and is not read."""
    out = []
    for start, path in found:
        name = os.path.relpath(path, root)
        length = path.stat().st_size
        if length != size:
            problems.append(Problem(name, 0, f"length {length}, the other files have {size}"))
            continue
        if size == 0:
            continue
        f = MappedFile.open(path, start, size, read_only=True)
        opened.append(f)
        out.append((name, f))
    return out


def verify_files(
    store_dir: str,
    log_files: list[tuple[str, MappedFile]],
    log_file_size: int,
    log_end: int | None,
    queues: list[QueueFiles],
    queue_file_size: int,
    rules: LayoutRules,
    delay_levels: tuple[int, ...],
    problems: list[Problem] | None = None,
    notes: list[str] | None = None,
) -> VerifyReport:
    """Verify mapped commit-log files (relative name, file) of `log_file_size` bytes, in order,
    whose max offset is `log_end` when known (else found: the bytes after the last record are
    zeros), and consume queues of `queue_file_size`-byte files; records are decoded by the
    profile's `rules`."""
    problems = [] if problems is None else problems
    notes = [] if notes is None else notes
    walk = _LogWalk(log_files, log_file_size, log_end, rules, delay_levels, problems, notes)
    records = walk.run()
    entries = 0
    named = np.zeros(len(records.phys), dtype=bool)
    cl_min = log_files[0][1].start if log_files else 0
    for q in queues:
        entries += _check_queue(q, queue_file_size, records, named, cl_min, walk.end, problems)
    _check_named(records, named, walk.file_of, problems)
    problems.sort(key=lambda p: (not p.file.startswith("commitlog"), p.file, p.position))
    return VerifyReport(
        store_dir,
        log_file_size,
        queue_file_size,
        len(log_files),
        len(records.phys),
        len(queues),
        entries,
        tuple(problems),
        tuple(notes),
    )


class _LogWalk:
    """The commit-log pass: records found file by file, problems reported as they are met."""

    def __init__(
        self,
        files: list[tuple[str, MappedFile]],
        file_size: int,
        end: int | None,
        rules: LayoutRules,
        delay_levels: tuple[int, ...],
        problems: list[Problem],
        notes: list[str],
    ) -> None:
        self.files = files
        self.file_size = file_size
        self.known_end = end
        self.end = end if end is not None else (files[-1][1].end if files else 0)
        self.problems = problems
        self.notes = notes
        self.dispatch = Dispatch(rules, delay_levels)
        self._columns: list[tuple[I64, ...]] = []

    def file_of(self, phys: int) -> tuple[str, int]:
        """(file name, position in it) of commit-log byte `phys`."""
        for name, f in self.files:
            if f.start <= phys < f.end:
                return name, phys - f.start
        return "commitlog", phys

    def problem(self, name: str, pos: int, what: str) -> None:
        self.problems.append(Problem(name, pos, what))

    def run(self) -> _Records:
        expected = None
        for i, (name, f) in enumerate(self.files):
            if f.start % self.file_size:
                self.problem(name, 0, f"starts at {f.start}, not a multiple of {self.file_size}")
            if expected is not None and f.start != expected:
                self.problem(name, 0, f"commit-log files missing from {expected} to {f.start}")
            expected = f.end
            if self.known_end is not None and f.start >= self.known_end and f.start > 0:
                break
            if self._walk_file(i, name, f):
                break
        return self._records()

    def _limit(self, f: MappedFile) -> int:
        if self.known_end is None:
            return f.size
        return max(0, min(f.size, self.known_end - f.start))

    def _walk_file(self, i: int, name: str, f: MappedFile) -> bool:
        """Walk one file; True when the log ends in it."""
        data, limit, pos = f.data, self._limit(f), 0
        found: list[I64] = []
        while pos < limit:
            walked = walk_compiled(data, pos, limit, f.start)
            if walked is not None:
                positions, stop, how = walked.positions, walked.end, walked.how
            else:
                listed, stop, how = walk_records(f.mm, pos, limit, f.start, limit + 1)
                positions = np.array(listed, dtype=np.int64)
            found.append(positions)
            pos = stop
            if how == 1:  # an end-of-file blank
                self._check_blank(name, f, pos)
                pos = f.size
                break
            if pos >= limit:
                break
            if not data[pos:limit].any():
                if self.known_end is not None:
                    self.problem(name, pos, f"zeros from here, the max offset is {self.end}")
                    break
                if not any(g.data.any() for _, g in self.files[i + 1 :]):
                    self.end = f.start + pos  # the log ends here; later files are preallocated
                    later = len(self.files) - i - 1
                    if later:
                        self.notes.append(f"{later} all-zero commit-log file(s) after the last")
                    self._file_records(name, f, found)
                    return True
                self.problem(name, pos, _NO_BLANK)
                break
            if not data[pos : pos + 8].any():
                at = pos + int(np.argmax(data[pos:limit] != 0))
                self.problem(name, pos, f"after the last record, bytes are not zero from {at}")
                break
            what, next_pos = _diagnose(f, pos, limit)
            self.problem(name, pos, what)
            if next_pos is not None:  # only a field is wrong: the record itself is in place
                found.append(np.array([pos], dtype=np.int64))
                pos = next_pos
                continue
            resumed = _resync(f, pos, limit, self.file_size)
            if resumed is None:
                self.problem(name, pos, f"no record or blank found after this to byte {limit}")
                break
            self.problem(name, pos, f"{resumed - pos} bytes skipped up to the next record")
            pos = resumed
        if self.known_end is not None and f.start <= self.known_end <= f.end:
            self._file_records(name, f, found)
            return True
        if i == len(self.files) - 1 and self.known_end is None and pos >= limit:
            self.end = f.end
        self._file_records(name, f, found)
        return False

    def _check_blank(self, name: str, f: MappedFile, pos: int) -> None:
        size = int(gather_be(f.data, np.array([pos]), 4)[0])
        if size != f.size - pos:
            self.problem(name, pos, f"end-of-file blank of {size} bytes, {f.size - pos} are left")
        rest = f.data[pos + 8 :]
        if rest.any():
            at = pos + 8 + int(np.argmax(rest != 0))
            self.problem(name, at, "bytes after the end-of-file blank are not zero")

    def _file_records(self, name: str, f: MappedFile, found: list[I64]) -> None:
        """Check the fields of every record found in one file and keep them for the queues."""
        pos = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        if len(pos) == 0:
            return
        data = f.data
        stored = gather_be(data, pos + OFF_BODY_CRC, 4)
        body_at, body_len = body_ranges(data, pos)
        ok = (body_len >= 0) & (body_at + body_len <= len(data))
        crc = np.full(len(pos), -1, dtype=np.int64)
        crc[ok] = body_crcs(data, body_at[ok], body_len[ok])
        for k in np.flatnonzero(crc != stored).tolist():
            self.problem(
                name,
                int(pos[k]),
                f"BODYCRC {int(stored[k])} but the body's CRC is {int(crc[k])}",
            )
        fields = dispatch_fields(f, pos)
        flags, qid, qoff = fields["sys_flag"], fields["queue_id"], fields["queue_offset"]
        born_len = np.where(flags & SYSFLAG_BORNHOST_V6, 20, 8)
        store_len = np.where(flags & SYSFLAG_STOREHOST_V6, 20, 8)
        store_host_at = pos + 48 + born_len + 8
        born_port = gather_be(data, pos + 48 + born_len - 4, 4)
        store_port = gather_be(data, store_host_at + store_len - 4, 4)
        reconsume = gather_be(data, store_host_at + store_len, 4)
        checks = (
            (flags & ~KNOWN_SYS_FLAGS != 0, "sysFlag", flags, "sets bits RocketMQ 4.x does not use"),
            (qid < 0, "QUEUEID", qid, "is negative"),
            (qoff < 0, "QUEUEOFFSET", qoff, "is negative"),
            ((born_port < 0) | (born_port > 65535), "born host port", born_port, "is not a port"),
            ((store_port < 0) | (store_port > 65535), "store host port", store_port,
             "is not a port"),
            (reconsume < 0, "RECONSUMETIMES", reconsume, "is negative"),
        )  # fmt: skip
        for bad, field, values, why in checks:
            for k in np.flatnonzero(bad).tolist():
                self.problem(name, int(pos[k]), f"{field} {int(values[k])} {why}")
        self._check_text(name, f, pos, fields)
        try:
            numbers = self.dispatch.queue_numbers(f, fields)
            tags = self.dispatch.tags_codes(f, pos, fields, numbers)
        except (CorruptStoreError, ValueError, UnicodeError) as exc:  # a schedule record
            self.problem(name, int(pos[0]), f"records cannot be decoded: {exc}")
            return
        kind = flags & 0xC
        self._columns.append(
            (pos + f.start, fields["size"], numbers, qoff, tags, (kind == 0) | (kind == 8))
        )

    def _check_text(self, name: str, f: MappedFile, pos: I64, fields: dict[str, I64]) -> None:
        """Topics TopicValidator accepts, topics and properties that are UTF-8."""
        for at, length, what in _TEXTS:
            groups, first = group_ranges(f.data, fields[at], fields[length])
            for g, k in enumerate(first.tolist()):
                start, n = int(fields[at][k]), int(fields[length][k])
                raw = bytes(f.mm[start : start + n])
                try:
                    text = raw.decode("utf-8")
                    why = validate_topic(text) if what == "topic" else None
                except UnicodeDecodeError:
                    why = "are not UTF-8" if what == "properties" else "is not UTF-8"
                if why:
                    for m in np.flatnonzero(groups == g).tolist():
                        self.problem(name, int(pos[m]), f"{what} {raw!r}: {why}")

    def _records(self) -> _Records:
        names = self.dispatch.names
        if not self._columns:
            empty = np.zeros(0, dtype=np.int64)
            return _Records(empty, empty, empty, empty, empty, empty.astype(bool), names)
        cols = [np.concatenate([c[k] for c in self._columns]) for k in range(6)]
        order = np.argsort(cols[0], kind="stable")
        phys, size, queue, qoff, tags, dispatched = (c[order] for c in cols)
        return _Records(phys, size, queue, qoff, tags, dispatched.astype(bool), names)


_TEXTS = (("topic_at", "topic_len", "topic"), ("props_at", "props_len", "properties"))


def _be(f: MappedFile, pos: int, width: int) -> int:
    return int.from_bytes(f.mm[pos : pos + width], "big", signed=True)


def _diagnose(f: MappedFile, pos: int, limit: int) -> tuple[str, int | None]:
    """What is wrong with the bytes at `pos` where the walk stopped, and where the record ends
    when only a field that does not move its boundaries is wrong (else None)."""
    if limit - pos < 8:
        return f"{limit - pos} bytes, too few for a record", None
    size, magic = _be(f, pos, 4), _be(f, pos + 4, 4)
    if magic != MESSAGE_MAGIC_CODE:
        return f"magic code 0x{magic & 0xFFFFFFFF:08X} is neither a message's nor a blank's", None
    if size < MIN_RECORD_LENGTH or pos + size > limit:
        return f"TOTALSIZE {size} does not fit: {limit - pos} bytes are left", None
    flags = _be(f, pos + OFF_SYS_FLAG, 4)
    body_at = pos + 84 + (12 if flags & SYSFLAG_BORNHOST_V6 else 0)
    body_at += 12 if flags & SYSFLAG_STOREHOST_V6 else 0
    if body_at + 4 > pos + size:
        return f"TOTALSIZE {size} is too short for its header", None
    body = _be(f, body_at, 4)
    topic_at = body_at + 4 + max(body, 0)
    if body < 0 or topic_at + 3 > pos + size:
        return f"BODYLENGTH {body} does not fit TOTALSIZE {size}", None
    topic = f.mm[topic_at]
    props_at = topic_at + 1 + topic
    if topic > 127 or props_at + 2 > pos + size:
        return f"topic length {topic} does not fit TOTALSIZE {size}", None
    props = _be(f, props_at, 2)
    computed = calc_msg_length(flags, body, topic, max(props, 0))
    if computed != size:
        return f"TOTALSIZE {size} but its fields add up to {computed}", None
    stamped = _be(f, pos + OFF_PHYSICAL_OFFSET, 8)
    if stamped != f.start + pos:
        return f"PHYSICALOFFSET {stamped} is not the record's offset {f.start + pos}", pos + size
    return "not a well-formed record", None


def _resync(f: MappedFile, pos: int, limit: int, file_size: int) -> int | None:
    """The first place after `pos` where a record (its magic code, and a PHYSICALOFFSET naming
    that place) or an end-of-file blank reaching the end of the file starts; None if none does."""
    p = pos + 1
    while p + 8 <= limit:
        m = f.mm.find(_MESSAGE, p + 4, limit)
        b = f.mm.find(_BLANK, p + 4, limit)
        candidates = [c - 4 for c in (m, b) if c >= 0]
        if not candidates:
            return None
        c = min(candidates)
        stamped_at = c + OFF_PHYSICAL_OFFSET
        if c == m - 4 and stamped_at + 8 <= limit and _be(f, stamped_at, 8) == f.start + c:
            return c
        if c == b - 4 and _be(f, c, 4) == file_size - c:
            return c
        p = c + 1
    return None


def _check_queue(
    q: QueueFiles,
    file_size: int,
    records: _Records,
    named: np.ndarray[Any, np.dtype[np.bool_]],
    cl_min: int,
    log_end: int,
    problems: list[Problem],
) -> int:
    """Check one consume queue's entries against the records; mark the records they name.
    Returns the number of written entries."""
    entries = 0
    units = file_size // CQ_STORE_UNIT_SIZE
    expected: int | None = None
    last_phys = -1
    key = (q.topic, q.queue_id)
    for n, (name, f) in enumerate(q.files):
        if f.start % file_size:
            problems.append(Problem(name, 0, f"starts at {f.start}, not a multiple of {file_size}"))
        if expected is not None and f.start != expected:
            problems.append(Problem(name, 0, f"files missing from byte {expected} of the queue"))
        expected = f.end
        view = np.frombuffer(f.mm, dtype=CQ_DTYPE)[:units]
        phys = view["phys"].astype(np.int64)
        size = view["size"].astype(np.int64)
        tags = view["tags"].astype(np.int64)
        last = n == len(q.files) - 1
        if q.end is not None:
            count = max(0, min(units, (q.end - f.start) // CQ_STORE_UNIT_SIZE))
        else:
            empty = (phys < 0) | (size <= 0)
            count = int(np.argmax(empty)) if empty.any() else units
            if count < units and not last:
                problems.append(
                    Problem(name, count * 20, "an empty entry inside a file that is not the last")
                )
            elif count < units:
                rest = np.frombuffer(f.mm, dtype=np.uint8)[count * 20 :]
                if rest.any():
                    at = count * 20 + int(np.argmax(rest != 0))
                    at -= at % CQ_STORE_UNIT_SIZE
                    problems.append(
                        Problem(name, at, "an entry after the last written one is not zero")
                    )
        first_index = f.start // CQ_STORE_UNIT_SIZE
        k = 0
        if n == 0:  # LAYOUT-3: a queue first written at an index > 0 starts with pre-blanks
            pre = (phys == PRE_BLANK_ENTRY[0]) & (size == PRE_BLANK_ENTRY[1])
            pre &= tags == PRE_BLANK_ENTRY[2]
            while k < count and pre[k]:
                k += 1
        for j in range(k, count):
            entries += 1
            p, s, t = int(phys[j]), int(size[j]), int(tags[j])
            where, at = name, j * CQ_STORE_UNIT_SIZE
            index = first_index + j
            if p <= last_phys:
                problems.append(
                    Problem(where, at, f"entry {index} points at {p}, not after the entry before")
                )
            if p < cl_min:
                # Expired: only entries before the first live one may point below the min.
                if last_phys >= cl_min:
                    why = f"entry {index} points at {p}, below the commit log's min {cl_min}"
                    problems.append(Problem(where, at, why))
                last_phys = max(last_phys, p)
                continue
            last_phys = max(last_phys, p)
            r = int(np.searchsorted(records.phys, p))
            if r >= len(records.phys) or int(records.phys[r]) != p:
                why = "past the end of the commit log" if p >= log_end else "where no record starts"
                problems.append(Problem(where, at, f"entry {index} points at {p}, {why}"))
                continue
            wrong = []
            if records.names[int(records.queue[r])] != key:
                topic, qid = records.names[int(records.queue[r])]
                wrong.append(f"a record of {topic}/{qid}")
            if int(records.queue_offset[r]) != index:
                wrong.append(f"a record of queue offset {int(records.queue_offset[r])}")
            if int(records.size[r]) != s:
                wrong.append(f"a record of {int(records.size[r])} bytes, the entry says {s}")
            if int(records.tags[r]) != t:
                wrong.append(f"a record of tags code {int(records.tags[r])}, the entry says {t}")
            if not records.dispatched[r]:
                wrong.append("a record that takes no queue offset (a prepared transaction)")
            if wrong:
                problems.append(
                    Problem(where, at, f"entry {index} points at {p}: " + "; ".join(wrong))
                )
            else:
                named[r] = True
    return entries


def _check_named(
    records: _Records,
    named: np.ndarray[Any, np.dtype[np.bool_]],
    file_of: Any,
    problems: list[Problem],
) -> None:
    """Every record that takes a queue offset is named by its queue's entry."""
    for r in np.flatnonzero(records.dispatched & ~named).tolist():
        topic, qid = records.names[int(records.queue[r])]
        name, pos = file_of(int(records.phys[r]))
        problems.append(
            Problem(
                name,
                pos,
                f"no consume-queue entry names this record ({topic}/{qid} offset "
                f"{int(records.queue_offset[r])})",
            )
        )
