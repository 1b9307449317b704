"""Adapter for area `broker_pull`: the broker's pull path with long polling on a virtual clock —
PullMessageProcessor, PullRequestHoldService, ConsumerOffsetManager and the lock requests.

One case is one broker (`broker-a`) over a fresh store, clock at 0, topic `T` with
`topicQueueNums` queues, consumer group `G`; the broker starts as a master (`set_role` makes it a slave).
config: `longPollingEnable`, `shortPollingTimeMills`, `slaveReadEnable`,
`filterSupportRetry`, `flushConsumerOffsetInterval`, `topicQueueNums`, and the store's
MessageStoreConfig keys (`mappedFileSizeCommitLog`, …).

| op | args | expect |
|---|---|---|
| `put` | `msgs` [{`queueId`, `tags`, `bodySize`}] | `results` [{`status`, `queueOffset`}], `notifies` (arrival notifications are sent), `answered`, `held` |
| `set_role` | `brokerRole`, `offsetCheckInSlave` | `held` |
| `register_consumer` | `subscriptions` {topic: TAG expression}, `broadcasting` | – |
| `pull` | `queueId`, `offset`, `maxMsgNums`, `subscription` (null: use the heartbeat's), `subVersion`, `suspend` (default true), `commitOffset` (null: no commit flag), `suspendTimeoutMillis` | `requestId`, `filter`, and `response` or (`held` true, `timeoutAnswerAt`, `storeStatus`, `wokenAtNextCheck`); `committedOffset` |
| `advance_clock` | `ms` | `now`, `answered` [{`requestId`, `at`, `allowSuspend`, `response`}], `held`, `offsetPersistAt` (offset-table flushes in the interval) |
| `query_offset` | `queueId` | `code`, `offset` |
| `update_offset` | `queueId`, `offset` | `code`, `committedOffset` |
| `set_lock_max_live_time_property` | `value` (string or null) | `leaseMs` or `error` |
| `lock_batch` / `unlock_batch` | `clientId`, `queueIds` | `code`, `locked` (lock only), `locks` |
| `client_gone` | `clientId` | `locks` (a closed channel keeps its leases) |

A `response` is {`code`, `status`, `nextBeginOffset`, `minOffset`, `maxOffset`,
`suggestWhichBrokerId`, `msgOffsets`}; `locks` maps queue ids to [clientId,
lastUpdateTimestamp, expired].
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.adapters._config import store_config
from pullspec.conformance.adapters.store import message
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject, as_given, to_int
from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.lock_manager import ReferenceLockManager
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec import commit, hold, lease
from pullspec.spec import filter as spec_filter
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageRequest,
    PullResponse,
)
from pullspec.spec.config import BrokerConfig
from pullspec.spec.errors import PullspecError
from pullspec.spec.evolve import evolve
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole, ResponseCode

#: The vector area this module serves.
AREA = "broker_pull"
#: The request codes of the two lock requests (LEASE-8).
LOCK_BATCH_MQ, UNLOCK_BATCH_MQ = 41, 42


def response_json(response: PullResponse) -> JSONObject:
    """The observed fields of a pull response."""
    return {
        "code": response.code.name,
        "status": response.status.value if response.status else None,
        "nextBeginOffset": response.next_begin_offset,
        "minOffset": response.min_offset,
        "maxOffset": response.max_offset,
        "suggestWhichBrokerId": response.suggest_which_broker_id,
        "msgOffsets": response.msg_offsets,
    }


class Reference(_client.ReferenceDriver):
    """The reference driver: reference.broker.ReferenceBroker over a ReferenceMessageStore."""

    area = AREA

    def __init__(self, config: JSONObject, profile: Profile) -> None:
        super().__init__(config, profile)
        self.clock = ManualClock(0)
        self.topic, self.group = "T", "G"
        scfg = evolve(store_config(config), broker_role=BrokerRole.ASYNC_MASTER)
        self.broker_config = BrokerConfig(
            long_polling_enable=as_given(bool, config.get("longPollingEnable", True)),
            short_polling_time_mills=as_given(int, config.get("shortPollingTimeMills", 1000)),
            slave_read_enable=as_given(bool, config.get("slaveReadEnable", False)),
            filter_support_retry=as_given(bool, config.get("filterSupportRetry", False)),
            flush_consumer_offset_interval=as_given(
                int, config.get("flushConsumerOffsetInterval", 5000)
            ),
        )
        self.broker = ReferenceBroker(
            store=ReferenceMessageStore(config=scfg, profile=profile, clock=self.clock),
            config=self.broker_config,
            profile=profile,
            clock=self.clock,
        )
        self.broker.create_topic(self.topic, to_int(config.get("topicQueueNums", 4)))

    # -- observations ---------------------------------------------------------------------

    def _held(self) -> list[int]:
        return sorted(h.request_id for h in self.broker.held_requests)

    def _answered(self, at: int) -> list[JSONObject]:
        return [
            {
                "requestId": rid,
                "at": at,
                # A woken or timed-out request is re-run without suspending (HOLD-6).
                "allowSuspend": hold.rerun_allows_suspend(),
                "response": response_json(r),
            }
            for rid, r in self.broker.drain_responses()
        ]

    def _locks(self, table: lease.LockTable) -> JSONObject:
        now, live = self.clock.now_ms(), self.broker.lock_manager.lock_max_live_time_ms
        return {
            str(q.queue_id): [e.client_id, e.last_update_timestamp, lease.is_expired(now, e, live)]
            for q, e in sorted(
                table.groups.get(self.group, {}).items(), key=lambda kv: kv[0].queue_id
            )
        }

    def _committed(self, queue_id: int) -> int:
        return self.broker.query_offset(self.group, self.topic, queue_id)

    # -- ops --------------------------------------------------------------------------------

    def op_put(self, args: _client.Args) -> JSONObject:
        """SEND_MESSAGE: store, dispatch and notify held pulls (HOLD-5, HOLD-8, HOLD-9)."""
        results = []
        answered: list[JSONObject] = []
        for m in args.req("msgs"):
            r = self.broker.send_message(message(self.topic, m))
            results.append(
                {"status": r.status.value, "queueOffset": r.queue_offset if r.ok else None}
            )
            answered += self._answered(self.clock.now_ms())
        role = self.broker.store.broker_role
        lp = self.broker_config.long_polling_enable
        return {
            "results": results,
            "notifies": hold.short_polling_notifications(lp) and hold.slave_notifications(role),
            "answered": answered,
            "held": self._held(),
        }

    def op_set_role(self, args: _client.Args) -> JSONObject:
        """Switch the broker role (a slave sends no arrival notifications)."""
        self.broker.store.set_role(
            args.enum("brokerRole", BrokerRole), args.bool("offsetCheckInSlave", False)
        )
        return {"held": self._held()}

    def op_register_consumer(self, args: _client.Args) -> JSONObject:
        """A heartbeat's subscriptions (used by pulls without a subscription, CODE-3)."""
        self.broker.register_consumer(
            self.group, dict(args.req("subscriptions")), args.bool("broadcasting", False)
        )
        return {}

    def op_pull(self, args: _client.Args) -> JSONObject:
        """PULL_MESSAGE (CODE-1 … CODE-14, COMMIT-2, HOLD-1, HOLD-7, HOLD-10)."""
        queue_id, offset = args.int("queueId"), args.int("offset")
        subscription = args.get("subscription")
        commit_to = args.get("commitOffset")
        flag = FLAG_SUSPEND if args.bool("suspend", True) else 0
        flag |= FLAG_SUBSCRIPTION if subscription is not None else 0
        flag |= FLAG_COMMIT_OFFSET if commit_to is not None else 0
        request = PullMessageRequest(
            consumer_group=self.group,
            topic=self.topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=args.int("maxMsgNums", 32),
            sys_flag=flag,
            commit_offset=commit_to or 0,
            suspend_timeout_millis=args.int("suspendTimeoutMillis", 15_000),
            subscription=subscription,
            sub_version=args.int("subVersion", 0),
        )
        sub = spec_filter.build_subscription_data(self.topic, subscription)
        retry = spec_filter.retry_filter_selected(self.broker_config.filter_support_retry)
        out: JSONObject = {
            "filter": {
                "kind": "ExpressionForRetryMessageFilter" if retry else "ExpressionMessageFilter",
                # Both filters pass every TAG subscription at the commit-log stage (FILTER-9).
                "commitLogStageMatches": spec_filter.retry_filter_matches_commit_log(sub)
                if retry
                else spec_filter.is_matched_by_commit_log(sub),
            }
        }
        # What the store answers right now decides whether a held pull wakes at the next check.
        peek = self.broker.store.get_message(
            self.group, self.topic, queue_id, offset, 1, spec_filter.ExpressionMessageFilter(None)
        )
        request_id, response = self.broker.pull_message(request)
        out["requestId"] = request_id
        if response is None:
            held = next(h for h in self.broker.held_requests if h.request_id == request_id)
            out.update(
                held=True,
                timeoutAnswerAt=hold.timeout_answer_time(
                    held.suspend_timestamp,
                    held.timeout_millis,
                    self.broker.next_hold_check_at,
                    self.broker.check_interval,
                ),
                storeStatus=peek.status.value,
                wokenAtNextCheck=hold.woken_at_next_check(peek.status),
            )
        else:
            out.update(held=False, response=response_json(response))
        out["committedOffset"] = self._committed(queue_id)
        return out

    def op_advance_clock(self, args: _client.Args) -> JSONObject:
        """Let time pass, running every hold check on its due time (HOLD-2 … HOLD-4, HOLD-7)."""
        start = self.clock.now_ms()
        until = start + args.int("ms")
        answered: list[JSONObject] = []
        while self.broker.next_hold_check_at <= until:
            self.clock.jump_to(max(self.clock.now_ms(), self.broker.next_hold_check_at))
            self.broker.run_hold_checks()
            answered += self._answered(self.clock.now_ms())
        self.clock.jump_to(until)
        interval = self.broker_config.flush_consumer_offset_interval
        first = commit.FIRST_PERSIST_DELAY_MS
        lowest = max(start + 1, first)
        k = max(0, -(-(lowest - first) // interval))
        flushes = []
        for t in range(first + k * interval, until + 1, interval):
            if commit.persist_due(t, interval):
                flushes.append(t)
        return {
            "now": until,
            "answered": answered,
            "held": self._held(),
            "offsetPersistAt": flushes,
        }

    def op_query_offset(self, args: _client.Args) -> JSONObject:
        """QUERY_CONSUMER_OFFSET (COMMIT-4)."""
        code, offset = self.broker.query_consumer_offset(
            self.group, self.topic, args.int("queueId")
        )
        return {"code": code.name, "offset": offset}

    def op_update_offset(self, args: _client.Args) -> JSONObject:
        """UPDATE_CONSUMER_OFFSET (COMMIT-1, COMMIT-3)."""
        queue_id = args.int("queueId")
        self.broker.update_consumer_offset(self.group, self.topic, queue_id, args.int("offset"))
        return {
            "code": commit.update_consumer_offset_code().name,
            "committedOffset": self._committed(queue_id),
        }

    def op_set_lock_max_live_time_property(self, args: _client.Args) -> JSONObject:
        """The broker's lease length from rocketmq.broker.rebalance.lockMaxLiveTime (LEASE-1)."""
        try:
            live = lease.lock_max_live_time(args.get("value"))
        except PullspecError as exc:
            return {"error": exc.java_exception or exc.kind.value}
        self.broker.lock_manager = ReferenceLockManager(self.clock, live)
        return {"leaseMs": live}

    def _mqs(self, args: _client.Args) -> list[MessageQueue]:
        return [MessageQueue(self.topic, "broker-a", q) for q in args.req("queueIds")]

    def op_lock_batch(self, args: _client.Args) -> JSONObject:
        """LOCK_BATCH_MQ (LEASE-8)."""
        locked = self.broker.lock_batch_mq(self.group, str(args.req("clientId")), self._mqs(args))
        slave = self.broker.store.broker_role is BrokerRole.SLAVE
        return {
            "code": ResponseCode(lease.lease_response_code(LOCK_BATCH_MQ, slave)).name,
            "locked": sorted(q.queue_id for q in locked),
            "locks": self._locks(self.broker.lock_manager.state),
        }

    def op_unlock_batch(self, args: _client.Args) -> JSONObject:
        """UNLOCK_BATCH_MQ (LEASE-8)."""
        self.broker.unlock_batch_mq(self.group, str(args.req("clientId")), self._mqs(args))
        slave = self.broker.store.broker_role is BrokerRole.SLAVE
        return {
            "code": ResponseCode(lease.lease_response_code(UNLOCK_BATCH_MQ, slave)).name,
            "locks": self._locks(self.broker.lock_manager.state),
        }

    def op_client_gone(self, args: _client.Args) -> JSONObject:
        """A client's channel closes (LEASE-9)."""
        client = str(args.req("clientId"))
        self.broker.client_channel_closed(client)
        return {"locks": self._locks(lease.on_client_gone(self.broker.lock_manager.state, client))}


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A fresh broker on a clock at 0."""
    return _client.open_driver(candidate, AREA, config, profile, Reference)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
