"""What the store answers: `PutMessageResult` and `GetMessageResult`."""

from __future__ import annotations

import attrs

from pullspec.spec.message import StoredMessage
from pullspec.spec.record import queue_offsets_in
from pullspec.spec.status import GetMessageStatus, PutMessageStatus


@attrs.frozen
class PutMessageResult:
    """The store's answer to one putMessage: status, queue offset and where the record went."""

    status: PutMessageStatus
    queue_offset: int = -1
    wrote_offset: int = -1
    wrote_bytes: int = 0

    @property
    def ok(self) -> bool:
        """True when the message was appended."""
        return self.status is PutMessageStatus.PUT_OK


@attrs.frozen
class GetMessageResult:
    """The store's answer to getMessage (STORE-17)."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[StoredMessage, ...] = ()
    suggest_pulling_from_slave: bool = False
    #: The bytes each returned entry read, given only when some read is not one whole record
    #: (STORE-21: phys 0 served from another file); `messages` then holds, per entry, the record
    #: those bytes start with.
    bodies: tuple[bytes, ...] | None = attrs.field(default=None, kw_only=True, eq=False)

    @property
    def buffer_total_size(self) -> int:
        """The sum of the returned records' sizes in bytes."""
        if self.bodies is not None:
            return sum(len(b) for b in self.bodies)
        return sum(m.size for m in self.messages)

    @property
    def message_count(self) -> int:
        """How many messages are returned."""
        return len(self.messages)

    @property
    def msg_offsets(self) -> list[int]:
        """The queue offsets of the returned messages, in order (read from the bytes when
        `bodies` are given: spec.record.queue_offsets_in)."""
        if self.bodies is not None:
            return queue_offsets_in(b"".join(self.bodies))
        return [m.queue_offset for m in self.messages]
