"""ClientConsumer: a DefaultMQPushConsumer fully wired on a `ReferenceClientInstance` — the pull
path (`ReferencePushConsumer`), the real rebalance (`ReferenceRebalancePushImpl`), the real
consume service (concurrent or orderly) and the offset store (remote in CLUSTERING, a local
file in BROADCASTING) — and `new_push_consumer`, which builds one.

The wiring, part by part:
- the rebalance's new PullRequests go to the instance's pull service (REBAL-12), its route and
  consumer ids come from the brokers (REBAL-4/5), its locks go to the masters (REBAL-19…21),
  messageQueueChanged sends a heartbeat (REBAL-13) and hands the rewritten thresholds to the
  pull path (FLOW-14), and the orderly service answers its consume-lock tries (REBAL-14);
- start() copies the subscriptions with subVersion = now, adds %RETRY%<group> "*" in
  CLUSTERING (REBAL-2), starts the consume service, the pull path and the instance, then sends
  a heartbeat and wakes the rebalance (DefaultMQPushConsumerImpl.start);
- shutdown() follows DefaultMQPushConsumerImpl.shutdown: consume service, persist, unregister
  (UNREGISTER_CLIENT to every broker), the instance if it has no consumer left, destroy.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

from pullspec.reference.client_instance import ReferenceClientInstance
from pullspec.reference.client_parts import (
    ClientRebalance,
    ConsumerParts,
    ConsumeService,
    ConsumeTime,
)
from pullspec.reference.client_remoting import RemotingAdmin, RemotingOffsetClient
from pullspec.reference.consume_concurrently import ReferenceConsumeConcurrentlyService
from pullspec.reference.consume_orderly import ReferenceConsumeOrderlyService
from pullspec.reference.offset_store import (
    ReferenceLocalFileOffsetStore,
    ReferenceRemoteOffsetStore,
)
from pullspec.reference.push_consumer import ReferencePushConsumer
from pullspec.reference.rebalance import NewPullRequest, ReferenceRebalancePushImpl
from pullspec.reference.remoting import ReferenceRemoting
from pullspec.reference.scheduler import Scheduler
from pullspec.spec import allocate as al
from pullspec.spec.consume_concurrently import ConcurrentListener
from pullspec.spec.consume_orderly import OrderlyListener
from pullspec.spec.consumer_config import ConsumeMode, ConsumerConfig, MessageModel
from pullspec.spec.errors import InvalidArgumentError, require_str
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import SubscriptionData, build_subscription_data
from pullspec.spec.message import MessageQueue, retry_topic_name
from pullspec.spec.offset_store import OffsetStore
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.retry import SendBackClient

Listener = ConcurrentListener | OrderlyListener


class ClientConsumer:
    """One push consumer of `group` on `instance`; see the module docstring for the wiring."""

    def __init__(
        self,
        instance: ReferenceClientInstance,
        group: str,
        config: ConsumerConfig,
        listener: Listener,
        subscriptions: Mapping[str, str],
        *,
        strategy: al.AllocateStrategy = al.allocate_averagely,
        offset_dir: str | Path | None = None,
        consume_time: ConsumeTime | None = None,
        parts: ConsumerParts | None = None,
        process_queue_factory: Callable[[], ProcessQueue] | None = None,
    ) -> None:
        #: The factories of the replaceable parts (the reference's classes where None).
        self.parts = parts or ConsumerParts()
        self.instance = instance
        self.group = require_str("group", group)
        self.config = config
        self.profile = instance.profile
        self.listener = listener
        #: topic → TAG expression, as subscribe(topic, expression) was called.
        self.topics = {
            require_str("topic", t): require_str("expression", e) for t, e in subscriptions.items()
        }
        remoting, scheduler = instance.remoting, instance.scheduler
        self.offset_store = self._offset_store(remoting, offset_dir)
        self.send_back = self._send_back_client()
        self.rebalance: ClientRebalance = (self.parts.rebalance or ReferenceRebalancePushImpl)(
            scheduler,
            group=group,
            client_id=instance.client_id,
            config=config,
            profile=self.profile,
            lock_client=instance.lock_client,
            offset_store=self.offset_store,
            admin=RemotingAdmin(remoting),
            route=instance.route,
            consumer_ids=instance.consumer_ids,
            strategy=strategy,
            dispatch=self._dispatch,
            process_queue_factory=process_queue_factory,
        )
        self.consume_service: ConsumeService
        if config.orderly:
            orderly = (self.parts.consume_orderly or ReferenceConsumeOrderlyService)(
                scheduler,
                group=group,
                config=config,
                profile=self.profile,
                listener=cast(OrderlyListener, listener),
                offset_store=self.offset_store,
                send_back=self.send_back,
                rebalance=self.rebalance,
                consume_time=consume_time,
            )
            self.rebalance.consume_lock_free = orderly.consume_lock_free
            self.consume_service = orderly
        else:
            concurrently = self.parts.consume_concurrently or ReferenceConsumeConcurrentlyService
            self.consume_service = concurrently(
                scheduler,
                group=group,
                config=config,
                profile=self.profile,
                listener=cast(ConcurrentListener, listener),
                offset_store=self.offset_store,
                send_back=self.send_back,
                process_queues=self.rebalance.process_queues,
                consume_time=consume_time,
            )
        self.push = ReferencePushConsumer(
            group,
            config,
            self.profile,
            scheduler,
            remoting,
            self.offset_store,
            self.consume_service,
            self.rebalance,
            pull_service=instance.pull_service,
            schedule_persist=False,  # the instance runs persistAllConsumerOffset
        )
        self.rebalance.send_heartbeat = instance.send_heartbeat_to_all_brokers
        self.rebalance.config_changed = self._config_changed

    def _offset_store(
        self, remoting: ReferenceRemoting, offset_dir: str | Path | None
    ) -> OffsetStore:
        if self.config.message_model is MessageModel.CLUSTERING:
            remote = self.parts.offset_store or ReferenceRemoteOffsetStore
            return remote(RemotingOffsetClient(remoting, self.group, self.profile), self.group)
        if offset_dir is None:
            raise InvalidArgumentError("offset_dir", None, "BROADCASTING needs a directory")
        return ReferenceLocalFileOffsetStore.for_group(
            str(offset_dir), self.instance.client_id, self.group
        )

    def _send_back_client(self) -> SendBackClient:
        """The group's SendBackClient (CONSUMER_SEND_MSG_BACK and the internal producer)."""
        return self.instance.send_back_client(self.group, unit_mode=self.config.unit_mode)

    def _dispatch(self, request: NewPullRequest) -> None:
        # dispatchPullRequest (REBAL-12): executePullRequestImmediately on the pull service
        self.push.execute_pull_request_immediately(request.pull_request())

    def _config_changed(self, config: ConsumerConfig) -> None:
        self.config = config
        self.push.config = config

    # -- what the instance asks (InstanceConsumer) -------------------------------------------

    @property
    def client_id(self) -> str:
        """The instance's client id."""
        return self.instance.client_id

    @property
    def broadcasting(self) -> bool:
        """The message model is BROADCASTING."""
        return self.config.message_model is MessageModel.BROADCASTING

    def subscriptions(self) -> Mapping[str, SubscriptionData]:
        """subscriptionInner, the retry topic included in CLUSTERING."""
        return self.rebalance.subscription_inner

    def do_rebalance(self) -> None:
        """doRebalance (REBAL-2): nothing while paused."""
        self.push.do_rebalance()

    def persist_consumer_offset(self) -> None:
        """persistConsumerOffset (OFFSET-8)."""
        self.push.persist_consumer_offset()

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """DefaultMQPushConsumerImpl.start: see the module docstring."""
        now = self.instance.clock.now_ms()
        topics = dict(self.topics)
        if not self.broadcasting:
            topics[retry_topic_name(self.group)] = "*"  # copySubscription (REBAL-2)
        for topic, expression in topics.items():
            # SubscriptionData's subVersion is its creation time
            sub = build_subscription_data(topic, expression)
            self.rebalance.subscribe(evolve(sub, sub_version=now))
        self.consume_service.start()
        try:
            self.instance.register_consumer(self)
        except Exception:
            # The group exists on this instance: RocketMQ shuts the service down and throws
            self.consume_service.shutdown(0)
            raise
        try:
            self.push.start()
        except Exception:
            self.instance.consumers.pop(self.group, None)
            self.consume_service.shutdown(0)
            raise
        self.instance.start()
        self.instance.send_heartbeat_to_all_brokers()
        self.instance.rebalance_immediately()

    def shutdown(self) -> None:
        """DefaultMQPushConsumerImpl.shutdown(awaitTerminateMillis from the config); nothing
        once its process crashed."""
        if not self.push.running or not self.instance.alive:
            return
        self.consume_service.shutdown(self.config.await_termination_millis_when_shutdown)
        self.push.shutdown()  # persist, then leave the pull service
        self.instance.unregister_consumer(self.group)
        self.instance.shutdown()
        self.rebalance.destroy()

    def suspend(self) -> None:
        """suspend(): pause pulling and rebalancing (FLOW-4, REBAL-2)."""
        self.push.suspend()
        self.rebalance.paused = True

    def resume(self) -> None:
        """resume(): unpause and rebalance at once (a crashed process does nothing)."""
        if not self.instance.alive:
            return
        self.rebalance.paused = False
        self.push.resume()

    # -- observation --------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Started, not shut down, and its process alive."""
        return self.push.running and self.instance.alive

    def process_queues(self) -> Mapping[MessageQueue, ProcessQueue]:
        """The rebalance's processQueueTable."""
        return self.rebalance.process_queues()


def new_push_consumer(
    group: str,
    config: ConsumerConfig,
    profile: Profile,
    listener: Listener,
    *,
    scheduler: Scheduler,
    remoting: ReferenceRemoting,
    subscriptions: Mapping[str, str],
    orderly: bool = False,
    client_id: str | None = None,
    instance: ReferenceClientInstance | None = None,
    rng: random.Random | None = None,
    strategy: al.AllocateStrategy = al.allocate_averagely,
    offset_dir: str | Path | None = None,
    consume_time: ConsumeTime | None = None,
) -> ClientConsumer:
    """A fully wired push consumer of `group`, not yet started: on `instance`, or on a new
    instance (with `client_id`, else REBAL-24's id, and `rng`) over `scheduler` and `remoting`.
    `orderly` (or an ORDERLY config) makes it an orderly consumer; `listener` is then an
    OrderlyListener."""
    if orderly and not config.orderly:
        config = evolve(config, consume_mode=ConsumeMode.ORDERLY)
    if instance is None:
        instance = ReferenceClientInstance(
            scheduler,
            remoting,
            profile,
            client_id=client_id,
            message_model=config.message_model,
            rng=rng,
            persist_consumer_offset_interval=config.persist_consumer_offset_interval,
        )
    elif instance.profile is not Profile.parse(profile):
        raise InvalidArgumentError("profile", profile, "differs from the instance's")
    return ClientConsumer(
        instance,
        group,
        config,
        listener,
        subscriptions,
        strategy=strategy,
        offset_dir=offset_dir,
        consume_time=consume_time,
    )
