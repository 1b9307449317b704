"""The interfaces every implementation (reference, fast, foreign) provides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from spec.message import BrokerInnerMessage, StoredMessage
from spec.results import GetMessageResult, PutMessageResult
from spec.status import BrokerRole


@runtime_checkable
class MessageFilter(Protocol):
    """The broker's two-stage message filter (MessageFilter)."""

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """Decide from the consume-queue entry's tags code (None = unknown, matches TAG filters)."""
        ...

    def is_matched_by_commit_log(self, message: StoredMessage | None) -> bool:
        """Decide from the commit-log record."""
        ...


@runtime_checkable
class MessageStore(Protocol):
    """The broker's message store (DefaultMessageStore) as the pull path sees it."""

    @property
    def broker_role(self) -> BrokerRole:
        """The live broker role."""
        ...

    @property
    def offset_check_in_slave(self) -> bool:
        """The live offsetCheckInSlave switch."""
        ...

    def set_role(self, broker_role: BrokerRole, offset_check_in_slave: bool) -> None:
        """Switch the broker role and offsetCheckInSlave at run time."""
        ...

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """Append one message to the commit log and dispatch it to its consume queue."""
        ...

    def put_messages(self, msgs: Sequence[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Append several messages in order; the same results as put_message one by one."""
        ...

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Answer a pull: DefaultMessageStore.getMessage."""
        ...

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's min offset (an index)."""
        ...

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's max offset: one past the last dispatched entry."""
        ...

    def get_min_phy_offset(self) -> int:
        """The commit log's min offset, or -1 when it has no file."""
        ...

    def get_max_phy_offset(self) -> int:
        """The commit log's max offset."""
        ...

    def look_message_by_offset(self, commitlog_offset: int) -> StoredMessage | None:
        """The record at a commit-log offset, or None when it is not (or no longer) stored."""
        ...

    def delete_expired_files(self) -> int:
        """Run one clean round: delete expired commit-log files, correct the consume queues."""
        ...
