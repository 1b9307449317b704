"""CODE (rulebook-broker §5): PullMessageProcessor's checks, status → code table, suggestion."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pullspec.reference.factories
from pullspec.reference.broker import ReferenceBroker
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import (
    FLAG_SUBSCRIPTION,
    PullMessageRequest,
    PullResponse,
    broker_allow_suspend,
    client_pull_status,
    decode_sys_flag,
    empty_queue_code,
    fastjson_string,
    is_held,
    no_store_result_code,
    offset_moved_event,
    offset_moved_outcome,
    pre_store_check,
    pull_outcome_code,
    registry_subscription_check,
    response_remark,
    slave_code,
    status_to_response_code,
    success_body,
    suggest_which_broker_id,
)
from pullspec.spec.config import BrokerConfig, StoreConfig
from pullspec.spec.contracts import check_call
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole, GetMessageStatus, PullStatus, ResponseCode

S, R = GetMessageStatus, ResponseCode
MASTER, SLAVE = BrokerRole.ASYNC_MASTER, BrokerRole.SLAVE
V47, V49 = Profile.V4_7, Profile.V4_9
statuses = st.sampled_from(list(GetMessageStatus))
roles = st.sampled_from(list(BrokerRole))
codes = st.sampled_from(list(ResponseCode))

CHECKS_OK = {
    "broker_permission": 6,
    "group_exists": True,
    "consume_enable": True,
    "topic_exists": True,
    "topic_permission": 6,
    "queue_id": 0,
    "read_queue_nums": 4,
}
REGISTRY_OK = {
    "group_registered": True,
    "broadcasting": False,
    "consume_broadcast_enable": True,
    "has_topic_subscription": True,
    "registered_sub_version": 5,
    "request_sub_version": 5,
}


def test_code_1_held_requests_are_rerun_without_suspend() -> None:
    assert [True, False] == [broker_allow_suspend(False), broker_allow_suspend(True)]


def test_code_2_sys_flag_bits() -> None:
    flags = decode_sys_flag(0x1 | 0x4 | 0x10)
    assert (True, False, True, False, True) == (
        flags.commit_offset,
        flags.suspend,
        flags.subscription,
        flags.class_filter,
        flags.lite_pull,
    )


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, None),
        ({"broker_permission": 2}, R.NO_PERMISSION),
        # the broker check comes first, even when everything else fails too
        ({"broker_permission": 2, "group_exists": False, "topic_exists": False}, R.NO_PERMISSION),
        ({"group_exists": False, "topic_exists": False}, R.SUBSCRIPTION_GROUP_NOT_EXIST),
        ({"consume_enable": False, "topic_exists": False}, R.NO_PERMISSION),
        ({"topic_exists": False, "queue_id": 9}, R.TOPIC_NOT_EXIST),
        ({"topic_permission": 2, "queue_id": 9}, R.NO_PERMISSION),
        ({"queue_id": 4}, R.SYSTEM_ERROR),
        ({"queue_id": -1}, R.SYSTEM_ERROR),
        ({"queue_id": 3}, None),
        ({"broker_permission": 4, "topic_permission": 4}, None),  # READ is enough
    ],
)
def test_code_2_checks_in_order(changes: dict[str, object], expected: ResponseCode | None) -> None:
    assert expected == pre_store_check(**{**CHECKS_OK, **changes})  # type: ignore[arg-type]


@given(
    st.integers(0, 15),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.integers(0, 15),
    st.integers(-2, 8),
    st.integers(0, 8),
)
def test_code_2_contract(
    perm: int, group: bool, enable: bool, topic: bool, topic_perm: int, queue: int, queues: int
) -> None:
    actual = check_call(
        pre_store_check,
        broker_permission=perm,
        group_exists=group,
        consume_enable=enable,
        topic_exists=topic,
        topic_permission=topic_perm,
        queue_id=queue,
        read_queue_nums=queues,
    )
    failures = [
        (not perm & 4, R.NO_PERMISSION),
        (not group, R.SUBSCRIPTION_GROUP_NOT_EXIST),
        (not enable, R.NO_PERMISSION),
        (not topic, R.TOPIC_NOT_EXIST),
        (not topic_perm & 4, R.NO_PERMISSION),
        (not 0 <= queue < queues, R.SYSTEM_ERROR),
    ]
    assert next((code for failed, code in failures if failed), None) == actual


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, None),
        ({"group_registered": False, "has_topic_subscription": False}, R.SUBSCRIPTION_NOT_EXIST),
        ({"broadcasting": True, "consume_broadcast_enable": False}, R.NO_PERMISSION),
        ({"broadcasting": True}, None),
        (
            {"broadcasting": True, "consume_broadcast_enable": False, "request_sub_version": 9},
            R.NO_PERMISSION,
        ),
        ({"has_topic_subscription": False, "request_sub_version": 9}, R.SUBSCRIPTION_NOT_EXIST),
        ({"request_sub_version": 6}, R.SUBSCRIPTION_NOT_LATEST),
        ({"request_sub_version": 4}, None),
    ],
)
def test_code_3_registry_checks_in_order(
    changes: dict[str, object], expected: ResponseCode | None
) -> None:
    assert expected == check_call(registry_subscription_check, **{**REGISTRY_OK, **changes})


def test_code_4_no_store_result_is_system_error() -> None:
    assert R.SYSTEM_ERROR == check_call(no_store_result_code)


def test_code_5_remark_is_the_status_name() -> None:
    assert ["FOUND", "OFFSET_FOUND_NULL"] == [
        response_remark(S.FOUND),
        check_call(response_remark, S.OFFSET_FOUND_NULL),
    ]


@pytest.mark.parametrize(
    ("suggest", "slave_read", "expected"),
    [(True, False, 0), (False, False, 0), (True, True, 1), (False, True, 3)],
)
def test_code_6_suggest_which_broker_id(suggest: bool, slave_read: bool, expected: int) -> None:
    # whichBrokerWhenConsumeSlowly 1, group brokerId 3
    assert expected == check_call(suggest_which_broker_id, suggest, slave_read, 1, 3)


CODE_7_TABLE = [
    (S.FOUND, 0, R.SUCCESS),
    (S.MESSAGE_WAS_REMOVING, 0, R.PULL_RETRY_IMMEDIATELY),
    (S.NO_MATCHED_MESSAGE, 0, R.PULL_RETRY_IMMEDIATELY),
    (S.NO_MESSAGE_IN_QUEUE, 5, R.PULL_OFFSET_MOVED),
    (S.NO_MESSAGE_IN_QUEUE, -1, R.PULL_OFFSET_MOVED),
    (S.NO_MESSAGE_IN_QUEUE, 0, R.PULL_NOT_FOUND),
    (S.NO_MATCHED_LOGIC_QUEUE, 5, R.PULL_OFFSET_MOVED),
    (S.NO_MATCHED_LOGIC_QUEUE, 0, R.PULL_NOT_FOUND),
    (S.OFFSET_FOUND_NULL, 0, R.PULL_NOT_FOUND),
    (S.OFFSET_OVERFLOW_ONE, 0, R.PULL_NOT_FOUND),
    (S.OFFSET_OVERFLOW_BADLY, 0, R.PULL_OFFSET_MOVED),
    (S.OFFSET_TOO_SMALL, 0, R.PULL_OFFSET_MOVED),
]


@pytest.mark.parametrize(("status", "offset", "code"), CODE_7_TABLE)
def test_code_7_status_to_response_code(
    status: GetMessageStatus, offset: int, code: ResponseCode
) -> None:
    assert code == status_to_response_code(status, offset)
    if status not in (S.NO_MESSAGE_IN_QUEUE, S.NO_MATCHED_LOGIC_QUEUE):
        assert code == status_to_response_code(status, 5)  # only the empty rows read the offset


@given(statuses, st.integers(-5, 5))
def test_code_7_contract(status: GetMessageStatus, offset: int) -> None:
    assert isinstance(check_call(status_to_response_code, status, offset), ResponseCode)


def test_code_8_empty_queue_offset_zero_special_case() -> None:
    assert [R.PULL_NOT_FOUND, R.PULL_OFFSET_MOVED, R.PULL_OFFSET_MOVED] == [
        empty_queue_code(0),
        empty_queue_code(4),
        check_call(empty_queue_code, -1),
    ]


@given(statuses, st.integers(-3, 3), roles, st.booleans())
def test_code_9_the_code_depends_only_on_the_status(
    status: GetMessageStatus, offset: int, role: BrokerRole, slave_read: bool
) -> None:
    expected = status_to_response_code(status, offset)
    assert expected == check_call(slave_code, role, slave_read, status, offset)


def test_code_9_slave_without_slave_read_serves_found() -> None:
    assert R.SUCCESS == slave_code(SLAVE, False, S.FOUND, 0)


@pytest.mark.parametrize(
    ("role", "check", "expected"),
    [
        (MASTER, False, (R.PULL_OFFSET_MOVED, 1, True)),
        (BrokerRole.SYNC_MASTER, False, (R.PULL_OFFSET_MOVED, 1, True)),
        (SLAVE, True, (R.PULL_OFFSET_MOVED, 1, True)),
        (SLAVE, False, (R.PULL_RETRY_IMMEDIATELY, 3, False)),
    ],
)
def test_code_10_offset_moved_handling(
    role: BrokerRole, check: bool, expected: tuple[ResponseCode, int, bool]
) -> None:
    assert expected == check_call(offset_moved_outcome, role, check, 1, 3)


def test_code_11_success_body_is_the_concatenated_records() -> None:
    assert b"abcde" == check_call(success_body, (b"ab", b"cde"))
    assert b"" == success_body(())


@given(codes, st.booleans(), st.booleans())
def test_code_12_only_pull_not_found_is_held(code: ResponseCode, allow: bool, flag: bool) -> None:
    expected = code is R.PULL_NOT_FOUND and allow and flag
    assert expected == check_call(is_held, code, allow, flag)


def test_code_12_examples() -> None:
    assert [True, False, False, False] == [
        is_held(R.PULL_NOT_FOUND, True, True),
        is_held(R.PULL_NOT_FOUND, False, True),
        is_held(R.PULL_NOT_FOUND, True, False),
        is_held(R.PULL_RETRY_IMMEDIATELY, True, True),
    ]


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (R.SUCCESS, PullStatus.FOUND),
        (R.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
        (R.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
        (R.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
        (R.SYSTEM_ERROR, None),
        (R.NO_PERMISSION, None),
        (R.SUBSCRIPTION_PARSE_FAILED, None),
    ],
)
def test_code_13_client_pull_status(code: ResponseCode, status: PullStatus | None) -> None:
    assert status == check_call(client_pull_status, code)


# --- CODE-14: the combined outcome table -------------------------------------------------------


@given(statuses, st.integers(-3, 3), roles, st.booleans())
def test_code_14_contract(
    status: GetMessageStatus, offset: int, role: BrokerRole, check: bool
) -> None:
    code = status_to_response_code(status, offset)
    if code is R.PULL_OFFSET_MOVED and role is SLAVE and not check:
        code = R.PULL_RETRY_IMMEDIATELY
    assert code == check_call(pull_outcome_code, status, offset, role, check)


def record_body(profile: Profile) -> bytes:
    """A body making a 200-byte record with TAGS of one character (LAYOUT-5)."""
    return bytes(200 - 98 - (profile is V47))


def table_broker(setup: str, profile: Profile, role: BrokerRole, check: bool) -> ReferenceBroker:
    """1 KiB commit-log files (five 200-byte records each), 4-entry consume-queue files.

    populated: T/0 = tags A B A C B A (min 0, max 6).
    found_null: five records in T/0 (commit-log file 0) and one in T/1 (file 1); expiry deletes
        file 0 and consume-queue file 0 of T/0, and T/0's min stays 0 (no entry of its first
        remaining file is backed), so index 0…3 have no file and index 4 is in a deleted record.
    too_small: twelve records in T/0; expiry deletes commit-log files 0 and 1 (min 2048), and
        T/0's min moves to index 10 (phys 2048).
    """
    clock = ManualClock(0)
    config = StoreConfig(
        mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
    )
    broker: ReferenceBroker = pullspec.reference.factories.broker(
        config, BrokerConfig(), profile, clock
    )
    broker.create_topic("T")
    puts = {
        "populated": [(0, t) for t in "ABACBA"],
        "found_null": [(0, "A")] * 5 + [(1, "A")],
        "too_small": [(0, "A")] * 12,
    }[setup]
    for queue, tag in puts:
        broker.send_message(BrokerInnerMessage("T", queue, record_body(profile), {"TAGS": tag}))
    if setup != "populated":
        broker.store.delete_expired_files()
    broker.store.set_role(role, check)
    return broker


def pull(broker: ReferenceBroker, queue: int, offset: int, sub: str = "*") -> PullResponse:
    _, response = broker.pull_message(
        PullMessageRequest(
            consumer_group="G",
            topic="T",
            queue_id=queue,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=FLAG_SUBSCRIPTION,
            subscription=sub,
        )
    )
    assert response is not None
    return response


# (setup, queue, offset, subscription, status, master code, master next, slave code, slave next)
CODE_14_TABLE = [
    ("populated", 0, 0, "*", S.FOUND, R.SUCCESS, 4, R.SUCCESS, 4),
    ("populated", 0, 3, "A", S.NO_MATCHED_MESSAGE, R.PULL_RETRY_IMMEDIATELY, 4, None, 4),
    ("found_null", 0, 4, "*", S.MESSAGE_WAS_REMOVING, R.PULL_RETRY_IMMEDIATELY, 5, None, 5),
    ("found_null", 0, 1, "*", S.OFFSET_FOUND_NULL, R.PULL_NOT_FOUND, 4, R.PULL_NOT_FOUND, 1),
    ("populated", 0, 6, "*", S.OFFSET_OVERFLOW_ONE, R.PULL_NOT_FOUND, 6, None, 6),
    ("populated", 0, 9, "*", S.OFFSET_OVERFLOW_BADLY, R.PULL_OFFSET_MOVED, 6, R.PULL_RETRY_IMMEDIATELY, 9),
    ("too_small", 0, 9, "*", S.OFFSET_TOO_SMALL, R.PULL_OFFSET_MOVED, 10, R.PULL_RETRY_IMMEDIATELY, 9),
    ("populated", 1, 3, "*", S.NO_MESSAGE_IN_QUEUE, R.PULL_OFFSET_MOVED, 0, R.PULL_RETRY_IMMEDIATELY, 3),
    ("populated", 1, 0, "*", S.NO_MESSAGE_IN_QUEUE, R.PULL_NOT_FOUND, 0, None, 0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("setup", "queue", "offset", "sub", "status", "code", "nxt", "slave_code_", "slave_next"),
    CODE_14_TABLE,
)
@pytest.mark.parametrize(
    ("role", "check"), [(MASTER, False), (SLAVE, True), (SLAVE, False)], ids=["m", "s+c", "s"]
)
def test_code_14_combined_outcome_table(
    setup: str,
    queue: int,
    offset: int,
    sub: str,
    status: GetMessageStatus,
    code: ResponseCode,
    nxt: int,
    slave_code_: ResponseCode | None,
    slave_next: int,
    role: BrokerRole,
    check: bool,
) -> None:
    corr_off = role is SLAVE and not check
    expected_code = (slave_code_ or code) if corr_off else code
    expected_next = slave_next if corr_off else nxt
    response = pull(table_broker(setup, V49, role, check), queue, offset, sub)
    assert (status, expected_code, expected_next, 0) == (
        response.status,
        response.code,
        response.next_begin_offset,
        response.suggest_which_broker_id,
    )
    assert expected_code == pull_outcome_code(status, offset, role, check)


def test_code_14_overflow_badly_row_per_profile() -> None:
    outcomes = [pull(table_broker("populated", p, MASTER, False), 0, 9) for p in (V47, V49)]
    assert [(R.PULL_OFFSET_MOVED, 0), (R.PULL_OFFSET_MOVED, 6)] == [
        (r.code, r.next_begin_offset) for r in outcomes
    ]


def test_code_14_slave_answers_found_null_with_the_same_offset_again() -> None:
    broker = table_broker("found_null", V49, SLAVE, False)
    answers = [pull(broker, 0, 2) for _ in range(3)]
    assert [(R.PULL_NOT_FOUND, 2)] * 3 == [(r.code, r.next_begin_offset) for r in answers]


def test_code_10_offset_moved_event_is_written_on_a_master() -> None:
    broker = table_broker("populated", V49, MASTER, False)
    assert 0 == broker.store.get_max_offset_in_queue("OFFSET_MOVED_EVENT", 0)
    pull(broker, 0, 9)
    pull(broker, 1, 3)
    assert 2 == broker.store.get_max_offset_in_queue("OFFSET_MOVED_EVENT", 0)
    event = broker.store.get_message("X", "OFFSET_MOVED_EVENT", 0, 0, 32).messages[0]
    assert ("G", "G") == (event.get_property("TAGS"), event.get_property("KEYS"))
    assert {
        "consumerGroup": "G",
        "messageQueue": {"topic": "T", "brokerName": "broker-a", "queueId": 0},
        "offsetRequest": 9,
        "offsetNew": 6,
    } == json.loads(event.body)


def test_code_10_no_offset_moved_event_on_a_slave_without_offset_check() -> None:
    broker = table_broker("populated", V49, SLAVE, False)
    response = pull(broker, 0, 9)
    assert (R.PULL_RETRY_IMMEDIATELY, 0) == (
        response.code,
        broker.store.get_max_offset_in_queue("OFFSET_MOVED_EVENT", 0),
    )


def test_code_5_response_header_carries_the_store_result() -> None:
    response = pull(table_broker("populated", V49, MASTER, False), 0, 2, "A || C")
    assert ("FOUND", S.FOUND, 4, 0, 6, [2, 3]) == (
        response.remark,
        response.status,
        response.next_begin_offset,
        response.min_offset,
        response.max_offset,
        response.msg_offsets,
    )


def test_code_11_success_carries_the_records_in_index_order() -> None:
    response = pull(table_broker("populated", V49, MASTER, False), 0, 0)
    assert ([0, 1, 2, 3], [0, 200, 400, 600]) == (
        response.msg_offsets,
        [m.commitlog_offset for m in response.messages],
    )


# --- CODE-15: the OFFSET_MOVED_EVENT record ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("G", '"G"'),
        ('a"b', '"a\\"b"'),
        ("a\\b", '"a\\\\b"'),
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ("\x00\x01\x0b\x1f", '"\\u0000\\u0001\\u000B\\u001F"'),  # upper-case hex, \v too
        ("\x7f\x9f\xa0", '"\\u007F\\u009F\xa0"'),  # U+00A0 is written as it is
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("é/<>", '"é/<>"'),  # no ASCII-only escaping, no slash, no browser escapes
    ],
)
def test_code_15_fastjson_writes_strings_with_its_default_features(text: str, written: str) -> None:
    assert written == fastjson_string(text)


def test_code_15_event_body_is_compact_alphabetical_json_and_properties_in_hash_map_order() -> None:
    body, properties = check_call(offset_moved_event, "G", "T", "broker-a", 0, 9, 6)
    assert (
        b'{"consumerGroup":"G","messageQueue":{"brokerName":"broker-a","queueId":0,"topic":"T"},'
        b'"offsetNew":6,"offsetRequest":9}'
    ) == body
    assert (("KEYS", "G"), ("DELAY", "0"), ("TAGS", "G")) == properties
    body, _ = check_call(offset_moved_event, "g\u00e9", "T", "b", 3, -1, 0)
    assert b'"consumerGroup":"g\xc3\xa9"' in body and b'"offsetRequest":-1}' in body


@pytest.mark.parametrize(("profile", "size"), [(V49, 248), (V47, 249)])
def test_code_15_the_event_record_is_written_with_its_exact_size(
    profile: Profile, size: int
) -> None:
    # 91 fixed bytes + 118 body + 18 topic "OFFSET_MOVED_EVENT" + properties "KEYS␁G␂DELAY␁0␂TAGS␁G"
    # (21 bytes; 4.7.1 adds the trailing separator, LAYOUT-9)
    clock = ManualClock(0)
    config = StoreConfig(mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80)
    broker: ReferenceBroker = pullspec.reference.factories.broker(
        config, BrokerConfig(), profile, clock
    )
    broker.create_topic("T")
    response = pull(broker, 1, 1)
    assert (R.PULL_OFFSET_MOVED, 0) == (response.code, response.next_begin_offset)
    assert size == broker.store.get_max_phy_offset()
    event = broker.store.look_message_by_offset(0)
    assert event is not None
    assert ("OFFSET_MOVED_EVENT", 0, 0, size) == (
        event.topic,
        event.queue_id,
        event.queue_offset,
        event.size,
    )
    assert {"KEYS": "G", "DELAY": "0", "TAGS": "G"} == dict(event.properties)
    assert (71, 0, 0) == (event.tags_code, event.flag, event.sys_flag)  # "G".hashCode() == 71
    expected = (
        b'{"consumerGroup":"G","messageQueue":{"brokerName":"broker-a","queueId":1,"topic":"T"},'
        b'"offsetNew":0,"offsetRequest":1}'
    )
    assert expected == event.body
    assert event.born_host == event.store_host
