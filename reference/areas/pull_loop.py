"""The reference driver of area `pull_loop` (vocabulary: conformance.adapters.pull_loop): the
reference's own pull loop — `ReferencePushConsumer` (pull decision, request, callback), its
`ReferenceProcessQueue`s, its `ReferenceRemoteOffsetStore` and its `ReferenceRebalancePushImpl`
— on a virtual clock, over a scripted broker (`ScriptedBroker`) and a scripted listener that
consumes every message but those the case holds (`ScriptedConsumeService`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import attrs

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.rebalance import NewPullRequest
from pullspec.reference.remoting import OnException, OnResponse
from pullspec.reference.scheduler import Scheduler
from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import PullResponse
from pullspec.spec.consumer_config import ConsumerConfig
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, conforms, require_int
from pullspec.spec.filter import build_subscription_data
from pullspec.spec.message import MessageQueue, StoredMessage
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.process_queue import require_messages
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.pull_actions import Delay
from pullspec.spec.pull_request import PullMessageRequestHeader
from pullspec.spec.pull_route import V4_1_0_SNAPSHOT
from pullspec.spec.status import ResponseCode

#: The vector area this module serves.
AREA = "pull_loop"
#: The one topic, broker and master address of the scripted cluster.
TOPIC, BROKER, ADDR = "T", "b", "127.0.0.1:10911"
#: How long the scripted broker holds a pull that finds nothing (brokerSuspendMaxTimeMillis).
HOLD_MS = 15_000
#: The client id of the consumer.
CLIENT_ID = "127.0.0.1@DEFAULT"
#: An `advance` runs at most this many events (a loop that never lets time pass is a bug).
MAX_EVENTS = 200_000


@attrs.define
class _Held:
    header: PullMessageRequestHeader
    on_response: OnResponse
    handle: int


class ScriptedBroker:
    """The broker of topic T: per queue a list of messages (offsets from 0), answering a pull
    at offset o with FOUND (the messages from o, at most maxMsgNums), holding a pull at the end
    of the queue until a message arrives or HOLD_MS pass (then NO_NEW_MSG), answering an offset
    below 0 or past the end with OFFSET_ILLEGAL (nextBeginOffset: the end) and a queue id it does
    not have with SYSTEM_ERROR; every answer arrives as an event at once. It keeps the group's consumer offsets (QUERY_CONSUMER_OFFSET /
    UPDATE_CONSUMER_OFFSET) and is the pull path's network (PullRemoting)."""

    def __init__(self, scheduler: Scheduler, queues: int) -> None:
        self.scheduler = scheduler
        self.messages: dict[int, list[StoredMessage]] = {q: [] for q in range(queues)}
        self.offsets = _wiring.OffsetBroker()
        self.held: dict[int, list[_Held]] = {}
        #: (time, queueId, offset) of every pull received.
        self.pulls: list[tuple[int, int, int]] = []

    # -- PullRemoting ---------------------------------------------------------------------------

    def broker_addrs(self, broker_name: str) -> BrokerAddrs:
        return BrokerAddrs([(0, ADDR)] if broker_name == BROKER else [])

    def broker_version(self, addr: str) -> int:
        return V4_1_0_SNAPSHOT

    def filter_servers(self, topic: str, broker_addr: str) -> list[str] | None:
        return None

    def pull_message_async(
        self,
        addr: str,
        header: PullMessageRequestHeader,
        timeout_ms: int,
        on_response: OnResponse,
        on_exception: OnException,
    ) -> object:
        queue, offset = header.queue_id, header.queue_offset
        self.pulls.append((self.scheduler.clock.now_ms(), queue, offset))
        stored = self.messages.get(queue)
        if stored is None:
            # A queue id the topic does not have: SYSTEM_ERROR, an MQBrokerException client side.
            remark = f"queueId[{queue}] is illegal"
            answer = PullResponse(code=ResponseCode.SYSTEM_ERROR, remark=remark)
            return self.scheduler.call_soon(lambda: on_response(answer), "pull answer")
        if offset == len(stored):
            held = _Held(header, on_response, 0)
            held.handle = self.scheduler.call_later(
                HOLD_MS, lambda: self._timeout(queue, held), "pull held"
            )
            self.held.setdefault(queue, []).append(held)
            return held.handle
        return self.scheduler.call_soon(lambda: on_response(self._answer(header)), "pull answer")

    def _answer(self, header: PullMessageRequestHeader) -> PullResponse:
        stored = self.messages[header.queue_id]
        offset, end = header.queue_offset, len(stored)
        if offset < 0 or offset > end:
            return PullResponse(
                code=ResponseCode.PULL_OFFSET_MOVED,
                next_begin_offset=end,
                min_offset=0,
                max_offset=end,
            )
        if offset == end:
            return PullResponse(
                code=ResponseCode.PULL_NOT_FOUND,
                next_begin_offset=end,
                min_offset=0,
                max_offset=end,
            )
        found = tuple(stored[offset : offset + header.max_msg_nums])
        return PullResponse(
            code=ResponseCode.SUCCESS,
            next_begin_offset=offset + len(found),
            min_offset=0,
            max_offset=end,
            messages=found,
        )

    def _timeout(self, queue: int, held: _Held) -> None:
        self.held[queue].remove(held)
        held.on_response(self._answer(held.header))

    # -- the case's ops -------------------------------------------------------------------------

    def put(self, queue: int, count: int, tags: str | None, body_size: int) -> None:
        """Append `count` messages to `queue` (one the topic has); its held pulls are answered at
        once."""
        if queue not in self.messages:
            raise InvalidArgumentError(
                "queueId", queue, f"the topic has {len(self.messages)} queues"
            )
        stored = self.messages[queue]
        for _ in range(count):
            raw: dict[str, Any] = {"queueOffset": len(stored), "bodySize": body_size}
            if tags is not None:
                raw["tags"] = tags
            stored.append(_client.message(raw, TOPIC, queue))
        for held in self.held.pop(queue, []):
            self.scheduler.cancel(held.handle)
            answer = self._answer(held.header)
            self.scheduler.call_soon(functools.partial(held.on_response, answer), "pull answer")

    def max_offset(self, mq: MessageQueue) -> int:
        """MQAdminImpl.maxOffset."""
        return len(self.messages.get(mq.queue_id, ()))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """MQAdminImpl.searchOffset: the scripted messages carry no store time: 0."""
        return 0


#: A scripted listener: consume `msgs` of `mq` now (True) or leave them waiting (False), as a
#: listener still busy would; `ScriptedConsumeService.release` offers them again.
Listener = Callable[[Sequence[StoredMessage], MessageQueue], bool]


def _mq(value: object) -> MessageQueue:
    if not isinstance(value, MessageQueue):
        raise InvalidTypeError("mq", value, "MessageQueue")
    return value


class ScriptedConsumeService:
    """The driver's ConsumeMessageService: batches of `batch_size` messages are consumed on the
    scheduler (call_soon) by the listener; a consumed batch is removed from its ProcessQueue and
    the offset removeMessage returns is committed increase-only unless the queue was dropped
    (CONC-4, CONC-9)."""

    def __init__(
        self,
        scheduler: Scheduler,
        offset_store: OffsetStore,
        listener: Listener | None = None,
        batch_size: int = 1,
    ) -> None:
        if not isinstance(scheduler, Scheduler):
            raise InvalidTypeError("scheduler", scheduler, "Scheduler")
        if not conforms(offset_store, OffsetStore):
            raise InvalidTypeError("offset_store", offset_store, "OffsetStore")
        if listener is not None and not callable(listener):
            raise InvalidTypeError("listener", listener, "a callable")
        self.batch_size = require_int("batch_size", batch_size)
        if self.batch_size < 1:
            raise InvalidArgumentError("batch_size", batch_size, "must be >= 1")
        self.scheduler, self.offset_store = scheduler, offset_store
        self.listener: Listener = listener or (lambda msgs, mq: True)
        #: Batches the listener left waiting, oldest first.
        self.waiting: list[tuple[tuple[StoredMessage, ...], ProcessQueue, MessageQueue]] = []
        #: (time, queue, offsets) of every batch consumed.
        self.consumed: list[tuple[int, MessageQueue, tuple[int, ...]]] = []
        #: (time, queue, offset) of every offset committed.
        self.committed: list[tuple[int, MessageQueue, int]] = []
        #: (time, queue, offsets) of batches discarded because their queue was dropped.
        self.discarded: list[tuple[int, MessageQueue, tuple[int, ...]]] = []

    def submit_consume_request(
        self,
        msgs: Sequence[StoredMessage],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        """submitConsumeRequest: one consume event per batch, whatever dispatch_to_consume says
        (the concurrent service ignores it, CONC-2)."""
        batch = require_messages("msgs", msgs)
        if not conforms(process_queue, ProcessQueue):
            raise InvalidTypeError("process_queue", process_queue, "ProcessQueue")
        mq = _mq(message_queue)
        if not isinstance(dispatch_to_consume, bool):
            raise InvalidTypeError("dispatch_to_consume", dispatch_to_consume, "bool")
        for i in range(0, len(batch), self.batch_size):
            self._submit(batch[i : i + self.batch_size], process_queue, mq)

    def release(self) -> None:
        """Offer every waiting batch to the listener again (each in its own consume event)."""
        waiting, self.waiting = self.waiting, []
        for batch, pq, mq in waiting:
            self._submit(batch, pq, mq)

    def _submit(self, batch: tuple[StoredMessage, ...], pq: ProcessQueue, mq: MessageQueue) -> None:
        self.scheduler.call_soon(lambda: self._consume(batch, pq, mq), "consume")

    def _consume(
        self, batch: tuple[StoredMessage, ...], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        now = self.scheduler.clock.now_ms()
        offsets = tuple(m.queue_offset for m in batch)
        if pq.dropped:  # CONC-4: a dropped queue's request is not consumed
            self.discarded.append((now, mq, offsets))
            return
        if not self.listener(batch, mq):
            self.waiting.append((batch, pq, mq))
            return
        self.consumed.append((now, mq, offsets))
        if pq.dropped:  # CONC-9: no result processing for a queue dropped meanwhile
            return
        offset = pq.remove_messages(batch)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(mq, offset, True)
            self.committed.append((now, mq, offset))


class Driver(_client.DriverBase):
    """One push consumer of group G over the scripted broker."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.clock = ManualClock(0)
        self.scheduler = Scheduler(self.clock)
        self.broker = ScriptedBroker(self.scheduler, int(config.get("queues", 1)))
        consumer = _client.consumer_config(config)
        self.store = self.classes.remote_offset_store(self.broker.offsets, _wiring.GROUP)
        self.holding: set[tuple[int, int]] = set()
        self.consume = ScriptedConsumeService(self.scheduler, self.store, self._listener)
        self.assigned: list[MessageQueue] = []
        self.rebalance = self.classes.rebalance(
            self.scheduler,
            group=_wiring.GROUP,
            client_id=CLIENT_ID,
            config=consumer,
            profile=profile,
            lock_client=_wiring.ScriptedLocks(),
            offset_store=self.store,
            admin=self.broker,
            route=lambda _topic: frozenset(
                MessageQueue(TOPIC, BROKER, q) for q in self.broker.messages
            ),
            consumer_ids=lambda _topic, _group: [CLIENT_ID],
            # AllocateMessageQueueByConfig: the queues the case assigns, whatever the route.
            strategy=lambda _group, _cid, _mqs, _cids: list(self.assigned),
            dispatch=self._dispatch,
            process_queue_factory=lambda: self.classes.process_queue(self.clock, profile),
        )
        self.rebalance.subscribe(build_subscription_data(TOPIC, "*"))
        self.push = self.classes.push_consumer(
            _wiring.GROUP,
            consumer,
            profile,
            self.scheduler,
            self.broker,
            self.store,
            self.consume,
            self.rebalance,
            pull_service=self.classes.pull_service(self.scheduler),
        )
        self.rebalance.config_changed = self._config_changed

    def _config_changed(self, config: ConsumerConfig) -> None:
        self.push.config = config

    def _dispatch(self, request: NewPullRequest) -> None:
        self.push.execute_pull_request_immediately(request.pull_request())

    def _listener(self, msgs: Sequence[StoredMessage], mq: MessageQueue) -> bool:
        return not any((mq.queue_id, m.queue_offset) in self.holding for m in msgs)

    # -- observation ------------------------------------------------------------------------------

    def _observe(self, pulls: int, attempts: int, consumed: int) -> dict[str, Any]:
        delays = [
            {
                "at": a.at,
                "queueId": a.mq.queue_id,
                "delayMs": a.action.ms,
                "reason": a.action.reason.value,
            }
            for a in self.push.attempts[attempts:]
            if isinstance(a.action, Delay)
        ]
        counts: dict[int, int] = {}
        for _, mq, offsets in self.consume.consumed[consumed:]:
            counts[mq.queue_id] = counts.get(mq.queue_id, 0) + len(offsets)
        table = sorted(self.rebalance.process_queues().items(), key=lambda kv: kv[0].queue_id)
        committed = self.store.clone_offset_table(None)
        return {
            "now": self.clock.now_ms(),
            "pulls": [
                {"at": at, "queueId": q, "offset": o} for at, q, o in self.broker.pulls[pulls:]
            ],
            "delays": delays,
            "consumed": [{"queueId": q, "count": n} for q, n in sorted(counts.items())],
            "table": [
                {
                    "queueId": mq.queue_id,
                    "cachedOffsets": list(pq.cached_offsets),
                    "msgCount": pq.msg_count,
                    "maxSpan": pq.max_span,
                    "dropped": pq.dropped,
                }
                for mq, pq in table
            ],
            "committed": _offsets(committed.items()),
            "persisted": _offsets(self.broker.offsets.offsets.items()),
        }

    def _run(self, until: int) -> None:
        ran = self.scheduler.run_until(until, MAX_EVENTS)
        if ran >= MAX_EVENTS:
            raise RuntimeError(f"{MAX_EVENTS} events without reaching {until} ms")

    def _step(self, action: Any, ms: int = 0) -> dict[str, Any]:
        marks = (len(self.broker.pulls), len(self.push.attempts), len(self.consume.consumed))
        action()
        self._run(self.clock.now_ms() + ms)
        return self._observe(*marks)

    # -- ops --------------------------------------------------------------------------------------

    def op_put(self, args: _client.Args) -> dict[str, Any]:
        """The broker stores `count` messages in queue `queueId`."""
        queue, count = args.int("queueId", 0), args.int("count", 1)
        tags, size = args.get("tags"), args.int("bodySize", 1)
        return self._step(lambda: self.broker.put(queue, count, tags, size))

    def op_set_offset(self, args: _client.Args) -> dict[str, Any]:
        """The broker's stored consumer offset of queue `queueId` (null: none)."""
        mq = MessageQueue(TOPIC, BROKER, args.int("queueId", 0))
        offset = args.get("offset")

        def write() -> None:
            self.broker.offsets.offsets.pop(mq, None)
            if offset is not None:
                self.broker.offsets.offsets[mq] = int(offset)

        return self._step(write)

    def op_start(self, args: _client.Args) -> dict[str, Any]:
        """The consumer starts: offsets load, the pull thread starts, persistence is scheduled;
        a second start throws MQClientException (observed as `exception`)."""
        marks = (len(self.broker.pulls), len(self.push.attempts), len(self.consume.consumed))
        try:
            return self._step(self.push.start)
        except MQClientError:
            return {"exception": MQClientError.java_exception, **self._observe(*marks)}

    def op_rebalance(self, args: _client.Args) -> dict[str, Any]:
        """A rebalance that assigns this consumer exactly the queues `queueIds`."""

        def run() -> None:
            self.assigned = [MessageQueue(TOPIC, BROKER, q) for q in args.req("queueIds")]
            self.push.do_rebalance()

        return self._step(run)

    def op_hold(self, args: _client.Args) -> dict[str, Any]:
        """From now on the listener leaves these offsets of `queueId` unconsumed."""
        queue = args.int("queueId", 0)
        return self._step(lambda: self.holding.update((queue, o) for o in args.req("offsets")))

    def op_release(self, args: _client.Args) -> dict[str, Any]:
        """The listener consumes held offsets of `queueId` (all of them when none are given)."""
        queue = args.int("queueId", 0)

        def release() -> None:
            wanted = args.get("offsets")
            gone = {(queue, o) for o in wanted} if wanted is not None else set(self.holding)
            self.holding -= {h for h in gone if h[0] == queue}
            self.consume.release()

        return self._step(release)

    def op_advance(self, args: _client.Args) -> dict[str, Any]:
        """Let `ms` of virtual time pass: pulls, answers, consumption, persistence."""
        return self._step(lambda: None, args.int("ms"))

    def op_shutdown(self, args: _client.Args) -> dict[str, Any]:
        """The consumer shuts down: it persists its offsets once."""
        return self._step(self.push.shutdown)


def _offsets(items: Iterable[tuple[MessageQueue, int]]) -> list[dict[str, int]]:
    return [
        {"queueId": q.queue_id, "offset": o}
        for q, o in sorted(items, key=lambda kv: kv[0].queue_id)
    ]


__all__ = ["MQBrokerError", "ScriptedBroker"]
