"""The client offset stores (OFFSET-1 … OFFSET-13): the `OffsetStore` interface, the update and
read rules shared by RemoteBrokerOffsetStore and LocalFileOffsetStore, and the persistence rules
of each. Where a new queue starts (REBAL-17) is in `spec.pull_from_where`."""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Protocol, TypeVar, runtime_checkable

import attrs

from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.consumer_config import (
    MASTER_ID,
    PERSIST_CONSUMER_OFFSET_INITIAL_DELAY_MILLIS,
    MessageModel,
    ReadOffsetType,
)
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_route import (
    FindBrokerResult,
    find_broker_address_in_admin,
    find_broker_address_in_subscribe_v49,
)
from pullspec.spec.rules import Rules, rule, stated

T = TypeVar("T")

_S24 = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")
_S4 = ("004_60fc00b6c6a023ff.txt",)
_REMOTE = "RemoteBrokerOffsetStore"
_LOCAL = "LocalFileOffsetStore"

#: OFFSET-8: persistAllConsumerOffset runs first after 10 s …
PERSIST_INITIAL_DELAY_MILLIS = PERSIST_CONSUMER_OFFSET_INITIAL_DELAY_MILLIS
#: … then every persistConsumerOffsetInterval (default 5 s).
PERSIST_CONSUMER_OFFSET_INTERVAL_MILLIS = 5000
#: OFFSET-5: readOffset sentinels.
OFFSET_NONE = -1
OFFSET_READ_FAILED = -2
#: OFFSET-9: file name and backup suffixes.
OFFSETS_FILE = "offsets.json"
BAK_SUFFIX = ".bak"
TMP_SUFFIX = ".tmp"


@attrs.frozen
class OffsetUpdate:
    """A call updateOffset(mq, offset, increaseOnly) the caller is to make on its offset store."""

    offset: int
    increase_only: bool


@runtime_checkable
class OffsetStore(Protocol):
    """The client's OffsetStore: an in-memory table of consume offsets plus its persistence."""

    def load(self) -> None:
        """Read persisted offsets into memory at start (empty for the remote store)."""
        ...

    def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        """Write `offset` for `mq` in memory (OFFSET-2)."""
        ...

    def read_offset(self, mq: MessageQueue | None, read_type: ReadOffsetType) -> int:
        """Read the offset of `mq` (OFFSET-4/5/10): −1 none, −2 failed remote read."""
        ...

    def persist(self, mq: MessageQueue | None) -> None:
        """Persist one queue's memory entry (remote: one-way update; local: no-op)."""
        ...

    def persist_all(self, mqs: Collection[MessageQueue] | None) -> None:
        """Persist the entries of `mqs` (OFFSET-6, OFFSET-11)."""
        ...

    def remove_offset(self, mq: MessageQueue | None) -> None:
        """Forget the memory entry of `mq` (local: no-op)."""
        ...

    def clone_offset_table(self, topic: str | None) -> dict[MessageQueue, int]:
        """A copy of the memory table, restricted to `topic` unless it is blank."""
        ...

    def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, is_oneway: bool
    ) -> None:
        """Send UPDATE_CONSUMER_OFFSET for `mq` (local: no-op)."""
        ...


class OffsetStoreKind(enum.Enum):
    """Which OffsetStore a push consumer uses."""

    USER_SUPPLIED = "USER_SUPPLIED"
    LOCAL_FILE = "LOCAL_FILE"
    REMOTE_BROKER = "REMOTE_BROKER"


@rule(
    "OFFSET-1", source="DefaultMQPushConsumerImpl.start", seeds=(*_S24, "003_97f7c1df5f6104bc.txt")
)
def offset_store_kind(message_model: MessageModel, user_supplied: bool) -> OffsetStoreKind:
    """A user-supplied OffsetStore wins; otherwise BROADCASTING uses LocalFileOffsetStore and
    CLUSTERING uses RemoteBrokerOffsetStore.

    post: user_supplied == (__return__ is OffsetStoreKind.USER_SUPPLIED)
    """
    # The store follows the message model only when the user gave none.
    if user_supplied:
        return OffsetStoreKind.USER_SUPPLIED
    if message_model is MessageModel.BROADCASTING:
        return OffsetStoreKind.LOCAL_FILE
    return OffsetStoreKind.REMOTE_BROKER


@rule(
    "OFFSET-2",
    source=f"{_REMOTE}.updateOffset, {_LOCAL}.updateOffset, MixAll.compareAndIncreaseOnly",
    seeds=_S24,
)
def updated_offset(current: int | None, offset: int, increase_only: bool) -> int:
    """updateOffset writes unconditionally when the queue has no entry, else sets the value, or
    with increaseOnly replaces it only by a strictly greater one.

    post: current is not None or __return__ == offset
    post: current is None or not increase_only or __return__ == max(current, offset)
    post: current is None or increase_only or __return__ == offset
    """
    # The first write ignores increaseOnly and an equal value is a no-op.
    if current is None:
        return offset
    if increase_only:
        return offset if offset > current else current
    return offset


class OffsetWriter(enum.Enum):
    """The callers of updateOffset (OFFSET-3)."""

    CONCURRENT_RESULT = "CONCURRENT_RESULT"
    CORRECT_TAGS_OFFSET = "CORRECT_TAGS_OFFSET"
    ORDERLY_RESULT = "ORDERLY_RESULT"
    OFFSET_ILLEGAL_FIX_UP = "OFFSET_ILLEGAL_FIX_UP"
    READ_FROM_STORE = "READ_FROM_STORE"
    UPDATE_CONSUME_OFFSET = "UPDATE_CONSUME_OFFSET"


_INCREASE_ONLY = frozenset({OffsetWriter.CONCURRENT_RESULT, OffsetWriter.CORRECT_TAGS_OFFSET})


@rule("OFFSET-3", source="(callers of OffsetStore.updateOffset)", seeds=_S24)
def increase_only_for(writer: OffsetWriter) -> bool:
    """Only the concurrent consume result and correctTagsOffset write increase-only; the orderly
    result, the OFFSET_ILLEGAL fix-up, a successful store read and updateConsumeOffset overwrite.

    post: __return__ == (writer in _INCREASE_ONLY)
    """
    # The orderly path may move the offset backwards.
    return writer in _INCREASE_ONLY


@rule("OFFSET-4", source=f"{_REMOTE}.readOffset, {_LOCAL}.readOffset", seeds=_S4)
def read_offset_from_memory(current: int | None, read_type: ReadOffsetType) -> int | None:
    """READ_FROM_MEMORY answers the entry or −1; MEMORY_FIRST_THEN_STORE answers the entry if
    present; otherwise (None here) the store is read as READ_FROM_STORE.

    post: read_type is not ReadOffsetType.READ_FROM_MEMORY or __return__ is not None
    post: read_type is not ReadOffsetType.READ_FROM_STORE or __return__ is None
    """
    # Absence reads as -1 from memory, never as 0.
    if read_type is ReadOffsetType.READ_FROM_STORE:
        return None
    if current is not None:
        return current
    return OFFSET_NONE if read_type is ReadOffsetType.READ_FROM_MEMORY else None


@rule("OFFSET-5", source=f"{_REMOTE}.readOffset", seeds=_S4)
def remote_store_read_result(outcome: int | BaseException) -> tuple[int, bool]:
    """A remote READ_FROM_STORE returns the broker's value and writes it to memory (not
    increase-only), returns −1 on MQBrokerException and −2 on any other exception.

    post: isinstance(outcome, BaseException) or __return__ == (outcome, True)
    post: not isinstance(outcome, MQBrokerError) or __return__ == (-1, False)
    """
    # A timeout or a missing broker gives -2, which makes rebalance skip the queue.
    if isinstance(outcome, MQBrokerError):
        return OFFSET_NONE, False
    if isinstance(outcome, BaseException):
        return OFFSET_READ_FAILED, False
    return outcome, True


@rule("OFFSET-6", source=f"{_REMOTE}.persistAll", seeds=_S24)
def remote_persist_all_plan(
    table: Collection[MessageQueue], mqs: Collection[MessageQueue] | None
) -> tuple[tuple[MessageQueue, ...], tuple[MessageQueue, ...]]:
    """Remote persistAll does nothing for a null or empty set, else sends a one-way update for
    each memory entry in the set and then removes every other entry from memory.

    post: not mqs or set(__return__[0]) | set(__return__[1]) == set(table)
    post: mqs or __return__ == ((), ())
    """
    # An empty set prunes nothing: it returns before looking at memory.
    if not mqs:
        return (), ()
    entries = tuple(table)
    return tuple(m for m in entries if m in mqs), tuple(m for m in entries if m not in mqs)


def _address(found: FindBrokerResult | None) -> str | None:
    return None if found is None else found.broker_addr


# [4.7]
@rule(
    "OFFSET-7",
    source=(
        f"{_REMOTE}.fetchConsumeOffsetFromBroker, {_REMOTE}.updateConsumeOffsetToBroker, "
        "MQClientInstance.findBrokerAddressInAdmin"
    ),
    profiles=(Profile.V4_7,),
    versions=(
        "4.9 asks findBrokerAddressInSubscribe for the master only, then after the route refresh "
        "for the master or else the map's first entry"
    ),
)
def offset_broker_address_v47(
    broker_addrs: BrokerAddrs | None, after_refresh: BrokerAddrs | None
) -> str | None:
    """The offset query and update go to the first entry of the broker's address map in its
    HashMap iteration order (findBrokerAddressInAdmin, slave possible), and only when there is
    none the route is refreshed from the NameServer and the refreshed map is asked the same way.

    post: broker_addrs is None or not broker_addrs or __return__ == next(iter(broker_addrs.values()))
    post: __return__ is not None or not after_refresh
    """
    # A slave answers offset queries in 4.7 whenever its id iterates first (never before
    # id 0: the map is a HashMap<Long, String>, not the route's list).
    found = find_broker_address_in_admin(broker_addrs)
    if found is None:
        found = find_broker_address_in_admin(after_refresh)
    return _address(found)


# [Modified in 4.9]
@rule(
    "OFFSET-7",
    source=(
        f"{_REMOTE}.fetchConsumeOffsetFromBroker, {_REMOTE}.updateConsumeOffsetToBroker, "
        "MQClientInstance.findBrokerAddressInSubscribe"
    ),
    profiles=(Profile.V4_9,),
)
def offset_broker_address_v49(
    broker_addrs: BrokerAddrs | None, after_refresh: BrokerAddrs | None
) -> str | None:
    """The offset query and update go to the master (findBrokerAddressInSubscribe(brokerName,
    MASTER_ID, onlyThisBroker = true)), and without one the route is refreshed from the
    NameServer and the lookup repeated with onlyThisBroker = false, which answers the master or
    else the first entry in the map's HashMap order — also when the refresh left the map as it
    was.

    post: broker_addrs is None or MASTER_ID not in broker_addrs or __return__ == broker_addrs[MASTER_ID]
    post: __return__ is not None or not after_refresh
    """
    # The second lookup always allows any broker: a slave-only route reaches the slave
    # even when the refresh changed nothing.
    found = find_broker_address_in_subscribe_v49(broker_addrs, MASTER_ID, True)
    if found is None:
        found = find_broker_address_in_subscribe_v49(after_refresh, MASTER_ID, False)
    return _address(found)


@rule("OFFSET-8", source="MQClientInstance.persistAllConsumerOffset", seeds=_S24)
def persist_consumer_offset_targets(
    running: bool, process_queue_mqs: Iterable[MessageQueue]
) -> frozenset[MessageQueue] | None:
    """Each periodic persist (first after 10 s, then every 5 s) hands persistAll a copy of the
    process-queue table's queues, dropped ones included, or persists nothing when the consumer is
    not RUNNING.

    post: running or __return__ is None
    """
    # A non-running consumer logs an error and sends nothing.
    return frozenset(process_queue_mqs) if running else None


@rule("OFFSET-9", source=f"{_LOCAL}.<init>")
def local_offset_store_path(base_dir: str, client_id: str, group: str) -> str:
    """The local offset file is <dir>/<clientId>/<group>/offsets.json, dir defaulting to
    ~/.rocketmq_offsets.

    post: __return__.endswith("/offsets.json")
    """
    # Broadcasting's unrenamed clientId keeps the path stable across restarts.
    return f"{base_dir.rstrip('/')}/{client_id}/{group}/{OFFSETS_FILE}"


@rule("OFFSET-10", source=f"{_LOCAL}.readLocalOffset, {_LOCAL}.readLocalOffsetBak", seeds=_S4)
def read_local_offset(main: str | None, bak: str | None, parse: Callable[[str], T]) -> T | None:
    """The local store reads offsets.json, falls back to offsets.json.bak when the main file is
    missing, empty or unparsable, and fails with MQClientException when the backup exists but
    does not parse.

    raises: MQClientError
    post: __return__ is not None or not bak or bool(main)
    """
    # A readable main file is used even when the backup is corrupt.
    if main:
        try:
            return parse(main)
        except Exception:
            pass  # RocketMQ logs "try to correct" and reads the backup
    if not bak:
        return None
    try:
        return parse(bak)
    except Exception as exc:
        raise MQClientError("readLocalOffset Exception, maybe fastjson version too low") from exc


class PersistStep(enum.Enum):
    """The file operations of MixAll.string2File."""

    WRITE_TMP = "WRITE_TMP"
    COPY_TO_BAK = "COPY_TO_BAK"
    DELETE_MAIN = "DELETE_MAIN"
    RENAME_TMP = "RENAME_TMP"


@rule("OFFSET-11", source=f"{_LOCAL}.persistAll, MixAll.string2File", seeds=_S4)
def local_persist_steps(has_previous: bool) -> tuple[PersistStep, ...]:
    """Local persistAll writes offsets.json.tmp, copies the previous offsets.json (if any) to
    offsets.json.bak, deletes offsets.json and renames the tmp file into place.

    post: __return__[0] is PersistStep.WRITE_TMP and __return__[-1] is PersistStep.RENAME_TMP
    post: (PersistStep.COPY_TO_BAK in __return__) == has_previous
    """
    # The backup always holds the previous generation, never the new one.
    copy = (PersistStep.COPY_TO_BAK,) if has_previous else ()
    return (PersistStep.WRITE_TMP, *copy, PersistStep.DELETE_MAIN, PersistStep.RENAME_TMP)


def local_persist_table(
    table: Mapping[MessageQueue, int], mqs: Collection[MessageQueue] | None
) -> dict[MessageQueue, int] | None:
    """OFFSET-11's content: None (write nothing) for a null or empty set, else only the memory
    entries whose queue is in `mqs`; other entries leave the file but stay in memory."""
    if not mqs:
        return None
    return {mq: offset for mq, offset in table.items() if mq in mqs}


class LocalNoOp(enum.Enum):
    """The OffsetStore operations LocalFileOffsetStore leaves empty."""

    PERSIST = "PERSIST"
    REMOVE_OFFSET = "REMOVE_OFFSET"
    UPDATE_CONSUME_OFFSET_TO_BROKER = "UPDATE_CONSUME_OFFSET_TO_BROKER"


@rule("OFFSET-12", source=f"{_LOCAL}.persist, {_LOCAL}.removeOffset")
def local_no_ops() -> frozenset[LocalNoOp]:
    """LocalFileOffsetStore's persist(mq), removeOffset(mq) and updateConsumeOffsetToBroker do
    nothing.

    post: len(__return__) == 3
    """
    # A broadcasting consumer keeps offsets of removed queues in memory (RESULT-11).
    return frozenset(LocalNoOp)


@rule("OFFSET-13", source="RebalanceImpl.updateProcessQueueTableInRebalance")
def memory_after_rebalance_read(stored: int) -> int | None:
    """Rebalance removes the dirty memory entry before computePullFromWhere, whose store read
    refills memory only with a stored offset ≥ 0, never with the ConsumeFromWhere start.

    post: (__return__ is None) == (stored < 0)
    """
    # A queue that consumed nothing carries no commit and has nothing to persist.
    return stored if stored >= 0 else None


class OffsetStoreRules(Rules):
    """The changed OFFSET rule (see `spec.rules.Rules`).

    `offset_broker_address(broker_addrs, after_refresh)` is OFFSET-7: `broker_addrs` is the
    client's map of the queue's broker before the lookup (None: none), `after_refresh` what
    updateTopicRouteInfoFromNameServer leaves (consulted only when the first lookup finds
    nothing; pass the same map when the refresh changes nothing). The caller raises
    MQClientError("The broker[…] not exist") on None.

    Example: ``OffsetStoreRules.of(Profile.V4_9).offset_broker_address(slave_only, slave_only)``
    with ``slave_only = BrokerAddrs([(1, "s:1")])`` is ``"s:1"``.
    """

    offset_broker_address = stated(offset_broker_address_v47, offset_broker_address_v49)
