"""The reference ProcessQueue: one frozen `spec.process_queue.ProcessQueueState`, advanced only by
the spec's rule functions, with timestamps from an injected Clock.

Each operation computes the whole next state before assigning it, so an operation that raises
leaves the queue exactly as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pullspec.spec import process_queue as pq
from pullspec.spec.clock import Clock
from pullspec.spec.errors import (
    InvalidTypeError,
    conforms,
    require_bool,
    require_int,
    require_non_negative,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.message import StoredMessage
from pullspec.spec.process_queue import SendMessageBack
from pullspec.spec.profiles import Profile
from pullspec.spec.ruleset import Ruleset

log = logging.getLogger(__name__)
# A library logs; the application decides where it goes (nothing by default).
log.addHandler(logging.NullHandler())


class ReferenceProcessQueue:
    """The simplest stateful ProcessQueue that follows the PQ rules step by step."""

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
        #: The rules of the profile, looked up once (a mutant swaps one).
        self.rules = Ruleset.of(self._profile)
        self._lock_max_live_time_ms = require_int("lock_max_live_time_ms", lock_max_live_time_ms)
        self._pull_max_idle_time_ms = require_int("pull_max_idle_time_ms", pull_max_idle_time_ms)
        self._state = pq.initial_state(clock.now_ms())

    @property
    def profile(self) -> Profile:
        """The version profile this queue follows."""
        return self._profile

    def snapshot(self) -> pq.ProcessQueueState:
        """The whole state, frozen."""
        return self._state

    # Operations (RocketMQ's methods) -----------------------------------------------------------

    def put_messages(self, msgs: Sequence[StoredMessage]) -> bool:
        """putMessage (PQ-2): cache `msgs`; True when the caller must dispatch consumption."""
        self._state, dispatch = pq.put_message(self._state, msgs)
        return dispatch

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int:
        """removeMessage (PQ-7): uncache `msgs`; the offset safe to commit, or −1."""
        self._state, offset = pq.remove_message(self._state, msgs, self._clock.now_ms())
        return offset

    def take_messages(self, batch_size: int) -> list[StoredMessage]:
        """takeMessages (PQ-8): move up to `batch_size` cached messages to the consuming tree."""
        self._state, taken = pq.take_messages(self._state, batch_size, self._clock.now_ms())
        return list(taken)

    def commit(self) -> int:
        """commit (PQ-9): release the consuming tree; its last offset + 1, or NoSuchElementError."""
        self._state, offset = pq.commit(self._state)
        return offset

    def rollback(self) -> None:
        """rollback (PQ-10): return the consuming tree to the cache."""
        self._state = pq.rollback(self._state)

    def make_messages_to_consume_again(self, msgs: Sequence[StoredMessage]) -> None:
        """makeMessageToConsumeAgain (PQ-11): put `msgs` back into the cache."""
        self._state = pq.make_message_to_consume_again(self._state, msgs)

    def clear(self) -> None:
        """clear (PQ-12): empty both trees and zero the counters."""
        self._state = pq.clear(self._state)

    def inc_try_unlock_times(self) -> None:
        """incTryUnlockTimes (PQ-20)."""
        self._state = pq.inc_try_unlock_times(self._state)

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
        expired_head = self.rules.expired_head
        for _ in range(min(len(self._state.msg_tree), pq.CLEAN_EXPIRED_LOOP_MAX)):
            # A NumberFormatError escapes here, as Java's does: nothing in the sweep catches it.
            msg = expired_head(self._state.msg_tree, self._clock.now_ms(), timeout)
            if msg is None:
                break
            try:
                send_message_back(msg, pq.SEND_BACK_DELAY_LEVEL)
            except Exception:
                # Java logs and goes on; the same head may be retried in this very sweep.
                log.exception("send expired msg exception")
                continue
            log.info("send expire msg back. queueOffset=%d", msg.queue_offset)
            head = self._state.msg_tree
            # The listener may have removed it meanwhile; only the unchanged head is removed.
            if head and head[0].queue_offset == msg.queue_offset:
                self.remove_messages([msg])

    # Reads -------------------------------------------------------------------------------------

    def is_lock_expired(self) -> bool:
        """isLockExpired (PQ-15) at the clock's now."""
        return pq.is_lock_expired(
            self._clock.now_ms(), self._state.last_lock_timestamp, self._lock_max_live_time_ms
        )

    def is_pull_expired(self) -> bool:
        """isPullExpired (PQ-16) at the clock's now."""
        return pq.is_pull_expired(
            self._clock.now_ms(), self._state.last_pull_timestamp, self._pull_max_idle_time_ms
        )

    def has_temp_message(self) -> bool:
        """hasTempMessage (PQ-12): anything cached (the consuming tree aside)."""
        return pq.has_temp_message(self._state)

    @property
    def max_span(self) -> int:
        """getMaxSpan (PQ-6)."""
        return pq.max_span(self._state.cached_offsets)

    @property
    def msg_count(self) -> int:
        """msgCount (PQ-13)."""
        return self._state.msg_count

    @property
    def msg_size(self) -> int:
        """msgSize: body bytes (PQ-13)."""
        return self._state.msg_size

    @property
    def queue_offset_max(self) -> int:
        """queueOffsetMax (PQ-4)."""
        return self._state.queue_offset_max

    @property
    def msg_acc_cnt(self) -> int:
        """msgAccCnt (PQ-5)."""
        return self._state.msg_acc_cnt

    @property
    def consuming(self) -> bool:
        """The dispatch flag (PQ-3)."""
        return self._state.consuming

    @property
    def cached_offsets(self) -> list[int]:
        """The keys of msgTreeMap, ascending."""
        return list(self._state.cached_offsets)

    @property
    def consuming_offsets(self) -> list[int]:
        """The keys of consumingMsgOrderlyTreeMap, ascending."""
        return list(self._state.consuming_offsets)

    @property
    def last_consume_timestamp(self) -> int:
        """lastConsumeTimestamp (PQ-17)."""
        return self._state.last_consume_timestamp

    @property
    def try_unlock_times(self) -> int:
        """tryUnlockTimes (PQ-20)."""
        return self._state.try_unlock_times

    # Flags and timestamps the owner writes -----------------------------------------------------

    @property
    def dropped(self) -> bool:
        """dropped (PQ-14)."""
        return self._state.dropped

    @dropped.setter
    def dropped(self, value: bool) -> None:
        self._state = pq.set_dropped(self._state, value)

    @property
    def locked(self) -> bool:
        """locked (PQ-15)."""
        return self._state.locked

    @locked.setter
    def locked(self, value: bool) -> None:
        self._state = evolve(self._state, locked=require_bool("locked", value))

    @property
    def last_lock_timestamp(self) -> int:
        """lastLockTimestamp (PQ-15)."""
        return self._state.last_lock_timestamp

    @last_lock_timestamp.setter
    def last_lock_timestamp(self, value: int) -> None:
        ts = require_int("last_lock_timestamp", value)
        self._state = evolve(self._state, last_lock_timestamp=ts)

    @property
    def last_pull_timestamp(self) -> int:
        """lastPullTimestamp (PQ-16)."""
        return self._state.last_pull_timestamp

    @last_pull_timestamp.setter
    def last_pull_timestamp(self, value: int) -> None:
        ts = require_int("last_pull_timestamp", value)
        self._state = evolve(self._state, last_pull_timestamp=ts)
