"""The reference push consumer's pull path (DefaultMQPushConsumerImpl.pullMessage and its
PullCallback) on the scheduler.

Every decision is a spec rule: FLOW via `decide_pull`, REQ via `spec.pull_request` and
`spec.pull_route`, RESULT via `spec.pull_result`; this module applies their answers to the
PullRequest, the ProcessQueue, the offset store and the pull service.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from typing import Protocol, runtime_checkable

import attrs

from pullspec.reference.pull_service import PullMessageService, PullRequest
from pullspec.reference.records import Records
from pullspec.reference.remoting import OnException, OnResponse
from pullspec.reference.scheduler import Scheduler
from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.code import PullResponse
from pullspec.spec.consumer_config import (
    PERSIST_CONSUMER_OFFSET_INITIAL_DELAY_MILLIS,
    ConsumerConfig,
    MessageModel,
    ReadOffsetType,
)
from pullspec.spec.errors import InvalidTypeError, conforms, require_str
from pullspec.spec.filter import SubscriptionData
from pullspec.spec.message import MessageQueue
from pullspec.spec.offset_store import OffsetStore, persist_consumer_offset_targets
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ConsumeMessageService, ProcessQueue
from pullspec.spec.pull_actions import (
    NO_FLOW_CONTROL,
    Delay,
    Drop,
    FlowControlCounters,
    Immediately,
    Pull,
    PullDecision,
    keeps_circulating,
)
from pullspec.spec.pull_decision import ConsumerState, ProcessQueueSnapshot, decide_pull
from pullspec.spec.pull_request import (
    PullCallbackContext,
    PullKernelCall,
    PullMessageRequestHeader,
    capture_pull_callback,
    commit_offset_for_pull,
    on_pull_kernel_exception,
    pull_kernel_call,
)
from pullspec.spec.pull_result import (
    PullResult,
    PullResultHandling,
    on_success,
    stores_despite_drop,
)
from pullspec.spec.pull_route import (
    check_filter_type_supported,
    pull_target_address,
    recalculate_pull_from_which_node,
)
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import PullStatus


class ServiceState(enum.Enum):
    """ServiceState of the consumer (FLOW-3 pulls only while RUNNING)."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"


@runtime_checkable
class PullRemoting(Protocol):
    """What the pull path needs of the network (ReferenceRemoting implements it; the conformance
    drivers script it): the route's broker map, the broker's version, its filter servers and the
    asynchronous pull."""

    def broker_addrs(self, broker_name: str) -> BrokerAddrs:
        """BrokerData.brokerAddrs of `broker_name` (REQ-6)."""
        ...

    def broker_version(self, addr: str) -> int:
        """The MQVersion ordinal of the broker at `addr` (REQ-7)."""
        ...

    def filter_servers(self, topic: str, broker_addr: str) -> list[str] | None:
        """The route's filter servers of `broker_addr` for `topic` (REQ-10), None when none."""
        ...

    def pull_message_async(
        self,
        addr: str,
        header: PullMessageRequestHeader,
        timeout_ms: int,
        on_response: OnResponse,
        on_exception: OnException,
    ) -> object:
        """Send the pull; exactly one callback runs later (or it raises at once)."""
        ...


@runtime_checkable
class RebalanceHooks(Protocol):
    """What the pull path needs of RebalanceImpl (the real rebalance implements it)."""

    def remove_process_queue(self, mq: MessageQueue) -> None:
        """removeProcessQueue (REBAL-16), run by the OFFSET_ILLEGAL fix-up."""
        ...

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """computePullFromWhere(WithException) (REBAL-17), run by FLOW-12."""
        ...

    def subscription(self, topic: str) -> SubscriptionData | None:
        """subscriptionInner.get(topic) (FLOW-13, REQ-3)."""
        ...

    def process_queues(self) -> Mapping[MessageQueue, ProcessQueue]:
        """processQueueTable (OFFSET-8 persists its keys)."""
        ...

    def do_rebalance(self) -> None:
        """rebalanceImpl.doRebalance, run by resume() (FLOW-4)."""
        ...


@attrs.frozen
class PullAttempt:
    """One pullMessage attempt: when, on which queue, the cursor after it and what it did."""

    at: int
    mq: MessageQueue
    next_offset: int
    action: Pull | Delay | Drop
    #: The whole decision (flow-control log, first-lock correction, …).
    decision: PullDecision | None = None
    #: PULLQ-8: the request lives on after this attempt (a pull sent, or a delay scheduled on a
    #: pull service that is not stopped); False means only a rebalance can revive the queue.
    circulates: bool = True


@attrs.frozen
class PullOutcome:
    """What the PullCallback did with one answer; status None for an exception (onException,
    or pullKernelImpl throwing before the RPC, REQ-11)."""

    at: int
    mq: MessageQueue
    status: PullStatus | None
    next_offset: int
    reenqueue: Immediately | Delay | None
    #: What onSuccess decided (None for an exception): the fields no effect shows.
    handling: PullResultHandling | None = None


def _require(name: str, value: object, kind: type) -> None:
    if not conforms(value, kind):
        raise InvalidTypeError(name, value, kind.__name__)


class ReferencePushConsumer:
    """DefaultMQPushConsumerImpl's pull path: FLOW → REQ → remoting → PullCallback (RESULT)."""

    def __init__(
        self,
        group: str,
        config: ConsumerConfig,
        profile: Profile,
        scheduler: Scheduler,
        remoting: PullRemoting,
        offset_store: OffsetStore,
        consume_service: ConsumeMessageService,
        rebalance_hooks: RebalanceHooks,
        *,
        pull_service: PullMessageService | None = None,
        schedule_persist: bool = True,
    ) -> None:
        self.group = require_str("group", group)
        for name, value, kind in (
            ("config", config, ConsumerConfig),
            ("scheduler", scheduler, Scheduler),
            ("remoting", remoting, PullRemoting),
            ("offset_store", offset_store, OffsetStore),
            ("consume_service", consume_service, ConsumeMessageService),
            ("rebalance_hooks", rebalance_hooks, RebalanceHooks),
        ):
            _require(name, value, kind)
        if pull_service is not None:
            _require("pull_service", pull_service, PullMessageService)
        self.config = config
        self.profile = Profile.parse(profile)
        #: The rules of the profile, looked up once (a mutant swaps one).
        self.rules = Ruleset.of(self.profile)
        self.scheduler = scheduler
        self.remoting = remoting
        self.offset_store = offset_store
        self.consume_service = consume_service
        self.rebalance_hooks = rebalance_hooks
        #: The client instance's pull service, shared by its consumers (PULLQ-1).
        self.pull_service = pull_service or PullMessageService(scheduler)
        #: Whether start() schedules persistConsumerOffset itself; a client instance that runs
        #: persistAllConsumerOffset for all its consumers (OFFSET-8) turns it off.
        self.schedule_persist = schedule_persist
        self.service_state = ServiceState.CREATE_JUST
        self.paused = False
        self.counters: FlowControlCounters = NO_FLOW_CONTROL
        #: pullFromWhichNodeTable (RESULT-2).
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        #: Every pullMessage attempt and every answer handled, in order.
        self.attempts = Records[PullAttempt]()
        self.outcomes = Records[PullOutcome]()
        #: (level, message) for what RocketMQ logs; tests read it.
        self.log: list[tuple[str, str]] = []
        #: The queues each persistConsumerOffset handed persistAll (None: it did not run).
        self.persist_rounds: list[Collection[MessageQueue] | None] = []
        #: PullAPIWrapper.randomNum (a non-negative random int) choosing a filter server (REQ-10).
        self.random_num: Callable[[], int] = lambda: 0
        #: findBrokerAddressInSubscribe's onlyThisBroker: pullKernelImpl always passes false; the
        #: pull_request area's drivers set it to drive REQ-6's other branch.
        self.only_this_broker = False

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """serviceState == RUNNING."""
        return self.service_state is ServiceState.RUNNING

    def start(self) -> None:
        """start(): load the offsets, register with the pull service and start it, and (unless
        `schedule_persist` is off) schedule persistAllConsumerOffset (OFFSET-8: first after
        10 s, then every 5 s)."""
        if self.service_state is not ServiceState.CREATE_JUST:
            raise MQClientError(f"The PushConsumer service state not OK, {self.service_state.name}")
        if self.pull_service.select_consumer(self.group) is not None:
            raise MQClientError(f"The consumer group[{self.group}] has been created before")
        self.offset_store.load()  # may raise (a corrupt local backup), before any registration
        self.pull_service.register_consumer(self.group, self)
        self.pull_service.start()
        self.service_state = ServiceState.RUNNING
        if self.schedule_persist:
            self._schedule_persist(
                self.scheduler.clock.now_ms() + PERSIST_CONSUMER_OFFSET_INITIAL_DELAY_MILLIS
            )

    def shutdown(self) -> None:
        """shutdown(): persist once, unregister, and stop (the shared pull service runs on)."""
        if self.service_state is not ServiceState.RUNNING:
            return
        self.persist_consumer_offset()
        self.pull_service.unregister_consumer(self.group)
        self.service_state = ServiceState.SHUTDOWN_ALREADY

    def suspend(self) -> None:
        """suspend(): pause pulling (FLOW-4)."""
        self.paused = True

    def resume(self) -> None:
        """resume(): clear the pause and rebalance at once (FLOW-4, REBAL-2)."""
        self.paused = False
        self.do_rebalance()

    def do_rebalance(self) -> None:
        """doRebalance(): nothing while paused (REBAL-2)."""
        if not self.paused:
            self.rebalance_hooks.do_rebalance()

    def execute_pull_request_immediately(self, pull_request: PullRequest) -> None:
        """Delegates to the pull service (PULLQ-3)."""
        self.pull_service.execute_pull_request_immediately(pull_request)

    def execute_pull_request_later(self, pull_request: PullRequest, delay_ms: int) -> None:
        """Delegates to the pull service (PULLQ-4)."""
        self.pull_service.execute_pull_request_later(pull_request, delay_ms)

    def persist_consumer_offset(self) -> None:
        """persistConsumerOffset (OFFSET-8): persistAll of the process-queue table's queues."""
        targets = persist_consumer_offset_targets(
            self.running, self.rebalance_hooks.process_queues().keys()
        )
        self.persist_rounds.append(targets)
        if targets is None:
            self.log.append(("error", f"group: {self.group} persistConsumerOffset exception"))
            return
        self.offset_store.persist_all(targets)

    def _schedule_persist(self, at: int) -> None:
        def tick() -> None:
            # MQClientInstance's fixed-rate task outlives a consumer's shutdown: it persists
            # the consumers still registered, so a stopped consumer is simply skipped.
            if self.service_state is ServiceState.RUNNING:
                self.persist_consumer_offset()
            self._schedule_persist(at + self.config.persist_consumer_offset_interval)

        self.scheduler.call_at(at, tick, "persist-offsets")

    # -- FLOW --------------------------------------------------------------------------------

    def pull_message(self, pull_request: PullRequest) -> None:
        """pullMessage(pr): the pre-pull decision (FLOW-1 … FLOW-13), then the request (REQ)."""
        _require("pull_request", pull_request, PullRequest)
        pr, pq = pull_request, pull_request.process_queue
        mq = pr.message_queue
        subscription = self.rebalance_hooks.subscription(mq.topic)
        snapshot = ProcessQueueSnapshot(
            dropped=pq.dropped,
            msg_count=pq.msg_count,
            msg_size=pq.msg_size,
            max_span=pq.max_span,
            locked=pq.locked,
            msg_tree_empty=not pq.has_temp_message(),
        )
        state = ConsumerState(self.running, self.paused, subscription is not None)
        decision = decide_pull(
            snapshot,
            state,
            pr.next_offset,
            pr.previously_locked,
            self.config,
            self.rules,
            self.counters,
            lambda: self.rebalance_hooks.compute_pull_from_where(mq),
        )
        now = self.scheduler.clock.now_ms()
        if decision.touch_last_pull_timestamp:
            pq.last_pull_timestamp = now
        pr.next_offset = decision.next_offset
        pr.previously_locked = decision.previously_locked
        self.counters = decision.counters
        if decision.flow_control_log is not None and not decision.flow_control_log.suppressed:
            self.log.append(("warn", f"flow control {decision.flow_control_log}"))
        circulates = keeps_circulating(decision.action, self.pull_service.stopped)
        self.attempts.append(
            PullAttempt(now, mq, pr.next_offset, decision.action, decision, circulates)
        )
        action = decision.action
        if isinstance(action, Delay):
            self.execute_pull_request_later(pr, action.ms)
        elif isinstance(action, Pull):
            assert subscription is not None
            self._pull(pr, pq, capture_pull_callback(now, subscription))

    # -- seams: one step of the pull path, as the conformance drivers call it ------------------

    def send_pull(self, pull_request: PullRequest, subscription: SubscriptionData) -> None:
        """pullKernelImpl for `pull_request` now, the callback capturing `subscription` (what
        pullMessage does once its checks pass)."""
        _require("pull_request", pull_request, PullRequest)
        now = self.scheduler.clock.now_ms()
        context = capture_pull_callback(now, subscription)
        self._pull(pull_request, pull_request.process_queue, context)

    def process_pull_result(
        self, pull_request: PullRequest, result: PullResult | None, subscription: SubscriptionData
    ) -> None:
        """PullCallback.onSuccess(result) of a pull sent now with `subscription` captured."""
        _require("pull_request", pull_request, PullRequest)
        context = capture_pull_callback(self.scheduler.clock.now_ms(), subscription)
        self._on_success(pull_request, pull_request.process_queue, context, result)

    def process_pull_exception(self, pull_request: PullRequest, error: BaseException) -> None:
        """PullCallback.onException(error)."""
        _require("pull_request", pull_request, PullRequest)
        self._on_exception(pull_request, error)

    # -- REQ ---------------------------------------------------------------------------------

    def _pull(self, pr: PullRequest, pq: ProcessQueue, context: PullCallbackContext) -> None:
        mq = pr.message_queue
        memory = 0  # REQ-2: only CLUSTERING reads the offset to piggy-back
        if self.config.message_model is MessageModel.CLUSTERING:
            memory = self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        commit = commit_offset_for_pull(self.config.message_model, memory)
        call = pull_kernel_call(
            mq,
            pr.next_offset,
            context.subscription_data,
            self.rebalance_hooks.subscription(mq.topic),
            commit,
            self.config,
        )
        try:
            addr, header = self._route(call)
            self.remoting.pull_message_async(
                addr,
                header,
                call.timeout_millis,
                lambda response: self._on_response(pr, pq, context, addr, response),
                lambda error: self._on_exception(pr, error),
            )
        except Exception as exc:
            self.log.append(("error", f"pullKernelImpl exception: {exc!r}"))
            delay = on_pull_kernel_exception(self.config)
            now = self.scheduler.clock.now_ms()
            self.outcomes.append(PullOutcome(now, mq, None, pr.next_offset, delay))
            self.execute_pull_request_later(pr, delay.ms)

    def _route(self, call: PullKernelCall) -> tuple[str, PullMessageRequestHeader]:
        """pullKernelImpl's broker choice, version check, header and filter-server routing."""
        mq = call.mq
        broker_id = recalculate_pull_from_which_node(self.pull_from_which_node.get(mq))
        found = None
        # REQ-6: look up, refresh the route (the registry is the route here) and look up again.
        for _ in range(2):
            addrs = self.remoting.broker_addrs(mq.broker_name)
            found = self.rules.find_broker_address_in_subscribe(
                addrs, broker_id, self.only_this_broker
            )
            if found is not None:
                break
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        version = self.remoting.broker_version(found.broker_addr)
        check_filter_type_supported(call.expression_type, version, mq.broker_name)
        header = self.rules.pull_message_request_header(self.group, call, found)
        # REQ-10 looks at the caller's flag (before the slave rewrite) for the class filter.
        servers = self.remoting.filter_servers(mq.topic, found.broker_addr)
        target = pull_target_address(
            call.sys_flag, found.broker_addr, mq.topic, servers, self.random_num()
        )
        return target, header

    # -- RESULT ------------------------------------------------------------------------------

    def _on_response(
        self,
        pr: PullRequest,
        pq: ProcessQueue,
        context: PullCallbackContext,
        addr: str,
        response: PullResponse,
    ) -> None:
        try:
            # REQ-12: processPullResponse.
            rules = self.rules
            status = rules.pull_status_for_response_code(response.code, response.remark, addr)
            result = PullResult(
                status,
                response.next_begin_offset or 0,
                response.min_offset or 0,
                response.max_offset or 0,
                response.messages if status is PullStatus.FOUND else None,
                response.suggest_which_broker_id,
            )
            self._on_success(pr, pq, context, result)
        except Exception as exc:
            # RESULT-14: whatever processPullResponse or onSuccess throws reaches onException.
            self._on_exception(pr, exc)

    def _on_success(
        self,
        pr: PullRequest,
        pq: ProcessQueue,
        context: PullCallbackContext,
        result: PullResult | None,
    ) -> None:
        mq = pr.message_queue
        handling = on_success(
            result, pr.next_offset, context.subscription_data, pq.msg_count, self.config
        )
        if result is None:  # RESULT-12: nothing at all happens; the request dies
            return
        if handling.pull_from_which_node is not None:
            self.pull_from_which_node[mq] = handling.pull_from_which_node
        pr.next_offset = handling.next_offset
        # RESULT-15: the callback does not look at pq.dropped before putting
        if handling.messages and stores_despite_drop(pq.dropped):
            dispatch = pq.put_messages(handling.messages)
            self.consume_service.submit_consume_request(handling.messages, pq, mq, dispatch)
        if handling.offset_update is not None:
            update = handling.offset_update
            self.offset_store.update_offset(mq, update.offset, update.increase_only)
        if handling.drop_process_queue:
            self.log.append(("warn", f"the pull request offset illegal, {mq} {result}"))
            pq.dropped = True
        if handling.fix_up is not None:
            self.pull_service.execute_task_later(lambda: self._fix_up(pr), handling.fix_up.delay_ms)
        self.outcomes.append(
            PullOutcome(
                self.scheduler.clock.now_ms(),
                mq,
                result.pull_status,
                pr.next_offset,
                handling.reenqueue,
                handling,
            )
        )
        if isinstance(handling.reenqueue, Immediately):
            self.execute_pull_request_immediately(pr)
        elif isinstance(handling.reenqueue, Delay):
            self.execute_pull_request_later(pr, handling.reenqueue.ms)
        if handling.bug_warning:
            self.log.append(("warn", "[BUG] pull message result maybe data wrong"))

    def _fix_up(self, pr: PullRequest) -> None:
        """RESULT-10's task: overwrite the offset with the request's cursor, persist, remove."""
        mq = pr.message_queue
        try:
            self.offset_store.update_offset(mq, pr.next_offset, False)
            self.offset_store.persist(mq)
            self.rebalance_hooks.remove_process_queue(mq)
            self.log.append(("warn", f"fix the pull request offset, {mq} {pr.next_offset}"))
        except Exception as exc:
            self.log.append(("error", f"executeTaskLater Exception: {exc!r}"))

    def _on_exception(self, pr: PullRequest, error: BaseException) -> None:
        handling = self.rules.on_exception(error, pr.message_queue.topic, self.config)
        if handling.log_warning:
            self.log.append(("warn", f"execute the pull request exception: {error!r}"))
        now = self.scheduler.clock.now_ms()
        self.outcomes.append(
            PullOutcome(now, pr.message_queue, None, pr.next_offset, handling.delay)
        )
        self.execute_pull_request_later(pr, handling.delay.ms)


__all__ = [
    "PullAttempt",
    "PullOutcome",
    "RebalanceHooks",
    "ReferencePushConsumer",
    "ServiceState",
]
