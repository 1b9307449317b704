"""Stand-ins around the reference's client classes, for the area drivers.

The pull-path areas (pull_decision, pull_result, pull_request) run one real
`ReferencePushConsumer` — with its real `PullMessageService` on a `Scheduler` — whose neighbours
are stand-ins the op scripts, as the recorded client vectors drove RocketMQ's own
DefaultMQPushConsumerImpl: a network answering from the op's broker map (`ScriptedRemoting`), a
process queue whose readings the op dictates (`ReadingsProcessQueue`), a rebalance that answers
the op's subscription and first-lock offset (`ScriptedHooks`), a consume service and an offset
store that record what they are handed (`RecordingConsumeService`, `RecordingOffsetStore`).

Example: ``PushConsumerRig(ConsumerConfig(), Profile.V4_9).consumer`` is a running push
consumer of group `G` over those stand-ins, its clock at 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from pullspec.reference.consume_concurrently import ReferenceConsumeConcurrentlyService
from pullspec.reference.consume_orderly import ReferenceConsumeOrderlyService
from pullspec.reference.offset_store import (
    ReferenceLocalFileOffsetStore,
    ReferenceRemoteOffsetStore,
)
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.pull_service import PullMessageService, PullRequest
from pullspec.reference.push_consumer import ReferencePushConsumer, ServiceState
from pullspec.reference.rebalance import ReferenceRebalancePushImpl
from pullspec.reference.remoting import OnException, OnResponse
from pullspec.reference.scheduler import Scheduler
from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.clock import Clock, ManualClock
from pullspec.spec.consumer_config import ConsumerConfig
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.pull_request import PullMessageRequestHeader
from pullspec.spec.pull_route import V4_1_0_SNAPSHOT
from pullspec.spec.status import ResponseCode


@attrs.frozen
class Classes:
    """The reference classes the drivers build: a driver's `classes` (a mutant of the bank
    replaces one with a copy that breaks one rule, conformance.mutants)."""

    push_consumer: type[ReferencePushConsumer] = ReferencePushConsumer
    rebalance: type[ReferenceRebalancePushImpl] = ReferenceRebalancePushImpl
    process_queue: type[ReferenceProcessQueue] = ReferenceProcessQueue
    pull_service: type[PullMessageService] = PullMessageService
    concurrent_service: type[ReferenceConsumeConcurrentlyService] = (
        ReferenceConsumeConcurrentlyService
    )
    orderly_service: type[ReferenceConsumeOrderlyService] = ReferenceConsumeOrderlyService
    remote_offset_store: type[ReferenceRemoteOffsetStore] = ReferenceRemoteOffsetStore
    local_offset_store: type[ReferenceLocalFileOffsetStore] = ReferenceLocalFileOffsetStore


#: The reference's own classes.
REFERENCE = Classes()

#: The queue of a one-queue case (topic T on broker b).
QUEUE = MessageQueue("T", "b", 0)
#: The group of every case.
GROUP = "G"


class OtherBrokerError(Exception):
    """A non-broker failure of an offset RPC (a timeout, no route)."""


class OffsetBroker:
    """The broker side of RemoteBrokerOffsetStore: stored offsets, scripted failures, and every
    UPDATE_CONSUMER_OFFSET received (BrokerOffsetClient)."""

    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}
        self.fails: dict[MessageQueue, str] = {}
        self.sent: list[tuple[MessageQueue, int, bool]] = []

    def query_offset(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET: the stored offset, QUERY_NOT_FOUND or the failure set."""
        fail = self.fails.get(mq)
        if fail == MQBrokerError.java_exception:
            raise MQBrokerError(int(ResponseCode.SYSTEM_ERROR))
        if fail is not None:
            raise OtherBrokerError(fail)
        if mq not in self.offsets:
            raise MQBrokerError(int(ResponseCode.QUERY_NOT_FOUND))
        return self.offsets[mq]

    def update_offset(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET: recorded, then stored (COMMIT-1 replaces)."""
        self.sent.append((mq, offset, oneway))
        self.offsets[mq] = offset


class RecordingOffsetStore(ReferenceRemoteOffsetStore):
    """The reference remote offset store over an `OffsetBroker`, recording every updateOffset
    and persist it is asked for."""

    def __init__(self, broker: OffsetBroker | None = None, group: str = GROUP) -> None:
        self.broker = broker or OffsetBroker()
        super().__init__(self.broker, group)
        self.updates: list[tuple[MessageQueue, int, bool]] = []
        self.persisted: list[MessageQueue] = []

    def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        """updateOffset, recorded."""
        super().update_offset(mq, offset, increase_only)
        if mq is not None:
            self.updates.append((mq, offset, increase_only))

    def persist(self, mq: MessageQueue | None) -> None:
        """persist, recorded."""
        super().persist(mq)
        if mq is not None:
            self.persisted.append(mq)


class ReadingsProcessQueue(ReferenceProcessQueue):
    """A ProcessQueue whose readings (dropped, msgCount, msgSize, maxSpan, locked, whether its
    tree is empty) are what the op says, and which records the messages put into it."""

    def __init__(self, clock: Clock, profile: Profile) -> None:
        super().__init__(clock, profile)
        self.readings: dict[str, Any] = {}
        self.puts: list[tuple[StoredMessage, ...]] = []
        #: How many times the pull path set dropped = true.
        self.drops = 0
        self._dropped_reading = False

    def read(self, values: Mapping[str, Any]) -> None:
        """Set the readings from the vocabulary's {dropped, msgCount, msgSize, maxSpan, locked,
        msgTreeEmpty}; absent ones are false / 0 (an empty tree when msgTreeEmpty is absent)."""
        self.readings = dict(values)
        self._dropped_reading = bool(values.get("dropped", False))
        self.locked = bool(values.get("locked", False))

    @property
    def msg_count(self) -> int:
        """msgCount as the op says."""
        return int(self.readings.get("msgCount", 0))

    @property
    def msg_size(self) -> int:
        """msgSize as the op says."""
        return int(self.readings.get("msgSize", 0))

    @property
    def max_span(self) -> int:
        """getMaxSpan as the op says."""
        return int(self.readings.get("maxSpan", 0))

    def has_temp_message(self) -> bool:
        """Not msgTreeEmpty."""
        return not bool(self.readings.get("msgTreeEmpty", False))

    @property
    def dropped(self) -> bool:
        """dropped as the op says, or as the pull path set it since."""
        return self._dropped_reading

    @dropped.setter
    def dropped(self, value: bool) -> None:
        self.drops += int(bool(value))
        self._dropped_reading = bool(value)

    def put_messages(self, msgs: Sequence[StoredMessage]) -> bool:
        """putMessage, recorded (nothing is cached: the readings stay what the op said)."""
        self.puts.append(tuple(msgs))
        return True


class RecordingConsumeService:
    """A ConsumeMessageService that records each submitConsumeRequest."""

    def __init__(self) -> None:
        self.submitted: list[tuple[tuple[StoredMessage, ...], bool]] = []

    def submit_consume_request(
        self,
        msgs: Sequence[StoredMessage],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        """Record the call."""
        self.submitted.append((tuple(msgs), dispatch_to_consume))


class ScriptedHooks:
    """The RebalanceHooks the pull path reads: subscriptions, the first-lock offset computation
    and the process-queue table, as the op scripts them; removals are recorded."""

    def __init__(self) -> None:
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.compute: Callable[[MessageQueue], int] = lambda _mq: 0
        self.table: dict[MessageQueue, ProcessQueue] = {}
        self.removed: list[MessageQueue] = []

    def remove_process_queue(self, mq: MessageQueue) -> None:
        """removeProcessQueue: recorded."""
        self.removed.append(mq)
        self.table.pop(mq, None)

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """computePullFromWhere as scripted."""
        return self.compute(mq)

    def subscription(self, topic: str) -> SubscriptionData | None:
        """subscriptionInner.get(topic)."""
        return self.subscriptions.get(topic)

    def process_queues(self) -> Mapping[MessageQueue, ProcessQueue]:
        """processQueueTable."""
        return self.table

    def do_rebalance(self) -> None:
        """Nothing to rebalance."""


class ScriptedRemoting:
    """The network the pull path sees: the route's broker maps, the brokers' versions and filter
    servers as scripted; every pull is recorded and left unanswered unless `respond` is told."""

    def __init__(self) -> None:
        self.addrs: dict[str, BrokerAddrs] = {}
        self.version = V4_1_0_SNAPSHOT
        self.servers: list[str] | None = None
        #: Every address whose version was asked (the broker pullKernelImpl found).
        self.asked_version: list[str] = []
        self.pulls: list[tuple[str, PullMessageRequestHeader, OnResponse, OnException]] = []

    def broker_addrs(self, broker_name: str) -> BrokerAddrs:
        """The scripted map (empty when the route has no such broker)."""
        return self.addrs.get(broker_name, BrokerAddrs(()))

    def broker_version(self, addr: str) -> int:
        """The scripted version (the address asked is recorded)."""
        self.asked_version.append(addr)
        return self.version

    def filter_servers(self, topic: str, broker_addr: str) -> list[str] | None:
        """The scripted filter servers."""
        return self.servers

    def pull_message_async(
        self,
        addr: str,
        header: PullMessageRequestHeader,
        timeout_ms: int,
        on_response: OnResponse,
        on_exception: OnException,
    ) -> object:
        """Record the pull; it stays in flight."""
        self.pulls.append((addr, header, on_response, on_exception))
        return None


class ScriptedAdmin:
    """MQAdminImpl's max-offset and search-offset queries as scripted; None answers throw."""

    def __init__(self, max_offset: int | None = 0, search_offset: int | None = 0) -> None:
        self._max, self._search = max_offset, search_offset

    def max_offset(self, mq: MessageQueue) -> int:
        if self._max is None:
            raise MQClientError("maxOffset failed")
        return self._max

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        if self._search is None:
            raise MQClientError("searchOffset failed")
        return self._search


class ScriptedLocks:
    """The masters' LOCK_BATCH_MQ / UNLOCK_BATCH_MQ as the op scripts them: the `granted` set
    is the answer (None: the call throws); without one, every queue asked but the `refused`
    ones is granted; `raises` makes unlocks throw."""

    def __init__(self) -> None:
        self.scripted = False
        self.granted: set[MessageQueue] | None = None
        self.refused: set[MessageQueue] = set()
        self.raises = False

    def answer(self, granted: Iterable[MessageQueue] | None) -> None:
        """The next lock calls answer `granted` (None: they throw)."""
        self.scripted, self.refused = True, set()
        self.granted = None if granted is None else set(granted)

    def grant_all_but(self, refused: Iterable[MessageQueue]) -> None:
        """The next lock calls grant what they ask but `refused`."""
        self.scripted, self.granted, self.refused = False, None, set(refused)

    def has_master(self, broker_name: str) -> bool:
        return True

    def lock_batch(
        self, broker_name: str, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> set[MessageQueue]:
        if not self.scripted:
            return set(mqs) - self.refused
        if self.granted is None:
            raise MQClientError("lockBatchMQ failed")
        return set(self.granted)

    def unlock_batch(
        self,
        broker_name: str,
        group: str,
        client_id: str,
        mqs: Iterable[MessageQueue],
        oneway: bool,
    ) -> None:
        if self.raises:
            raise MQClientError("unlockBatchMQ failed")


class PushConsumerRig:
    """A running ReferencePushConsumer of group G over the stand-ins above, its clock at 0."""

    def __init__(
        self,
        config: ConsumerConfig,
        profile: Profile,
        group: str = GROUP,
        classes: Classes = REFERENCE,
    ) -> None:
        self.clock = ManualClock(0)
        self.scheduler = Scheduler(self.clock)
        self.pull_service = classes.pull_service(self.scheduler)
        self.remoting = ScriptedRemoting()
        self.offset_store = RecordingOffsetStore()
        self.consume_service = RecordingConsumeService()
        self.hooks = ScriptedHooks()
        self.consumer = classes.push_consumer(
            group,
            config,
            profile,
            self.scheduler,
            self.remoting,
            self.offset_store,
            self.consume_service,
            self.hooks,
            pull_service=self.pull_service,
            schedule_persist=False,
        )
        self.consumer.service_state = ServiceState.RUNNING
        self.pull_service.register_consumer(group, self.consumer)
        self.pq = ReadingsProcessQueue(self.clock, profile)
        self.request = PullRequest(group, QUEUE, self.pq, 0)

    def circulating(self) -> bool:
        """Whether the request is still on its way somewhere: queued or timed in the pull
        service, or a pull in flight."""
        service = self.pull_service
        return bool(service.queued or service.pending_timers or self.remoting.pulls)
