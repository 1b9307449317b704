"""How the simulator sees inside a client without changing what it does: subclasses and
wrappers of the reference client parts that report each action to the consumer's `SimClient`
(`reference.sim.client`), which turns it into history events.

- `ObservedProcessQueue` reports every put (the pull's messages and the cache size, FLOW-6);
- `ObservedOffsetStore` reports every in-memory offset write with its value before and after
  (OFFSET-2) and names the broker writes it causes (persist, RESULT-10's fix-up);
- `ObservedSendBack` reports every hand-back, with the topic the broker stored a copy in, and
  injects the send-back faults;
- `SimConsumer` is a ClientConsumer whose offset store is observed.

Tests subclass these to build deliberately broken configurations.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

from pullspec.reference.client_consumer import ClientConsumer, Listener
from pullspec.reference.client_instance import ReferenceClientInstance
from pullspec.reference.client_parts import ConsumerParts, ConsumeTime
from pullspec.reference.client_remoting import RemotingOffsetClient
from pullspec.reference.offset_store import BrokerOffsetClient, ReferenceRemoteOffsetStore
from pullspec.reference.process_queue import ReferenceProcessQueue
from pullspec.reference.rebalance import NewPullRequest
from pullspec.reference.remoting import ReferenceRemoting
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.clock import Clock
from pullspec.spec.consumer_config import ConsumerConfig, ReadOffsetType
from pullspec.spec.message import PROPERTY_UNIQ_KEY, MessageQueue, StoredMessage
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.retry import ClientMessage, SendBackClient

T = TypeVar("T")


class PutWatcher(Protocol):
    """What an `ObservedProcessQueue` reports to (its consumer's `SimClient`)."""

    #: The client lease the queue keeps (PQ-15).
    client_lock_ms: int

    def on_put(self, pq: ObservedProcessQueue, msgs: Sequence[StoredMessage]) -> None:
        """A put into `pq` (PQ-2)."""
        ...


class ClientWatcher(PutWatcher, Protocol):
    """What the observed parts of one consumer report to: its `SimClient`
    (`reference.sim.client`), which turns each report into history events."""

    orderly: bool

    def writer_rule(self, increase_only: bool) -> str:
        """The rule an in-memory offset write of this kind follows."""
        ...

    def on_client_commit(
        self,
        mq: MessageQueue,
        offset: int,
        increase_only: bool,
        before: int | None,
        after: int | None,
        rule: str,
    ) -> None:
        """An in-memory offset write (OFFSET-2)."""
        ...

    def writing(self, via: str) -> AbstractContextManager[None]:
        """The broker commits made meanwhile are this client's, `via` persist or fix-up."""
        ...

    def capture_stored(self) -> AbstractContextManager[list[str]]:
        """The topics the master stores records of meanwhile."""
        ...

    def take_send_back_fault(self) -> str | None:
        """The next injected send-back fault ("fail", "lost"), or None."""
        ...

    def on_sent_back(self, key: str, via: str, ok: bool, stored: str | None) -> None:
        """A hand-back of message `key`, stored (in topic `stored`) or not."""
        ...

    def new_process_queue(self) -> ProcessQueue:
        """A new ProcessQueue for the consumer's rebalance."""
        ...

    def on_dispatch(self, request: NewPullRequest) -> None:
        """A new PullRequest handed to the pull service."""
        ...


class ObservedProcessQueue(ReferenceProcessQueue):
    """A ReferenceProcessQueue numbered in the run, reporting each put to its owner."""

    def __init__(self, clock: Clock, profile: Profile, owner: PutWatcher, pq_id: int) -> None:
        super().__init__(clock, profile, lock_max_live_time_ms=owner.client_lock_ms)
        self.owner = owner
        self.pq_id = pq_id

    def put_messages(self, msgs: Sequence[StoredMessage]) -> bool:
        """putMessage (PQ-2), reported with the count it leaves (FLOW-5)."""
        dispatch = super().put_messages(msgs)
        self.owner.on_put(self, msgs)
        return dispatch


def message_key(msg: StoredMessage | ClientMessage) -> str:
    """The key of a message across its copies: the producer's UNIQ_KEY ("" when absent)."""
    return dict(msg.properties).get(PROPERTY_UNIQ_KEY, "")


class ObservedOffsetStore:
    """A RemoteBrokerOffsetStore (the reference's, or `inner`) reporting each memory write and
    naming its broker writes. A write the store makes inside a READ_FROM_STORE read (OFFSET-5)
    is seen as the change of its memory entry and reported as the rebalance's (REBAL-17)."""

    def __init__(
        self,
        client: BrokerOffsetClient,
        group: str,
        owner: ClientWatcher,
        inner: OffsetStore | None = None,
    ) -> None:
        self.inner: OffsetStore = (
            inner if inner is not None else ReferenceRemoteOffsetStore(client, group)
        )
        self.owner = owner
        #: The queue of the last non-increase-only write: a persist of that queue right after
        #: it is RESULT-10's fix-up (update, then persist, REBAL-16).
        self._last_reset: MessageQueue | None = None

    def _memory(self, mq: MessageQueue) -> int | None:
        return self.inner.clone_offset_table(mq.topic).get(mq)

    def load(self) -> None:
        """load (nothing for a remote store)."""
        self.inner.load()

    def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        """updateOffset (OFFSET-2), reported as a ClientCommit."""
        before = self._memory(mq) if isinstance(mq, MessageQueue) else None
        self.write(mq, offset, increase_only)
        if mq is None:
            return
        after = self._memory(mq)
        self._last_reset = mq if not increase_only else None
        rule = self.owner.writer_rule(increase_only)
        self.owner.on_client_commit(mq, offset, increase_only, before, after, rule)

    def write(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        """The store's own update (OFFSET-2), apart from its reporting (a broken store overrides
        this)."""
        self.inner.update_offset(mq, offset, increase_only)

    def read_offset(self, mq: MessageQueue | None, read_type: ReadOffsetType) -> int:
        """readOffset; the memory write a READ_FROM_STORE makes is the rebalance's (REBAL-17)."""
        if not isinstance(mq, MessageQueue) or read_type is not ReadOffsetType.READ_FROM_STORE:
            return self.inner.read_offset(mq, read_type)
        before = self._memory(mq)
        value = self.inner.read_offset(mq, read_type)
        after = self._memory(mq)
        if after is not None and after != before:
            self._last_reset = None
            self.owner.on_client_commit(mq, after, False, before, after, "REBAL-17")
        return value

    def persist(self, mq: MessageQueue | None) -> None:
        """persist (OFFSET-6), its broker write named "fix-up" right after a reset."""
        via = "fix-up" if mq is not None and mq == self._last_reset else "persist"
        with self.owner.writing(via):
            self.inner.persist(mq)

    def persist_all(self, mqs: Collection[MessageQueue] | None) -> None:
        """persistAll (OFFSET-6, OFFSET-8)."""
        with self.owner.writing("persist"):
            self.inner.persist_all(mqs)

    def remove_offset(self, mq: MessageQueue | None) -> None:
        """removeOffset."""
        self.inner.remove_offset(mq)

    def clone_offset_table(self, topic: str | None) -> dict[MessageQueue, int]:
        """cloneOffsetTable."""
        return self.inner.clone_offset_table(topic)

    def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, is_oneway: bool
    ) -> None:
        """updateConsumeOffsetToBroker."""
        self.inner.update_consume_offset_to_broker(mq, offset, is_oneway)


class SendBackFaultError(MQClientError):
    """An injected send-back failure."""


class ObservedSendBack:
    """A SendBackClient that reports each hand-back and injects the owner's send-back faults:
    "fail" refuses before the broker is reached, "lost" lets the broker store the copy and
    then reports a failure (the answer was lost)."""

    def __init__(self, inner: SendBackClient, owner: ClientWatcher) -> None:
        self.inner = inner
        self.owner = owner

    def send_message_back(
        self,
        msg: StoredMessage,
        delay_level: int,
        broker_name: str | None,
        max_reconsume_times: int,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK; without a broker name it is PQ-18's cleaner calling."""
        via = "rpc" if broker_name is not None else "cleaner"
        self._hand_back(
            via,
            message_key(msg),
            lambda: self.inner.send_message_back(
                msg, delay_level, broker_name, max_reconsume_times
            ),
        )

    def send_retry_message(self, message: ClientMessage) -> None:
        """The internal producer's send: CONC-11's fallback, or ORDER-15's hand-off."""
        via = "orderly" if self.owner.orderly else "fallback"
        self._hand_back(via, message_key(message), lambda: self.inner.send_retry_message(message))

    def _hand_back(self, via: str, key: str, call: Callable[[], None]) -> None:
        fault = self.owner.take_send_back_fault()
        if fault == "fail":
            self.owner.on_sent_back(key, via, False, None)
            raise SendBackFaultError("send-back refused (injected)")
        error: Exception | None = None
        with self.owner.capture_stored() as stored:
            try:
                call()
            except Exception as exc:
                error = exc
        if error is None and fault == "lost":
            error = SendBackFaultError("send-back answer lost (injected)")
        self.owner.on_sent_back(key, via, error is None, stored[0] if stored else None)
        if error is not None:
            raise error


class SimConsumer(ClientConsumer):
    """A ClientConsumer built with the simulation's parts (`SimHooks.parts.consumer`), whose
    offset store (an `offset_store`, `SimHooks.offset_store`), send-backs, new PullRequests and
    new ProcessQueues report to `owner`."""

    owner: ClientWatcher

    def __init__(
        self,
        owner: ClientWatcher,
        instance: ReferenceClientInstance,
        group: str,
        config: ConsumerConfig,
        listener: Listener,
        subscriptions: Mapping[str, str],
        consume_time: ConsumeTime,
        *,
        parts: ConsumerParts,
        offset_store: type[ObservedOffsetStore],
    ) -> None:
        self.owner = owner
        self._observed_offset_store = offset_store
        super().__init__(
            instance,
            group,
            config,
            listener,
            subscriptions,
            consume_time=consume_time,
            parts=parts,
            process_queue_factory=owner.new_process_queue,
        )

    def _offset_store(self, remoting: ReferenceRemoting, offset_dir: object) -> OffsetStore:
        client = RemotingOffsetClient(remoting, self.group, self.profile)
        factory = self.parts.offset_store
        inner = factory(client, self.group) if factory is not None else None
        return self._observed_offset_store(client, self.group, self.owner, inner)

    def _send_back_client(self) -> SendBackClient:
        return ObservedSendBack(super()._send_back_client(), self.owner)

    def _dispatch(self, request: NewPullRequest) -> None:
        self.owner.on_dispatch(request)
        super()._dispatch(request)
