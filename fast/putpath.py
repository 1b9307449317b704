"""The append path of MmapMessageStore: validate a batch, place its records (LAYOUT-7 rolls),
write each commit-log segment with one copy and dispatch each queue's entries with one numpy
write (CommitLog.asyncPutMessage, ReputMessageService)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import numpy as np

from fast.batch import MessageBatch, columns_of
from fast.putvector import PutResults, VectorPut, properties_tags_code
from spec.clock import Clock
from spec.config import StoreConfig
from spec.delay import delay_rewrite, deliver_timestamp
from spec.errors import IllegalTopicError, InvalidTypeError, MessageIllegalError
from spec.layout import (
    END_FILE_MIN_BLANK_LENGTH,
    body_crc,
    calc_msg_length,
    check_message_limits,
    is_dispatched_type,
    message_properties_to_string,
    needs_end_of_file_blank,
    validate_topic,
)
from spec.message import BrokerInnerMessage
from spec.profiles import Profile
from spec.record import encode_record_bytes, host_sys_flag
from spec.results import PutMessageResult
from spec.status import BrokerRole, PutMessageStatus
from spec.store import assign_queue_offset

if TYPE_CHECKING:
    from fast.commitlog import CommitLog
    from fast.consumequeue import ConsumeQueue

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: Messages per list below which the per-message path is cheaper than numpy's fixed costs.
VECTOR_MIN = 32


class Prepared(NamedTuple):
    """A validated message with its encoded topic and properties and its record length."""

    msg: BrokerInnerMessage
    topic: bytes
    properties: bytes
    sys_flag: int
    length: int
    crc: int
    tags_code: int
    delay_level: int


def stored_tags_code(msg: BrokerInnerMessage, properties_string: str, profile: Profile) -> int:
    """FILTER-1 on a message's properties as the dispatcher will parse them back from the
    record (`properties_tags_code`)."""
    return properties_tags_code(msg.properties, properties_string, profile)


def _require_java(name: str, value: int, bounds: tuple[int, int], msg: BrokerInnerMessage) -> None:
    if not bounds[0] <= value <= bounds[1]:
        raise MessageIllegalError(name, value, "does not fit its Java field", "MESSAGE_ILLEGAL")


class PutPath(VectorPut):
    """Mixin: the put half of MmapMessageStore."""

    if TYPE_CHECKING:
        commit_log: CommitLog
        config: StoreConfig
        profile: Profile
        clock: Clock
        flush_mode: str
        _role: BrokerRole
        _counters: dict[tuple[str, int], int]
        _last_store_timestamp: int
        _delay_levels: tuple[int, ...]

        def _queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...
        def _checkpoint(self) -> None: ...

    def _encoded(self, msg: BrokerInnerMessage) -> tuple[bytes, bytes, str, int]:
        """(topic bytes, properties bytes, properties string, stored tags code) of a message,
        cached per (topic, properties): a workload repeats a handful of them."""
        cache: dict[tuple[str, Any], tuple[bytes, bytes, str, int]] = self.__dict__.setdefault(
            "_encoding_cache", {}
        )
        key = (msg.topic, msg.properties)
        found = cache.get(key)
        if found is None:
            why = validate_topic(msg.topic)
            if why:
                raise IllegalTopicError("topic", msg.topic, why)
            text = message_properties_to_string(msg.properties, self.profile)
            found = (
                msg.topic.encode("utf-8"),
                text.encode("utf-8"),
                text,
                stored_tags_code(msg, text, self.profile),
            )
            if len(cache) > 4096:
                cache.clear()
            cache[key] = found
        return found

    def _prepare(self, msg: BrokerInnerMessage) -> Prepared:
        """Validate one message (types, TopicValidator, LAYOUT-11, Java field ranges, fitting a
        commit-log file) without touching the store."""
        if type(msg) is not BrokerInnerMessage and not isinstance(msg, BrokerInnerMessage):
            raise InvalidTypeError("msg", msg, "BrokerInnerMessage")
        level = 0
        rewrite = delay_rewrite(
            msg.topic, msg.queue_id, msg.properties, msg.sys_flag, len(self._delay_levels)
        )
        if rewrite is not None:  # Java re-serialises the rewritten map
            topic_name, queue_id, rewritten, level = rewrite
            msg = attrs.evolve(
                msg,
                topic=topic_name,
                queue_id=queue_id,
                properties=rewritten,
                stored_properties=None,
            )
        elif msg.stored_properties is not None:
            msg = attrs.evolve(msg, properties=msg.stored_properties, stored_properties=None)
        topic, properties, properties_string, tags_code = self._encoded(msg)
        born, store = msg.born_host, msg.store_host
        sys_flag = msg.sys_flag
        if len(born.ip) != 4 or len(store.ip) != 4 or sys_flag & 0x30:
            sys_flag = host_sys_flag(sys_flag, born, store)
        body = msg.body
        length = calc_msg_length(sys_flag, len(body), len(topic), len(properties))
        status = check_message_limits(
            msg.topic,
            properties_string,
            len(body),
            length,
            self.config.max_message_size,
            self.profile,
        )
        if status is not None:
            raise MessageIllegalError("msg", msg.topic, f"{length}-byte record", status.value)
        if length + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log:
            raise MessageIllegalError(
                "msg", length, "the record cannot fit one commit-log file", "MESSAGE_ILLEGAL"
            )
        lo32, hi32, lo64, hi64 = _INT32[0], _INT32[1], _INT64[0], _INT64[1]
        if not (
            lo32 <= msg.queue_id <= hi32
            and lo32 <= msg.flag <= hi32
            and lo32 <= sys_flag <= hi32
            and lo32 <= msg.reconsume_times <= hi32
            and lo64 <= msg.born_timestamp <= hi64
            and lo64 <= msg.prepared_transaction_offset <= hi64
            and lo32 <= born.port <= hi32
            and lo32 <= store.port <= hi32
        ):
            for name, value, bounds in (
                ("queue_id", msg.queue_id, _INT32),
                ("flag", msg.flag, _INT32),
                ("sys_flag", msg.sys_flag, _INT32),
                ("reconsume_times", msg.reconsume_times, _INT32),
                ("born_timestamp", msg.born_timestamp, _INT64),
                ("prepared_transaction_offset", msg.prepared_transaction_offset, _INT64),
                ("born_host.port", born.port, _INT32),
                ("store_host.port", store.port, _INT32),
            ):
                _require_java(name, value, bounds, msg)
        return Prepared(msg, topic, properties, sys_flag, length, body_crc(body), tags_code, level)

    def _put_list(self, msgs: Sequence[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Append a list: by columns (`columns_of`, the vectorized path) when it has enough
        messages of a shape that path takes, else message by message."""
        if len(msgs) >= VECTOR_MIN and set(map(type, msgs)) == {BrokerInnerMessage}:
            batch = columns_of(msgs)
            plan = None if batch is None else self._plan(batch)
            if batch is not None and plan is not None:
                return self._store_batch(batch, plan).to_list()
        return self._put_each(msgs)

    def _put_columns(self, batch: MessageBatch) -> PutResults:
        """Append a MessageBatch: vectorized, or as its messages() when that path declines."""
        plan = self._plan(batch)
        if plan is not None:
            return self._store_batch(batch, plan)
        return PutResults.of(self._put_each(batch.messages()))

    def _put_each(self, msgs: Sequence[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Validate every message, then append them one record at a time."""
        prepared = [self._prepare(m) for m in msgs]
        if self._role is BrokerRole.SLAVE:
            return [PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE) for _ in prepared]
        log = self.commit_log
        size = log.file_size
        low = log.max_offset()
        results: list[PutMessageResult] = []
        dispatch: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
        segment: list[bytes] = []
        segment_phys = 0
        now = 0
        for p in prepared:
            msg = p.msg
            now = self.clock.now_ms()
            rolls = (
                not log.files
                or log.wrote >= size
                or needs_end_of_file_blank(p.length, log.wrote, size)
            )
            if rolls and segment:
                log.write(segment_phys, b"".join(segment), now)
                segment = []
            phys = log.reserve(p.length, now)
            if not segment:
                segment_phys = phys
            key = (msg.topic, msg.queue_id)
            queue_offset, self._counters[key] = assign_queue_offset(
                self._counters.get(key, 0), msg.sys_flag
            )
            segment.append(
                encode_record_bytes(
                    p.topic,
                    p.properties,
                    msg.body,
                    queue_id=msg.queue_id,
                    flag=msg.flag,
                    sys_flag=p.sys_flag,
                    queue_offset=queue_offset,
                    physical_offset=phys,
                    born_timestamp=msg.born_timestamp,
                    born_host=msg.born_host,
                    store_timestamp=now,
                    store_host=msg.store_host,
                    reconsume_times=msg.reconsume_times,
                    prepared_transaction_offset=msg.prepared_transaction_offset,
                    crc=p.crc,
                )
            )
            if is_dispatched_type(msg.sys_flag):
                code = (
                    deliver_timestamp(p.delay_level, now, self._delay_levels)
                    if p.delay_level
                    else p.tags_code
                )
                dispatch.setdefault(key, []).append((queue_offset, phys, p.length, code))
            results.append(PutMessageResult(PutMessageStatus.PUT_OK, queue_offset, phys, p.length))
        if segment:
            log.write(segment_phys, b"".join(segment), now)
        if prepared:
            self._last_store_timestamp = now
        touched = []
        for key, rows in dispatch.items():
            table = np.array(rows, dtype=np.int64)
            q = self._queue(*key)
            q.append(int(table[0, 0]), table[:, 1], table[:, 2], table[:, 3])
            touched.append(q)
        if self.flush_mode == "sync" and prepared:
            log.sync(low)
            for q in touched:
                q.flush()
            self._checkpoint()
        return results
