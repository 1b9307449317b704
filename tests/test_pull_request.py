"""REQ rules: one example per rule (expected values worked out from the rulebook) and Hypothesis
properties of the commit-offset piggy-back, the sys flag and the header."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.consumer_config import ConsumerConfig, MessageModel
from pullspec.spec.contracts import check_call
from pullspec.spec.filter import SubscriptionData, build_subscription_data
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.pull_actions import Delay, DelayReason
from pullspec.spec.pull_request import (
    CommitOffset,
    PullMessageRequestHeader,
    capture_pull_callback,
    commit_offset_for_pull,
    on_pull_kernel_exception,
    pull_kernel_call,
    pull_message_request_header_v47,
    pull_message_request_header_v49,
    pull_status_for_response_code_v47,
    pull_status_for_response_code_v49,
    subscription_expression,
)
from pullspec.spec.pull_route import (
    V4_1_0_SNAPSHOT,
    FindBrokerResult,
    PullSysFlag,
    build_sys_flag,
    check_filter_type_supported,
    clear_commit_offset_flag,
    find_broker_address_in_subscribe_v47,
    find_broker_address_in_subscribe_v49,
    has_flag,
    pull_target_address,
    recalculate_pull_from_which_node,
    sys_flag_for_broker,
)
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import PullStatus, ResponseCode

MQ = MessageQueue("TopicA", "broker-a", 3)
SD = build_subscription_data("TopicA", "A || B")
MASTER = FindBrokerResult("10.0.0.1:10911", slave=False)
SLAVE = FindBrokerResult("10.0.0.2:10911", slave=True)


def test_req_1_callback_capture() -> None:
    ctx = capture_pull_callback(1234, SD)
    assert ctx.begin_timestamp == 1234 and ctx.subscription_data is SD


def test_req_2_commit_offset() -> None:
    assert commit_offset_for_pull(MessageModel.CLUSTERING, 57) == CommitOffset(True, 57)
    assert commit_offset_for_pull(MessageModel.CLUSTERING, 0) == CommitOffset(False, 0)
    assert commit_offset_for_pull(MessageModel.CLUSTERING, -1) == CommitOffset(False, -1)
    assert commit_offset_for_pull(MessageModel.BROADCASTING, 57) == CommitOffset(False, 0)


def test_req_3_expression() -> None:
    assert subscription_expression(SD, post_subscription_when_pull=False) == (None, False)
    assert subscription_expression(SD, post_subscription_when_pull=True) == ("A || B", False)
    class_sd = SubscriptionData("TopicA", "A", class_filter_mode=True)
    assert subscription_expression(class_sd, post_subscription_when_pull=True) == (None, True)
    assert subscription_expression(None, post_subscription_when_pull=True) == (None, False)


def test_req_4_sys_flag() -> None:
    assert build_sys_flag(False, True, False, False) == 2
    assert build_sys_flag(True, True, False, False) == 3
    assert build_sys_flag(False, True, True, False) == 6
    assert build_sys_flag(True, True, True, False) == 7
    assert build_sys_flag(False, True, False, True) == 10
    assert build_sys_flag(True, True, False, True) == 11
    assert build_sys_flag(False, False, False, False, lite_pull=True) == 16
    assert clear_commit_offset_flag(11) == 10
    assert clear_commit_offset_flag(2) == 2
    assert has_flag(10, PullSysFlag.CLASS_FILTER) and not has_flag(10, PullSysFlag.COMMIT_OFFSET)


def test_req_5_kernel_call() -> None:
    sd = SubscriptionData("TopicA", "*", sub_version=1_700_000_000_000)
    call = pull_kernel_call(MQ, 88, sd, sd, CommitOffset(True, 80), ConsumerConfig())
    assert (call.mq, call.sub_expression, call.expression_type) == (MQ, None, "TAG")
    assert (call.sub_version, call.offset, call.max_nums) == (1_700_000_000_000, 88, 32)
    assert (call.sys_flag, call.commit_offset) == (3, 80)
    assert (call.broker_suspend_max_time_millis, call.timeout_millis) == (15000, 30000)


def test_req_6_broker_address() -> None:
    assert recalculate_pull_from_which_node(None) == 0
    assert recalculate_pull_from_which_node(1) == 1
    assert (
        recalculate_pull_from_which_node(1, connect_broker_by_user=True, default_broker_id=0) == 0
    )
    addrs = BrokerAddrs([(0, "m"), (2, "s2")])
    assert find_broker_address_in_subscribe_v47(addrs, 0, False) == FindBrokerResult("m", False)
    # Slave id 1 missing: 4.7 falls back to the first entry (the master), 4.9 tries id 2 first.
    assert find_broker_address_in_subscribe_v47(addrs, 1, False) == FindBrokerResult("m", False)
    assert find_broker_address_in_subscribe_v49(addrs, 1, False) == FindBrokerResult("s2", True)
    assert find_broker_address_in_subscribe_v47(addrs, 1, True) is None
    assert find_broker_address_in_subscribe_v49(addrs, 1, True) == FindBrokerResult("s2", True)
    slave = BrokerAddrs([(1, "s1")])
    assert find_broker_address_in_subscribe_v47(slave, 0, False) == FindBrokerResult("s1", True)
    assert Ruleset.of(Profile.V4_9).find_broker_address_in_subscribe(None, 0, False) is None
    assert (
        Ruleset.of(Profile.V4_7).find_broker_address_in_subscribe(BrokerAddrs(), 0, False) is None
    )


@pytest.mark.parametrize("profile", list(Profile))
def test_req_6_first_entry_is_the_hash_maps_not_the_routes(profile: Profile) -> None:
    # The route lists the slave first; HashMap<Long, String> iterates id 0 first, so a missing
    # id 3 (4.9: and 4) falls back to the master (the recorded edge-req6-missing-slave-id).
    listed = BrokerAddrs([(2, "s2:1"), (0, "m:1")])
    assert FindBrokerResult("m:1", False) == Ruleset.of(profile).find_broker_address_in_subscribe(
        listed, 3, False
    )
    # 16 sits in bucket 0 of 16, 17 and 33 in bucket 1: 16 iterates first whatever the put order.
    shared = BrokerAddrs([(17, "a:1"), (16, "b:1"), (33, "c:1")])
    assert FindBrokerResult("b:1", True) == Ruleset.of(profile).find_broker_address_in_subscribe(
        shared, 5, False
    )


def test_req_7_filter_type_version() -> None:
    check_filter_type_supported("TAG", 0, "broker-a")
    check_filter_type_supported("SQL92", V4_1_0_SNAPSHOT, "broker-a")
    with pytest.raises(MQClientError):
        check_filter_type_supported("SQL92", V4_1_0_SNAPSHOT - 1, "broker-a")


def test_req_8_never_commit_through_slave() -> None:
    assert sys_flag_for_broker(3, slave=True) == 2
    assert sys_flag_for_broker(3, slave=False) == 3
    assert sys_flag_for_broker(11, slave=True) == 10


def test_req_9_header_both_profiles() -> None:
    call = pull_kernel_call(MQ, 88, SD, SD, CommitOffset(True, 80), ConsumerConfig())
    expected = PullMessageRequestHeader(
        consumer_group="G",
        topic="TopicA",
        queue_id=3,
        queue_offset=88,
        max_msg_nums=32,
        sys_flag=2,
        commit_offset=80,
        suspend_timeout_millis=15000,
        subscription=None,
        sub_version=0,
        expression_type="TAG",
        bname=None,
    )
    assert pull_message_request_header_v47("G", call, SLAVE) == expected
    v49 = pull_message_request_header_v49("G", call, MASTER)
    assert v49.bname == "broker-a" and v49.sys_flag == 3
    assert Ruleset.of(Profile.V4_7).pull_message_request_header("G", call, MASTER).bname is None


def test_req_10_filter_server() -> None:
    assert pull_target_address(3, "b:1", "T", None, 5) == "b:1"
    assert pull_target_address(10, "b:1", "T", ["f0", "f1", "f2"], 5) == "f2"
    with pytest.raises(MQClientError):
        pull_target_address(10, "b:1", "T", [], 0)


def test_req_11_synchronous_failure() -> None:
    assert on_pull_kernel_exception(ConsumerConfig()) == Delay(
        1000, DelayReason.PULL_KERNEL_EXCEPTION
    )


@pytest.mark.parametrize(
    "rule", [pull_status_for_response_code_v47, pull_status_for_response_code_v49]
)
def test_req_12_response_codes(rule: Callable[[int, str | None, str], PullStatus]) -> None:
    assert rule(0, None, "b:1") is PullStatus.FOUND
    assert rule(19, None, "b:1") is PullStatus.NO_NEW_MSG
    assert rule(20, None, "b:1") is PullStatus.NO_MATCHED_MSG
    assert rule(21, None, "b:1") is PullStatus.OFFSET_ILLEGAL


def test_req_12_broker_error_names_the_broker_only_in_4_9() -> None:
    rules = {p: Ruleset.of(p).pull_status_for_response_code for p in ALL_PROFILES}
    named = {}
    for profile, rule in rules.items():
        with pytest.raises(MQBrokerError) as info:
            rule(ResponseCode.SUBSCRIPTION_NOT_LATEST, "stale", "b:1")
        named[profile] = (info.value.code, info.value.remark, info.value.addr)
    assert {Profile.V4_7: (25, "stale", None), Profile.V4_9: (25, "stale", "b:1")} == named


# --- properties ----------------------------------------------------------------------------------


@settings(max_examples=4 * settings().max_examples)
@given(
    st.sampled_from(MessageModel),
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.booleans(),
    st.sampled_from(Profile),
    st.lists(st.tuples(st.integers(0, 3), st.just("addr")), max_size=4).map(BrokerAddrs),
    st.integers(0, 3),
)
def test_commit_never_sent_when_not_positive_or_through_slave(
    model: MessageModel,
    memory_offset: int,
    post_subscription: bool,
    class_filter: bool,
    profile: Profile,
    addrs: BrokerAddrs,
    broker_id: int,
) -> None:
    sd = SubscriptionData("TopicA", "A", class_filter_mode=class_filter)
    config = ConsumerConfig(message_model=model, post_subscription_when_pull=post_subscription)
    commit = check_call(commit_offset_for_pull, model, memory_offset)
    call = check_call(pull_kernel_call, MQ, 5, sd, sd, commit, config)
    broker = Ruleset.of(profile).find_broker_address_in_subscribe(addrs, broker_id, False)
    if broker is None:
        assert not addrs
        return
    header = Ruleset.of(profile).pull_message_request_header("G", call, broker)
    committed = has_flag(header.sys_flag, PullSysFlag.COMMIT_OFFSET)
    if committed:
        assert model is MessageModel.CLUSTERING and header.commit_offset > 0 and not broker.slave
    else:
        assert memory_offset <= 0 or broker.slave or model is MessageModel.BROADCASTING
    assert has_flag(header.sys_flag, PullSysFlag.SUSPEND)
    assert (header.bname is None) == (profile is Profile.V4_7)


@given(st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_sys_flag_contracts(c: bool, s: bool, sub: bool, cf: bool, lite: bool, slave: bool) -> None:
    flag = check_call(build_sys_flag, c, s, sub, cf, lite)
    inner = check_call(sys_flag_for_broker, flag, slave)
    assert has_flag(inner, PullSysFlag.CLASS_FILTER) == cf


@given(st.integers(-5, 300))
def test_response_code_contract(code: int) -> None:
    try:
        check_call(pull_status_for_response_code_v49, code, None, "b:1")
    except MQBrokerError as exc:
        assert exc.code == code and code not in (0, 19, 20, 21)
