"""FastProcessQueue: RocketMQ's consumer ProcessQueue (PQ-1 … PQ-20) on sorted Python lists.

The observable behaviour — return values, counters, snapshots, typed errors — is the PQ rules'
(spec.process_queue), quirks included: msgCount is a counter, msgSize drifts on a re-put, the
queueOffsetMax is the last NEW offset, commit on an empty consuming tree raises. The two
TreeMaps are `fast.pq_tree.OffsetTree`s: a pull's put, an acknowledgement's remove, a take, a
commit and a rollback are each a few C-level list operations per batch; anything else costs a
bisect per message.

Every call validates its whole input (and reads the clock) before it takes the lock, so a call
that raises leaves the queue exactly as it was.

Locking: one `threading.RLock` guards all state, where Java uses a ReentrantReadWriteLock over
the two trees. A reader-writer lock buys nothing here: the GIL already serialises the bytecode
of concurrent readers, the critical sections are a few list operations long, and a pure-Python
RW lock would cost a Condition round trip on every call, reads included. Reentrancy is needed
because cleanExpiredMsg holds the lock while it calls removeMessage, as Java does. Single
fields (flags, counters, timestamps) are read without it: one attribute load is atomic under
the GIL, as Java's volatile and Atomic reads are.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from pullspec.fast.pq_tree import OffsetTree, body_bytes, require_longs, validate_batch
from pullspec.spec import process_queue as pq
from pullspec.spec.clock import Clock
from pullspec.spec.errors import (
    JAVA_INT_MAX,
    InvalidTypeError,
    NoSuchElementError,
    conforms,
    require_bool,
    require_int,
    require_non_negative,
    require_range,
)
from pullspec.spec.message import StoredMessage
from pullspec.spec.process_queue import SendMessageBack
from pullspec.spec.profiles import Profile
from pullspec.spec.ruleset import Ruleset

log = logging.getLogger(__name__)


class FastProcessQueue:
    """A thread-safe, array-backed `spec.protocols.ProcessQueue`, timed by an injected Clock.

    >>> from pullspec.spec import ManualClock, Profile, StoredMessage
    >>> queue = FastProcessQueue(ManualClock(0), Profile.V4_9)
    >>> pulled = [StoredMessage("T", 0, offset, 0, 0, 0, b"x" * 10) for offset in range(3)]
    >>> queue.put_messages(pulled), queue.msg_count, queue.msg_size
    (True, 3, 30)
    >>> queue.remove_messages(pulled[:1])  # consumed: the offset to commit is the next cached
    1
    """

    def __init__(
        self,
        clock: Clock,
        profile: Profile,
        lock_max_live_time_ms: int = pq.LOCK_MAX_LIVE_TIME_MS,
        pull_max_idle_time_ms: int = pq.PULL_MAX_IDLE_TIME_MS,
    ) -> None:
        if not conforms(clock, Clock):
            raise InvalidTypeError("clock", clock, "Clock")
        self._clock = clock
        self._profile = Profile.parse(profile)
        #: The profile's rules, looked up once (PQ-18 changed in 4.9).
        self._rules = Ruleset.of(self._profile)
        self._lock_max_live_time_ms = require_int("lock_max_live_time_ms", lock_max_live_time_ms)
        self._pull_max_idle_time_ms = require_int("pull_max_idle_time_ms", pull_max_idle_time_ms)
        start = pq.initial_state(clock.now_ms())
        self._lock = threading.RLock()
        self._cached = OffsetTree()  # msgTreeMap
        self._taken = OffsetTree()  # consumingMsgOrderlyTreeMap
        self._msg_count = 0
        self._msg_size = 0
        self._queue_offset_max = 0
        self._msg_acc_cnt = 0
        self._consuming = False
        self._dropped = False
        self._locked = False
        self._last_lock_timestamp = start.last_lock_timestamp
        self._last_pull_timestamp = start.last_pull_timestamp
        self._last_consume_timestamp = start.last_consume_timestamp
        self._try_unlock_times = 0

    @property
    def profile(self) -> Profile:
        """The version profile this queue follows."""
        return self._profile

    def snapshot(self) -> pq.ProcessQueueState:
        """The whole state, frozen (equal to the reference's after the same calls)."""
        with self._lock:
            return pq.ProcessQueueState(
                msg_tree=self._cached.values(),
                consuming_tree=self._taken.values(),
                msg_count=self._msg_count,
                msg_size=self._msg_size,
                queue_offset_max=self._queue_offset_max,
                msg_acc_cnt=self._msg_acc_cnt,
                consuming=self._consuming,
                dropped=self._dropped,
                locked=self._locked,
                last_lock_timestamp=self._last_lock_timestamp,
                last_pull_timestamp=self._last_pull_timestamp,
                last_consume_timestamp=self._last_consume_timestamp,
                try_unlock_times=self._try_unlock_times,
            )

    # Operations (RocketMQ's methods) -----------------------------------------------------------

    def put_messages(self, msgs: Sequence[StoredMessage]) -> bool:
        """putMessage (PQ-2): cache `msgs`; True when the caller must dispatch consumption.

        Offsets outside Java's long range raise InvalidArgumentError (RocketMQ cannot hold them).
        """
        batch, offsets = validate_batch("msgs", msgs)
        # Java parses MAX_OFFSET after changing the tree; parsing first keeps a failure clean.
        last_max_offset = pq.max_offset_property(batch[-1]) if batch else None
        require_longs(offsets)
        with self._lock:
            if batch:
                new = self._cached.put(batch, offsets)
                if new:
                    self._msg_count += len(new)
                    self._msg_size += body_bytes(new)
                    # PQ-4: the new offset inserted last in list order, not the largest.
                    self._queue_offset_max = new[-1].queue_offset
                self._msg_acc_cnt = pq.msg_acc_cnt_after(
                    self._msg_acc_cnt, offsets[-1], last_max_offset
                )
            dispatch = pq.dispatch_to_consume(len(self._cached) > 0, self._consuming)
            self._consuming = self._consuming or dispatch
            return dispatch

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        """removeMessage (PQ-7): uncache `msgs`; −1 if nothing was cached on entry, else the
        smallest offset still cached, or queueOffsetMax + 1 when this call emptied the cache."""
        batch, offsets = validate_batch("msgs", msgs)
        # An offset beyond Java's long range is never cached, so it is just not found.
        now = require_int("now", self._clock.now_ms())
        with self._lock:
            self._last_consume_timestamp = now
            cached = self._cached
            if not cached.keys:
                return -1
            removed = cached.remove(batch, offsets)
            if removed:
                self._msg_count -= len(removed)
                # PQ-13: the ARGUMENT's body length (its first occurrence removed the entry).
                self._msg_size -= body_bytes(removed)
            return cached.keys[0] if cached.keys else self._queue_offset_max + 1

    def take_messages(self, batch_size: int) -> list[StoredMessage]:
        """takeMessages (PQ-8): move up to `batch_size` lowest cached messages to the consuming
        tree; clears `consuming` when it takes nothing. No counter changes."""
        n = require_range("batch_size", batch_size, 0, JAVA_INT_MAX)
        now = require_int("now", self._clock.now_ms())
        with self._lock:
            self._last_consume_timestamp = now
            keys, taken = self._cached.pop_first(n)
            self._taken.put(taken, keys)
            self._consuming = self._consuming and len(taken) > 0
            return taken

    def commit(self) -> int:
        """commit (PQ-9): release the consuming tree; its last offset + 1, or NoSuchElementError
        (changing nothing) when it is empty."""
        with self._lock:
            taken = self._taken
            if not taken.keys:
                raise NoSuchElementError("commit: the consuming tree is empty")
            offset = taken.keys[-1]
            self._msg_count -= len(taken.keys)
            # The STORED objects' body lengths, unlike removeMessage.
            self._msg_size -= body_bytes(taken.msgs)
            taken.clear()
            return offset + 1

    def rollback(self) -> None:
        """rollback (PQ-10): return the consuming tree to the cache; no counter changes."""
        with self._lock:
            self._cached.put(self._taken.msgs, self._taken.keys)
            self._taken.clear()

    def make_messages_to_consume_again(self, msgs: Sequence[StoredMessage]) -> None:
        """makeMessageToConsumeAgain (PQ-11): uncache `msgs` from the consuming tree and put them
        into the cache, taken or not; no counter changes."""
        batch, offsets = validate_batch("msgs", msgs)
        require_longs(offsets)
        with self._lock:
            # The trees are independent, so all removes then all puts is Java's interleaving.
            self._taken.remove(batch, offsets)
            self._cached.put(batch, offsets)

    def clear(self) -> None:
        """clear (PQ-12): empty both trees and zero msgCount, msgSize and queueOffsetMax."""
        with self._lock:
            self._cached.clear()
            self._taken.clear()
            self._msg_count = self._msg_size = self._queue_offset_max = 0

    def inc_try_unlock_times(self) -> None:
        """incTryUnlockTimes (PQ-20)."""
        with self._lock:
            self._try_unlock_times += 1

    def clean_expired_msg(
        self,
        send_message_back: SendMessageBack,
        consume_timeout_min: int = pq.DEFAULT_CONSUME_TIMEOUT_MIN,
        consume_orderly: bool = False,
    ) -> None:
        """cleanExpiredMsg (PQ-18): send expired head messages back (delay level 3) and uncache
        them; `send_message_back(msg, delay_level)` stands for DefaultMQPushConsumer's."""
        timeout = require_non_negative("consume_timeout_min", consume_timeout_min)
        if require_bool("consume_orderly", consume_orderly):
            return
        expired_head = self._rules.expired_head
        # Java reads the size without the lock; locked, it never sees half a batch. Same cost.
        with self._lock:
            loops = min(len(self._cached), pq.CLEAN_EXPIRED_LOOP_MAX)
        for _ in range(loops):
            with self._lock:
                # The rules look at the head only; a NumberFormatError escapes, as in Java.
                msg = expired_head(self._cached.head(), self._clock.now_ms(), timeout)
            if msg is None:
                break
            # Sent outside the lock (Java too), so a slow broker call does not block the queue.
            try:
                send_message_back(msg, pq.SEND_BACK_DELAY_LEVEL)
            except Exception:
                # Java logs and goes on; the same head may be retried in this very sweep.
                log.exception("send expired msg exception")
                continue
            log.info("send expire msg back. queueOffset=%d", msg.queue_offset)
            with self._lock:
                # The listener may have removed it meanwhile; only the unchanged head goes.
                if self._cached.keys[:1] == [msg.queue_offset]:
                    self.remove_messages([msg])

    # Reads -------------------------------------------------------------------------------------

    def is_lock_expired(self) -> bool:
        """isLockExpired (PQ-15): now − lastLockTimestamp > lockMaxLiveTime, strictly."""
        return pq.is_lock_expired(
            self._clock.now_ms(), self._last_lock_timestamp, self._lock_max_live_time_ms
        )

    def is_pull_expired(self) -> bool:
        """isPullExpired (PQ-16): now − lastPullTimestamp > pullMaxIdleTime, strictly."""
        return pq.is_pull_expired(
            self._clock.now_ms(), self._last_pull_timestamp, self._pull_max_idle_time_ms
        )

    def has_temp_message(self) -> bool:
        """hasTempMessage (PQ-12): anything cached (the consuming tree aside)."""
        # Locked: a tree's length is two fields, which another thread may change in between.
        with self._lock:
            return len(self._cached) > 0

    @property
    def max_span(self) -> int:
        """getMaxSpan (PQ-6): last cached offset − first, or 0."""
        with self._lock:
            keys = self._cached.keys
            return keys[-1] - keys[0] if keys else 0

    @property
    def msg_count(self) -> int:
        """msgCount (PQ-13)."""
        return self._msg_count

    @property
    def msg_size(self) -> int:
        """msgSize: body bytes (PQ-13)."""
        return self._msg_size

    @property
    def queue_offset_max(self) -> int:
        """queueOffsetMax (PQ-4)."""
        return self._queue_offset_max

    @property
    def msg_acc_cnt(self) -> int:
        """msgAccCnt (PQ-5)."""
        return self._msg_acc_cnt

    @property
    def consuming(self) -> bool:
        """The dispatch flag (PQ-3)."""
        return self._consuming

    @property
    def cached_offsets(self) -> list[int]:
        """The keys of msgTreeMap, ascending."""
        with self._lock:
            return self._cached.keys.copy()

    @property
    def consuming_offsets(self) -> list[int]:
        """The keys of consumingMsgOrderlyTreeMap, ascending."""
        with self._lock:
            return self._taken.keys.copy()

    @property
    def last_consume_timestamp(self) -> int:
        """lastConsumeTimestamp (PQ-17)."""
        return self._last_consume_timestamp

    @property
    def try_unlock_times(self) -> int:
        """tryUnlockTimes (PQ-20)."""
        return self._try_unlock_times

    # Flags and timestamps the owner writes (plain fields, Java's volatiles) ---------------------

    @property
    def dropped(self) -> bool:
        """dropped (PQ-14)."""
        return self._dropped

    @dropped.setter
    def dropped(self, value: bool) -> None:
        self._dropped = require_bool("dropped", value)

    @property
    def locked(self) -> bool:
        """locked (PQ-15)."""
        return self._locked

    @locked.setter
    def locked(self, value: bool) -> None:
        self._locked = require_bool("locked", value)

    @property
    def last_lock_timestamp(self) -> int:
        """lastLockTimestamp (PQ-15)."""
        return self._last_lock_timestamp

    @last_lock_timestamp.setter
    def last_lock_timestamp(self, value: int) -> None:
        self._last_lock_timestamp = require_int("last_lock_timestamp", value)

    @property
    def last_pull_timestamp(self) -> int:
        """lastPullTimestamp (PQ-16)."""
        return self._last_pull_timestamp

    @last_pull_timestamp.setter
    def last_pull_timestamp(self, value: int) -> None:
        self._last_pull_timestamp = require_int("last_pull_timestamp", value)
