"""ReferenceMessageStore: the simplest correct model of DefaultMessageStore.

The commit log is a list of fixed-size files holding decoded records at their byte positions;
each consume queue is a list of files of (phys, size, tags_code) entries. Every decision is a
spec rule; time comes from the injected clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import attrs

from pullspec.spec.batch import BatchLimits, check_in_disk_by_commit_offset
from pullspec.spec.clock import Clock
from pullspec.spec.config import HOUR_MS, StoreConfig
from pullspec.spec.delay import delay_rewrite, deliver_timestamp, parse_delay_levels
from pullspec.spec.errors import (
    IllegalTopicError,
    InvalidArgumentError,
    InvalidTypeError,
    MessageIllegalError,
    require_int,
    require_str,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import tags_string_to_tags_code
from pullspec.spec.layout import (
    CQ_STORE_UNIT_SIZE,
    calc_msg_length,
    is_dispatched_type,
    needs_end_of_file_blank,
    validate_topic,
)
from pullspec.spec.layout import body_crc as compute_body_crc
from pullspec.spec.message import PROPERTY_TAGS, BrokerInnerMessage, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter, check_get_message_arguments
from pullspec.spec.record import (
    encode_stored,
    host_sys_flag,
)
from pullspec.spec.results import GetMessageResult, PutMessageResult
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import BrokerRole, GetMessageStatus, PutMessageStatus
from pullspec.spec.store import (
    CQEntry,
    RoleHolder,
    assign_queue_offset,
    classify_offset,
    commit_log_read_position,
    consume_queue_roll_next_file,
    corrected_min_logic_offset,
    expired_consume_queue_files,
    find_consume_queue,
    index_window,
    looked_up_record,
    max_phy_offset,
    next_offset_correction,
    queue_min_max_offsets,
    scan_next_begin_offset,
    scan_window,
    suggest_pulling_from_slave,
    whole_records_read,
)


@attrs.define
class _CommitLogFile:
    start: int
    written: int = 0
    last_modified: int = 0


@attrs.define
class _ConsumeQueueFile:
    start_index: int
    entries: list[CQEntry] = attrs.Factory(list)


@attrs.define
class _ConsumeQueue:
    files: list[_ConsumeQueueFile] = attrs.Factory(list)
    min_logic_offset: int = 0


@attrs.define
class ReferenceMessageStore(RoleHolder):
    """A deterministic in-memory DefaultMessageStore that answers exactly as RocketMQ does."""

    config: StoreConfig = attrs.field(factory=StoreConfig)
    profile: Profile = Profile.V4_9
    clock: Clock = attrs.field(kw_only=True)
    _role: BrokerRole = attrs.field(init=False)
    _offset_check_in_slave: bool = attrs.field(init=False)
    _files: list[_CommitLogFile] = attrs.field(init=False, factory=list)
    _records: dict[int, StoredMessage] = attrs.field(init=False, factory=dict)
    #: Each record's properties string as written (its properties read back without some).
    _properties_strings: dict[int, str] = attrs.field(init=False, factory=dict)
    _queues: dict[tuple[str, int], _ConsumeQueue] = attrs.field(init=False, factory=dict)
    _counters: dict[tuple[str, int], int] = attrs.field(init=False, factory=dict)
    _last_physical_min_offset: int = attrs.field(init=False, default=0)
    _delay_levels: tuple[int, ...] = attrs.field(init=False, default=())
    #: (message, its _prepare result) while put_messages appends that message.
    _prepared: tuple[BrokerInnerMessage, tuple[BrokerInnerMessage, int, int]] | None = attrs.field(
        init=False, default=None
    )
    #: The rules of `profile` (the mutation bank swaps one).
    rules: Ruleset = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.config, StoreConfig):
            raise InvalidTypeError("config", self.config, "StoreConfig")
        self.profile = Profile.parse(self.profile)
        self.rules = Ruleset.of(self.profile)
        self._role = self.config.broker_role
        self._offset_check_in_slave = self.config.offset_check_in_slave
        self._delay_levels = parse_delay_levels(self.config.message_delay_level)

    # -- put -----------------------------------------------------------------------------------

    def put_messages(self, msgs: Sequence[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Append several messages in order; every message is validated before any is stored."""
        if isinstance(msgs, BrokerInnerMessage) or not isinstance(msgs, Sequence):
            raise InvalidTypeError("msgs", msgs, "a sequence of BrokerInnerMessage")
        prepared = [self._prepare(m) for m in msgs]
        results = []
        # Each append still goes through put_message (subclasses report appends there); the
        # batch's preparation is handed over so that put_message does not redo it.
        for m, p in zip(msgs, prepared, strict=True):
            self._prepared = (m, p)
            try:
                results.append(self.put_message(m))
            finally:
                self._prepared = None
        return results

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """Append one message to the commit log and dispatch it to its consume queue."""
        handed = self._prepared
        msg, msg_length, delay_level = (
            handed[1] if handed is not None and handed[0] is msg else self._prepare(msg)
        )
        if self._role is BrokerRole.SLAVE:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        now = self.clock.now_ms()
        file = self._file_for(msg_length, now)
        key = (msg.topic, msg.queue_id)
        queue_offset, self._counters[key] = assign_queue_offset(
            self._counters.get(key, 0), msg.sys_flag
        )
        phys = file.start + file.written
        properties_string = self.rules.message_properties_to_string(msg.properties)
        # Every reader of the commit log decodes the stored properties string (LAYOUT-13)
        properties = self.rules.string_to_message_properties(properties_string)
        record = StoredMessage(
            topic=msg.topic,
            queue_id=msg.queue_id,
            queue_offset=queue_offset,
            commitlog_offset=phys,
            size=msg_length,
            tags_code=(
                deliver_timestamp(delay_level, now, self._delay_levels)
                if delay_level
                else tags_string_to_tags_code(dict(properties).get(PROPERTY_TAGS))
            ),
            body=msg.body,
            properties=properties,
            reconsume_times=msg.reconsume_times,
            flag=msg.flag,
            sys_flag=msg.sys_flag,
            body_crc=compute_body_crc(msg.body),
            prepared_transaction_offset=msg.prepared_transaction_offset,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_timestamp=now,
            store_host=msg.store_host,
        )
        self._records[phys] = record
        self._properties_strings[phys] = properties_string
        file.written += msg_length
        file.last_modified = now
        if is_dispatched_type(msg.sys_flag):
            self._dispatch(record)
        return PutMessageResult(PutMessageStatus.PUT_OK, queue_offset, phys, msg_length)

    def _prepare(self, msg: BrokerInnerMessage) -> tuple[BrokerInnerMessage, int, int]:
        """Validate a message, apply the delay rewrite (RETRY-8) and compute its length."""
        if not isinstance(msg, BrokerInnerMessage):
            raise InvalidTypeError("msg", msg, "BrokerInnerMessage")
        rewrite = delay_rewrite(
            msg.topic, msg.queue_id, msg.properties, msg.sys_flag, len(self._delay_levels)
        )
        level = 0
        if rewrite is not None:  # Java re-serialises the rewritten map
            topic, queue_id, properties, level = rewrite
            msg = evolve(
                msg, topic=topic, queue_id=queue_id, properties=properties, stored_properties=None
            )
        elif msg.stored_properties is not None:
            msg = evolve(msg, properties=msg.stored_properties, stored_properties=None)
        flags = host_sys_flag(msg.sys_flag, msg.born_host, msg.store_host)
        if flags != msg.sys_flag:
            msg = evolve(msg, sys_flag=flags)
        return (msg, self._validate(msg), level)

    def _validate(self, msg: BrokerInnerMessage) -> int:
        why = validate_topic(msg.topic)
        if why:
            raise IllegalTopicError("topic", msg.topic, why)
        properties_string = self.rules.message_properties_to_string(msg.properties)
        msg_length = calc_msg_length(
            msg.sys_flag,
            len(msg.body),
            len(msg.topic.encode("utf-8")),
            len(properties_string.encode("utf-8")),
        )
        status = self.rules.check_message_limits(
            msg.topic, properties_string, len(msg.body), msg_length, self.config.max_message_size
        )
        if status is not None:
            raise MessageIllegalError("msg", msg.topic, f"{msg_length}-byte record", status.value)
        file_size = self.config.mapped_file_size_commit_log
        if needs_end_of_file_blank(msg_length, 0, file_size):
            # RocketMQ would blank a whole new file and still report PUT_OK; a record must fit a
            # file with room for the end-of-file blank (LAYOUT-4, LAYOUT-7), so we refuse it.
            raise MessageIllegalError(
                "msg",
                msg.topic,
                f"{msg_length}-byte record does not fit a {file_size}-byte file",
                "MESSAGE_ILLEGAL",
            )
        return msg_length

    def _file_for(self, msg_length: int, now: int) -> _CommitLogFile:
        size = self.config.mapped_file_size_commit_log
        if not self._files:
            self._files.append(_CommitLogFile(0, 0, now))
        last = self._files[-1]
        if needs_end_of_file_blank(msg_length, last.written, size):
            last.written = size  # the end-of-file blank fills the rest of the file
            last.last_modified = now
            self._files.append(_CommitLogFile(last.start + size, 0, now))
        return self._files[-1]

    def _dispatch(self, record: StoredMessage) -> None:
        queue = self._queue(record.topic, record.queue_id)
        units = self.config.consume_queue_units_per_file
        index = record.queue_offset
        if not queue.files or len(queue.files[-1].entries) == units:
            start = index - index % units
            if not queue.files and index != 0:
                queue.min_logic_offset = index * CQ_STORE_UNIT_SIZE  # LAYOUT-3 pre-blank
            queue.files.append(_ConsumeQueueFile(start, [(0, 2_147_483_647, 0)] * (index - start)))
        queue.files[-1].entries.append((record.commitlog_offset, record.size, record.tags_code))

    def _queue(self, topic: str, queue_id: int) -> _ConsumeQueue:
        key = (topic, queue_id)
        queue = find_consume_queue(self._queues.get(key), _ConsumeQueue)
        self._queues[key] = queue
        return queue

    # -- offsets -------------------------------------------------------------------------------

    def _min_max(self, queue: _ConsumeQueue) -> tuple[int, int]:
        if not queue.files:
            return queue_min_max_offsets(queue.min_logic_offset, None, 0)
        last = queue.files[-1]
        return queue_min_max_offsets(
            queue.min_logic_offset,
            last.start_index * CQ_STORE_UNIT_SIZE,
            len(last.entries) * CQ_STORE_UNIT_SIZE,
        )

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's min offset (an index); creates the queue if needed, as RocketMQ does."""
        return self._min_max(
            self._queue(require_str("topic", topic), require_int("queue_id", queue_id))
        )[0]

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's max offset: one past the last dispatched entry."""
        return self._min_max(
            self._queue(require_str("topic", topic), require_int("queue_id", queue_id))
        )[1]

    def get_min_phy_offset(self) -> int:
        """The commit log's min offset, or -1 when it has no file."""
        return self._files[0].start if self._files else -1

    def get_max_phy_offset(self) -> int:
        """The commit log's max offset."""
        if not self._files:
            return max_phy_offset(None, 0)
        return max_phy_offset(self._files[-1].start, self._files[-1].written)

    def look_message_by_offset(self, commitlog_offset: int) -> StoredMessage | None:
        """The record at a commit-log offset, or None when it is not (or no longer) stored."""
        phys = require_int("commitlog_offset", commitlog_offset)
        if phys < 0:
            return None
        at = self._read_position(phys, 4)
        found = looked_up_record(at, at in self._records)
        return None if found is None else self._records[found]

    def check_in_disk_by_consume_offset(
        self, topic: str, queue_id: int, consume_offset: int
    ) -> bool:
        """Whether the entry at `consume_offset` lies on disk (BATCH-3); False when absent
        (DefaultMessageStore.checkInDiskByConsumeOffset, used by COMMIT-4)."""
        queue = self._queue(require_str("topic", topic), require_int("queue_id", queue_id))
        index = require_int("consume_offset", consume_offset)
        for f in queue.files:
            if f.start_index <= index < f.start_index + len(f.entries):
                phys = f.entries[index - f.start_index][0]
                return check_in_disk_by_commit_offset(
                    phys, self.get_max_phy_offset(), self.config.memory_residency_bytes
                )
        return False

    def _read_position(self, phys: int, size: int) -> int | None:
        """Where the commit log serves `size` bytes at `phys` (STORE-21), or None."""
        if not self._files:
            return None
        last = self._files[-1]
        return commit_log_read_position(
            phys,
            size,
            self.config.mapped_file_size_commit_log,
            self._files[0].start,
            last.start,
            last.written,
        )

    def _read(self, phys: int, size: int) -> StoredMessage | None:
        """The record the `size` bytes of a consume-queue entry start with where the commit log
        serves them (STORE-21: another file's first record when phys 0 was deleted), or None."""
        at = self._read_position(phys, size) if size > 0 else None
        return None if at is None else self._records.get(at)

    def _bytes(self, start: int, size: int) -> bytes:
        """The `size` commit-log bytes from record `start` on, as encoded (LAYOUT-5, LAYOUT-7):
        the records that follow one another there, then an end-of-file blank."""
        out, at = bytearray(), start
        file_end = start - start % self.config.mapped_file_size_commit_log
        file_end += self.config.mapped_file_size_commit_log
        while len(out) < size and at in self._records:
            r = self._records[at]
            out += encode_stored(r, self._properties_strings[at])
            at += r.size
        if len(out) < size and at < file_end:
            out += self.rules.encode_blank(file_end - at)
        return bytes(out[:size]).ljust(size, b"\0")

    def _bodies(
        self, messages: Sequence[StoredMessage], entries: Sequence[CQEntry]
    ) -> tuple[bytes, ...] | None:
        """The bytes every returned entry read, when one of them is not the whole record the
        entry names (STORE-21); None otherwise, when the messages are exactly what was read."""
        if whole_records_read(messages, entries):
            return None
        return tuple(
            self.rules.with_blank_leftovers(self._bytes(m.commitlog_offset, size))
            for m, (_, size, _) in zip(messages, entries, strict=True)
        )

    # -- get -----------------------------------------------------------------------------------

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Answer a pull exactly as DefaultMessageStore.getMessage does."""
        check_get_message_arguments(group, topic, queue_id, offset, max_msg_nums, message_filter)
        max_offset_py = self.get_max_phy_offset()
        queue = self._queue(topic, queue_id)
        min_offset, max_offset = self._min_max(queue)
        decided = classify_offset(
            offset, min_offset, max_offset, self._role, self._offset_check_in_slave, self.rules
        )
        if decided is not None:
            return GetMessageResult(decided[0], decided[1], min_offset, max_offset)
        units = self.config.consume_queue_units_per_file
        file_size = units * CQ_STORE_UNIT_SIZE
        files = [
            (f.start_index * CQ_STORE_UNIT_SIZE, len(f.entries) * CQ_STORE_UNIT_SIZE)
            for f in queue.files
        ]
        window = index_window(offset, queue.min_logic_offset, files, file_size)
        if window is None:
            next_offset = next_offset_correction(
                offset,
                consume_queue_roll_next_file(offset, units),
                self._role,
                self._offset_check_in_slave,
            )
            return GetMessageResult(
                GetMessageStatus.OFFSET_FOUND_NULL, next_offset, min_offset, max_offset
            )
        self.rules.check_result_capacity(max_msg_nums)
        number, first, end = window
        entries = queue.files[number].entries[
            first // CQ_STORE_UNIT_SIZE : end // CQ_STORE_UNIT_SIZE
        ]
        memory = self.config.memory_residency_bytes
        read: dict[int, StoredMessage | None] = {}

        def present(phys: int, size: int) -> bool:
            read[phys] = self._read(phys, size)
            return read[phys] is not None

        state = scan_window(
            entries,
            max_msg_nums=max_msg_nums,
            max_offset_py=max_offset_py,
            memory=memory,
            limits=BatchLimits.of(self.config),
            commit_log_file_size=self.config.mapped_file_size_commit_log,
            matches_consume_queue=(
                message_filter.is_matched_by_consume_queue if message_filter else _always
            ),
            record_present=present,
            matches_commit_log=lambda phys: (
                message_filter.is_matched_by_commit_log(read[phys]) if message_filter else True
            ),
        )
        returned = [entries[p] for p in state.returned]
        messages = tuple(cast(StoredMessage, read[phys]) for phys, _, _ in returned)
        return GetMessageResult(
            state.status,
            scan_next_begin_offset(offset, state.scanned),
            min_offset,
            max_offset,
            messages,
            suggest_pulling_from_slave(max_offset_py, state.max_phy_offset_pulling, memory),
            bodies=self._bodies(messages, returned),
        )

    def set_last_modified(self, file_start: int, timestamp: int) -> None:
        """Set a commit-log file's last-modified time, as touching the file on disk would."""
        for f in self._files:
            if f.start == require_int("file_start", file_start):
                f.last_modified = require_int("timestamp", timestamp)
                return
        raise InvalidArgumentError("file_start", file_start, "no commit-log file starts there")

    # -- expiry --------------------------------------------------------------------------------

    def delete_expired_files(self) -> int:
        """One clean round: delete expired commit-log files (never the last, at most
        delete_files_batch_max), then correct every consume queue (STORE-19)."""
        now = self.clock.now_ms()
        reserved = self.config.file_reserved_time * HOUR_MS
        deleted = 0
        while (
            len(self._files) > 1
            and deleted < self.config.delete_files_batch_max
            and now >= self._files[0].last_modified + reserved
        ):
            gone = self._files.pop(0)
            for phys in [
                p for p in self._records if p < gone.start + self.config.mapped_file_size_commit_log
            ]:
                del self._records[phys]
                del self._properties_strings[phys]
            deleted += 1
        commit_log_min = self.get_min_phy_offset()
        if commit_log_min > self._last_physical_min_offset:
            self._last_physical_min_offset = commit_log_min
            for queue in self._queues.values():
                self._correct_queue(queue, commit_log_min)
        return deleted

    def _correct_queue(self, queue: _ConsumeQueue, commit_log_min: int) -> None:
        units = self.config.consume_queue_units_per_file
        full = [f for f in queue.files if len(f.entries) == units]
        last_phys = [f.entries[-1][0] for f in full] + [0]  # the last file is never deleted
        drop = min(expired_consume_queue_files(last_phys, commit_log_min), len(queue.files) - 1)
        del queue.files[:drop]
        if queue.files:
            first = queue.files[0]
            queue.min_logic_offset = corrected_min_logic_offset(
                first.start_index * CQ_STORE_UNIT_SIZE,
                first.entries,
                commit_log_min,
                queue.min_logic_offset,
            )


def _always(tags_code: int | None) -> bool:
    return True
