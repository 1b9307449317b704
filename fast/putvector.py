"""The vectorized append of a MessageBatch: the same checks and bytes as the per-message path
(fast.putpath), done once per distinct topic and property set and with numpy over the columns;
records encoded straight into the mapped commit log (fast.encode_kernels). PutResults: the
answers by columns."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple, overload

import attrs
import numpy as np

from pullspec.fast.batch import MessageBatch
from pullspec.fast.encode_kernels import Run, Tails, encode_run, host_bytes, make_tails
from pullspec.fast.gather import I64
from pullspec.spec.clock import Clock, ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.filter import tags_string_to_tags_code
from pullspec.spec.layout import (
    END_FILE_MIN_BLANK_LENGTH,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    LayoutRules,
    calc_msg_length,
    is_dispatched_type,
    validate_topic,
)
from pullspec.spec.message import PROPERTY_DELAY, PROPERTY_TAGS, Properties
from pullspec.spec.profiles import Profile
from pullspec.spec.results import PutMessageResult
from pullspec.spec.status import BrokerRole, PutMessageStatus

if TYPE_CHECKING:
    from pullspec.fast.commitlog import CommitLog
    from pullspec.fast.consumequeue import ConsumeQueue

#: Java int and long ranges, inclusive (a record's 4- and 8-byte fields).
INT32_RANGE = (-(1 << 31), (1 << 31) - 1)
INT64_RANGE = (-(1 << 63), (1 << 63) - 1)
#: Bytes of a record with IPv4 hosts besides its body, topic and properties.
_FIXED = calc_msg_length(0, 0, 0, 0)
_CACHE_LIMIT = 4096


def properties_tags_code(properties: Properties, properties_string: str, rules: LayoutRules) -> int:
    """FILTER-1 on the properties as the dispatcher will parse them back from the record: TAGS
    as given unless a name or value holds a separator or is empty, when the stored string must
    be parsed."""
    plain = all(
        k and v and NAME_VALUE_SEPARATOR not in k + v and PROPERTY_SEPARATOR not in k + v
        for k, v in properties
    )
    if plain:
        return tags_string_to_tags_code(dict(properties).get(PROPERTY_TAGS))
    parsed = rules.string_to_message_properties(properties_string)
    return tags_string_to_tags_code(dict(parsed).get(PROPERTY_TAGS))


class EncodedSet(NamedTuple):
    """A property set as stored: its string, UTF-8 bytes and consume-queue tags code."""

    text: str
    data: bytes
    tags_code: int


class Plan(NamedTuple):
    """A batch the vectorized path accepted: its record lengths, tags codes and tails."""

    lengths: I64
    tags: I64
    tails: Tails


def _within(column: I64, bounds: tuple[int, int]) -> bool:
    return not len(column) or (bounds[0] <= int(column.min()) and int(column.max()) <= bounds[1])


class VectorPut:
    """Mixin: MmapMessageStore's vectorized append."""

    if TYPE_CHECKING:
        commit_log: CommitLog
        config: StoreConfig
        profile: Profile
        rules: LayoutRules
        clock: Clock
        flush_mode: str
        _role: BrokerRole
        _write_error: OSError | None
        _counters: dict[tuple[str, int], int]
        _last_store_timestamp: int
        #: Plain attributes the store sets in its __init__ (see fast.putsmall.prepared_cache).
        _topic_cache: dict[str, bytes | None]
        _set_cache: dict[Properties, EncodedSet | None]

        def _queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...
        def _checkpoint(self) -> None: ...

    def _caches(self) -> tuple[dict[str, bytes | None], dict[Properties, EncodedSet | None]]:
        """Per distinct topic its UTF-8 bytes (None when TopicValidator refuses it), per distinct
        property set its EncodedSet (None when it asks for the delay rewrite)."""
        topics, sets = self._topic_cache, self._set_cache
        if len(topics) > _CACHE_LIMIT:
            topics.clear()
        if len(sets) > _CACHE_LIMIT:
            sets.clear()
        return topics, sets

    def _plan(self, batch: MessageBatch) -> Plan | None:
        """Validate `batch` as the per-message path would, by columns; None when it holds
        anything this path leaves to that one (a refused message, so that it raises exactly
        as for the list; a delay rewrite; IPv6 hosts; a value out of its Java field)."""
        born, store, sys_flag = batch.born_host, batch.store_host, batch.sys_flag
        if (
            born.is_ipv6
            or store.is_ipv6
            or sys_flag & (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
            or not INT32_RANGE[0] <= sys_flag <= INT32_RANGE[1]
            or not INT64_RANGE[0] <= batch.prepared_transaction_offset <= INT64_RANGE[1]
            or not _within(batch.queue_ids, INT32_RANGE)
            or not _within(batch.flags, INT32_RANGE)
            or not _within(batch.reconsume_times, INT32_RANGE)
        ):
            return None
        topic_cache, set_cache = self._caches()
        topics: list[bytes] = []
        for name in batch.topics:
            if name not in topic_cache:
                topic_cache[name] = None if validate_topic(name) else name.encode("utf-8")
            data = topic_cache[name]
            if data is None:
                return None
            topics.append(data)
        sets: list[EncodedSet] = []
        for props in batch.property_sets:
            if props not in set_cache:
                set_cache[props] = self._encode_set(props)
            found = set_cache[props]
            if found is None:
                return None
            sets.append(found)
        # Unused dictionary entries are checked too: stricter, never wrong (the list path decides).
        body_lengths = np.diff(batch.body_offsets)
        topic_lengths = np.array([len(t) for t in topics], dtype=np.int64)
        set_lengths = np.array([len(s.data) for s in sets], dtype=np.int64)
        lengths = (
            _FIXED
            + body_lengths
            + topic_lengths[batch.topic_index]
            + set_lengths[batch.property_index]
        )
        if len(lengths):
            longest_body = int(body_lengths.max())
            longest_topic = int(topic_lengths.max())
            for s in sets:
                # LAYOUT-11 only grows stricter with longer records: check the longest possible.
                status = self.rules.check_message_limits(
                    "",
                    s.text,
                    longest_body,
                    _FIXED + longest_body + longest_topic + len(s.data),
                    self.config.max_message_size,
                )
                if status is not None:
                    return None
            if int(lengths.max()) + END_FILE_MIN_BLANK_LENGTH > self.commit_log.file_size:
                return None
        codes = np.array([s.tags_code for s in sets], dtype=np.int64)
        return Plan(
            lengths, codes[batch.property_index], make_tails(topics, [s.data for s in sets])
        )

    def _encode_set(self, props: Properties) -> EncodedSet | None:
        if any(k == PROPERTY_DELAY for k, _ in props):
            return None
        text = self.rules.message_properties_to_string(props)
        return EncodedSet(text, text.encode("utf-8"), properties_tags_code(props, text, self.rules))

    def _store_times(self, n: int) -> I64:
        """The store timestamp of each of n records: one clock reading per record, as the
        per-message path takes them (a ManualClock reads the same until told to move)."""
        clock = self.clock
        if type(clock) is ManualClock:
            return np.full(n, clock.now_ms(), dtype=np.int64)
        now = clock.now_ms
        return np.array([now() for _ in range(n)], dtype=np.int64)

    def _queue_offsets(
        self, batch: MessageBatch
    ) -> tuple[I64, list[tuple[tuple[str, int], int, I64 | None]]]:
        """STORE-18 by columns: each message's queue offset, and per queue touched (in order of
        first message) its key, first offset and message indices (None: every message)."""
        n = len(batch)
        if not is_dispatched_type(batch.sys_flag):
            return np.zeros(n, dtype=np.int64), []
        qids, names = batch.queue_ids, batch.topics
        if len(set(names)) == 1 and int(qids.min()) == int(qids.max()):
            key = (names[0], int(qids[0]))
            base = self._counters.get(key, 0)
            self._counters[key] = base + n
            return base + np.arange(n, dtype=np.int64), [(key, base, None)]
        # A topic named twice in the dictionary is one topic: key queues by its first entry.
        first = np.array([names.index(t) for t in names], dtype=np.int64)
        keys = (first[batch.topic_index] << 32) | (qids & 0xFFFFFFFF)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        sizes = np.diff(np.r_[starts, n])
        bases = np.empty(len(starts), dtype=np.int64)
        groups: list[tuple[tuple[str, int], int, I64 | None]] = []
        for g in np.argsort(order[starts], kind="stable").tolist():
            s = int(starts[g])
            k = int(order[s])
            key = (batch.topics[int(batch.topic_index[k])], int(qids[k]))
            bases[g] = self._counters.get(key, 0)
            self._counters[key] = int(bases[g]) + int(sizes[g])
            members: I64 = order[s : s + int(sizes[g])]
            groups.append((key, int(bases[g]), members))
        offsets = np.empty(n, dtype=np.int64)
        offsets[order] = np.repeat(bases - starts, sizes) + np.arange(n, dtype=np.int64)
        return offsets, groups

    def _store_batch(self, batch: MessageBatch, plan: Plan) -> PutResults:
        """Append a planned batch: place its records in runs (LAYOUT-7), encode each run into its
        file, then dispatch each queue's entries with one write."""
        n = len(batch)
        if self._role is BrokerRole.SLAVE or self._write_error is not None:
            return PutResults.refused(PutMessageStatus.SERVICE_NOT_AVAILABLE, n)
        lengths = plan.lengths
        if n == 0:
            return PutResults(PutMessageStatus.PUT_OK, lengths, lengths, lengths)
        log = self.commit_log
        low = log.max_offset()
        now = self._store_times(n)
        body_starts = batch.body_offsets[:-1]
        body_lengths = np.diff(batch.body_offsets)
        queue_offsets, groups = self._queue_offsets(batch)
        rel = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=rel[1:])
        phys = np.empty(n, dtype=np.int64)
        born = host_bytes(batch.born_host.ip, batch.born_host.port)
        store = host_bytes(batch.store_host.ip, batch.store_host.port)
        for i, j in log.runs(lengths):
            run_bytes = int(rel[j - 1] + lengths[j - 1] - rel[i])
            first = log.reserve(run_bytes, int(now[i]))
            # The file's write time is the clock reading of the record that ends the run.
            out, pos = log.region(first, run_bytes, int(now[min(j, n - 1)]))
            run_rel = rel[i:j] - rel[i]
            phys[i:j] = first + run_rel
            columns: list[Any] = [run_rel, lengths[i:j]]
            columns += [batch.queue_ids[i:j], batch.flags[i:j], queue_offsets[i:j], phys[i:j]]
            columns += [batch.born_timestamps[i:j], now[i:j], batch.reconsume_times[i:j]]
            columns += [body_starts[i:j], body_lengths[i:j]]
            columns += [batch.topic_index[i:j], batch.property_index[i:j]]
            shared = (batch.sys_flag, batch.prepared_transaction_offset, born, store)
            # Part by part: the committer writes each part while the next is encoded.
            lo, cuts = 0, log.commit_parts(run_rel, run_bytes)
            try:
                for hi in cuts:
                    part = Run(*columns) if len(cuts) == 1 else Run(*(c[lo:hi] for c in columns))
                    encode_run(out, pos, part, batch.body_data, plan.tails, *shared)
                    if hi < j - i:
                        log.commit_part(first, int(run_rel[lo]), int(run_rel[hi]))
                        lo = hi
            except BaseException:
                log.wait_parts()
                raise
            log.commit_region(first, run_bytes, int(run_rel[lo]))
        log.publish()  # every record is written: readers may see them, then their entries
        self._last_store_timestamp = int(now[-1])
        touched = []
        for (topic, queue_id), base, idx in groups:
            q = self._queue(topic, queue_id)
            if idx is None:
                q.append(base, phys, lengths, plan.tags)
            else:
                q.append(base, phys[idx], lengths[idx], plan.tags[idx])
            touched.append(q)
        if self.flush_mode == "sync":
            log.sync(low)
            for q in touched:
                q.flush()
            self._checkpoint()
        return PutResults(PutMessageStatus.PUT_OK, queue_offsets, phys, lengths)


_RESULT_FIELDS = ("queue_offset", "wrote_offset", "wrote_bytes")


@attrs.frozen(eq=False)
class PutResults(Sequence[PutMessageResult]):
    """The store's answers to a batch by columns: one status for every message, and each
    message's queue offset, commit-log offset and record length (−1, −1, 0 when not stored).
    It is also a sequence of PutMessageResult, built on access.

    >>> import numpy as np
    >>> from pullspec.spec import PutMessageStatus
    >>> results = PutResults(
    ...     PutMessageStatus.PUT_OK, np.array([0, 1]), np.array([0, 94]), np.array([94, 94])
    ... )
    >>> results.wrote_offsets.tolist(), results[1].queue_offset
    ([0, 94], 1)
    """

    status: PutMessageStatus
    queue_offsets: I64
    wrote_offsets: I64
    wrote_bytes: I64

    def __attrs_post_init__(self) -> None:
        # The store may keep views of these columns (its consume-queue caches): never mutable.
        for column in (self.queue_offsets, self.wrote_offsets, self.wrote_bytes):
            column.flags.writeable = False

    @classmethod
    def refused(cls, status: PutMessageStatus, n: int) -> PutResults:
        """n messages answered `status` without being stored."""
        minus = np.full(n, -1, dtype=np.int64)
        return cls(status, minus, minus.copy(), np.zeros(n, dtype=np.int64))

    @classmethod
    def of(cls, results: Sequence[PutMessageResult]) -> PutResults:
        """The columns of per-message results that share one status."""
        statuses = {r.status for r in results}
        if len(statuses) > 1:
            raise InvalidArgumentError("results", len(results), "statuses differ")
        status = statuses.pop() if statuses else PutMessageStatus.PUT_OK
        q, p, n = ([getattr(r, f) for r in results] for f in _RESULT_FIELDS)
        return cls(status, *(np.array(c, dtype=np.int64) for c in (q, p, n)))

    def __len__(self) -> int:
        return len(self.queue_offsets)

    @overload
    def __getitem__(self, k: int) -> PutMessageResult: ...
    @overload
    def __getitem__(self, k: slice) -> list[PutMessageResult]: ...
    def __getitem__(self, k: int | slice) -> PutMessageResult | list[PutMessageResult]:
        if isinstance(k, slice):
            return self.to_list()[k]
        return PutMessageResult(
            self.status,
            int(self.queue_offsets[k]),
            int(self.wrote_offsets[k]),
            int(self.wrote_bytes[k]),
        )

    def __iter__(self) -> Iterator[PutMessageResult]:
        return iter(self.to_list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return self.to_list() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def to_list(self) -> list[PutMessageResult]:
        """One PutMessageResult per message."""
        columns = (self.queue_offsets, self.wrote_offsets, self.wrote_bytes)
        # map over the columns keeps the per-message work to the results' own __init__.
        return list(map(PutMessageResult, repeat(self.status), *(c.tolist() for c in columns)))
