"""Reference offset stores: `ReferenceRemoteOffsetStore` (RemoteBrokerOffsetStore over a broker
offset client) and `ReferenceLocalFileOffsetStore` (LocalFileOffsetStore over a directory).

Every decision is a spec rule (`spec.offset_store`); this module only keeps the table and does
the I/O. Bad input raises a typed `spec.errors` exception and leaves the state unchanged; a None
queue is a no-op, as OFFSET-2 step 1 makes it in RocketMQ.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pullspec.spec.client_errors import MQClientError
from pullspec.spec.consumer_config import ReadOffsetType
from pullspec.spec.errors import InvalidTypeError, require_bool, require_int, require_str
from pullspec.spec.message import MessageQueue
from pullspec.spec.offset_store import (
    BAK_SUFFIX,
    OFFSET_NONE,
    OFFSETS_FILE,
    TMP_SUFFIX,
    PersistStep,
    local_offset_store_path,
    local_persist_steps,
    local_persist_table,
    read_local_offset,
    read_offset_from_memory,
    remote_persist_all_plan,
    remote_store_read_result,
    updated_offset,
)


@runtime_checkable
class BrokerOffsetClient(Protocol):
    """The broker side of RemoteBrokerOffsetStore: QUERY_CONSUMER_OFFSET and
    UPDATE_CONSUMER_OFFSET for one consumer group, the broker already chosen (OFFSET-7)."""

    def query_offset(self, mq: MessageQueue) -> int:
        """The broker's stored offset; raises MQBrokerError (e.g. QUERY_NOT_FOUND) or any other
        exception (timeout, no broker) on failure."""
        ...

    def update_offset(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        """Store `offset` on the broker; may raise."""
        ...


def _mq(value: object) -> MessageQueue | None:
    if value is None or isinstance(value, MessageQueue):
        return value
    raise InvalidTypeError("mq", value, "MessageQueue")


def _read_type(value: object) -> ReadOffsetType:
    if not isinstance(value, ReadOffsetType):
        raise InvalidTypeError("read_type", value, "ReadOffsetType")
    return value


def _mqs(value: object) -> Collection[MessageQueue] | None:
    if value is None:
        return None
    if not isinstance(value, Collection) or isinstance(value, str | bytes):
        raise InvalidTypeError("mqs", value, "a collection of MessageQueue")
    for mq in value:
        if not isinstance(mq, MessageQueue):
            raise InvalidTypeError("mqs", mq, "MessageQueue")
    return value


def _blank(topic: object) -> bool:
    if topic is None:
        return True
    return require_str("topic", topic).strip() == ""


class _TableStore:
    """The in-memory offset table both stores share (OFFSET-2, OFFSET-4)."""

    def __init__(self) -> None:
        self._table: dict[MessageQueue, int] = {}
        #: (level, message) pairs for what RocketMQ logs; tests read it.
        self.log: list[tuple[str, str]] = []

    def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        """updateOffset (OFFSET-2): first write unconditional, then set or increase-only."""
        queue = _mq(mq)
        value = require_int("offset", offset)
        increase = require_bool("increase_only", increase_only)
        if queue is None:
            return
        self._table[queue] = updated_offset(self._table.get(queue), value, increase)

    def clone_offset_table(self, topic: str | None) -> dict[MessageQueue, int]:
        """cloneOffsetTable: the entries of `topic`, or all when it is blank."""
        every = _blank(topic)
        return {mq: v for mq, v in self._table.items() if every or mq.topic == topic}

    def _read(self, mq: MessageQueue | None, read_type: ReadOffsetType) -> int:
        queue = _mq(mq)
        if queue is None:
            return OFFSET_NONE
        answer = read_offset_from_memory(self._table.get(queue), _read_type(read_type))
        return self._read_store(queue) if answer is None else answer

    def _read_store(self, mq: MessageQueue) -> int:
        raise NotImplementedError


class ReferenceRemoteOffsetStore(_TableStore):
    """RemoteBrokerOffsetStore: memory table, broker reads and one-way broker writes."""

    def __init__(self, client: BrokerOffsetClient, group: str = "") -> None:
        super().__init__()
        self.client = client
        self.group = group

    def load(self) -> None:
        """The remote load() is empty (OFFSET-1)."""

    def read_offset(self, mq: MessageQueue | None, read_type: ReadOffsetType) -> int:
        """readOffset (OFFSET-4, OFFSET-5)."""
        return self._read(mq, read_type)

    def _read_store(self, mq: MessageQueue) -> int:
        outcome: int | BaseException
        try:
            outcome = self.client.query_offset(mq)
        except Exception as exc:
            outcome = exc
        value, write = remote_store_read_result(outcome)
        if write:
            self.update_offset(mq, value, False)
        elif value != OFFSET_NONE:
            self.log.append(("warn", f"fetchConsumeOffsetFromBroker exception, {mq}"))
        return value

    def _send(self, mq: MessageQueue, offset: int) -> None:
        try:
            self.client.update_offset(mq, offset, True)
        except Exception as exc:
            self.log.append(("error", f"updateConsumeOffsetToBroker exception, {mq}: {exc}"))

    def persist(self, mq: MessageQueue | None) -> None:
        """persist (OFFSET-6): a one-way update of the memory entry, errors logged."""
        queue = _mq(mq)
        if queue is not None and queue in self._table:
            self._send(queue, self._table[queue])

    def persist_all(self, mqs: Collection[MessageQueue] | None) -> None:
        """persistAll (OFFSET-6): send the entries in `mqs`, then prune the others."""
        send, remove = remote_persist_all_plan(tuple(self._table), _mqs(mqs))
        for mq in send:
            self._send(mq, self._table[mq])
        for mq in remove:
            del self._table[mq]
            self.log.append(("info", f"remove unused mq, {mq}, {self.group}"))

    def remove_offset(self, mq: MessageQueue | None) -> None:
        """removeOffset (OFFSET-6): forget the memory entry."""
        queue = _mq(mq)
        if queue is not None:
            self._table.pop(queue, None)

    def update_consume_offset_to_broker(
        self, mq: MessageQueue | None, offset: int, is_oneway: bool
    ) -> None:
        """updateConsumeOffsetToBroker (OFFSET-6): send UPDATE_CONSUMER_OFFSET; errors propagate."""
        queue = _mq(mq)
        value = require_int("offset", offset)
        oneway = require_bool("is_oneway", is_oneway)
        if queue is not None:
            self.client.update_offset(queue, value, oneway)


def encode_offset_table(table: dict[MessageQueue, int]) -> str:
    """The deterministic JSON form of an offset table (OFFSET-9): entries sorted by
    (topic, broker_name, queue_id), keys sorted, two-space indent."""
    rows = [
        {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": v}
        for mq, v in sorted(table.items())
    ]
    return json.dumps({"offsetTable": rows}, indent=2, sort_keys=True) + "\n"


def decode_offset_table(text: str) -> dict[MessageQueue, int]:
    """Parse `encode_offset_table`'s output; anything else raises ValueError or TypeError."""
    data: Any = json.loads(text)
    table: dict[MessageQueue, int] = {}
    for row in data["offsetTable"]:
        mq = MessageQueue(row["topic"], row["brokerName"], row["queueId"])
        table[mq] = require_int("offset", row["offset"])
    return table


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


class ReferenceLocalFileOffsetStore(_TableStore):
    """LocalFileOffsetStore: memory table persisted to `<directory>/offsets.json`."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.path = self.directory / OFFSETS_FILE
        #: The OFFSET-11 steps of the last persistAll that wrote the file.
        self.last_persist_steps: tuple[PersistStep, ...] = ()

    @classmethod
    def for_group(cls, base_dir: str, client_id: str, group: str) -> ReferenceLocalFileOffsetStore:
        """The store at OFFSET-9's location <base_dir>/<client_id>/<group>/offsets.json."""
        return cls(Path(local_offset_store_path(base_dir, client_id, group)).parent)

    def _read_file(self) -> dict[MessageQueue, int] | None:
        bak = Path(str(self.path) + BAK_SUFFIX)
        return read_local_offset(_read_text(self.path), _read_text(bak), decode_offset_table)

    def load(self) -> None:
        """load (OFFSET-10): put the file's entries into memory; MQClientError on a corrupt
        backup."""
        table = self._read_file()
        if table:
            self._table.update(table)

    def read_offset(self, mq: MessageQueue | None, read_type: ReadOffsetType) -> int:
        """readOffset (OFFSET-4, OFFSET-10): READ_FROM_STORE re-reads the file every time."""
        return self._read(mq, read_type)

    def _read_store(self, mq: MessageQueue) -> int:
        try:
            table = self._read_file()
        except MQClientError:
            return OFFSET_NONE
        if table is None or mq not in table:
            return OFFSET_NONE
        self.update_offset(mq, table[mq], False)
        return table[mq]

    def persist_all(self, mqs: Collection[MessageQueue] | None) -> None:
        """persistAll (OFFSET-11): write the entries in `mqs` via tmp, .bak and rename."""
        content = local_persist_table(self._table, _mqs(mqs))
        if content is None:
            return
        text = encode_offset_table(content)
        tmp = Path(str(self.path) + TMP_SUFFIX)
        bak = Path(str(self.path) + BAK_SUFFIX)
        previous = _read_text(self.path)
        steps = local_persist_steps(previous is not None)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for step in steps:
                if step is PersistStep.WRITE_TMP:
                    tmp.write_text(text, encoding="utf-8")
                elif step is PersistStep.COPY_TO_BAK:
                    bak.write_text(previous or "", encoding="utf-8")
                elif step is PersistStep.DELETE_MAIN:
                    self.path.unlink(missing_ok=True)
                else:
                    tmp.replace(self.path)
        except OSError as exc:
            self.log.append(("error", f"persistAll consumer offset Exception, {self.path}: {exc}"))
            return
        self.last_persist_steps = steps

    def persist(self, mq: MessageQueue | None) -> None:
        """persist is a no-op locally (OFFSET-12)."""
        _mq(mq)

    def remove_offset(self, mq: MessageQueue | None) -> None:
        """removeOffset is a no-op locally (OFFSET-12)."""
        _mq(mq)

    def update_consume_offset_to_broker(
        self, mq: MessageQueue | None, offset: int, is_oneway: bool
    ) -> None:
        """updateConsumeOffsetToBroker is a no-op locally (OFFSET-12)."""
        _mq(mq)
        require_int("offset", offset)
        require_bool("is_oneway", is_oneway)
