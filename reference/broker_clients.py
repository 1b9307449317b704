"""The broker's requests from clients other than pulls, locks and send-backs (`ClientRequests`,
a base of ReferenceBroker): heartbeats, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, closed
connections and the housekeeping scan over the table of consumer clients (`ConsumerManager`),
and SEND_MESSAGE as a client's internal producer sends it to a retry topic (RETRY-11).

The consumer table is broker behaviour the rulebooks only touch from the client side (REBAL-1,
REBAL-5); it follows the 4.x source (ClientManageProcessor.heartBeat / unregisterClient,
ConsumerManager, ClientHousekeepingService, DefaultConsumerIdsChangeListener), the same in 4.7.1
and 4.9.7 for what is modelled. NOTIFY_CONSUMER_IDS_CHANGED messages are queued here and drained
by the network (`ReferenceRemoting`), which delivers them to the clients.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from pullspec.spec.clock import Clock
from pullspec.spec.config import PERM_WRITE, BrokerConfig, SubscriptionGroupConfig, TopicConfig
from pullspec.spec.errors import MessageIllegalError, NullPointerError, require_str
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import RETRY_GROUP_TOPIC_PREFIX, BrokerInnerMessage, retry_topic_name
from pullspec.spec.profiles import Profile
from pullspec.spec.results import PutMessageResult
from pullspec.spec.retry import (
    SendBackResponse,
    put_response,
    retry_topic_config,
)
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import ResponseCode

#: ClientHousekeepingService: a client whose last heartbeat is older than this (strictly) is
#: dropped by the scan (ConsumerManager.CHANNEL_EXPIRED_TIMEOUT).
CHANNEL_EXPIRED_TIMEOUT_MILLIS = 120_000
#: ClientHousekeepingService.scanExceptionChannel: initial delay and period.
HOUSEKEEPING_INTERVAL_MILLIS = 10_000


@attrs.frozen
class ConsumerRegistration:
    """What a group's heartbeats registered: its subscriptions and message model."""

    subscriptions: Mapping[str, SubscriptionData]
    broadcasting: bool = False


@attrs.define
class ConsumerGroupInfo:
    """ConsumerGroupInfo: the group's clients (client id → last heartbeat time) and the
    subscriptions all of them together registered."""

    clients: dict[str, int] = attrs.Factory(dict)
    subscriptions: dict[str, SubscriptionData] = attrs.Factory(dict)
    broadcasting: bool = False

    def update_subscriptions(self, subs: Mapping[str, SubscriptionData]) -> bool:
        """updateSubscription: add new topics, replace a topic's data by a newer subVersion, and
        drop the topics this heartbeat does not name; True when a topic was added or dropped
        (a version bump alone is no change)."""
        changed = False
        for topic, sub in subs.items():
            old = self.subscriptions.get(topic)
            if old is None:
                self.subscriptions[topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[topic] = sub
        for topic in [t for t in self.subscriptions if t not in subs]:
            # One heartbeat's set replaces the group's: clients that subscribe differently
            # flip the broker's table back and forth (a known RocketMQ 4.x hazard).
            del self.subscriptions[topic]
            changed = True
        return changed


class ConsumerManager:
    """ConsumerManager over `registry`, the broker's group → ConsumerRegistration map that the
    pull path reads (CODE-3): kept equal to the subscriptions of the live groups here."""

    def __init__(self, clock: Clock, registry: dict[str, ConsumerRegistration]) -> None:
        self.clock = clock
        self.registry = registry
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self._notifications: list[tuple[str, str]] = []
        #: (level, message) for what the broker logs; tests read it.
        self.log: list[tuple[str, str]] = []

    # -- requests ---------------------------------------------------------------------------------

    def register(
        self,
        group: str,
        client_id: str,
        subscriptions: Mapping[str, SubscriptionData],
        broadcasting: bool,
    ) -> bool:
        """registerConsumer (a HEART_BEAT's consumer data): a new client or a topic added or
        dropped notifies every client of the group; answer whether that happened."""
        info = self.groups.setdefault(require_str("group", group), ConsumerGroupInfo())
        new_client = require_str("client_id", client_id) not in info.clients
        info.clients[client_id] = self.clock.now_ms()
        info.broadcasting = broadcasting
        changed = info.update_subscriptions(subscriptions)
        self._sync(group)
        if new_client or changed:
            self._notify(group)
        return new_client or changed

    def unregister(self, group: str, client_id: str) -> None:
        """unregisterConsumer (UNREGISTER_CLIENT): drop the client (and the group once empty),
        then notify whoever is left, whether or not the client was known."""
        info = self.groups.get(group)
        if info is None:
            return
        info.clients.pop(client_id, None)
        self._drop_if_empty(group)
        self._notify(group)

    def channel_closed(self, client_id: str) -> None:
        """doChannelCloseEvent: a closed connection removes the client from every group it was
        in, each such group notifying its remaining clients."""
        for group, info in list(self.groups.items()):
            if info.clients.pop(client_id, None) is not None:
                self._drop_if_empty(group)
                self._notify(group)

    def scan_not_active(self) -> list[tuple[str, str]]:
        """scanNotActiveChannel: drop every client silent for more than 120 s, without any
        notification (the channel is already gone when its close event fires); answer the
        (group, client id) pairs dropped."""
        now = self.clock.now_ms()
        dropped: list[tuple[str, str]] = []
        for group, info in list(self.groups.items()):
            for cid, last in list(info.clients.items()):
                if now - last > CHANNEL_EXPIRED_TIMEOUT_MILLIS:
                    del info.clients[cid]
                    dropped.append((group, cid))
                    self.log.append(("warn", f"SCAN: remove expired channel {cid} from {group}"))
            self._drop_if_empty(group)
        return dropped

    def client_ids(self, group: str) -> list[str] | None:
        """GET_CONSUMER_LIST_BY_GROUP: the group's client ids, or None when it has none (the
        broker answers SYSTEM_ERROR "no consumer for this group")."""
        info = self.groups.get(group)
        if info is None or not info.clients:
            return None
        return list(info.clients)

    def drain_notifications(self) -> list[tuple[str, str]]:
        """The NOTIFY_CONSUMER_IDS_CHANGED messages queued since the last call, as
        (client id, group), in the order they were sent."""
        out, self._notifications = self._notifications, []
        return out

    # -- internals --------------------------------------------------------------------------------

    def _sync(self, group: str) -> None:
        info = self.groups[group]
        self.registry[group] = ConsumerRegistration(dict(info.subscriptions), info.broadcasting)

    def _drop_if_empty(self, group: str) -> None:
        info = self.groups.get(group)
        if info is not None and not info.clients:
            # The group's registration goes too: its pulls then answer SUBSCRIPTION_NOT_EXIST.
            del self.groups[group]
            self.registry.pop(group, None)

    def _notify(self, group: str) -> None:
        info = self.groups.get(group)
        for cid in info.clients if info is not None else ():
            self._notifications.append((cid, group))


class ClientRequests:
    """The client requests of a ReferenceBroker that go through its consumer table or its
    SEND_MESSAGE path; the broker provides the attributes declared here."""

    __slots__ = ()

    if TYPE_CHECKING:
        topics: dict[str, TopicConfig]
        config: BrokerConfig
        profile: Profile
        rules: Ruleset
        consumer_manager: ConsumerManager

        def group_config(self, group: str) -> SubscriptionGroupConfig | None:
            """The broker's group config, auto-created as the broker allows."""
            ...

        def send_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
            """Store `msg`, waking the held pulls of its queue."""
            ...

    def heartbeat(
        self,
        client_id: str,
        group: str,
        subscriptions: Mapping[str, SubscriptionData],
        broadcasting: bool = False,
    ) -> bool:
        """HEART_BEAT of one consumer group of a client: create the group's retry topic (as
        ClientManageProcessor.heartBeat does, so %RETRY%<group> has a route before any
        send-back), then registerConsumer; True when the group's members or topics changed
        (its clients are then notified, see `drain_notifications`)."""
        cfg = self.group_config(group)
        if cfg is not None:
            self.topics.setdefault(
                retry_topic_name(group), retry_topic_config(group, cfg.retry_queue_nums)
            )
        return self.consumer_manager.register(group, client_id, subscriptions, broadcasting)

    def unregister_client(self, client_id: str, group: str) -> None:
        """UNREGISTER_CLIENT for one consumer group (a consumer's shutdown)."""
        self.consumer_manager.unregister(group, client_id)

    def client_channel_closed(self, client_id: str) -> None:
        """The client's connection closed (its process died): it leaves every group at once."""
        self.consumer_manager.channel_closed(client_id)

    def scan_not_active_clients(self) -> list[tuple[str, str]]:
        """ClientHousekeepingService's scan: the (group, client id) pairs it dropped."""
        return self.consumer_manager.scan_not_active()

    def get_consumer_list_by_group(self, group: str) -> tuple[ResponseCode, list[str] | None]:
        """GET_CONSUMER_LIST_BY_GROUP (the cidAll of REBAL-5): SUCCESS with the client ids, or
        SYSTEM_ERROR when the group has no client."""
        ids = self.consumer_manager.client_ids(group)
        return (ResponseCode.SYSTEM_ERROR, None) if ids is None else (ResponseCode.SUCCESS, ids)

    def drain_notifications(self) -> list[tuple[str, str]]:
        """NOTIFY_CONSUMER_IDS_CHANGED messages to send: (client id, group), in order."""
        return self.consumer_manager.drain_notifications()

    def send_message_request(
        self,
        msg: BrokerInnerMessage,
        *,
        reconsume_times: int | None = None,
        max_reconsume_times: int | None = None,
    ) -> SendBackResponse:
        """SEND_MESSAGE with its header's reconsumeTimes and maxReconsumeTimes (None: absent):
        msgCheck's topic checks (a missing retry topic is created with one queue), RETRY-11 for
        a %RETRY% topic, then the put with reconsumeTimes from the header; code and remark."""
        topic, cfg = msg.topic, self.topics.get(msg.topic)
        retry_group = None
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            retry_group = topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
        if cfg is None and retry_group is not None:
            cfg = self.topics[topic] = retry_topic_config(retry_group, 1)
        if cfg is None:
            return SendBackResponse(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if not cfg.perm & self.config.broker_permission & PERM_WRITE:
            return SendBackResponse(ResponseCode.NO_PERMISSION, f"topic[{topic}] not writable")
        if not 0 <= msg.queue_id < cfg.write_queue_nums:
            return SendBackResponse(ResponseCode.SYSTEM_ERROR, f"queueId[{msg.queue_id}] illegal")
        group = self.group_config(retry_group) if retry_group is not None else None
        rules = self.rules
        try:
            target = rules.plain_send_target(
                topic,
                msg.queue_id,
                group.retry_max_times if group is not None else None,
                max_reconsume_times,
                reconsume_times,
                rules.client_request_version(),
            )
        except NullPointerError as exc:  # 4.7 unboxes an absent maxReconsumeTimes
            return SendBackResponse(ResponseCode.SYSTEM_ERROR, str(exc))
        if isinstance(target, SendBackResponse):
            return target
        if target.dlq_perm is not None:
            dlq = TopicConfig(
                topic_name=target.topic, read_queue_nums=1, write_queue_nums=1, perm=target.dlq_perm
            )
            self.topics.setdefault(target.topic, dlq)
        # The header's reconsumeTimes becomes the record's (SendMessageProcessor sets it)
        stored = evolve(
            msg, topic=target.topic, queue_id=target.queue_id, reconsume_times=reconsume_times or 0
        )
        try:
            result = self.send_message(stored)
        except MessageIllegalError as exc:  # the store's refusal is a put status
            return SendBackResponse(put_response(None).code, exc.status)
        return put_response(result.status)
