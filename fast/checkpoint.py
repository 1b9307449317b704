"""The store checkpoint file (RocketMQ's StoreCheckpoint): one 4096-byte page holding
physicMsgTimestamp, logicsMsgTimestamp and indexMsgTimestamp as big-endian int64 at 0, 8, 16.

pullspec's fast store also writes, at byte 24, the 8-byte marker `PSFAST01` followed by the
commit-log offset through which every record was flushed and dispatched. RocketMQ reads only the
first 24 bytes, so the file stays readable by a broker; recovery prefers the offset when present
because store timestamps need not grow when the injected clock moves backwards.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

CHECKPOINT_SIZE = 4096
EXTENSION_MAGIC = b"PSFAST01"
_TIMESTAMPS = struct.Struct(">qqq")
_EXTENSION = struct.Struct(">8sq")


class Checkpoint:
    """The checkpoint of one store directory; all zeros when the file is absent (as it is when
    `fresh`: the directory was just made)."""

    def __init__(
        self, path: Path, read_only: bool, fresh: bool = False, volatile: bool = False
    ) -> None:
        self.path = path
        #: On a RAM filesystem: the page is not msynced (fast.mapped.on_ram_filesystem).
        self.volatile = volatile
        self.read_only = read_only
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.dispatched_offset: int | None = None
        self._mm: mmap.mmap | None = None
        if not fresh and path.exists():
            raw = path.read_bytes()[:CHECKPOINT_SIZE].ljust(CHECKPOINT_SIZE, b"\0")
            self._parse(raw)
        if not read_only:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if fresh or os.fstat(fd).st_size != CHECKPOINT_SIZE:
                    os.ftruncate(fd, CHECKPOINT_SIZE)
                self._mm = mmap.mmap(fd, CHECKPOINT_SIZE, access=mmap.ACCESS_WRITE)
            finally:
                os.close(fd)

    def _parse(self, raw: bytes) -> None:
        physic, logics, index = _TIMESTAMPS.unpack_from(raw, 0)
        self.physic_msg_timestamp, self.logics_msg_timestamp = int(physic), int(logics)
        self.index_msg_timestamp = int(index)
        magic, offset = _EXTENSION.unpack_from(raw, _TIMESTAMPS.size)
        self.dispatched_offset = int(offset) if magic == EXTENSION_MAGIC and offset >= 0 else None

    @property
    def min_timestamp(self) -> int:
        """min(physic, logics): where abnormal recovery starts (StoreCheckpoint.getMinTimestamp,
        without the index, as messageIndexSafe is off by default)."""
        return min(self.physic_msg_timestamp, self.logics_msg_timestamp)

    def update(self, store_timestamp: int, dispatched_offset: int) -> None:
        """Record that every record up to `dispatched_offset` (last stored at `store_timestamp`)
        is flushed and dispatched, and msync the page."""
        self.physic_msg_timestamp = store_timestamp
        self.logics_msg_timestamp = store_timestamp
        self.dispatched_offset = dispatched_offset
        if self._mm is None:
            return
        _TIMESTAMPS.pack_into(
            self._mm, 0, store_timestamp, store_timestamp, self.index_msg_timestamp
        )
        _EXTENSION.pack_into(self._mm, _TIMESTAMPS.size, EXTENSION_MAGIC, dispatched_offset)
        if not self.volatile:
            self._mm.flush()

    def close(self) -> None:
        """Unmap the page."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
