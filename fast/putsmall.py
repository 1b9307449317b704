"""The per-message append path of MmapMessageStore, for the short lists the vectorized path
(fast.putvector) would spend more on numpy's fixed costs than on the messages: validate each
message, encode its record from a struct-packed head and cached topic and property bytes, write
each commit-log segment with one copy and each queue's entries with one packed write.

`put_message` has a one-pass path for a message of a shape the store has stored before
(docs/using/fast.md, "One message per call"); everything else goes through `_put_each`."""

from __future__ import annotations

import functools
import struct
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pullspec.fast.putvector import INT32_RANGE, INT64_RANGE, properties_tags_code
from pullspec.fast.results import PlacedResult, set_placed
from pullspec.spec.clock import Clock
from pullspec.spec.config import StoreConfig
from pullspec.spec.delay import delay_rewrite, deliver_timestamp
from pullspec.spec.errors import IllegalTopicError, InvalidTypeError, MessageIllegalError
from pullspec.spec.evolve import evolve
from pullspec.spec.layout import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    LayoutRules,
    body_crc,
    calc_msg_length,
    is_dispatched_type,
    validate_topic,
)
from pullspec.spec.message import PROPERTY_DELAY, BrokerInnerMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.record import encode_record_bytes, host_sys_flag
from pullspec.spec.results import PutMessageResult
from pullspec.spec.status import BrokerRole, PutMessageStatus

if TYPE_CHECKING:
    from pullspec.fast.commitlog import CommitLog
    from pullspec.fast.consumequeue import ConsumeQueue

#: A record's fields before its body with IPv4 hosts (LAYOUT-5): TOTALSIZE … BODYLENGTH.
_HEAD_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_PUT_OK = PutMessageStatus.PUT_OK
_new = object.__new__
#: A slave's answer to every put (frozen, so one instance serves them all).
_UNAVAILABLE = PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
_SLAVE = BrokerRole.SLAVE
_CACHE_LIMIT = 4096
#: Validated messages kept per store configuration, the largest body one may have (together at
#: most 4 MiB of bodies kept alive), and configurations kept.
_PREPARED_KEPT = 4096
_PREPARED_BODY_MAX = 1024
_PREPARED_CONFIGS = 16
#: Validated messages by identity, per (max message size, commit-log file size, profile,
#: delay levels): what validation depends on besides the (frozen) message. Each entry holds its
#: message, so the id is not reused while cached.
_PREPARED: dict[tuple[Any, ...], dict[int, tuple[BrokerInnerMessage, Prepared]]] = {}


class Encoding(NamedTuple):
    """What a message's topic and properties contribute to its record, computed once per
    distinct pair."""

    topic: bytes
    properties: bytes
    properties_string: str
    tags_code: int
    #: The record's bytes after the body: [topic length][topic][properties length][properties].
    tail: bytes
    #: Whether the properties name DELAY (delay_rewrite may then move the message).
    delay: bool


#: Packs a whole record into a buffer at a position: `struct.Struct.pack_into` of
#: `record_packer`'s format, taking the head's fields, the body and the tail.
PackInto = Callable[..., None]


#: What put_message's one-pass path knows of a (topic, properties) pair the store has stored
#: before without DELAY: its tags code (FILTER-1), its record's tail (Encoding.tail), and by body
#: length, for the lengths LAYOUT-11 and the commit-log file size have accepted, the record
#: length and its packer. A plain tuple: the interpreter unpacks an exact tuple in one
#: specialized step, a NamedTuple through an iterator.
Shape = tuple[int, bytes, dict[int, tuple[int, PackInto]]]


@functools.lru_cache(maxsize=_CACHE_LIMIT)
def record_packer(body_length: int, tail_length: int) -> PackInto:
    """The `pack_into` of a whole IPv4 record (LAYOUT-5) with a body and a tail (topic and
    properties with their lengths) of these lengths: the head's fields, then the two as
    bytes. struct refuses a head value out of its Java field (struct.error)."""
    return struct.Struct(f"{_HEAD_V4.format}{body_length}s{tail_length}s").pack_into


#: Whether a sysFlag without IPv6 host bits is dispatched (STORE-18); other values (IPv6 hosts,
#: anything not an int) take the general path.
_DISPATCHED = {f: is_dispatched_type(f) for f in range(16)}


class Prepared(NamedTuple):
    """A validated message with its encoding and its record length."""

    msg: BrokerInnerMessage
    encoding: Encoding
    sys_flag: int
    length: int
    crc: int
    delay_level: int
    #: Whether it takes a queue offset and an entry (STORE-18).
    dispatched: bool


def stored_tags_code(msg: BrokerInnerMessage, properties_string: str, rules: LayoutRules) -> int:
    """FILTER-1 on a message's properties as the dispatcher will parse them back from the
    record (`properties_tags_code`)."""
    return properties_tags_code(msg.properties, properties_string, rules)


def prepared_cache(
    config: StoreConfig, profile: Profile, delay_levels: tuple[int, ...]
) -> dict[int, tuple[BrokerInnerMessage, Prepared]]:
    """The validated messages kept for stores of this configuration (`SmallPut._prepare`),
    shared by every such store in the process.

    The store keeps it, and its other put caches, as plain attributes set in __init__, never
    a cached_property or a write through `__dict__`: once an object's `__dict__` has been
    materialized, Python 3.11 no longer specializes reads of its attributes, and every
    `self.x` of the one-message put and pull then takes the interpreter's generic path (about
    50 against 12 ns a read)."""
    key = (config.max_message_size, config.mapped_file_size_commit_log, profile, delay_levels)
    found = _PREPARED.get(key)
    if found is None:
        if len(_PREPARED) >= _PREPARED_CONFIGS:
            _PREPARED.clear()
        found = _PREPARED[key] = {}
    return found


def _require_java(name: str, value: int, bounds: tuple[int, int]) -> None:
    if not bounds[0] <= value <= bounds[1]:
        raise MessageIllegalError(name, value, "does not fit its Java field", "MESSAGE_ILLEGAL")


class SmallPut:
    """Mixin: the put of a short list, message by message."""

    if TYPE_CHECKING:
        commit_log: CommitLog
        config: StoreConfig
        profile: Profile
        rules: LayoutRules
        clock: Clock
        flush_mode: str
        queues: dict[tuple[str, int], ConsumeQueue]
        _role: BrokerRole
        _write_error: OSError | None
        _counters: dict[tuple[str, int], int]
        _last_store_timestamp: int
        _delay_levels: tuple[int, ...]
        _put_lock: threading.Lock
        read_only: bool
        _closed: bool
        _refusing_puts: bool
        # The caches below are plain attributes the store sets in its __init__ (see
        # `prepared_cache`).
        #: The shapes put_message's one-pass path takes.
        _shapes: dict[tuple[str, Any], Shape]
        #: Encodings by (topic, properties), for `_encoded`.
        _encoding_cache: dict[tuple[str, Any], Encoding]
        #: Validated messages by identity, for `_prepare`.
        _prepared: dict[int, tuple[BrokerInnerMessage, Prepared]]

        def _queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...
        def _checkpoint(self) -> None: ...
        def _require_writable(self, what: str) -> None: ...
        def _stop_writes(self, exc: OSError) -> None: ...

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """Append one message to the commit log and dispatch it to its consume queue.

        Under the put lock, a message of a shape this store has stored before (topic and
        properties without DELAY, IPv4 hosts, a body length already checked) goes in one pass:
        the checks that depend on the message alone run here, and the Java field ranges by
        packing its record straight into the commit log's mapping past the write position
        (struct refuses a value out of its field; what it wrote is zeroed again), all before
        the store changes; then the record is published, then its entry. Anything else — a
        new shape, a record that starts a new file, a sync flush, a slave, a value out of
        range — takes `_put_each`, which validates in full and names the error."""
        # acquire/release rather than `with`, and the one-pass path in this frame: the context
        # protocol's two calls and a second frame each cost a few per cent of a put.
        lock = self._put_lock
        lock.acquire()
        try:
            if self._refusing_puts:  # read-only, closed, or stopped by a failed write
                self._require_writable("put")  # raises unless a failed write stopped it
                return self._put_each([msg])[0]  # validated, then refused
            if (
                type(msg) is not BrokerInnerMessage
                or msg.stored_properties is not None
                or self._role is _SLAVE
                or self.flush_mode == "sync"
            ):
                return self._put_each([msg])[0]
            topic = msg.topic
            shape = self._shapes.get((topic, msg.properties))
            born, store = msg.born_host, msg.store_host
            dispatched = _DISPATCHED.get(msg.sys_flag)
            if shape is None or dispatched is None or len(born.ip) != 4 or len(store.ip) != 4:
                return self._put_fresh(msg)
            body = msg.body
            tags_code, tail, lengths = shape
            placed = lengths.get(len(body))
            if placed is None:
                return self._put_fresh(msg)
            length, pack_record = placed
            log = self.commit_log
            at = log.room(length)
            if at is None:
                return self._put_fresh(msg)
            mm, pos, phys = at
            key = (topic, msg.queue_id)
            counters = self._counters
            counter = counters.get(key, 0)
            queue_offset = counter if dispatched else 0
            now = self.clock.now_ms()
            # The whole record, packed straight into the file's mapping past its write position.
            try:
                pack_record(
                    mm, pos, length, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF,
                    msg.queue_id, msg.flag, queue_offset, phys, msg.sys_flag,
                    msg.born_timestamp, born.ip, born.port, now, store.ip, store.port,
                    msg.reconsume_times, msg.prepared_transaction_offset, len(body), body, tail,
                )  # fmt: skip
            except struct.error:  # a value out of its Java field: _validate names it
                # struct wrote the fields before it: nothing past the write position may stay.
                mm[pos : pos + length] = bytes(length)
                return self._put_each([msg])[0]
            log.appended(length, now)
            self._last_store_timestamp = now
            if dispatched:
                counters[key] = counter + 1
                q = self.queues.get(key)
                if q is None:
                    q = self._queue(*key)
                q.append_one(queue_offset, phys, length, tags_code)
            # fast.results.placed inlined: a call fewer on every put.
            result: PlacedResult = _new(PlacedResult)
            set_placed(result, (queue_offset, phys, length))
            return result
        except OSError as exc:  # a write failed half-way: no later put may build on it
            self._stop_writes(exc)
            raise
        finally:
            lock.release()

    def _put_fresh(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """`_put_each` of one message, then remember its shape (when it has no DELAY and its
        record length) for put_message's one-pass path."""
        result = self._put_each([msg])[0]
        enc = self._encoding_cache.get((msg.topic, msg.properties))
        if enc is not None and not enc.delay and enc.tail and result.status is _PUT_OK:
            shapes = self._shapes
            shape = shapes.get((msg.topic, msg.properties))
            if shape is None:
                if len(shapes) > _CACHE_LIMIT:
                    shapes.clear()
                shape = shapes[(msg.topic, msg.properties)] = (enc.tags_code, enc.tail, {})
            lengths = shape[2]
            if len(lengths) > _CACHE_LIMIT:
                lengths.clear()
            lengths[len(msg.body)] = (
                calc_msg_length(0, len(msg.body), len(enc.topic), len(enc.properties)),
                record_packer(len(msg.body), len(enc.tail)),
            )
        return result

    def _encoded(self, msg: BrokerInnerMessage) -> Encoding:
        """The Encoding of a message's topic and properties, cached per (topic, properties): a
        workload repeats a handful of them. IllegalTopicError for a topic TopicValidator
        refuses."""
        cache = self._encoding_cache
        key = (msg.topic, msg.properties)
        found = cache.get(key)
        if found is None:
            why = validate_topic(msg.topic)
            if why:
                raise IllegalTopicError("topic", msg.topic, why)
            text = self.rules.message_properties_to_string(msg.properties)
            topic, properties = msg.topic.encode("utf-8"), text.encode("utf-8")
            tail = b"".join(
                (bytes((len(topic),)), topic, len(properties).to_bytes(2, "big"), properties)
                if len(topic) < 256 and len(properties) <= MAX_PROPERTIES_LENGTH
                else ()  # refused by check_message_limits before any record is encoded
            )
            found = Encoding(
                topic,
                properties,
                text,
                stored_tags_code(msg, text, self.rules),
                tail,
                any(k == PROPERTY_DELAY for k, _ in msg.properties),
            )
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
            cache[key] = found
        return found

    def _prepare(self, msg: BrokerInnerMessage) -> Prepared:
        """Validate one message (types, TopicValidator, LAYOUT-11, Java field ranges, fitting a
        commit-log file) without touching the store. A message object put again (a producer's
        retry, the campaigns' shared messages) is validated once: it is frozen, and the answer
        depends on nothing else but the store's configuration."""
        if type(msg) is BrokerInnerMessage:
            hit = self._prepared.get(id(msg))
            if hit is not None and hit[0] is msg:
                return hit[1]
            prepared = self._validate(msg)
            if len(msg.body) <= _PREPARED_BODY_MAX:
                cache = self._prepared
                if len(cache) >= _PREPARED_KEPT:
                    cache.clear()
                cache[id(msg)] = (msg, prepared)
            return prepared
        if not isinstance(msg, BrokerInnerMessage):
            raise InvalidTypeError("msg", msg, "BrokerInnerMessage")
        return self._validate(msg)

    def _validate(self, msg: BrokerInnerMessage) -> Prepared:
        level = 0
        enc = None
        if msg.stored_properties is None:
            enc = self._encoding_cache.get((msg.topic, msg.properties))
        if enc is None or enc.delay:
            # Not seen, or DELAY is set: delay_rewrite decides (and raises first).
            rewrite = delay_rewrite(
                msg.topic, msg.queue_id, msg.properties, msg.sys_flag, len(self._delay_levels)
            )
            if rewrite is not None:  # Java re-serialises the rewritten map
                topic_name, queue_id, rewritten, level = rewrite
                msg = evolve(
                    msg,
                    topic=topic_name,
                    queue_id=queue_id,
                    properties=rewritten,
                    stored_properties=None,
                )
            elif msg.stored_properties is not None:
                msg = evolve(msg, properties=msg.stored_properties, stored_properties=None)
            enc = self._encoded(msg)
        born, store = msg.born_host, msg.store_host
        sys_flag = msg.sys_flag
        if len(born.ip) != 4 or len(store.ip) != 4 or sys_flag & 0x30:
            sys_flag = host_sys_flag(sys_flag, born, store)
        body = msg.body
        length = calc_msg_length(sys_flag, len(body), len(enc.topic), len(enc.properties))
        status = self.rules.check_message_limits(
            msg.topic, enc.properties_string, len(body), length, self.config.max_message_size
        )
        if status is not None:
            raise MessageIllegalError("msg", msg.topic, f"{length}-byte record", status.value)
        if length + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log:
            raise MessageIllegalError(
                "msg", length, "the record cannot fit one commit-log file", "MESSAGE_ILLEGAL"
            )
        lo32, hi32, lo64, hi64 = INT32_RANGE[0], INT32_RANGE[1], INT64_RANGE[0], INT64_RANGE[1]
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
                ("queue_id", msg.queue_id, INT32_RANGE),
                ("flag", msg.flag, INT32_RANGE),
                ("sys_flag", msg.sys_flag, INT32_RANGE),
                ("reconsume_times", msg.reconsume_times, INT32_RANGE),
                ("born_timestamp", msg.born_timestamp, INT64_RANGE),
                ("prepared_transaction_offset", msg.prepared_transaction_offset, INT64_RANGE),
                ("born_host.port", born.port, INT32_RANGE),
                ("store_host.port", store.port, INT32_RANGE),
            ):
                _require_java(name, value, bounds)
        return Prepared(
            msg, enc, sys_flag, length, body_crc(body), level, is_dispatched_type(msg.sys_flag)
        )

    def _put_each(self, msgs: Sequence[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Validate every message, then append them one record at a time."""
        prepared = [self._prepare(m) for m in msgs]
        if self._role is _SLAVE or self._write_error is not None:
            return [_UNAVAILABLE] * len(prepared)
        log = self.commit_log
        size = log.file_size
        low = log.max_offset()
        clock = self.clock
        counters = self._counters
        results: list[PutMessageResult] = []
        # Per queue: the first queue offset and the (phys, size, tags code) entries from it.
        dispatch: dict[tuple[str, int], tuple[int, list[tuple[int, int, int]]]] = {}
        segment: list[bytes] = []
        segment_phys = 0
        now = 0
        for p in prepared:
            msg = p.msg
            length = p.length
            now = clock.now_ms()
            if segment and (
                log.wrote >= size or length + END_FILE_MIN_BLANK_LENGTH > size - log.wrote
            ):  # the record starts a new file (LAYOUT-7): the segment ends in this one
                log.write(segment_phys, b"".join(segment), now)
                segment = []
            phys = log.reserve(length, now)
            if not segment:
                segment_phys = phys
            key = (msg.topic, msg.queue_id)
            # STORE-18: a dispatched message takes the queue's counter, any other gets 0.
            counter = counters.get(key, 0)
            queue_offset = counter if p.dispatched else 0
            counters[key] = counter + 1 if p.dispatched else counter
            segment += self._record(p, queue_offset, phys, now)
            if p.dispatched:
                code = (
                    deliver_timestamp(p.delay_level, now, self._delay_levels)
                    if p.delay_level
                    else p.encoding.tags_code
                )
                found = dispatch.get(key)
                if found is None:
                    dispatch[key] = (queue_offset, [(phys, length, code)])
                else:
                    found[1].append((phys, length, code))
            results.append(PutMessageResult(_PUT_OK, queue_offset, phys, length))
        if segment:
            log.write(segment_phys, b"".join(segment), now)
        log.publish()  # every record is written: readers may see them, then their entries
        if prepared:
            self._last_store_timestamp = now
        touched = []
        queues = self.queues
        for key, (first, entries) in dispatch.items():
            q = queues.get(key)
            if q is None:
                q = self._queue(*key)
            q.append_entries(first, entries)
            touched.append(q)
        if self.flush_mode == "sync" and prepared:
            log.sync(low)
            for q in touched:
                q.flush()
            self._checkpoint()
        return results

    def _record(self, p: Prepared, queue_offset: int, phys: int, now: int) -> Sequence[bytes]:
        """The pieces of a message's record (LAYOUT-5): head, body, tail."""
        msg, enc = p.msg, p.encoding
        born, store = msg.born_host, msg.store_host
        if p.sys_flag & 0x30 == 0 and enc.tail:
            try:
                head = _HEAD_V4.pack(
                    p.length, MESSAGE_MAGIC_CODE, p.crc, msg.queue_id, msg.flag, queue_offset,
                    phys, p.sys_flag, msg.born_timestamp, born.ip, born.port, now, store.ip,
                    store.port, msg.reconsume_times, msg.prepared_transaction_offset,
                    len(msg.body),
                )  # fmt: skip
                return (head, msg.body, enc.tail)
            except struct.error:
                pass  # out of its Java field: the spec's encoder below names the field
        return (
            encode_record_bytes(
                enc.topic,
                enc.properties,
                msg.body,
                queue_id=msg.queue_id,
                flag=msg.flag,
                sys_flag=p.sys_flag,
                queue_offset=queue_offset,
                physical_offset=phys,
                born_timestamp=msg.born_timestamp,
                born_host=born,
                store_timestamp=now,
                store_host=store,
                reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=msg.prepared_transaction_offset,
                crc=p.crc,
            ),
        )
