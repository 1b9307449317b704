"""ReferenceBroker: the broker's pull path over a message store — PullMessageProcessor's checks
and codes, the consumer offset table, and long polling driven by the injected clock."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import attrs

from pullspec.reference.broker_clients import ClientRequests, ConsumerManager, ConsumerRegistration
from pullspec.reference.lock_manager import ReferenceLockManager
from pullspec.reference.send_back import ReferenceSendBack
from pullspec.spec.clock import Clock
from pullspec.spec.code import (
    MASTER_ID,
    OFFSET_MOVED_EVENT,
    PullMessageRequest,
    PullResponse,
    broker_allow_suspend,
    decode_sys_flag,
    is_held,
    offset_moved_event,
    offset_moved_outcome,
    pre_store_check,
    registry_subscription_check,
    response_remark,
    slave_code,
    suggest_which_broker_id,
)
from pullspec.spec.commit import commit_offset, commits_piggy_backed_offset, query_consumer_offset
from pullspec.spec.config import BrokerConfig, StoreConfig, SubscriptionGroupConfig, TopicConfig
from pullspec.spec.errors import (
    IllegalCapacityError,
    InvalidArgumentError,
    InvalidTypeError,
    require_int,
    require_str,
)
from pullspec.spec.filter import (
    ExpressionMessageFilter,
    SubscriptionData,
    SubscriptionParseError,
    build_subscription_data,
    sql92_allowed,
)
from pullspec.spec.hold import (
    HoldDecision,
    held_request_decision,
    hold_check_interval,
    hold_key,
    hold_timeout_millis,
    notifies_on_arrival,
    periodic_check_queue,
)
from pullspec.spec.layout import is_dispatched_type
from pullspec.spec.message import DEFAULT_STORE_HOST, BrokerInnerMessage, MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageStore
from pullspec.spec.results import PutMessageResult
from pullspec.spec.retry import SendBackRequest, SendBackResponse
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import BrokerRole, ResponseCode
from pullspec.spec.store import commit_log_roll_next_file

#: MixAll.isSysConsumerGroup: such groups are created even without autoCreateSubscriptionGroup.
SYSTEM_CONSUMER_GROUP_PREFIX = "CID_RMQ_SYS_"


@attrs.define
class HeldRequest:
    """A suspended pull waiting in the hold service (HOLD-1)."""

    request_id: int
    request: PullMessageRequest
    suspend_timestamp: int
    timeout_millis: int
    pull_from_this_offset: int
    message_filter: ExpressionMessageFilter


class ConfiguredStore(MessageStore, Protocol):
    """A message store that shows its StoreConfig: the broker walks the commit log file by file
    (`mapped_file_size_commit_log`) to notify held pulls of what was appended."""

    @property
    def config(self) -> StoreConfig:
        """The store's settings."""
        ...


@attrs.define
class ReferenceBroker(ClientRequests):
    """A deterministic broker: pulls, offset commits, long polling; no threads, no sleeping.
    Heartbeats, the consumer list and SEND_MESSAGE requests are in `ClientRequests`."""

    store: ConfiguredStore
    config: BrokerConfig = attrs.field(factory=BrokerConfig)
    profile: Profile = Profile.V4_9
    clock: Clock = attrs.field(kw_only=True)
    topics: dict[str, TopicConfig] = attrs.field(factory=dict)
    groups: dict[str, SubscriptionGroupConfig] = attrs.field(factory=dict)
    consumers: dict[str, ConsumerRegistration] = attrs.field(factory=dict)
    offsets: dict[str, dict[int, int]] = attrs.field(factory=dict)
    _held: dict[str, list[HeldRequest]] = attrs.field(init=False, factory=dict)
    _answers: list[tuple[int, PullResponse]] = attrs.field(init=False, factory=list)
    _next_request_id: int = attrs.field(init=False, default=1)
    _next_check: int = attrs.field(init=False, default=0)
    lock_manager: ReferenceLockManager = attrs.field(init=False)
    #: The rules of the profile, looked up once.
    rules: Ruleset = attrs.field(init=False)
    send_back_processor: ReferenceSendBack = attrs.field(init=False)
    #: The consumer clients of each group, as heartbeats registered them.
    consumer_manager: ConsumerManager = attrs.field(init=False)
    #: Called with (group, topic, queue_id, offset) on every consumer offset commit.
    commit_listeners: list[Callable[[str, str, int, int], None]] = attrs.field(
        init=False, factory=list
    )

    def __attrs_post_init__(self) -> None:
        self.rules = Ruleset.of(self.profile)
        self._next_check = self.clock.now_ms() + self.check_interval
        self.lock_manager = ReferenceLockManager(clock=self.clock)
        self.consumer_manager = ConsumerManager(self.clock, self.consumers)
        self.send_back_processor = ReferenceSendBack(
            self.store,
            SubscriptionGroupConfig(group_name=SYSTEM_CONSUMER_GROUP_PREFIX + "SEND_BACK"),
            self.profile,
            self.clock,
            broker_permission=self.config.broker_permission,
            auto_create_subscription_group=self.config.auto_create_subscription_group,
        )
        # One broker: the send-back processor sees the broker's topic and group configs. The
        # topics field's converter would copy the dict, so the shared one is set around it.
        object.__setattr__(self.send_back_processor, "topics", self.topics)
        self.send_back_processor.groups = self.groups

    @property
    def check_interval(self) -> int:
        """The hold service's check interval (HOLD-2)."""
        return hold_check_interval(
            self.config.long_polling_enable, self.config.short_polling_time_mills
        )

    @property
    def next_hold_check_at(self) -> int:
        """When the next periodic hold check is due."""
        return self._next_check

    # -- administration --------------------------------------------------------------------

    def create_topic(self, topic: str, queue_nums: int = 4, perm: int = 6) -> TopicConfig:
        """Create (or replace) a topic's config with `queue_nums` read and write queues."""
        cfg = TopicConfig(
            topic_name=require_str("topic", topic),
            read_queue_nums=require_int("queue_nums", queue_nums),
            write_queue_nums=queue_nums,
            perm=require_int("perm", perm),
        )
        self.topics[topic] = cfg
        return cfg

    def register_consumer(
        self, group: str, subscriptions: Mapping[str, str], broadcasting: bool = False
    ) -> None:
        """Record a consumer heartbeat: topic → TAG expression, and the message model."""
        self.consumers[require_str("group", group)] = ConsumerRegistration(
            {t: build_subscription_data(t, e) for t, e in subscriptions.items()}, broadcasting
        )

    def group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created when autoCreateSubscriptionGroup is on."""
        cfg = self.groups.get(group)
        system_group = group.startswith(SYSTEM_CONSUMER_GROUP_PREFIX)
        if cfg is None and (self.config.auto_create_subscription_group or system_group):
            cfg = self.groups[group] = SubscriptionGroupConfig(group_name=group)
        return cfg

    # -- producing --------------------------------------------------------------------------

    def send_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """Store a message and notify the held pulls of its queue (HOLD-5)."""
        before = self.store.get_max_phy_offset()
        result = self.store.put_message(msg)
        self._notify_dispatched(before)
        return result

    def _notify_dispatched(self, since_phys: int) -> None:
        """ReputMessageService: notify held pulls of every record appended since `since_phys`,
        each on the queue it was dispatched to (a delayed message: the schedule topic)."""
        if not notifies_on_arrival(self.store.broker_role, self.config.long_polling_enable):
            return
        file_size = self.store.config.mapped_file_size_commit_log
        phys, end = max(since_phys, 0), self.store.get_max_phy_offset()
        while phys < end:
            record = self.store.look_message_by_offset(phys)
            if record is None:  # the end-of-file blank: continue in the next file
                phys = commit_log_roll_next_file(phys, file_size)
                continue
            if is_dispatched_type(record.sys_flag):
                self.notify_message_arriving(
                    record.topic, record.queue_id, record.queue_offset + 1, record.tags_code
                )
            phys += record.size

    # -- locks, send-back, delayed delivery -------------------------------------------------

    def lock_batch_mq(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ (LEASE-8): the queues now locked by `client_id`; always SUCCESS."""
        return self.lock_manager.try_lock_batch(group, list(mqs), client_id)

    def unlock_batch_mq(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ (LEASE-8)."""
        self.lock_manager.unlock_batch(group, list(mqs), client_id)

    def consumer_send_msg_back(self, request: SendBackRequest) -> SendBackResponse:
        """CONSUMER_SEND_MSG_BACK (RETRY-1 … RETRY-6); the new record wakes held pulls."""
        before = self.store.get_max_phy_offset()
        response = self.send_back_processor.send_back(request)
        self._notify_dispatched(before)
        return response

    @property
    def next_schedule_delivery_at(self) -> int | None:
        """When the schedule service next has a delayed message due (None: nothing waits)."""
        if self.store.broker_role is BrokerRole.SLAVE:
            return None
        return self.send_back_processor.schedule.next_due_at()

    def deliver_due_messages(self) -> int:
        """Run the schedule service (RETRY-9) at the clock's time; delivered records wake pulls."""
        before = self.store.get_max_phy_offset()
        delivered = self.send_back_processor.schedule.deliver_due()
        self._notify_dispatched(before)
        return delivered

    # -- pulling ----------------------------------------------------------------------------

    def pull_message(self, request: PullMessageRequest) -> tuple[int, PullResponse | None]:
        """Process a pull: (request id, response), the response None when the pull is held."""
        if not isinstance(request, PullMessageRequest):
            raise InvalidTypeError("request", request, "PullMessageRequest")
        for name in ("queue_id", "queue_offset", "max_msg_nums", "sys_flag", "commit_offset"):
            require_int(name, getattr(request, name))
        if request.queue_id < 0:
            # RocketMQ's processor answers SYSTEM_ERROR; the spec rejects the input outright.
            raise InvalidArgumentError("queue_id", request.queue_id, "must be >= 0")
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id, self._process(request, request_id, broker_allow_suspend(False))

    def _process(
        self, request: PullMessageRequest, request_id: int, allow_suspend: bool
    ) -> PullResponse | None:
        flags = decode_sys_flag(request.sys_flag)
        group = self.group_config(request.consumer_group)
        topic = self.topics.get(request.topic)
        early = pre_store_check(
            broker_permission=self.config.broker_permission,
            group_exists=group is not None,
            consume_enable=group is not None and group.consume_enable,
            topic_exists=topic is not None,
            topic_permission=topic.perm if topic else 0,
            queue_id=request.queue_id,
            read_queue_nums=topic.read_queue_nums if topic else 0,
        )
        if early is not None:
            return PullResponse(code=early)
        assert group is not None
        subscription, early = self._subscription(request, flags.subscription, group)
        if early is not None or subscription is None:
            return PullResponse(code=early or ResponseCode.SYSTEM_ERROR)
        message_filter = ExpressionMessageFilter(subscription)
        try:
            response = self._answer(request, group, message_filter)
        except IllegalCapacityError as exc:
            # 4.9: getMessage throws; the remoting layer answers SYSTEM_ERROR and the processor
            # never reaches its offset commit (BATCH-4).
            return PullResponse(code=ResponseCode.SYSTEM_ERROR, remark=str(exc))
        if response.code is ResponseCode.PULL_NOT_FOUND and is_held(
            response.code, allow_suspend, flags.suspend
        ):
            self._suspend(request, request_id, message_filter)
            response_or_none: PullResponse | None = None
        else:
            response_or_none = response
        if commits_piggy_backed_offset(
            allow_suspend, request.sys_flag, self.store.broker_role, passed_checks=True
        ):
            self.commit_offset(
                request.consumer_group, request.topic, request.queue_id, request.commit_offset
            )
        return response_or_none

    def _subscription(
        self, request: PullMessageRequest, has_subscription: bool, group: SubscriptionGroupConfig
    ) -> tuple[SubscriptionData | None, ResponseCode | None]:
        if has_subscription:
            try:
                sub = build_subscription_data(
                    request.topic, request.subscription, request.expression_type
                )
            except SubscriptionParseError:
                return None, ResponseCode.SUBSCRIPTION_PARSE_FAILED
        else:
            reg = self.consumers.get(request.consumer_group)
            found = reg.subscriptions.get(request.topic) if reg else None
            early = registry_subscription_check(
                group_registered=reg is not None,
                broadcasting=reg is not None and reg.broadcasting,
                consume_broadcast_enable=group.consume_broadcast_enable,
                has_topic_subscription=found is not None,
                registered_sub_version=found.sub_version if found else 0,
                request_sub_version=request.sub_version,
            )
            if early is not None or found is None:
                return None, early
            sub = found
        if not sql92_allowed(sub.expression_type, self.config.enable_property_filter):
            return None, ResponseCode.SYSTEM_ERROR
        return sub, None

    def _answer(
        self,
        request: PullMessageRequest,
        group: SubscriptionGroupConfig,
        message_filter: ExpressionMessageFilter,
    ) -> PullResponse:
        result = self.store.get_message(
            request.consumer_group,
            request.topic,
            request.queue_id,
            request.queue_offset,
            request.max_msg_nums,
            message_filter,
        )
        role = self.store.broker_role
        suggestion = suggest_which_broker_id(
            result.suggest_pulling_from_slave,
            self.config.slave_read_enable,
            group.which_broker_when_consume_slowly,
            group.broker_id,
        )
        code = slave_code(role, self.config.slave_read_enable, result.status, request.queue_offset)
        if code is ResponseCode.PULL_OFFSET_MOVED:
            code, suggestion, write_event = offset_moved_outcome(
                role, self.store.offset_check_in_slave, suggestion, group.broker_id
            )
            if write_event:
                self._offset_moved_event(request, result.next_begin_offset)
        return PullResponse(
            code=code,
            remark=response_remark(result.status),
            status=result.status,
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            suggest_which_broker_id=suggestion,
            messages=result.messages if code is ResponseCode.SUCCESS else (),
            bodies=result.bodies if code is ResponseCode.SUCCESS else None,
        )

    def _offset_moved_event(self, request: PullMessageRequest, offset_new: int) -> None:
        body, properties = offset_moved_event(
            request.consumer_group,
            request.topic,
            self.config.broker_name,
            request.queue_id,
            request.queue_offset,
            offset_new,
        )
        event = BrokerInnerMessage(
            topic=OFFSET_MOVED_EVENT,
            queue_id=0,
            body=body,
            properties=properties,
            born_timestamp=self.clock.now_ms(),
            born_host=DEFAULT_STORE_HOST,  # born and stored at the broker's own address
            store_host=DEFAULT_STORE_HOST,
        )
        with contextlib.suppress(InvalidArgumentError):  # RocketMQ ignores a failed event write
            self.store.put_message(event)

    # -- long polling -----------------------------------------------------------------------

    def _suspend(
        self, request: PullMessageRequest, request_id: int, message_filter: ExpressionMessageFilter
    ) -> None:
        held = HeldRequest(
            request_id,
            request,
            self.clock.now_ms(),
            hold_timeout_millis(
                self.config.long_polling_enable,
                request.suspend_timeout_millis,
                self.config.short_polling_time_mills,
            ),
            request.queue_offset,
            message_filter,
        )
        self._held.setdefault(hold_key(request.topic, request.queue_id), []).append(held)

    @property
    def held_requests(self) -> list[HeldRequest]:
        """Every pull currently held, in key then insertion order."""
        return [h for hs in self._held.values() for h in hs]

    def notify_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None
    ) -> None:
        """Wake, time out or keep every held pull of one queue (HOLD-4)."""
        key = hold_key(topic, queue_id)
        held = self._held.get(key)
        if not held:
            # As pullRequestTable.get(key) == null: a queue nobody waits on gets no entry, so
            # the periodic check walks only queues that had a held pull.
            return
        self._held[key] = []
        kept: list[HeldRequest] = []
        now = self.clock.now_ms()
        for i, h in enumerate(held):
            try:
                current_max = self.store.get_max_offset_in_queue(topic, queue_id)
                decision = held_request_decision(
                    max_offset,
                    current_max,
                    h.pull_from_this_offset,
                    h.message_filter.is_matched_by_consume_queue(tags_code),
                    now,
                    h.suspend_timestamp,
                    h.timeout_millis,
                )
                response = (
                    None
                    if decision is HoldDecision.KEEP
                    else self._process(h.request, h.request_id, broker_allow_suspend(True))
                )
            except BaseException:
                self._held[key].extend([*kept, *held[i:]])  # nothing held is lost on a failure
                raise
            if response is None:
                kept.append(h)
            else:
                self._answers.append((h.request_id, response))
        self._held[key].extend(kept)

    def run_hold_checks(self) -> int:
        """Run every periodic hold check due by now (HOLD-2, HOLD-3); return how many ran."""
        ran = 0
        while self.clock.now_ms() >= self._next_check:
            for key in list(self._held):
                queue = periodic_check_queue(key)
                if queue is not None:
                    topic, queue_id = queue
                    self.notify_message_arriving(
                        topic, queue_id, self.store.get_max_offset_in_queue(topic, queue_id), None
                    )
            self._next_check += self.check_interval
            ran += 1
        return ran

    def drain_responses(self) -> list[tuple[int, PullResponse]]:
        """The responses of held pulls answered since the last call, in answer order."""
        out, self._answers = self._answers, []
        return out

    # -- offsets ----------------------------------------------------------------------------

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """ConsumerOffsetManager.commitOffset (COMMIT-1): replace, not increase-only."""
        table = self.offsets.setdefault(f"{topic}@{group}", {})
        table[queue_id] = commit_offset(table.get(queue_id), offset)
        for listener in self.commit_listeners:
            listener(group, topic, queue_id, table[queue_id])

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The stored offset, or -1 (ConsumerOffsetManager.queryOffset)."""
        return self.offsets.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def query_consumer_offset(
        self, group: str, topic: str, queue_id: int
    ) -> tuple[ResponseCode, int | None]:
        """QUERY_CONSUMER_OFFSET (COMMIT-4)."""
        min_offset = self.store.get_min_offset_in_queue(topic, queue_id)
        in_disk = self.store.check_in_disk_by_consume_offset(topic, queue_id, 0)
        return query_consumer_offset(self.query_offset(group, topic, queue_id), min_offset, in_disk)

    def update_consumer_offset(
        self, group: str, topic: str, queue_id: int, offset: int
    ) -> ResponseCode:
        """UPDATE_CONSUMER_OFFSET (COMMIT-3): commit and answer SUCCESS on any role."""
        self.commit_offset(group, topic, queue_id, require_int("offset", offset))
        return ResponseCode.SUCCESS


__all__ = ["MASTER_ID", "BrokerRole", "ConsumerRegistration", "HeldRequest", "ReferenceBroker"]
