"""ReferenceSendBack and ReferenceScheduleService: SendMessageProcessor.consumerSendMsgBack and
ScheduleMessageService over a message store, every decision a RETRY rule, time from the clock.

A send-back stores its new message through `store.put_message`, so a retry goes through the
schedule topic (RETRY-8) and comes back to `%RETRY%<group>` when `deliver_due` runs after its
delay (RETRY-9). No threads: the caller drives delivery by moving the clock.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import attrs

from pullspec.spec.clock import Clock
from pullspec.spec.config import (
    DEFAULT_MESSAGE_DELAY_LEVEL,
    PERM_READ,
    PERM_WRITE,
    StoreConfig,
    SubscriptionGroupConfig,
    TopicConfig,
)
from pullspec.spec.delay import SCHEDULE_TOPIC, parse_delay_levels
from pullspec.spec.errors import (
    IllegalTopicError,
    InvalidArgumentError,
    InvalidTypeError,
    MessageIllegalError,
    require_int,
    require_str,
)
from pullspec.spec.evolve import evolve
from pullspec.spec.layout import validate_topic
from pullspec.spec.message import (
    BrokerInnerMessage,
    StoredMessage,
    dlq_topic_name,
    retry_topic_name,
)
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageStore
from pullspec.spec.retry import (
    SendBackRequest,
    SendBackResponse,
    delivered_message,
    delivery_properties,
    due_timestamp,
    put_response,
    retry_delay_level,
    retry_topic_config,
    send_back_checks,
)
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import BrokerRole

#: The consumer group the schedule service reads its queues as (the store ignores it).
SCHEDULE_READER = "SCHEDULE_SERVICE"
_BATCH = 32


def _levels_of(store: MessageStore) -> tuple[int, ...]:
    config = getattr(store, "config", None)
    text = (
        config.message_delay_level
        if isinstance(config, StoreConfig)
        else DEFAULT_MESSAGE_DELAY_LEVEL
    )
    return parse_delay_levels(text)


@attrs.define
class ReferenceScheduleService:
    """ScheduleMessageService: delivers due messages of SCHEDULE_TOPIC_XXXX back to their real
    topic and queue (RETRY-9), one consume queue per delay level, only on a master."""

    store: MessageStore
    profile: Profile = Profile.V4_9
    clock: Clock = attrs.field(kw_only=True)
    #: The delay of each level in ms (RETRY-7); default: the store's messageDelayLevel.
    levels: tuple[int, ...] = attrs.field(kw_only=True, default=())
    _offsets: dict[int, int] = attrs.field(init=False, factory=dict)
    #: The rules of `profile` (the mutation bank swaps one).
    rules: Ruleset = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.profile = Profile.parse(self.profile)
        self.rules = Ruleset.of(self.profile)
        if not self.levels:
            self.levels = _levels_of(self.store)

    def offset(self, level: int) -> int:
        """The next schedule-queue offset level `level` delivers (delayOffset.json)."""
        return self._offsets.get(require_int("level", level), 0)

    def next_due_at(self) -> int | None:
        """When the earliest undelivered schedule message falls due, or None when none waits."""
        due: list[int] = []
        for level in range(1, len(self.levels) + 1):
            offset = self.offset(level)
            # A level's queue with nothing at or past the offset answers no message
            # (OFFSET_OVERFLOW_ONE or _BADLY, or no queue): skip the read. The client areas'
            # brokers ask this after every event, for 18 levels that are mostly empty.
            if self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1) <= offset:
                continue
            while True:
                result = self.store.get_message(
                    SCHEDULE_READER, SCHEDULE_TOPIC, level - 1, offset, 1
                )
                if result.messages:
                    record = result.messages[0]
                    now = self.clock.now_ms()
                    due.append(due_timestamp(record.tags_code, now, self.levels[level - 1]))
                    break
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
        return min(due) if due else None

    def deliver_due(self) -> int:
        """Deliver every schedule message due at the clock's time, level by level in queue order;
        answer how many were stored back in their real topic (0 on a slave)."""
        if self.store.broker_role is BrokerRole.SLAVE:
            return 0
        return sum(self._deliver_level(level) for level in range(1, len(self.levels) + 1))

    def _deliver_level(self, level: int) -> int:
        offset, delivered = self.offset(level), 0
        while True:
            result = self.store.get_message(
                SCHEDULE_READER, SCHEDULE_TOPIC, level - 1, offset, _BATCH
            )
            if not result.messages:
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset  # skip entries whose records are gone
                continue
            for record in result.messages:
                if not self._due(record, level):
                    self._offsets[level] = record.queue_offset
                    return delivered
                stored = self._deliver(record)
                if stored is False:
                    self._offsets[level] = record.queue_offset
                    return delivered
                delivered += int(stored is True)
                offset = record.queue_offset + 1
            offset = max(offset, result.next_begin_offset)
        self._offsets[level] = offset
        return delivered

    def _due(self, record: StoredMessage, level: int) -> bool:
        now = self.clock.now_ms()
        return due_timestamp(record.tags_code, now, self.levels[level - 1]) <= now

    def _deliver(self, record: StoredMessage) -> bool | None:
        """True when stored, False to retry this record later, None when it is dropped."""
        try:
            msg = delivered_message(record)
        except InvalidArgumentError:
            # RETRY-9: 4.7 logs and drops the record; 4.9.7's catch sits outside the loop.
            return False if self.rules.retries_undeliverable_record() else None
        # RETRY-9: the store decides on the map without DELAY but stores the record's properties.
        try:
            result = self.store.put_message(
                evolve(
                    msg,
                    properties=delivery_properties(msg.properties),
                    stored_properties=msg.properties,
                )
            )
        except (MessageIllegalError, IllegalTopicError):
            return False  # a refused put is a failed put status: the level retries it later
        return result.ok


def _topics(value: Mapping[str, TopicConfig] | None) -> dict[str, TopicConfig]:
    topics = dict(value or {})
    for name, config in topics.items():
        if not isinstance(config, TopicConfig) or config.topic_name != name:
            raise InvalidArgumentError("topics", name, "must map each name to its TopicConfig")
    return topics


@attrs.define
class ReferenceSendBack:
    """SendMessageProcessor.consumerSendMsgBack over a message store (RETRY-1 … RETRY-6), with
    the broker's retry and DLQ topic configs and a schedule service for redelivery."""

    store: MessageStore
    group_config: SubscriptionGroupConfig
    profile: Profile
    clock: Clock
    #: Topic configs by name; retry and DLQ topics are created here when absent.
    topics: dict[str, TopicConfig] = attrs.field(default=None, converter=_topics)
    broker_permission: int = attrs.field(kw_only=True, default=PERM_READ | PERM_WRITE)
    auto_create_subscription_group: bool = attrs.field(kw_only=True, default=True)
    #: The random source of the queue choice (RETRY-2), seeded for reproducibility.
    rng: random.Random = attrs.field(kw_only=True, factory=lambda: random.Random(0))
    broker_ip: str = attrs.field(kw_only=True, default="127.0.0.1")
    groups: dict[str, SubscriptionGroupConfig] = attrs.field(init=False, factory=dict)
    schedule: ReferenceScheduleService = attrs.field(init=False)
    _last_stored: StoredMessage | None = attrs.field(init=False, default=None)
    #: The rules of `profile` (the mutation bank swaps one).
    rules: Ruleset = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.group_config, SubscriptionGroupConfig):
            raise InvalidTypeError("group_config", self.group_config, "SubscriptionGroupConfig")
        self.profile = Profile.parse(self.profile)
        self.rules = Ruleset.of(self.profile)
        self.groups[self.group_config.group_name] = self.group_config
        self.schedule = ReferenceScheduleService(self.store, self.profile, clock=self.clock)

    @property
    def last_stored(self) -> StoredMessage | None:
        """The record the last send-back appended (read back from the commit log), or None."""
        return self._last_stored

    def topic_config(self, topic: str) -> TopicConfig | None:
        """The config of `topic`, or None when the broker has none."""
        return self.topics.get(require_str("topic", topic))

    def send_back(
        self, request: SendBackRequest, *, request_version: int | None = None
    ) -> SendBackResponse:
        """Process CONSUMER_SEND_MSG_BACK; `request_version` defaults to the profile's client.

        Bad input raises a typed error before any state changes, as does 4.7's absent
        maxReconsumeTimes (Java would already have created the retry topic config). unitMode is
        not modelled: TopicConfig has no topic sysFlag to carry the unit flag.
        """
        if not isinstance(request, SendBackRequest):
            raise InvalidTypeError("request", request, "SendBackRequest")
        version = (
            self.rules.client_request_version() if request_version is None else request_version
        )
        require_int("request_version", version)
        group = request.group
        for topic in (retry_topic_name(group), dlq_topic_name(group)):
            why = validate_topic(topic)
            if why:
                raise IllegalTopicError("group", group, why)
        rules = self.rules
        config = self.groups.get(group)
        if config is None and self.auto_create_subscription_group:
            config = SubscriptionGroupConfig(group_name=group)
        existing = self.topics.get(retry_topic_name(group))
        record = self.store.look_message_by_offset(request.offset)
        stop = send_back_checks(
            group=group,
            offset=request.offset,
            group_exists=config is not None,
            broker_permission=self.broker_permission,
            retry_queue_nums=config.retry_queue_nums if config else 0,
            retry_topic_perm=existing.perm if existing else PERM_READ | PERM_WRITE,
            record_found=record is not None,
            broker_ip=self.broker_ip,
        )
        limit = None
        if stop is None:
            assert config is not None and record is not None
            limit = rules.max_reconsume_times(
                request.max_reconsume_times, config.retry_max_times, version
            )
        # From here on the request changes the broker's state.
        self._last_stored = None
        if config is not None:
            self.groups[group] = config
        if stop is not None and stop.step < 5:
            return stop.response
        assert config is not None
        topic, queue_id = rules.retry_target(group, config.retry_queue_nums, self._draw())
        self.topics.setdefault(topic, retry_topic_config(group, config.retry_queue_nums))
        if stop is not None:
            return stop.response
        assert record is not None and limit is not None
        dlq = rules.dead_letter_target(group, record.reconsume_times, limit, request.delay_level)
        if dlq is None:
            delay: int | None = retry_delay_level(request.delay_level, record.reconsume_times)
        else:
            self._draw()  # Java draws the DLQ queue too: nextInt % DLQ_NUMS_PER_GROUP == 0
            topic, queue_id, delay = dlq.topic, dlq.queue_id, dlq.delay_level
            self.topics.setdefault(topic, dlq.topic_config())
        return self._put(rules.send_back_message(record, topic, queue_id, delay))

    def _draw(self) -> int:
        # RETRY-2: 4.7 draws Random.nextInt(), 4.9 ThreadLocalRandom.nextInt(99999999).
        return self.rng.randrange(*self.rules.retry_random_range())

    def _put(self, msg: BrokerInnerMessage) -> SendBackResponse:
        try:
            result = self.store.put_message(msg)
        except MessageIllegalError as exc:
            # The store's refusal is a put status, answered like any other failed put.
            return SendBackResponse(put_response(None).code, exc.status)
        if result.ok:
            self._last_stored = self.store.look_message_by_offset(result.wrote_offset)
        return put_response(result.status)
