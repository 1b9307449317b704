"""MmapMessageStore: spec.protocols.MessageStore over RocketMQ 4.x's own on-disk layout."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from pullspec.fast.batch import MessageBatch
from pullspec.fast.checkpoint import Checkpoint
from pullspec.fast.commitlog import CommitLog
from pullspec.fast.consumequeue import ConsumeQueue
from pullspec.fast.damage import decode_checked
from pullspec.fast.integrity import QueueFiles, VerifyReport, verify_files
from pullspec.fast.mapped import MappedFile, fsync_dir, on_ram_filesystem
from pullspec.fast.putpath import PutPath
from pullspec.fast.putsmall import Encoding, Shape, prepared_cache
from pullspec.fast.putvector import EncodedSet, PutResults
from pullspec.fast.read_plan import GetRequest, ScanPlan
from pullspec.fast.reader import Reader
from pullspec.fast.recovery import RecoveryReport, recover
from pullspec.fast.results import MultiGetResult
from pullspec.fast.spares import Spares, remove_spares
from pullspec.spec.batch import check_in_disk_by_commit_offset
from pullspec.spec.clock import Clock
from pullspec.spec.config import HOUR_MS, StoreConfig
from pullspec.spec.delay import parse_delay_levels
from pullspec.spec.errors import (
    InvalidArgumentError,
    InvalidTypeError,
    ReadOnlyStoreError,
    require_int,
    require_str,
)
from pullspec.spec.filter import ExpressionMessageFilter
from pullspec.spec.message import BrokerInnerMessage, Properties, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter, check_get_message_arguments
from pullspec.spec.results import GetMessageResult, PutMessageResult
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.store import RoleHolder, find_consume_queue, looked_up_record

#: messageDelayLevel parsed once per distinct string.
_delay_levels = functools.lru_cache(maxsize=64)(parse_delay_levels)
FlushMode = Literal["async", "sync"]


class MmapMessageStore(PutPath, RoleHolder):
    """A DefaultMessageStore over mapped files in `store_dir`: `commitlog/`, `consumequeue/`,
    `checkpoint` and, while open for writing, `abort` (its presence at open means the last writer
    did not close cleanly, so recovery starts from the checkpoint, not the last three files) and
    `.spares` (expired small files kept for reuse, fast.spares).

    flush="sync" msyncs every put before returning (the put is then durable); "async" flushes
    a commit-log file when it fills (in a background thread for files of 4 MiB or more), on
    flush() and on close(); on a RAM filesystem (tmpfs), where flushing protects nothing, neither
    msyncs (fast.mapped.on_ram_filesystem). A read-only store never writes; it
    recovers in memory. `repair=True` truncates at corruption in the middle of the commit log, as
    RocketMQ does, instead of raising CorruptStoreError. `warm_mapped_files=True` (RocketMQ's
    warmMapedFileEnable) allocates each new commit-log file's blocks when the file is created,
    which makes first writes to it much cheaper; the files then use their full size on disk.
    `transient_store_pool=True` (RocketMQ's transientStorePoolEnable) encodes appends into a
    reused buffer and writes them to the file with pwrite rather than through the mapping, which
    avoids a page fault per page written; reads still go through the mapping. Where a put_batch
    puts 2 MiB or more into one file, those records are then written in parts of about 1 MiB by
    a committer thread while the next part is encoded (RocketMQ's CommitRealTimeService beside
    the writer); the put returns, and readers see its messages, only once every part is in the
    file. A put whose write fails raises the OSError, and the store then refuses every later
    put until it is reopened (`write_error`).

    Threads: any number of threads may call put_message, put_messages, put_batch, the get
    calls (get_message, get_messages, pull_through, look_message_by_offset, the offset queries)
    and delete_expired_files, flush and set_last_modified at once, as a broker's request
    threads do. Appends, expiry and flushes are serialised by one lock (RocketMQ's put lock):
    queue offsets and commit-log positions are assigned in commit-log order. Reads take no
    lock: a record is written before the commit log's max offset moves past it, and its
    consume-queue entry after that, so a read sees a message whole or not at all; a file
    that expiry removes stays mapped while a read holds it (a later round deletes it).
    close() must not run beside any other call; nor may set_role (harmless, but not atomic
    with a read: a read may see the old role and the new offsetCheckInSlave). Returned results
    decode their messages from the mapped files when read, safely from any thread.

    >>> import tempfile
    >>> from pullspec.spec import BrokerInnerMessage, ManualClock, Profile, StoreConfig
    >>> folder = tempfile.TemporaryDirectory()
    >>> config = StoreConfig(mapped_file_size_commit_log=4096)
    >>> with MmapMessageStore(folder.name, config, Profile.V4_9, ManualClock(0)) as store:
    ...     store.put_message(BrokerInnerMessage(topic="T", queue_id=0, body=b"hi")).wrote_bytes
    ...     store.get_message("G", "T", 0, 0, 32).messages[0].body
    94
    b'hi'
    >>> folder.cleanup()
    """

    def __init__(
        self,
        store_dir: str | Path,
        config: StoreConfig,
        profile: Profile,
        clock: Clock,
        read_only: bool = False,
        flush: FlushMode = "async",
        repair: bool = False,
        warm_mapped_files: bool = False,
        transient_store_pool: bool = False,
    ) -> None:
        if not isinstance(config, StoreConfig):
            raise InvalidTypeError("config", config, "StoreConfig")
        if flush not in ("async", "sync"):
            raise InvalidArgumentError("flush", flush, "expected 'async' or 'sync'")
        self.store_dir = Path(store_dir)
        self._root = os.fspath(self.store_dir)
        self.config = config
        self.profile = Profile.parse(profile)
        #: The profile's rules, looked up once.
        self.rules = Ruleset.of(self.profile)
        self.clock = clock
        self.read_only = read_only
        self.flush_mode: FlushMode = flush
        self._role = config.broker_role
        self._offset_check_in_slave = config.offset_check_in_slave
        self._closed = False
        #: What stopped the appends (`write_error`); None while the store takes them.
        self._write_error: OSError | None = None
        #: read_only, closed or `_write_error`: put_message's one check of all three.
        self._refusing_puts = read_only
        #: RocketMQ's put lock: one writer at a time appends, expires and flushes.
        self._put_lock = threading.Lock()
        self._last_physical_min_offset = 0
        self._last_store_timestamp = 0
        self._counters: dict[tuple[str, int], int] = {}
        self._delay_levels = _delay_levels(config.message_delay_level)
        # The put path's caches (fast.putsmall, fast.putvector), plain attributes: see
        # fast.putsmall.prepared_cache for why.
        self._shapes: dict[tuple[str, Any], Shape] = {}
        self._encoding_cache: dict[tuple[str, Any], Encoding] = {}
        self._prepared = prepared_cache(config, self.profile, self._delay_levels)
        self._topic_cache: dict[str, bytes | None] = {}
        self._set_cache: dict[Properties, EncodedSet | None] = {}
        # A directory just made empty (TemporaryMmapMessageStore's) has nothing to look for.
        fresh = self._fresh_directory and not read_only
        if not read_only:
            if not fresh:
                os.makedirs(self._root, exist_ok=True)
        elif not os.path.isdir(self._root):
            raise InvalidArgumentError("store_dir", str(store_dir), "no such directory")
        abort = os.path.join(self._root, "abort")
        abnormal = not fresh and os.path.exists(abort)
        self.commit_log = CommitLog(
            self.store_dir / "commitlog",
            config.mapped_file_size_commit_log,
            self.rules,
            read_only,
        )
        # On tmpfs nothing is msync'ed (fast.mapped.on_ram_filesystem): the log's flag is the
        # store's, which its queues and checkpoint take from it.
        self.commit_log.volatile = on_ram_filesystem(self._root)
        self.commit_log.warm = bool(warm_mapped_files)
        self.commit_log.transient = bool(transient_store_pool)
        self._spares: Spares[MappedFile] | None = None
        if not read_only:
            if not fresh:
                remove_spares(self._root)  # a crash may have left some
            self._spares = Spares[MappedFile](self._root)
        self.commit_log.spares = self._spares
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.checkpoint = Checkpoint(
            self.store_dir / "checkpoint", read_only, fresh, self.commit_log.volatile
        )
        try:
            if not fresh:
                self.commit_log.load()
                self._load_queues()
            self.recovery: RecoveryReport = recover(
                self.commit_log,
                self.queues,
                self._new_queue,
                abnormal=abnormal,
                checkpoint_min_timestamp=self.checkpoint.min_timestamp,
                checkpoint_offset=self.checkpoint.dispatched_offset,
                check_crc=config.check_crc_on_recover,
                repair=repair,
                rules=self.rules,
                delay_levels=self._delay_levels,
            )
        except BaseException:
            self._unmap()
            raise
        self.reader = Reader(self.commit_log, config, self.profile, self._delay_levels)
        cl_min = self.commit_log.min_offset()
        for key, q in self.queues.items():
            self._counters[key] = q.min_max()[1]
            q.correct_min_offset(cl_min)
        if not read_only:
            if abnormal:
                os.utime(abort)
            else:
                os.close(os.open(abort, os.O_WRONLY | os.O_CREAT, 0o666))  # as Path.touch
            self._checkpoint()

    #: Whether the store directory is always one just made empty (so nothing is loaded).
    _fresh_directory = False

    # -- layout ------------------------------------------------------------------------------

    def _queue_dir(self, topic: str, queue_id: int) -> str:
        return os.path.join(self._root, "consumequeue", topic, str(queue_id))

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        q = ConsumeQueue(
            self._queue_dir(topic, queue_id),
            topic,
            queue_id,
            self.config.consume_queue_file_size,
            self.read_only,
            self.config.mapped_file_size_commit_log,
        )
        q.transient = self.commit_log.transient
        q.flush_filled = self.commit_log.flush_filled
        q.spares = self._spares
        q.volatile = self.commit_log.volatile
        return q

    def _load_queues(self) -> None:
        root = self.store_dir / "consumequeue"
        if not root.is_dir():
            return
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.lstrip("-").isdigit():
                    q = self._new_queue(topic_dir.name, int(queue_dir.name))
                    q.load()
                    self.queues[(topic_dir.name, int(queue_dir.name))] = q

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of (topic, queue id), made (empty, with no file) when missing
        (DefaultMessageStore.findConsumeQueue)."""
        return self._queue(topic, queue_id)

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        q = self.queues.get(key)
        if q is not None:
            return q
        q = find_consume_queue(q, lambda: self._new_queue(topic, queue_id))
        # A reader may add the queue beside the writer: the first one in wins (putIfAbsent).
        return self.queues.setdefault(key, q)

    # -- lifecycle ---------------------------------------------------------------------------

    def _checkpoint(self) -> None:
        # After a failed write the log's max offset may pass records whose entries were never
        # written: the checkpoint stays where it was, and reopening rebuilds them from there.
        if self._write_error is None:
            self.checkpoint.update(self._last_store_timestamp, self.commit_log.max_offset())

    def flush(self) -> None:
        """msync the commit log and the consume queues, then record the checkpoint."""
        with self._put_lock:
            self._flush()

    def _flush(self) -> None:
        """`flush` under the put lock."""
        if self.read_only or self._closed:
            return
        self.commit_log.flush()
        for q in list(self.queues.values()):  # readers may add queues meanwhile
            q.flush()
        self._checkpoint()

    def _unmap(self) -> None:
        if self._spares is not None:
            self._spares.close()
        self.commit_log.close()
        for q in self.queues.values():
            q.close()
        self.checkpoint.close()

    def close(self) -> None:
        """Flush (fsync) everything, remove the abort marker and unmap the files. A store whose
        appends a failed write stopped (`write_error`) keeps its abort marker."""
        with self._put_lock:  # a put still running finishes first; later ones are refused
            if self._closed:
                return
            if not self.read_only and self._write_error is not None:
                # As RocketMQ's shutdown when the store is not writable: keep what was
                # published, keep the abort marker, so that the next open recovers the files
                # as after a crash: it cuts the half-written records off and rebuilds the
                # entries a failed write left out (the checkpoint did not move, `_checkpoint`).
                with contextlib.suppress(OSError):
                    self._flush()
            elif not self.read_only:
                self._flush()
                with contextlib.suppress(FileNotFoundError):
                    (self.store_dir / "abort").unlink()
                if not self.commit_log.volatile:
                    fsync_dir(self.store_dir)
            self._closed = self._refusing_puts = True
            self._unmap()

    def __enter__(self) -> MmapMessageStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def write_error(self) -> OSError | None:
        """The error of the write that stopped this store's appends, or None.

        When writing a put's records or entries fails (a full disk, say), the put raises the
        OSError and the store stops taking messages, as RocketMQ's does once it is not
        writable: every later put answers SERVICE_NOT_AVAILABLE, reads go on answering what was
        stored before, the checkpoint stays where it was and close() keeps the abort marker.
        Reopening the store recovers its files as after a crash (the records a failed put wrote
        whole are kept and their entries rebuilt, the rest is cut off) and takes messages
        again.

        >>> import tempfile
        >>> from pullspec.spec import ManualClock, Profile, StoreConfig
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     with MmapMessageStore(folder, StoreConfig(), Profile.V4_9, ManualClock(0)) as s:
        ...         print(s.write_error)
        None
        """
        return self._write_error

    def _stop_writes(self, exc: OSError) -> None:
        """Refuse every later put: the failed one left the write position past bytes it never
        wrote, and queue offsets handed to messages that are not stored."""
        if self._write_error is None:
            self._write_error = exc
            self._refusing_puts = True

    def _require_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"{what} on a read-only store")
        if self._closed:
            raise ReadOnlyStoreError(f"{what} on a closed store")

    # -- offsets -----------------------------------------------------------------------------

    def _checked_queue(self, topic: object, queue_id: object) -> ConsumeQueue:
        """The queue named by arguments that must be a str and an int."""
        if type(topic) is str and type(queue_id) is int:
            q = self.queues.get((topic, queue_id))
            if q is not None:
                return q
        return self._queue(require_str("topic", topic), require_int("queue_id", queue_id))

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's min offset (an index)."""
        return self._checked_queue(topic, queue_id).min_offset()

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's max offset: one past the last dispatched entry."""
        return self._checked_queue(topic, queue_id).max_offset()

    def get_min_phy_offset(self) -> int:
        """The commit log's min offset, or -1 when it has no file."""
        return self.commit_log.min_offset()

    def get_max_phy_offset(self) -> int:
        """The commit log's max offset."""
        return self.commit_log.max_offset()

    def look_message_by_offset(self, commitlog_offset: int) -> StoredMessage | None:
        """The record starting at a commit-log offset, or None when no record starts there (or
        its file was deleted)."""
        phys = require_int("commitlog_offset", commitlog_offset)
        log = self.commit_log
        log_view = log.snapshot()
        served = log.record_at(phys, 4, log_view)  # its TOTALSIZE first (STORE-21)
        if served is None:
            return None
        f, pos = served
        at = f.start + pos
        if looked_up_record(at, log.is_record_start(at, log_view) > 0) is None:
            return None
        return decode_checked(f.mm, pos, self.rules, self._delay_levels)

    def check_in_disk_by_consume_offset(
        self, topic: str, queue_id: int, consume_offset: int
    ) -> bool:
        """Whether the entry at `consume_offset` lies on disk (BATCH-3); False when the queue has
        no such entry (DefaultMessageStore.checkInDiskByConsumeOffset, used by COMMIT-4)."""
        q = self._checked_queue(topic, queue_id)
        entry = q.entry(require_int("consume_offset", consume_offset))
        if entry is None:
            return False
        phys = entry[0]
        return check_in_disk_by_commit_offset(
            phys, self.commit_log.max_offset(), self.config.memory_residency_bytes
        )

    # -- integrity ---------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Walk every record this store holds and every consume-queue entry, as `pullspec store
        verify` walks a directory (fast.integrity), puts and expiry waiting meanwhile: each
        problem with its file, byte position and what is wrong."""
        with self._put_lock:
            if self._closed:
                raise ReadOnlyStoreError("verify on a closed store")
            log = self.commit_log
            queues = [
                QueueFiles(
                    topic,
                    queue_id,
                    [(f"consumequeue/{topic}/{queue_id}/{f.start:020d}", f) for f in q.files],
                    q.end,
                )
                for (topic, queue_id), q in sorted(self.queues.items())
            ]
            return verify_files(
                self._root,
                [(f"commitlog/{f.start:020d}", f) for f in log.files],
                log.file_size,
                log.end,
                queues,
                self.config.consume_queue_file_size,
                self.rules,
                self._delay_levels,
            )

    # -- expiry ------------------------------------------------------------------------------

    def delete_expired_files(self) -> int:
        """One clean round (STORE-19): delete commit-log files last written at least
        fileReservedTime hours ago (never the last, at most deleteFilesBatchMax), then delete the
        consume-queue files wholly below the new commit-log min and correct each queue's min."""
        self._require_writable("delete_expired_files")
        with self._put_lock:
            deleted = self.commit_log.delete_expired(
                self.clock.now_ms(),
                self.config.file_reserved_time * HOUR_MS,
                self.config.delete_files_batch_max,
            )
            cl_min = self.commit_log.min_offset()
            if cl_min > self._last_physical_min_offset:
                self._last_physical_min_offset = cl_min
                for q in list(self.queues.values()):  # readers may add queues meanwhile
                    q.delete_expired(cl_min)
            if deleted:
                self.commit_log.sync_directory()
            return deleted

    def set_last_modified(self, file_start: int, timestamp: int) -> None:
        """Set a commit-log file's last-write time, as touching the file on disk would."""
        start = require_int("file_start", file_start)
        ms = require_int("timestamp", timestamp)
        with self._put_lock:
            known = self.commit_log.set_last_modified(start, ms)
        if not known:
            raise InvalidArgumentError("file_start", file_start, "no commit-log file starts there")

    # -- the protocol's put and get (PutPath and fast.reader hold the work) -------------------

    def put_messages(
        self, msgs: Sequence[BrokerInnerMessage] | MessageBatch
    ) -> list[PutMessageResult]:
        """Append several messages in order (all validated before any is stored), given as a
        list or as a MessageBatch: records encoded by columns into the mapped commit log, one
        numpy write per consume queue."""
        if isinstance(msgs, MessageBatch):
            return self.put_batch(msgs).to_list()
        if isinstance(msgs, BrokerInnerMessage) or not isinstance(msgs, Sequence):
            raise InvalidTypeError("msgs", msgs, "a sequence of BrokerInnerMessage")
        if len(msgs) == 1:  # all validated before any is stored holds for one message
            return [self.put_message(msgs[0])]
        with self._put_lock:
            self._require_writable("put")
            try:
                return self._put_list(msgs)
            except OSError as exc:
                self._stop_writes(exc)
                raise

    def put_batch(self, batch: MessageBatch) -> PutResults:
        """Append a MessageBatch, answering by columns: the same records and results as
        put_messages(batch.messages()), without a Python object per message."""
        if not isinstance(batch, MessageBatch):
            raise InvalidTypeError("batch", batch, "MessageBatch")
        with self._put_lock:
            self._require_writable("put")
            try:
                return self._put_columns(batch)
            except OSError as exc:
                self._stop_writes(exc)
                raise

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Answer a pull exactly as DefaultMessageStore.getMessage does, vectorized."""
        # check_get_message_arguments' own first test, repeated here so that the usual exact
        # types cost no call (about 4 % of a warm pull); anything else is checked in full.
        if not (
            type(group) is str
            and type(topic) is str
            and type(queue_id) is int
            and type(offset) is int
            and type(max_msg_nums) is int
            and (message_filter is None or type(message_filter) is ExpressionMessageFilter)
        ):
            check_get_message_arguments(
                group, topic, queue_id, offset, max_msg_nums, message_filter
            )
        if self._closed:
            raise ReadOnlyStoreError("get_message on a closed store")
        q = self.queues.get((topic, queue_id))
        if q is None:
            q = self._queue(topic, queue_id)
        # Reader.get's compiled branch inlined: a frame fewer on every pull (about 2 %).
        reader = self.reader
        kernels = reader.kernels or reader.load_kernels()
        if kernels is not None:
            found = reader.compiled.pull(
                kernels, q, offset, max_msg_nums, message_filter, self._role,
                self._offset_check_in_slave,
            )  # fmt: skip
            if not isinstance(found, ScanPlan):
                return found
            return reader.numpy.scan(found, message_filter, True)
        return reader.get(
            q, offset, max_msg_nums, message_filter, self._role, self._offset_check_in_slave
        )

    def get_messages(self, requests: Sequence[GetRequest | tuple[Any, ...]]) -> MultiGetResult:
        """Answer many pulls at once; result i equals get_message(*requests[i]). The answer is
        also columnar (MultiGetResult.next_begin_offsets, message_counts, …)."""
        if isinstance(requests, str | bytes) or not isinstance(requests, Sequence):
            raise InvalidTypeError("requests", requests, "a sequence of get_message requests")
        if self._closed:
            raise ReadOnlyStoreError("get_messages on a closed store")
        return self.reader.get_many(
            requests, self._role, self._offset_check_in_slave, self.queues, self._queue
        )

    def pull_through(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
        max_calls: int | None = None,
    ) -> MultiGetResult:
        """The pulls from `offset` on, each at the previous nextBeginOffset, until one reaches
        the queue's max offset, one is not a window scan (FOUND, NO_MATCHED_MESSAGE or
        MESSAGE_WAS_REMOVING), or `max_calls` were made; the answers in order, columnar."""
        check_get_message_arguments(group, topic, queue_id, offset, max_msg_nums, message_filter)
        if max_calls is not None and (require_int("max_calls", max_calls) < 0):
            raise InvalidArgumentError("max_calls", max_calls, "must be at least 0")
        if self._closed:
            raise ReadOnlyStoreError("pull_through on a closed store")
        q = self._queue(topic, queue_id)
        limit = (1 << 62) if max_calls is None else max_calls
        return self.reader.pull_through(
            q, offset, max_msg_nums, message_filter, limit, self._role, self._offset_check_in_slave
        )
