"""RETRY rules (spec.retry): one example per rule worked out by hand from the rulebook, and
Hypothesis properties over the rules and their contracts."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.spec import retry
from pullspec.spec.config import DEFAULT_MESSAGE_DELAY_LEVEL, PERM_READ, PERM_WRITE
from pullspec.spec.contracts import check_call
from pullspec.spec.delay import delay_rewrite, parse_delay_levels
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, NullPointerError
from pullspec.spec.layout import SYSFLAG_TRANSACTION_PREPARED_TYPE
from pullspec.spec.message import DEFAULT_STORE_HOST, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.retry import (
    V3_4_9,
    DeadLetterTarget,
    SendBackRequest,
    SendBackResponse,
    SendTarget,
)
from pullspec.spec.rules import function
from pullspec.spec.status import PutMessageStatus, ResponseCode

LEVELS = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
RW = PERM_READ | PERM_WRITE
V471, V497 = retry.MQ_VERSION_ORDINALS["V4_7_1"], retry.MQ_VERSION_ORDINALS["V4_9_7"]
#: The offset message id of a record at commit-log offset 0 on 127.0.0.1:10911.
MSG_ID_0 = "7F00000100002A9F0000000000000000"
PROFILES = (Profile.V4_7, Profile.V4_9)


def record(reconsume_times: int = 0, commitlog_offset: int = 0, **props: str) -> StoredMessage:
    """A consumed record of topic T tagged A with `props` added."""
    return StoredMessage(
        topic="T",
        queue_id=0,
        queue_offset=0,
        commitlog_offset=commitlog_offset,
        size=114,
        tags_code=65,
        body=b"x" * 16,
        properties={"TAGS": "A", **props},
        reconsume_times=reconsume_times,
        flag=3,
        born_timestamp=42,
    )


def checks(**overrides: Any) -> retry.SendBackStop | None:
    """send_back_checks with every check passing unless overridden."""
    kwargs: dict[str, Any] = dict(
        group="G",
        offset=0,
        group_exists=True,
        broker_permission=RW,
        retry_queue_nums=1,
        retry_topic_perm=RW,
        record_found=True,
    )
    kwargs.update(overrides)
    return check_call(retry.send_back_checks, **kwargs)  # type: ignore[no-any-return]


# --- one example per rule ---------------------------------------------------------------------


def test_retry_1_steps_in_order() -> None:
    assert checks() is None
    stop = checks(group_exists=False, broker_permission=0, record_found=False)
    assert stop is not None and stop.step == 2
    assert stop.response.code is ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert stop.response.remark is not None and stop.response.remark.startswith(
        "subscription group not exist, G \nSee http://rocketmq.apache.org/docs/faq/"
    )
    assert checks(broker_permission=PERM_READ, retry_queue_nums=0) == retry.SendBackStop(
        3,
        SendBackResponse(
            ResponseCode.NO_PERMISSION, "the broker[127.0.0.1] sending message is forbidden"
        ),
    )
    # retryQueueNums ≤ 0 drops the message with SUCCESS, before the record is looked at
    assert checks(retry_queue_nums=0, record_found=False) == retry.SendBackStop(
        4, SendBackResponse(ResponseCode.SUCCESS)
    )
    assert checks(retry_topic_perm=None) == retry.SendBackStop(
        5, SendBackResponse(ResponseCode.SYSTEM_ERROR, "topic[%RETRY%G] not exist")
    )
    assert checks(retry_topic_perm=PERM_READ, record_found=False) == retry.SendBackStop(
        5,
        SendBackResponse(
            ResponseCode.NO_PERMISSION, "the topic[%RETRY%G] sending message is forbidden"
        ),
    )
    assert checks(offset=999, record_found=False) == retry.SendBackStop(
        6, SendBackResponse(ResponseCode.SYSTEM_ERROR, "look message by offset failed, 999")
    )


def test_retry_1_step_9_put_status() -> None:
    assert retry.put_response(PutMessageStatus.PUT_OK) == SendBackResponse(ResponseCode.SUCCESS)
    assert retry.put_response(PutMessageStatus.SERVICE_NOT_AVAILABLE) == SendBackResponse(
        ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE"
    )
    assert retry.put_response(None) == SendBackResponse(
        ResponseCode.SYSTEM_ERROR, "putMessageResult is null"
    )


def test_retry_2_topic_and_queue() -> None:
    assert check_call(retry.retry_target_v47, "G", 1, -123_456) == ("%RETRY%G", 0)
    assert check_call(retry.retry_target_v47, "G", 3, -5) == (
        "%RETRY%G",
        2,
    )  # abs(-5 % 99999999) = 5
    # Java: -2147483648 % 99999999 = -47483669, abs → 47483669, mod 4 → 1
    assert check_call(retry.retry_target_v47, "G", 4, -(2**31)) == ("%RETRY%G", 1)
    assert check_call(retry.retry_target_v49, "G", 4, 7) == ("%RETRY%G", 3)
    assert retry.retry_topic_config("G", 3).read_queue_nums == 3
    assert retry.retry_topic_config("G", 3).perm == RW


def test_retry_3_max_reconsume_times() -> None:
    assert check_call(retry.max_reconsume_times_v49, 5, 16, V497) == 5
    assert check_call(retry.max_reconsume_times_v49, None, 16, V497) == 16
    assert check_call(retry.max_reconsume_times_v49, 5, 16, V3_4_9 - 1) == 16
    assert check_call(retry.max_reconsume_times_v47, -1, 16, V471) == -1  # −1: "DLQ at once"
    assert check_call(retry.max_reconsume_times_v47, None, 16, V3_4_9 - 1) == 16
    with pytest.raises(NullPointerError):
        retry.max_reconsume_times_v47(None, 16, V471)
    assert retry.request_version_ordinal("V3_4_9") == 121
    with pytest.raises(InvalidArgumentError):
        retry.request_version_ordinal("V9_9_9")


def test_retry_4_dead_letter_decision_and_permission() -> None:
    assert check_call(retry.dead_letter_target_v49, "G", 15, 16, 0) is None
    assert check_call(retry.dead_letter_target_v49, "G", 16, 16, 0) == DeadLetterTarget(
        "%DLQ%G", 0, RW, 0
    )
    assert check_call(retry.dead_letter_target_v49, "G", 0, 16, -1) == DeadLetterTarget(
        "%DLQ%G", 0, RW, 0
    )
    assert check_call(retry.dead_letter_target_v47, "G", 3, 3, 5) == DeadLetterTarget(
        "%DLQ%G", 0, PERM_WRITE, None
    )
    assert DeadLetterTarget("%DLQ%G", 0, PERM_WRITE, None).topic_config().write_queue_nums == 1


def test_retry_5_delay_level() -> None:
    assert check_call(retry.retry_delay_level, 0, 0) == 3
    assert check_call(retry.retry_delay_level, 0, 15) == 18
    assert check_call(retry.retry_delay_level, 5, 3) == 5
    assert check_call(retry.retry_delay_level, 0, 20) == 23  # the store clamps it to 18
    rewrite = delay_rewrite("%RETRY%G", 0, (("DELAY", "23"),), 0, len(LEVELS))
    assert rewrite is not None and rewrite[1:] == (
        17,
        (("DELAY", "18"), ("REAL_TOPIC", "%RETRY%G"), ("REAL_QID", "0")),
        18,
    )


def test_retry_6_new_message_v49() -> None:
    msg = check_call(retry.send_back_message_v49, record(2), "%RETRY%G", 0, 5)
    assert (msg.topic, msg.queue_id, msg.reconsume_times, msg.body, msg.flag) == (
        "%RETRY%G",
        0,
        3,
        b"x" * 16,
        3,
    )
    assert msg.born_timestamp == 42 and msg.store_host == DEFAULT_STORE_HOST
    assert dict(msg.properties) == {
        "TAGS": "A",
        "RETRY_TOPIC": "T",
        "WAIT": "false",
        "DELAY": "5",
        "ORIGIN_MESSAGE_ID": MSG_ID_0,
    }
    # a retried record keeps its first original topic and its origin id
    again = record(3, 500, RETRY_TOPIC="T0", ORIGIN_MESSAGE_ID="ABC")
    msg = check_call(retry.send_back_message_v49, again, "%DLQ%G", 0, 0)
    assert (msg.get_property("RETRY_TOPIC"), msg.get_property("ORIGIN_MESSAGE_ID")) == ("T0", "ABC")
    blank = check_call(
        retry.send_back_message_v49, record(0, 0, ORIGIN_MESSAGE_ID=" "), "%DLQ%G", 0, 0
    )
    assert blank.get_property("ORIGIN_MESSAGE_ID") == MSG_ID_0


def test_retry_6_new_message_v47_loses_the_origin_id_unless_delayed() -> None:
    dlq = check_call(retry.send_back_message_v47, record(0), "%DLQ%G", 0, None)
    assert dict(dlq.properties) == {"TAGS": "A", "RETRY_TOPIC": "T", "WAIT": "false"}
    delayed = check_call(retry.send_back_message_v47, record(0), "%RETRY%G", 0, 3)
    assert delayed.get_property("ORIGIN_MESSAGE_ID") == MSG_ID_0
    # an inherited DELAY makes the store re-serialise, so the id survives on the DLQ path too
    inherited = check_call(retry.send_back_message_v47, record(4, 0, DELAY="7"), "%DLQ%G", 0, None)
    assert (inherited.get_property("DELAY"), inherited.get_property("ORIGIN_MESSAGE_ID")) == (
        "7",
        MSG_ID_0,
    )
    kept = check_call(
        retry.send_back_message_v47, record(0, 0, ORIGIN_MESSAGE_ID="ABC"), "%DLQ%G", 0, None
    )
    assert kept.get_property("ORIGIN_MESSAGE_ID") == "ABC"
    # a prepared-transaction record is never rewritten for a delay
    prepared = attrs.evolve(record(0), sys_flag=SYSFLAG_TRANSACTION_PREPARED_TYPE)
    assert (
        check_call(retry.send_back_message_v47, prepared, "%RETRY%G", 0, 3).get_property(
            "ORIGIN_MESSAGE_ID"
        )
        is None
    )


def test_retry_9_delivered_message_keeps_the_stored_properties() -> None:
    scheduled = record(4, 900, DELAY="7", REAL_TOPIC="%RETRY%G", REAL_QID="0", WAIT="false")
    msg = check_call(retry.delivered_message, scheduled)
    assert (msg.topic, msg.queue_id, msg.reconsume_times) == ("%RETRY%G", 0, 4)
    assert dict(msg.properties) == dict(scheduled.properties)
    assert dict(retry.delivery_properties(msg.properties)) == {
        "TAGS": "A",
        "REAL_TOPIC": "%RETRY%G",
        "REAL_QID": "0",
        "WAIT": "false",
    }
    with pytest.raises(InvalidArgumentError):
        retry.delivered_message(record(0, 0, REAL_TOPIC="%RETRY%G"))
    with pytest.raises(InvalidArgumentError):
        retry.delivered_message(record(0, 0, REAL_TOPIC="%RETRY%G", REAL_QID="x"))
    assert retry.due_timestamp(10_000, 5_000, 10_000) == 10_000
    assert retry.due_timestamp(20_000, 5_000, 10_000) == 5_000  # more than one delay ahead


def test_retry_10_timetable() -> None:
    s, m, h = 1_000, 60_000, 3_600_000
    expected = (
        10 * s,
        30 * s,
        m,
        2 * m,
        3 * m,
        4 * m,
        5 * m,
        6 * m,
        7 * m,
        8 * m,
        9 * m,
        10 * m,
        20 * m,
        30 * m,
        h,
        2 * h,
    )
    assert check_call(retry.retry_timetable, 16, LEVELS) == expected
    assert check_call(retry.retry_timetable, 3, LEVELS) == expected[:3]
    assert check_call(retry.retry_timetable, 20, LEVELS)[16:] == (2 * h,) * 4  # clamped to level 18


def test_retry_11_plain_send_to_a_retry_topic() -> None:
    assert check_call(retry.plain_send_target_v49, "T", 2, None, None, None, V497) == SendTarget(
        "T", 2
    )
    missing = check_call(retry.plain_send_target_v49, "%RETRY%G", 0, None, None, 3, V497)
    assert isinstance(missing, SendBackResponse)
    assert missing.code is ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert check_call(retry.plain_send_target_v49, "%RETRY%G", 0, 16, None, 16, V497) == SendTarget(
        "%DLQ%G", 0, RW
    )
    assert check_call(retry.plain_send_target_v49, "%RETRY%G", 0, 16, 3, None, V497) == SendTarget(
        "%RETRY%G", 0
    )
    assert check_call(retry.plain_send_target_v47, "%RETRY%G", 0, 16, 3, 3, V471) == SendTarget(
        "%DLQ%G", 0, PERM_WRITE
    )
    with pytest.raises(NullPointerError):
        retry.plain_send_target_v47("%RETRY%G", 0, 16, None, 3, V471)


def test_request_types_are_checked() -> None:
    with pytest.raises(InvalidTypeError, match="offset"):
        SendBackRequest(offset="0", group="G", delay_level=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="max_reconsume_times"):
        SendBackRequest(offset=0, group="G", delay_level=0, max_reconsume_times=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="unit_mode"):
        SendBackRequest(offset=0, group="G", delay_level=0, unit_mode=1)  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------------

reconsume = st.integers(min_value=0, max_value=40)
levels_header = st.integers(min_value=-3, max_value=40)
maxima = st.integers(min_value=-1, max_value=40)
properties = st.dictionaries(
    st.sampled_from(["KEYS", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "DELAY", "UNIQ_KEY"]),
    st.from_regex(r"[A-Z0-9]{1,6}", fullmatch=True),
)


@given(st.sampled_from(PROFILES), reconsume, properties, st.none() | st.integers(0, 18))
def test_new_message_reconsume_times_is_stored_plus_one(
    profile: Profile, r: int, props: dict[str, str], delay: int | None
) -> None:
    props.pop("DELAY", None)
    msg = check_call(function("RETRY-6", profile), record(r, 0, **props), "%RETRY%G", 0, delay)
    assert msg.reconsume_times == r + 1
    assert msg.get_property("RETRY_TOPIC") == props.get("RETRY_TOPIC", "T")


@given(st.sampled_from(PROFILES), reconsume, maxima, levels_header)
def test_dlq_iff_stored_reconsume_times_reaches_max_or_level_negative(
    profile: Profile, r: int, max_times: int, level: int
) -> None:
    target = check_call(function("RETRY-4", profile), "G", r, max_times, level)
    assert (target is not None) == (r >= max_times or level < 0)
    if target is not None:
        assert (target.topic, target.queue_id) == ("%DLQ%G", 0)


@given(reconsume, maxima, st.integers(0, 40))
def test_non_dlq_level_is_within_the_table_after_clamping(
    r: int, max_times: int, level: int
) -> None:
    if check_call(retry.dead_letter_target_v49, "G", r, max_times, level) is not None:
        return
    chosen = check_call(retry.retry_delay_level, level, r)
    rewrite = check_call(delay_rewrite, "%RETRY%G", 0, (("DELAY", str(chosen)),), 0, len(LEVELS))
    assert rewrite is not None and 1 <= rewrite[3] <= 18 and rewrite[1] == rewrite[3] - 1


@given(st.integers(1, 64), st.integers(-(2**31), 2**31 - 1))
def test_retry_queue_choice_contracts(n: int, random_int: int) -> None:
    check_call(retry.retry_target_v47, "G", n, random_int)
    check_call(retry.retry_target_v49, "G", n, random_int % retry.RANDOM_BOUND)


@given(st.sampled_from(PROFILES), st.none() | maxima, st.integers(0, 40), st.integers(100, 500))
def test_max_reconsume_times_contracts(
    profile: Profile, header: int | None, group_max: int, version: int
) -> None:
    try:
        result = check_call(function("RETRY-3", profile), header, group_max, version)
    except NullPointerError:
        assert profile is Profile.V4_7 and header is None and version >= V3_4_9
    else:
        assert result == (header if version >= V3_4_9 and header is not None else group_max)


@given(st.sampled_from(PROFILES), st.booleans(), reconsume, st.none() | reconsume, maxima)
def test_plain_send_contracts(
    profile: Profile, to_retry: bool, r: int, header_r: int | None, max_times: int
) -> None:
    topic = "%RETRY%G" if to_retry else "T"
    target = check_call(function("RETRY-11", profile), topic, 1, 16, max_times, header_r, V497)
    assert isinstance(target, SendTarget)
    assert (target.topic == "%DLQ%G") == (to_retry and (header_r or 0) >= max_times)


@given(st.integers(-2, 30))
def test_timetable_contracts(max_times: int) -> None:
    check_call(retry.retry_timetable, max_times, LEVELS)
