"""ReferenceBroker scenarios: pre-store checks (CODE-2/3), piggy-backed commits (COMMIT-2) and
long polling on the manual clock (HOLD). The broker is created at time 0, so the periodic hold
checks run at 5000, 10000, 15000, … ms (1000, 2000, … without long polling)."""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
import pytest

import pullspec.reference.factories
from pullspec.reference.broker import ConsumerRegistration, ReferenceBroker
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageRequest,
    PullResponse,
)
from pullspec.spec.config import (
    PERM_READ,
    PERM_WRITE,
    BrokerConfig,
    StoreConfig,
    SubscriptionGroupConfig,
)
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError
from pullspec.spec.filter import SubscriptionData, build_subscription_data
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole, GetMessageStatus, ResponseCode

R, S = ResponseCode, GetMessageStatus
V47, V49 = Profile.V4_7, Profile.V4_9
HELD = FLAG_SUBSCRIPTION | FLAG_SUSPEND
TINY = StoreConfig(
    mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
)


class Env:
    """A reference broker over a tiny-file store, with its clock."""

    def __init__(
        self, profile: Profile = V49, config: BrokerConfig | None = None, **store: Any
    ) -> None:
        self.clock = ManualClock(0)
        store_config = attrs.evolve(TINY, **store)
        self.broker: ReferenceBroker = pullspec.reference.factories.broker(
            store_config, config or BrokerConfig(), profile, self.clock
        )
        self.broker.create_topic("T", 4)

    def send(self, tag: str | None = "A", queue: int = 0) -> int:
        """Send a 200-byte record (tags of one character, LAYOUT-5); return its queue offset."""
        # 91 + 1 (topic) + body + properties ("TAGS\x01A", 6 bytes; 4.7: 7 with the separator)
        properties = 0 if tag is None else 6 + (self.broker.profile is V47)
        body = bytes(200 - 92 - properties)
        result = self.broker.send_message(
            BrokerInnerMessage("T", queue, body, {"TAGS": tag} if tag else None)
        )
        return result.queue_offset

    def pull(
        self,
        offset: int,
        *,
        queue: int = 0,
        sub: str | None = "*",
        sys_flag: int = HELD,
        commit: int = 0,
        timeout: int = 15_000,
        max_msg_nums: int = 32,
        group: str = "G",
        topic: str = "T",
        sub_version: int = 0,
    ) -> tuple[int, PullResponse | None]:
        return self.broker.pull_message(
            PullMessageRequest(
                consumer_group=group,
                topic=topic,
                queue_id=queue,
                queue_offset=offset,
                max_msg_nums=max_msg_nums,
                sys_flag=sys_flag,
                commit_offset=commit,
                suspend_timeout_millis=timeout,
                subscription=sub,
                sub_version=sub_version,
            )
        )

    def answer(self, offset: int, **kwargs: Any) -> PullResponse:
        """A pull that must be answered at once."""
        _, response = self.pull(offset, **kwargs)
        assert response is not None
        return response

    def run_until_answered(self, step: int = 100, limit: int = 40_000) -> tuple[int, list[Any]]:
        """Advance the clock by `step` and run the due hold checks until a held pull is answered;
        return (time, answers)."""
        while self.clock.now_ms() < limit:
            self.clock.advance(step)
            self.broker.run_hold_checks()
            answers = self.broker.drain_responses()
            if answers:
                return self.clock.now_ms(), answers
        raise AssertionError(f"nothing answered by {limit} ms")


def summary(response: PullResponse) -> tuple[Any, ...]:
    return (response.code, response.status, response.next_begin_offset, response.msg_offsets)


# --- CODE-2: checks before the store -----------------------------------------------------------


@pytest.mark.parametrize(
    ("setup", "kwargs", "code"),
    [
        ("broker_write_only", {}, R.NO_PERMISSION),
        ("no_auto_group", {}, R.SUBSCRIPTION_GROUP_NOT_EXIST),
        ("consume_disabled", {}, R.NO_PERMISSION),
        ("none", {"topic": "Unknown"}, R.TOPIC_NOT_EXIST),
        ("topic_write_only", {}, R.NO_PERMISSION),
        ("none", {"queue": 4}, R.SYSTEM_ERROR),  # queue id >= readQueueNums (4)
        ("none", {"sub": "||"}, R.SUBSCRIPTION_PARSE_FAILED),
    ],
)
def test_code_2_early_returns(setup: str, kwargs: dict[str, Any], code: ResponseCode) -> None:
    config = {
        "broker_write_only": BrokerConfig(broker_permission=PERM_WRITE),
        "no_auto_group": BrokerConfig(auto_create_subscription_group=False),
    }.get(setup, BrokerConfig())
    env = Env(config=config)
    env.send()
    if setup == "consume_disabled":
        env.broker.groups["G"] = SubscriptionGroupConfig(group_name="G", consume_enable=False)
    if setup == "topic_write_only":
        env.broker.create_topic("T", 4, perm=PERM_WRITE)
    response = env.answer(0, sys_flag=HELD | FLAG_COMMIT_OFFSET, commit=5, **kwargs)
    assert (code, None, None, []) == summary(response)
    assert -1 == env.broker.query_offset("G", "T", 0)  # an early return commits nothing
    assert [] == env.broker.held_requests


def test_code_2_read_permission_is_enough() -> None:
    env = Env(config=BrokerConfig(broker_permission=PERM_READ))
    env.broker.create_topic("T", 4, perm=PERM_READ)
    assert R.PULL_NOT_FOUND == env.answer(0, sys_flag=FLAG_SUBSCRIPTION).code


def test_code_2_group_is_auto_created_by_default() -> None:
    env = Env()
    env.send()
    assert R.SUCCESS == env.answer(0, group="NewGroup").code
    assert "NewGroup" in env.broker.groups


def test_code_2_system_group_is_auto_created_even_without_the_switch() -> None:
    env = Env(config=BrokerConfig(auto_create_subscription_group=False))
    env.send()
    assert R.SUCCESS == env.answer(0, group="CID_RMQ_SYS_TRACE").code


def test_code_2_negative_queue_id_is_rejected_as_an_argument() -> None:
    env = Env()
    with pytest.raises(InvalidArgumentError) as info:
        env.pull(0, queue=-1)
    assert ("queue_id", -1) == (info.value.name, info.value.value)


@pytest.mark.parametrize(
    ("field", "value"), [("queue_offset", "0"), ("max_msg_nums", 1.5), ("sys_flag", None)]
)
def test_pull_rejects_non_int_header_fields(field: str, value: object) -> None:
    env = Env()
    args: dict[str, Any] = {
        "consumer_group": "G",
        "topic": "T",
        "queue_id": 0,
        "queue_offset": 0,
        "max_msg_nums": 32,
        field: value,
    }
    with pytest.raises(InvalidTypeError) as info:
        env.broker.pull_message(PullMessageRequest(**args))
    assert (field, value) == (info.value.name, info.value.value)


def test_pull_rejects_a_request_of_another_type() -> None:
    with pytest.raises(InvalidTypeError) as info:
        Env().broker.pull_message({"topic": "T"})  # type: ignore[arg-type]
    assert "request" == info.value.name


# --- CODE-3: the heartbeat registry ------------------------------------------------------------


def registered(env: Env, sub: SubscriptionData | None, broadcasting: bool = False) -> None:
    env.broker.consumers["G"] = ConsumerRegistration({"T": sub} if sub else {}, broadcasting)


@pytest.mark.parametrize(
    ("registration", "request_version", "code"),
    [
        ("none", 0, R.SUBSCRIPTION_NOT_EXIST),
        ("broadcast_refused", 0, R.NO_PERMISSION),
        ("other_topic", 0, R.SUBSCRIPTION_NOT_EXIST),
        ("version_3", 4, R.SUBSCRIPTION_NOT_LATEST),
        ("version_3", 3, R.SUCCESS),
        ("broadcast_allowed", 0, R.SUCCESS),
    ],
)
def test_code_3_registry_checks(
    registration: str, request_version: int, code: ResponseCode
) -> None:
    env = Env()
    env.send()
    sub = build_subscription_data("T", "*")
    if registration == "broadcast_refused":
        env.broker.groups["G"] = SubscriptionGroupConfig(
            group_name="G", consume_broadcast_enable=False
        )
        registered(env, sub, broadcasting=True)
    elif registration == "broadcast_allowed":
        registered(env, sub, broadcasting=True)
    elif registration == "other_topic":
        registered(env, None)
    elif registration == "version_3":
        registered(env, SubscriptionData("T", "*", sub_version=3))
    response = env.answer(0, sys_flag=FLAG_COMMIT_OFFSET, commit=1, sub_version=request_version)
    assert code == response.code
    assert (1 if code is R.SUCCESS else -1) == env.broker.query_offset("G", "T", 0)


def test_code_3_registered_subscription_filters_the_pull() -> None:
    env = Env()
    for tag in "ABAC":
        env.send(tag)
    env.broker.register_consumer("G", {"T": "A || C"})
    assert (R.SUCCESS, S.FOUND, 4, [0, 2, 3]) == summary(env.answer(0, sys_flag=0, sub=None))


# --- CODE-12 and the 4.9 IllegalCapacity ------------------------------------------------------


def test_code_12_without_the_suspend_flag_pull_not_found_is_answered() -> None:
    env = Env()
    assert (R.PULL_NOT_FOUND, S.NO_MESSAGE_IN_QUEUE, 0, []) == summary(
        env.answer(0, sys_flag=FLAG_SUBSCRIPTION)
    )
    assert [] == env.broker.held_requests


@pytest.mark.parametrize(("profile", "code"), [(V47, R.SUCCESS), (V49, R.SYSTEM_ERROR)])
def test_batch_4_negative_max_msg_nums_through_the_broker(
    profile: Profile, code: ResponseCode
) -> None:
    env = Env(profile)
    env.send()
    env.send()
    response = env.answer(0, sys_flag=FLAG_SUBSCRIPTION, max_msg_nums=-5)
    assert code == response.code
    assert ([0] if code is R.SUCCESS else []) == response.msg_offsets


def test_batch_4_illegal_capacity_commits_no_offset() -> None:
    env = Env(V49)
    env.send()
    response = env.answer(
        0, sys_flag=FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, commit=3, max_msg_nums=-5
    )
    assert (R.SYSTEM_ERROR, -1) == (response.code, env.broker.query_offset("G", "T", 0))


# --- COMMIT-2: the piggy-backed commit ---------------------------------------------------------


@pytest.mark.parametrize(
    ("sys_flag", "role", "stored"),
    [
        (FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, BrokerRole.ASYNC_MASTER, 7),
        (FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, BrokerRole.SYNC_MASTER, 7),
        (FLAG_SUBSCRIPTION, BrokerRole.ASYNC_MASTER, -1),  # no commit flag
        (FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, BrokerRole.SLAVE, -1),
    ],
)
def test_commit_2_piggy_backed_commit(sys_flag: int, role: BrokerRole, stored: int) -> None:
    env = Env()
    env.send()
    env.broker.store.set_role(role, True)
    assert R.SUCCESS == env.answer(0, sys_flag=sys_flag, commit=7).code
    assert stored == env.broker.query_offset("G", "T", 0)


def test_commit_2_commits_for_every_status_and_for_a_held_pull() -> None:
    env = Env()
    assert (
        R.PULL_OFFSET_MOVED
        == env.answer(5, sys_flag=FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, commit=4).code
    )
    assert 4 == env.broker.query_offset("G", "T", 0)
    _, held = env.pull(0, sys_flag=HELD | FLAG_COMMIT_OFFSET, commit=2)
    assert (None, 2) == (held, env.broker.query_offset("G", "T", 0))  # not increase-only


def test_commit_2_a_rerun_of_a_held_pull_commits_nothing() -> None:
    env = Env()
    request_id, held = env.pull(0, sys_flag=HELD | FLAG_COMMIT_OFFSET, commit=3)
    assert (None, 3) == (held, env.broker.query_offset("G", "T", 0))
    env.broker.update_consumer_offset("G", "T", 0, 9)
    env.send()  # wakes and re-runs the held pull
    answers = env.broker.drain_responses()
    assert [(request_id, R.SUCCESS)] == [(i, r.code) for i, r in answers]
    assert 9 == env.broker.query_offset("G", "T", 0)


# --- HOLD: long polling on the manual clock ----------------------------------------------------


def test_hold_1_a_held_pull_records_its_request() -> None:
    env = Env()
    env.clock.jump_to(1000)
    request_id, response = env.pull(0, sub="A", timeout=20_000)
    assert response is None
    [held] = env.broker.held_requests
    assert (request_id, 1000, 20_000, 0) == (
        held.request_id,
        held.suspend_timestamp,
        held.timeout_millis,
        held.pull_from_this_offset,
    )
    assert [] == env.broker.drain_responses()


def test_hold_5_matching_arrival_answers_at_once() -> None:
    env = Env()
    env.clock.jump_to(1000)
    request_id, _ = env.pull(0, sub="A")
    env.clock.jump_to(2000)
    env.send("A")
    [(answered_id, response)] = env.broker.drain_responses()
    assert (request_id, (R.SUCCESS, S.FOUND, 1, [0])) == (answered_id, summary(response))
    assert [] == env.broker.held_requests


def test_hold_5_non_matching_arrival_keeps_it_and_the_periodic_check_wakes_it() -> None:
    env = Env()
    env.clock.jump_to(1000)
    request_id, _ = env.pull(0, sub="A")
    env.clock.jump_to(2000)
    env.send("B")
    assert ([], 1) == (env.broker.drain_responses(), len(env.broker.held_requests))
    # the periodic check passes a null tags code, which every TAG filter matches
    when, [(answered_id, response)] = env.run_until_answered()
    assert (5000, request_id) == (when, answered_id)
    assert (R.PULL_RETRY_IMMEDIATELY, S.NO_MATCHED_MESSAGE, 1, []) == summary(response)


def test_hold_4_non_matching_arrival_after_the_timeout_answers_it() -> None:
    env = Env()
    env.clock.jump_to(1000)
    env.pull(0, sub="A", timeout=3000)  # due at 4000
    env.clock.jump_to(4500)  # no check between 1000 and 5000
    env.send("B")
    [(_, response)] = env.broker.drain_responses()
    assert (R.PULL_RETRY_IMMEDIATELY, S.NO_MATCHED_MESSAGE, 1, []) == summary(response)


def test_hold_7_timeout_answered_at_the_fourth_check_after_suspension() -> None:
    env = Env()
    env.clock.jump_to(1000)
    request_id, _ = env.pull(0)  # due at 16000; checks at 5000, 10000, 15000, 20000
    when, [(answered_id, response)] = env.run_until_answered()
    assert (20_000, request_id) == (when, answered_id)
    assert (R.PULL_NOT_FOUND, S.NO_MESSAGE_IN_QUEUE, 0, []) == summary(response)


def test_hold_4_timeout_is_non_strict() -> None:
    env = Env()
    env.pull(0)  # suspended at 0, due at 15000, which is a check time
    when, [(_, response)] = env.run_until_answered()
    assert (15_000, R.PULL_NOT_FOUND) == (when, response.code)


def test_hold_10_overflow_one_stays_held_until_the_timeout() -> None:
    env = Env()
    env.send()
    env.send()
    env.clock.jump_to(1000)
    env.pull(2)
    when, [(_, response)] = env.run_until_answered()
    assert (20_000, (R.PULL_NOT_FOUND, S.OFFSET_OVERFLOW_ONE, 2, [])) == (when, summary(response))


def test_hold_10_offset_found_null_is_woken_at_the_next_check() -> None:
    env = Env()
    for _ in range(5):
        env.send("A", queue=0)  # commit-log file 0
    env.send("A", queue=1)  # opens file 1
    env.broker.store.delete_expired_files()  # T/0 keeps min 0; its index 0…3 have no file
    env.clock.jump_to(1000)
    _, response = env.pull(0)
    assert response is None
    when, [(_, answer)] = env.run_until_answered()
    assert (5000, (R.PULL_NOT_FOUND, S.OFFSET_FOUND_NULL, 4, [])) == (when, summary(answer))


def test_hold_10_suspend_timeout_zero_holds_until_the_next_check() -> None:
    env = Env()
    env.clock.jump_to(1000)
    _, response = env.pull(0, timeout=0)
    assert response is None
    when, [(_, answer)] = env.run_until_answered()
    assert (5000, R.PULL_NOT_FOUND) == (when, answer.code)


def test_hold_10_no_deduplication_and_insertion_order() -> None:
    env = Env()
    first, _ = env.pull(0, sub="A")
    second, _ = env.pull(0, sub="A")
    other_queue, _ = env.pull(0, queue=1, sub="A")
    env.send("A")
    answers = env.broker.drain_responses()
    assert [(first, R.SUCCESS), (second, R.SUCCESS)] == [(i, r.code) for i, r in answers]
    assert [other_queue] == [h.request_id for h in env.broker.held_requests]


def test_hold_8_short_polling() -> None:
    env = Env(config=BrokerConfig(long_polling_enable=False))
    assert (1000, 1000) == (env.broker.check_interval, env.broker.next_hold_check_at)
    env.clock.jump_to(200)
    request_id, _ = env.pull(0, sub="A", timeout=15_000)
    assert 1000 == env.broker.held_requests[0].timeout_millis  # the header is ignored
    env.clock.jump_to(300)
    env.send("A")  # no arrival notification without long polling
    assert [] == env.broker.drain_responses()
    when, [(answered_id, response)] = env.run_until_answered()
    assert (1000, request_id, R.SUCCESS) == (when, answered_id, response.code)


def test_hold_8_short_polling_timeout_within_two_seconds() -> None:
    env = Env(config=BrokerConfig(long_polling_enable=False))
    env.clock.jump_to(200)
    env.pull(0)  # due at 1200: the check at 1000 keeps it, the check at 2000 answers
    when, [(_, response)] = env.run_until_answered()
    assert (2000, R.PULL_NOT_FOUND) == (when, response.code)


def test_hold_9_a_slave_answers_held_pulls_only_at_periodic_checks() -> None:
    env = Env()
    store = env.broker.store
    store.set_role(BrokerRole.SLAVE, False)
    env.clock.jump_to(1000)
    request_id, response = env.pull(0, sys_flag=HELD | FLAG_COMMIT_OFFSET, commit=4)
    assert (None, -1) == (response, env.broker.query_offset("G", "T", 0))  # no commit on a slave
    # replication: the record reaches the slave's store without a broker send
    store.set_role(BrokerRole.ASYNC_MASTER, False)
    store.put_message(BrokerInnerMessage("T", 0, b"x", {"TAGS": "A"}))
    store.set_role(BrokerRole.SLAVE, False)
    assert [] == env.broker.drain_responses()
    when, [(answered_id, answer)] = env.run_until_answered()
    assert (5000, request_id, (R.SUCCESS, S.FOUND, 1, [0])) == (when, answered_id, summary(answer))


def test_hold_9_a_slave_cannot_accept_sends_so_nothing_is_notified() -> None:
    env = Env()
    env.broker.store.set_role(BrokerRole.SLAVE, False)
    env.pull(0)
    result = env.broker.send_message(BrokerInnerMessage("T", 0, b"x"))
    assert ("SERVICE_NOT_AVAILABLE", [], 1) == (
        result.status.value,
        env.broker.drain_responses(),
        len(env.broker.held_requests),
    )


def test_hold_2_run_hold_checks_runs_every_due_check() -> None:
    env = Env()
    assert (0, 5000) == (env.broker.run_hold_checks(), env.broker.next_hold_check_at)
    env.clock.jump_to(16_000)
    assert (3, 20_000) == (env.broker.run_hold_checks(), env.broker.next_hold_check_at)


def test_hold_5_a_delayed_message_does_not_wake_its_original_queue() -> None:
    env = Env()
    env.pull(0)
    env.broker.send_message(BrokerInnerMessage("T", 0, b"x", {"TAGS": "A", "DELAY": "3"}))
    assert 0 == env.broker.store.get_max_offset_in_queue("T", 0)
    assert ([], 1) == (env.broker.drain_responses(), len(env.broker.held_requests))


@pytest.mark.parametrize(
    ("field", "value"), [("suspend_timeout_millis", "15000"), ("subscription", 123)]
)
def test_pull_rejects_a_malformed_header_with_a_typed_error(field: str, value: object) -> None:
    env = Env()
    args: dict[str, Any] = {
        "consumer_group": "G",
        "topic": "T",
        "queue_id": 0,
        "queue_offset": 0,
        "max_msg_nums": 32,
        "sys_flag": HELD,
        "subscription": "*",
        field: value,
    }
    with pytest.raises(InvalidTypeError) as info:
        env.broker.pull_message(PullMessageRequest(**args))
    assert (field, value) == (info.value.name, info.value.value)
    assert [] == env.broker.held_requests


def test_a_malformed_held_pull_does_not_lose_the_others() -> None:
    env = Env()
    with contextlib.suppress(InvalidTypeError):
        env.pull(0, timeout="15000")  # type: ignore[arg-type]
    good, _ = env.pull(0)
    when, answers = env.run_until_answered()
    assert (15_000, [good]) == (when, [i for i, _ in answers])
