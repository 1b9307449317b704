"""The reference driver of area `process_queue_maintenance` (vocabulary: conformance.adapters.process_queue_maintenance, docs/protocol.md)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.spec import process_queue as spec_pq
from pullspec.spec.clock import ManualClock
from pullspec.spec.message import PROPERTY_CONSUME_START_TIME, StoredMessage
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "process_queue_maintenance"

# cleanExpiredMsg logs a failed send-back with its traceback, as RocketMQ does; a case that makes
# send-backs fail on purpose should not print that on stderr when nobody configured logging.
logging.getLogger("pullspec.reference.process_queue").addHandler(logging.NullHandler())


class Driver(_client.DriverBase):
    """The reference driver: reference.process_queue.ReferenceProcessQueue."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.clock = ManualClock(int(config.get("clockStart", 0)))
        self.pq = self.classes.process_queue(self.clock, profile)

    def _state(self) -> dict[str, Any]:
        return {
            "now": self.clock.now_ms(),
            "msgCount": self.pq.msg_count,
            "msgSize": self.pq.msg_size,
            "queueOffsetMax": self.pq.queue_offset_max,
            "cachedOffsets": list(self.pq.cached_offsets),
            "dropped": self.pq.dropped,
            "tryUnlockTimes": self.pq.try_unlock_times,
        }

    def op_put_messages(self, args: _client.Args) -> dict[str, Any]:
        """putMessage."""
        msgs = []
        for raw in args.req("msgs"):
            props = dict(raw.get("properties") or {})
            if raw.get("consumeStartTime") is not None:
                props[PROPERTY_CONSUME_START_TIME] = str(raw["consumeStartTime"])
            msgs.append(_client.message({**raw, "properties": props}))
        self.pq.put_messages(msgs)
        return self._state()

    def op_advance_clock(self, args: _client.Args) -> dict[str, Any]:
        """Let time pass."""
        self.clock.advance(args.int("ms"))
        return self._state()

    def op_clean_expired_msg(self, args: _client.Args) -> dict[str, Any]:
        """cleanExpiredMsg (PQ-18)."""
        fails = set(args.get("sendBackFails", []))
        sent: list[dict[str, Any]] = []

        def send_back(msg: StoredMessage, delay_level: int) -> None:
            sent.append({"queueOffset": msg.queue_offset, "delayLevel": delay_level})
            if msg.queue_offset in fails:
                raise RuntimeError("sendMessageBack failed")

        self.pq.clean_expired_msg(
            send_back, args.int("consumeTimeout", 15), args.bool("consumeOrderly", False)
        )
        return {"sentBack": sent, **self._state()}

    def op_clear(self, args: _client.Args) -> dict[str, Any]:
        """clear (PQ-12)."""
        self.pq.clear()
        return self._state()

    def op_set_dropped(self, args: _client.Args) -> dict[str, Any]:
        """setDropped (PQ-14)."""
        self.pq.dropped = args.bool("dropped")
        return self._state()

    def op_inc_try_unlock_times(self, args: _client.Args) -> dict[str, Any]:
        """incTryUnlockTimes (PQ-20)."""
        self.pq.inc_try_unlock_times()
        return self._state()

    def op_interrupted(self, args: _client.Args) -> dict[str, Any]:
        """What a method returns when its tree-lock acquisition is interrupted (PQ-19)."""
        result = spec_pq.interrupted_result(str(args.req("method")))
        return {"result": list(result) if isinstance(result, tuple) else result}
