"""A client's requests over `ReferenceRemoting`, each an adapter to a protocol the client parts
already speak: the offset client (OFFSET-7) and the admin queries of REBAL-17, the broker lock
client (REBAL-19 … REBAL-21), the send-back client (CONC-11, ORDER-15), the topic routes and the
consumer-id list (REBAL-4, REBAL-5).

There is no name server: a topic's route is read from the registered brokers' topic configs
when it is needed (RocketMQ refreshes it every 30 s), and a broker that is down stays in the
route, as it does until the name server notices. Every request is synchronous and takes no
virtual time; its failures are what the remoting raises (RemotingConnectError for a broker
that is down, RemotingTimeoutError for a failing request) or MQClientError / MQBrokerError.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from pullspec.reference.remoting import ReferenceRemoting, RemotingConnectError
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.clock import Clock
from pullspec.spec.config import PERM_READ, PERM_WRITE, TopicConfig
from pullspec.spec.errors import (
    InvalidTypeError,
    UnsupportedError,
    require_bool,
    require_int,
    require_str,
)
from pullspec.spec.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_RECONSUME_TIME,
    BrokerInnerMessage,
    MessageQueue,
    StoredMessage,
)
from pullspec.spec.offset_store import OffsetStoreRules
from pullspec.spec.profiles import Profile
from pullspec.spec.retry import ClientMessage, SendBackRequest, client_msg_id
from pullspec.spec.status import ResponseCode

#: DefaultMQProducer.retryTimesWhenSendFailed: a synchronous send is tried 1 + 2 times.
SEND_ATTEMPTS = 3
#: sendDefaultImpl retries an MQBrokerException only with these codes (TOPIC_NOT_EXIST,
#: SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, NO_PERMISSION, NO_BUYER_ID, NOT_IN_CURRENT_UNIT).
RETRIED_BROKER_CODES = frozenset({17, 14, 1, 16, 204, 205})
MASTER = 0


def master_addr(remoting: ReferenceRemoting, broker_name: str) -> str | None:
    """findBrokerAddressInPublish / findBrokerAddressInSubscribe(name, MASTER_ID, true): the
    master's address, or None when the route has no master."""
    return remoting.broker_addrs(broker_name).get(MASTER)


def _topic_configs(remoting: ReferenceRemoting, topic: str) -> dict[str, TopicConfig]:
    """broker name → the topic's config on its master (else on its lowest-id broker)."""
    found: dict[str, TopicConfig] = {}
    for name in remoting.broker_names():
        addrs = remoting.broker_addrs(name)
        cfg = remoting.broker(addrs[min(addrs)]).topics.get(topic)
        if cfg is not None:
            found[name] = cfg
    return found


def topic_route(remoting: ReferenceRemoting, topic: str) -> frozenset[MessageQueue] | None:
    """topicSubscribeInfoTable[topic] (REBAL-4): readQueueNums queues of every broker whose
    config of the topic is readable; None when no broker knows the topic."""
    configs = _topic_configs(remoting, require_str("topic", topic))
    if not configs:
        return None
    return frozenset(
        MessageQueue(topic, name, i)
        for name, cfg in configs.items()
        if cfg.perm & PERM_READ
        for i in range(cfg.read_queue_nums)
    )


def publish_queues(remoting: ReferenceRemoting, topic: str) -> list[MessageQueue]:
    """TopicPublishInfo's queues: writeQueueNums queues of every writable master, in broker
    then queue order (topicRouteData2TopicPublishInfo)."""
    configs = _topic_configs(remoting, require_str("topic", topic))
    return [
        MessageQueue(topic, name, i)
        for name, cfg in configs.items()
        if cfg.perm & PERM_WRITE and master_addr(remoting, name) is not None
        for i in range(cfg.write_queue_nums)
    ]


def find_consumer_id_list(
    remoting: ReferenceRemoting, topic: str, group: str, rng: random.Random
) -> list[str] | None:
    """findConsumerIdList (REBAL-5): GET_CONSUMER_LIST_BY_GROUP to a random broker of the
    topic's route (its master, else a random one of its brokers); None on any failure."""
    names = sorted(_topic_configs(remoting, topic))
    if not names:
        return None
    addrs = remoting.broker_addrs(names[rng.randrange(len(names))])
    addr = addrs.get(MASTER) or addrs[rng.choice(sorted(addrs))]
    try:
        code, ids = remoting.invoke(
            addr, "GET_CONSUMER_LIST_BY_GROUP", lambda b: b.get_consumer_list_by_group(group)
        )
    except Exception:
        return None  # logged as warn by RocketMQ; the rebalance then changes nothing
    return ids if code is ResponseCode.SUCCESS else None


class RemotingLockClient:
    """BrokerLockClient (spec.protocols) over the remoting: LOCK_BATCH_MQ / UNLOCK_BATCH_MQ
    to the master of a broker (LEASE-8 answers always SUCCESS)."""

    def __init__(self, remoting: ReferenceRemoting) -> None:
        self.remoting = remoting

    def has_master(self, broker_name: str) -> bool:
        """The route knows a master for `broker_name`."""
        return master_addr(self.remoting, broker_name) is not None

    def _master(self, broker_name: str) -> str:
        addr = master_addr(self.remoting, broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        return addr

    def lock_batch(
        self, broker_name: str, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the queues the broker granted (LEASE-6)."""
        queues = list(mqs)
        return self.remoting.invoke(
            self._master(broker_name),
            "LOCK_BATCH_MQ",
            lambda b: b.lock_batch_mq(group, client_id, queues),
        )

    def unlock_batch(
        self,
        broker_name: str,
        group: str,
        client_id: str,
        mqs: Iterable[MessageQueue],
        oneway: bool,
    ) -> None:
        """UNLOCK_BATCH_MQ (LEASE-7); one-way or not, an unreachable broker raises."""
        queues = list(mqs)
        self.remoting.invoke(
            self._master(broker_name),
            "UNLOCK_BATCH_MQ",
            lambda b: b.unlock_batch_mq(group, client_id, queues),
        )


class RemotingSendBackClient:
    """SendBackClient (spec.retry) of one consumer group: CONSUMER_SEND_MSG_BACK to
    the queue's master (CONC-11), and the internal producer's synchronous send of a
    client-built retry message (CONC-11 fallback, ORDER-15, RETRY-11)."""

    def __init__(
        self,
        remoting: ReferenceRemoting,
        group: str,
        clock: Clock,
        rng: random.Random,
        *,
        unit_mode: bool = False,
    ) -> None:
        self.remoting = remoting
        self.group = require_str("group", group)
        self.clock = clock
        self.rng = rng
        self.unit_mode = unit_mode
        #: TopicPublishInfo.sendWhichQueue per topic: starts at a random index.
        self._send_which_queue: dict[str, int] = {}
        #: (time, address, request) of every CONSUMER_SEND_MSG_BACK the broker accepted.
        self.sent_back: list[tuple[int, str, SendBackRequest]] = []
        #: (time, queue, message) of every retry message the broker stored.
        self.sent: list[tuple[int, MessageQueue, BrokerInnerMessage]] = []

    def _store_host_addr(self, msg: StoredMessage) -> str | None:
        # The model's records all carry one store host, so msg.storeHost cannot name a broker:
        # the master whose store holds this record at its commit-log offset is the one.
        for name in self.remoting.broker_names():
            addr = master_addr(self.remoting, name)
            if addr is None:
                continue
            record = self.remoting.broker(addr).store.look_message_by_offset(msg.commitlog_offset)
            if record is not None and record.body == msg.body:
                return addr
        return None

    def send_message_back(
        self,
        msg: StoredMessage,
        delay_level: int,
        broker_name: str | None,
        max_reconsume_times: int,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK to the master of `broker_name` (msg.storeHost when None);
        raises on a missing master, a failed request or any answer but SUCCESS."""
        addr = (
            master_addr(self.remoting, broker_name)
            if broker_name is not None
            else self._store_host_addr(msg)
        )
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        request = SendBackRequest(
            offset=msg.commitlog_offset,
            group=self.group,
            delay_level=require_int("delay_level", delay_level),
            origin_msg_id=client_msg_id(msg),
            origin_topic=msg.topic,
            unit_mode=self.unit_mode,
            max_reconsume_times=require_int("max_reconsume_times", max_reconsume_times),
        )
        response = self.remoting.invoke(
            addr, "CONSUMER_SEND_MSG_BACK", lambda b: b.consumer_send_msg_back(request)
        )
        if response.code is not ResponseCode.SUCCESS:
            raise MQBrokerError(int(response.code), response.remark, addr)
        self.sent_back.append((self.clock.now_ms(), addr, request))

    def send_retry_message(self, message: ClientMessage) -> None:
        """DefaultMQProducerImpl.sendDefaultImpl, SYNC: up to 3 attempts over the topic's
        queues round-robin (another broker after a failure when there is one), a broker answer
        ending them unless its code is retried; RECONSUME_TIME and MAX_RECONSUME_TIMES travel
        in the header, not as properties (sendKernelImpl)."""
        if not isinstance(message, ClientMessage):
            raise InvalidTypeError("message", message, "ClientMessage")
        queues = publish_queues(self.remoting, message.topic)
        if not queues:
            raise MQClientError(f"No route info of this topic, {message.topic}")
        props = dict(message.properties)
        reconsume = props.pop(PROPERTY_RECONSUME_TIME, None)
        max_times = props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
        last_broker: str | None = None
        errors: list[BaseException] = []
        for _ in range(SEND_ATTEMPTS):
            mq = self._select_queue(message.topic, queues, last_broker)
            last_broker = mq.broker_name
            inner = BrokerInnerMessage(
                mq.topic,
                mq.queue_id,
                message.body,
                props,
                flag=message.flag,
                born_timestamp=self.clock.now_ms(),
            )
            try:
                self._send(mq, inner, reconsume, max_times)
                return
            except MQBrokerError as exc:
                if exc.code not in RETRIED_BROKER_CODES:
                    raise
                errors.append(exc)
            except (MQClientError, RemotingConnectError) as exc:  # remoting/client failures
                errors.append(exc)
        raise MQClientError(f"Send [{SEND_ATTEMPTS}] times, still failed: {errors[-1]!r}")

    def _select_queue(
        self, topic: str, queues: list[MessageQueue], last_broker: str | None
    ) -> MessageQueue:
        """TopicPublishInfo.selectOneMessageQueue(lastBrokerName) without latency fault."""
        if topic not in self._send_which_queue:
            self._send_which_queue[topic] = self.rng.randrange(1 << 31)
        for _ in range(len(queues)):
            self._send_which_queue[topic] += 1
            mq = queues[self._send_which_queue[topic] % len(queues)]
            if last_broker is None or mq.broker_name != last_broker:
                return mq
        self._send_which_queue[topic] += 1
        return queues[self._send_which_queue[topic] % len(queues)]

    def _send(
        self,
        mq: MessageQueue,
        inner: BrokerInnerMessage,
        reconsume: str | None,
        max_times: str | None,
    ) -> None:
        addr = master_addr(self.remoting, mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        response = self.remoting.invoke(
            addr,
            "SEND_MESSAGE",
            lambda b: b.send_message_request(
                inner,
                reconsume_times=None if reconsume is None else int(reconsume),
                max_reconsume_times=None if max_times is None else int(max_times),
            ),
        )
        if response.code is not ResponseCode.SUCCESS:
            raise MQBrokerError(int(response.code), response.remark, addr)
        self.sent.append((self.clock.now_ms(), mq, inner))


class RemotingOffsetClient:
    """RemoteBrokerOffsetStore's broker side over the remoting, for one consumer group."""

    def __init__(self, remoting: ReferenceRemoting, group: str, profile: Profile) -> None:
        if not isinstance(remoting, ReferenceRemoting):
            raise InvalidTypeError("remoting", remoting, "ReferenceRemoting")
        self.remoting = remoting
        self.group = require_str("group", group)
        self.profile = Profile.parse(profile)
        #: OFFSET-7 of the profile, looked up once.
        self.rules = OffsetStoreRules.of(self.profile)

    def query_offset(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET: the stored offset; MQBrokerError on a non-SUCCESS code,
        MQClientError / RemotingConnectError when there is no reachable broker."""
        queue = _message_queue(mq)
        addr = self.remoting.offset_broker_addr(queue.broker_name, self.rules)
        broker = self.remoting.connect(addr)
        code, offset = broker.query_consumer_offset(self.group, queue.topic, queue.queue_id)
        if code is not ResponseCode.SUCCESS or offset is None:
            raise MQBrokerError(int(code), code.name, addr)
        return offset

    def update_offset(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET (one-way or synchronous); the broker commits it on any role."""
        queue = _message_queue(mq)
        value = require_int("offset", offset)
        require_bool("oneway", oneway)
        addr = self.remoting.offset_broker_addr(queue.broker_name, self.rules)
        code = self.remoting.connect(addr).update_consumer_offset(
            self.group, queue.topic, queue.queue_id, value
        )
        if code is not ResponseCode.SUCCESS and not oneway:
            raise MQBrokerError(int(code), code.name, addr)


class RemotingAdmin:
    """MQAdminImpl.maxOffset / searchOffset over the remoting (the OffsetQueries of REBAL-17)."""

    def __init__(self, remoting: ReferenceRemoting) -> None:
        if not isinstance(remoting, ReferenceRemoting):
            raise InvalidTypeError("remoting", remoting, "ReferenceRemoting")
        self.remoting = remoting

    def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET from the master; MQClientError when it is missing or unreachable."""
        queue = _message_queue(mq)
        addr = self.remoting.broker_addrs(queue.broker_name).get(0)
        if addr is None:
            raise MQClientError(f"The broker[{queue.broker_name}] not exist")
        try:
            broker = self.remoting.connect(addr)
        except RemotingConnectError as exc:
            raise MQClientError(f"Invoke Broker[{addr}] exception") from exc
        return broker.store.get_max_offset_in_queue(queue.topic, queue.queue_id)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: not modelled (the reference store keeps no time index)."""
        _message_queue(mq)
        require_int("timestamp_ms", timestamp_ms)
        raise UnsupportedError("searchOffset (CONSUME_FROM_TIMESTAMP) in the reference remoting")


def _message_queue(value: object) -> MessageQueue:
    if not isinstance(value, MessageQueue):
        raise InvalidTypeError("mq", value, "MessageQueue")
    return value
