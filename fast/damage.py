"""Refusing damaged bytes at read, where it costs little (issue 17): RocketMQ serves whatever the
files hold; the fast store raises CorruptStoreError naming what it found.

- A record is decoded only when a message is read (fast.results): its body's CRC is checked
  then (LAYOUT-8), a few hundred nanoseconds beside the decoding itself.
- A consume-queue entry whose record is not readable sends a pull to the entry-by-entry scan
  (fast.read_numpy). There an entry that points inside the live commit log (at or above its min,
  below its max) at bytes that are not a record of the entry's size is damage, not an expired
  record: the pull is refused, naming the entry, instead of answering MESSAGE_WAS_REMOVING and
  skipping the rest of the file as RocketMQ does.

`pullspec store verify` (fast.integrity) checks everything else.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from pullspec.spec.errors import CorruptStoreError
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE, PRE_BLANK_ENTRY, LayoutRules
from pullspec.spec.message import StoredMessage
from pullspec.spec.record import decode_record

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer as Buffer

    from pullspec.fast.commitlog import CommitLog, LogView
    from pullspec.fast.consumequeue import ConsumeQueue, Window


def decode_checked(
    buf: Buffer, pos: int, rules: LayoutRules, delay_levels: tuple[int, ...] | None
) -> StoredMessage:
    """spec.record.decode_record (by the profile's `rules`), refusing a record whose body does
    not match its BODYCRC."""
    m = decode_record(buf, pos, rules, delay_levels)
    crc = zlib.crc32(m.body) & 0x7FFFFFFF
    if crc != m.body_crc:
        raise CorruptStoreError(
            f"commit log offset {m.commitlog_offset}",
            f"BODYCRC {m.body_crc} but the body's CRC is {crc}: the record is damaged",
        )
    return m


def refuse_damaged_entry(
    log: CommitLog, log_view: LogView, q: ConsumeQueue, window: Window, k: int
) -> None:
    """Raise CorruptStoreError when entry `k` of `window` (not readable as a record of its size)
    points inside the live commit log: damage, not an expired or unwritten record."""
    entry = window.view[window.first + k]
    phys, size = int(entry["phys"]), int(entry["size"])
    end, files = log_view
    if not files or not files[0].start <= phys < end:
        return  # expired (its file was deleted) or not written: RocketMQ's answer stands
    if (phys, size, int(entry["tags"])) == PRE_BLANK_ENTRY:
        return  # LAYOUT-3's filler, readable when the min is recomputed as 0: not damage
    actual = log.is_record_start(phys, log_view)
    found = f"a record of {actual} bytes" if actual else "no record"
    index = (window.start // CQ_STORE_UNIT_SIZE) + window.first + k
    raise CorruptStoreError(
        f"{q.directory}/{window.start:020d}",
        f"entry {index} (byte {(window.first + k) * CQ_STORE_UNIT_SIZE}) names {size} bytes at "
        f"commit-log offset {phys}, where {found} starts: the consume queue is damaged",
    )
