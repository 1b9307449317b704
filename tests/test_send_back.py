"""ReferenceSendBack and ReferenceScheduleService on the fake clock: the full retry timetable to
the DLQ, the 4.7 profile differences, bad input, and every recorded send_back vector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pullspec.reference.factories
from pullspec.conformance.adapters import send_back as adapter
from pullspec.conformance.vectors import Verdict, load_cases, run_case
from pullspec.reference.send_back import ReferenceSendBack
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import (
    PERM_READ,
    PERM_WRITE,
    StoreConfig,
    SubscriptionGroupConfig,
    TopicConfig,
)
from pullspec.spec.errors import IllegalTopicError, InvalidTypeError, NullPointerError
from pullspec.spec.message import BrokerInnerMessage, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.retry import SendBackRequest, SendBackResponse, retry_timetable
from pullspec.spec.status import BrokerRole, ResponseCode

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"
VERSIONS = {"rocketmq-4.7.1": Profile.V4_7, "rocketmq-4.9.7": Profile.V4_9}
T0 = 1_000_000
S, M, H = 1_000, 60_000, 3_600_000
#: RETRY-10: the delays of send-backs 1 … 16 with delayLevel 0 (levels 3 … 18).
TIMETABLE = (
    10 * S,
    30 * S,
    M,
    2 * M,
    3 * M,
    4 * M,
    5 * M,
    6 * M,
    7 * M,
    8 * M,
    9 * M,
    10 * M,
    20 * M,
    30 * M,
    H,
    2 * H,
)
RW = PERM_READ | PERM_WRITE
OK = SendBackResponse(ResponseCode.SUCCESS)


def make(
    profile: Profile, group: SubscriptionGroupConfig | None = None, **kwargs: Any
) -> tuple[ReferenceSendBack, ManualClock]:
    """A send-back processor over a fresh store, clock at T0; kwargs replace its settings."""
    clock = ManualClock(T0)
    sb = pullspec.reference.factories.send_back(
        StoreConfig(), group or SubscriptionGroupConfig(group_name="G"), profile, clock
    )
    assert isinstance(sb, ReferenceSendBack)
    return attrs.evolve(sb, **kwargs) if kwargs else sb, clock


def original(sb: ReferenceSendBack, reconsume_times: int = 0, **props: str) -> StoredMessage:
    """Put a message of topic T tagged A and return its stored record."""
    msg = BrokerInnerMessage(
        topic="T",
        queue_id=0,
        body=b"x" * 16,
        properties={"TAGS": "A", **props},
        reconsume_times=reconsume_times,
    )
    result = sb.store.put_message(msg)
    stored = sb.store.look_message_by_offset(result.wrote_offset)
    assert stored is not None
    return stored


def request(
    offset: int, max_times: int | None = 16, delay_level: int = 0, group: str = "G"
) -> SendBackRequest:
    """A send-back header as a concurrent consumer sends it."""
    return SendBackRequest(
        offset=offset, group=group, delay_level=delay_level, max_reconsume_times=max_times
    )


def read_back(sb: ReferenceSendBack, topic: str, offset: int) -> StoredMessage:
    """The record at `offset` of queue 0 of `topic`."""
    result = sb.store.get_message("G", topic, 0, offset, 1)
    assert len(result.messages) == 1, result
    return result.messages[0]


# --- the retry timetable end to end (RETRY-1 … RETRY-10) -------------------------------------


@pytest.mark.parametrize("profile", [Profile.V4_7, Profile.V4_9])
def test_sixteen_failures_follow_the_timetable(profile: Profile) -> None:
    sb, clock = make(profile)
    first = original(sb)
    current, deliveries = first, []
    for k, delay in enumerate(TIMETABLE):
        sent_at = clock.now_ms()
        assert sb.send_back(request(current.commitlog_offset)) == OK
        parked = sb.last_stored
        assert parked is not None
        level = min(3 + k, 18)
        assert (parked.topic, parked.queue_id, parked.reconsume_times) == (
            "SCHEDULE_TOPIC_XXXX",
            level - 1,
            k + 1,
        )
        assert (parked.get_property("DELAY"), parked.get_property("REAL_TOPIC")) == (
            str(level),
            "%RETRY%G",
        )
        assert parked.get_property("ORIGIN_MESSAGE_ID") == first.msg_id
        clock.advance(delay - 1)
        assert sb.schedule.deliver_due() == 0
        clock.advance(1)
        assert sb.schedule.deliver_due() == 1
        current = read_back(sb, "%RETRY%G", k)
        deliveries.append(current.store_timestamp - sent_at)
        assert (current.topic, current.queue_id, current.reconsume_times) == ("%RETRY%G", 0, k + 1)
        assert current.store_timestamp == clock.now_ms()
        assert (current.get_property("RETRY_TOPIC"), current.get_property("REAL_QID")) == ("T", "0")
        assert current.get_property("ORIGIN_MESSAGE_ID") == first.msg_id
    assert tuple(deliveries) == TIMETABLE == retry_timetable(16, sb.schedule.levels)
    assert clock.now_ms() - T0 == sum(TIMETABLE)
    assert sb.topic_config("%RETRY%G") == TopicConfig(
        topic_name="%RETRY%G", read_queue_nums=1, write_queue_nums=1
    )
    assert sb.topic_config("%DLQ%G") is None


def run_to_last_retry(profile: Profile) -> tuple[ReferenceSendBack, ManualClock, StoredMessage]:
    """Fail a message 16 times; answer the 16th redelivery (reconsumeTimes 16)."""
    sb, clock = make(profile)
    current = original(sb)
    for k, delay in enumerate(TIMETABLE):
        assert sb.send_back(request(current.commitlog_offset)) == OK
        clock.advance(delay)
        assert sb.schedule.deliver_due() == 1
        current = read_back(sb, "%RETRY%G", k)
    return sb, clock, current


def test_seventeenth_send_back_goes_straight_to_the_dlq_v49() -> None:
    sb, clock, current = run_to_last_retry(Profile.V4_9)
    assert current.reconsume_times == 16
    assert sb.send_back(request(current.commitlog_offset)) == OK
    dead = sb.last_stored
    assert dead is not None
    assert (dead.topic, dead.queue_id, dead.reconsume_times, dead.get_property("DELAY")) == (
        "%DLQ%G",
        0,
        17,
        "0",
    )
    assert dead.store_timestamp == clock.now_ms() == T0 + sum(TIMETABLE)
    assert read_back(sb, "%DLQ%G", 0) == dead
    assert sb.topic_config("%DLQ%G") == TopicConfig(
        topic_name="%DLQ%G", read_queue_nums=1, write_queue_nums=1, perm=RW
    )
    clock.advance(2 * H)
    assert sb.schedule.deliver_due() == 0


def test_next_due_at_is_the_earliest_undelivered_schedule_message() -> None:
    sb, clock = make(Profile.V4_9)
    assert sb.schedule.next_due_at() is None
    # Parked at level 5 (1 min) at T0, then at level 3 (10 s) 5 s later.
    assert sb.send_back(request(original(sb).commitlog_offset, delay_level=5)) == OK
    clock.advance(5 * S)
    assert sb.send_back(request(original(sb).commitlog_offset)) == OK
    assert T0 + 15 * S == sb.schedule.next_due_at()
    clock.advance(10 * S)
    assert sb.schedule.deliver_due() == 1
    assert T0 + M == sb.schedule.next_due_at()  # level 3 is past its only entry now
    clock.advance(M)
    assert sb.schedule.deliver_due() == 1
    assert sb.schedule.next_due_at() is None


def test_seventeenth_send_back_detours_through_the_schedule_topic_v47() -> None:
    sb, _clock, current = run_to_last_retry(Profile.V4_7)
    assert current.get_property("DELAY") == "18"  # RETRY-9: the stored record keeps DELAY
    assert sb.send_back(request(current.commitlog_offset)) == OK
    parked = sb.last_stored
    assert parked is not None and (parked.topic, parked.get_property("REAL_TOPIC")) == (
        "SCHEDULE_TOPIC_XXXX",
        "%DLQ%G",
    )


# --- 4.7 profile differences (RETRY-3, RETRY-4, RETRY-6) -------------------------------------


def test_absent_max_reconsume_times_fails_in_47_and_falls_back_in_49() -> None:
    sb, _ = make(Profile.V4_7)
    first = original(sb)
    head = sb.store.get_max_phy_offset()
    with pytest.raises(NullPointerError):
        sb.send_back(request(first.commitlog_offset, max_times=None))
    assert (sb.topics, sb.last_stored, sb.store.get_max_phy_offset()) == ({}, None, head)
    group = SubscriptionGroupConfig(group_name="G", retry_max_times=0)
    sb49, _ = make(Profile.V4_9, group)
    assert sb49.send_back(request(original(sb49).commitlog_offset, max_times=None)) == OK
    assert sb49.last_stored is not None and sb49.last_stored.topic == "%DLQ%G"
    # a request older than V3_4_9 ignores the header in both profiles
    assert sb.send_back(request(first.commitlog_offset, max_times=None), request_version=120) == OK


@pytest.mark.parametrize(
    ("profile", "perm", "props"),
    [
        (Profile.V4_7, PERM_WRITE, {"TAGS": "A", "RETRY_TOPIC": "T", "WAIT": "false"}),
        (
            Profile.V4_9,
            RW,
            {
                "TAGS": "A",
                "RETRY_TOPIC": "T",
                "WAIT": "false",
                "DELAY": "0",
                "ORIGIN_MESSAGE_ID": "",
            },
        ),
    ],
)
def test_dlq_permission_delay_and_origin_id(
    profile: Profile, perm: int, props: dict[str, str]
) -> None:
    sb, _ = make(profile)
    first = original(sb)
    assert sb.send_back(request(first.commitlog_offset, delay_level=-1)) == OK
    dead = sb.last_stored
    assert dead is not None and (dead.topic, dead.queue_id, dead.reconsume_times) == (
        "%DLQ%G",
        0,
        1,
    )
    expected = {k: (first.msg_id if k == "ORIGIN_MESSAGE_ID" else v) for k, v in props.items()}
    assert dict(dead.properties) == expected
    config = sb.topic_config("%DLQ%G")
    assert config is not None and config.perm == perm
    assert sb.topic_config("%RETRY%G") is not None  # created before the DLQ decision


@pytest.mark.parametrize("profile", [Profile.V4_7, Profile.V4_9])
def test_inherited_delay_on_the_dlq_path(profile: Profile) -> None:
    sb, clock = make(profile)
    # A record that carries DELAY=2, as a redelivered retry record does (RETRY-9).
    carrier = original(sb, 5, DELAY="2", RETRY_TOPIC="T")
    assert sb.send_back(request(carrier.commitlog_offset, max_times=3)) == OK
    stored = sb.last_stored
    assert stored is not None and stored.reconsume_times == 6
    if profile is Profile.V4_9:
        assert (stored.topic, stored.get_property("DELAY")) == ("%DLQ%G", "0")
        return
    # 4.7 keeps DELAY=2: parked in the schedule topic, in the DLQ 5 s later (RETRY-4, V3)
    assert (stored.topic, stored.queue_id, stored.get_property("REAL_TOPIC")) == (
        "SCHEDULE_TOPIC_XXXX",
        1,
        "%DLQ%G",
    )
    assert stored.get_property("ORIGIN_MESSAGE_ID") == carrier.msg_id
    assert sb.schedule.deliver_due() == 0
    clock.advance(5 * S)
    assert sb.schedule.deliver_due() == 2  # the carrier itself was parked at level 2 too
    assert read_back(sb, "%DLQ%G", 0).reconsume_times == 6


# --- other answers (RETRY-1) ------------------------------------------------------------------


def test_checks_before_the_store() -> None:
    sb, _ = make(Profile.V4_9, broker_permission=PERM_READ)
    offset = original(sb).commitlog_offset
    assert sb.send_back(request(offset)).code is ResponseCode.NO_PERMISSION
    sb, _ = make(Profile.V4_9, SubscriptionGroupConfig(group_name="G", retry_queue_nums=0))
    assert sb.send_back(request(original(sb).commitlog_offset)) == OK
    assert (sb.last_stored, sb.topics) == (None, {})
    locked = TopicConfig(topic_name="%RETRY%G", perm=PERM_READ)
    sb, _ = make(Profile.V4_9, topics={"%RETRY%G": locked})
    answer = sb.send_back(request(original(sb).commitlog_offset))
    assert answer == SendBackResponse(
        ResponseCode.NO_PERMISSION, "the topic[%RETRY%G] sending message is forbidden"
    )
    assert sb.topic_config("%RETRY%G") is locked
    sb, _ = make(Profile.V4_9)
    assert sb.send_back(request(999)) == SendBackResponse(
        ResponseCode.SYSTEM_ERROR, "look message by offset failed, 999"
    )
    assert sb.topic_config("%RETRY%G") is not None and sb.last_stored is None


def test_groups_are_auto_created_unless_disabled() -> None:
    sb, _ = make(Profile.V4_9)
    assert sb.send_back(request(original(sb).commitlog_offset, group="H")) == OK
    assert sb.groups["H"] == SubscriptionGroupConfig(group_name="H")
    sb, _ = make(Profile.V4_9, auto_create_subscription_group=False)
    answer = sb.send_back(request(original(sb).commitlog_offset, group="H"))
    assert answer.code is ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "H" not in sb.groups


def test_slave_store_answers_system_error_and_does_not_deliver() -> None:
    sb, clock = make(Profile.V4_9)
    offset = original(sb).commitlog_offset
    assert sb.send_back(request(offset)) == OK
    sb.store.set_role(BrokerRole.SLAVE, False)
    assert sb.send_back(request(offset)) == SendBackResponse(
        ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE"
    )
    clock.advance(H)
    assert sb.schedule.deliver_due() == 0
    sb.store.set_role(BrokerRole.ASYNC_MASTER, False)
    assert sb.schedule.deliver_due() == 1


@pytest.mark.parametrize(("profile", "after"), [(Profile.V4_7, 2), (Profile.V4_9, 0)])
def test_schedule_entry_without_real_topic(profile: Profile, after: int) -> None:
    sb, clock = make(profile)
    # Stored directly in level 1's queue with no DELAY: no REAL_TOPIC, tags code 65 ("A"), due.
    sb.store.put_message(BrokerInnerMessage(topic="SCHEDULE_TOPIC_XXXX", queue_id=0, body=b"x"))
    assert sb.send_back(request(original(sb).commitlog_offset, delay_level=1)) == OK
    clock.advance(S)
    # 4.7 drops the broken entry and delivers the next; 4.9.7 retries it and stays blocked.
    assert sb.schedule.deliver_due() == after // 2
    assert sb.schedule.offset(1) == after


def test_bad_input_raises_and_changes_nothing() -> None:
    sb, _ = make(Profile.V4_9)
    original(sb)
    with pytest.raises(InvalidTypeError, match="request"):
        sb.send_back({"offset": 0})  # type: ignore[arg-type]
    with pytest.raises(IllegalTopicError, match="group"):
        sb.send_back(request(0, group="bad group"))
    with pytest.raises(InvalidTypeError, match="request_version"):
        sb.send_back(request(0), request_version="V4_9_7")  # type: ignore[arg-type]
    assert (sb.topics, sb.last_stored, list(sb.groups)) == ({}, None, ["G"])
    with pytest.raises(InvalidTypeError, match="group_config"):
        ReferenceSendBack(sb.store, "G", Profile.V4_9, ManualClock(0))  # type: ignore[arg-type]


@settings(max_examples=60)
@given(
    st.sampled_from([Profile.V4_7, Profile.V4_9]),
    st.integers(0, 25),
    st.integers(-1, 20),
    st.integers(-2, 25),
)
def test_reference_send_back_properties(
    profile: Profile, r: int, max_times: int, level: int
) -> None:
    sb, _ = make(profile)
    first = original(sb, r)
    assert sb.send_back(request(first.commitlog_offset, max_times, level)) == OK
    stored = sb.last_stored
    assert stored is not None and stored.reconsume_times == r + 1
    assert (stored.topic == "%DLQ%G") == (r >= max_times or level < 0)
    if stored.topic != "%DLQ%G":
        assert stored.topic == "SCHEDULE_TOPIC_XXXX"
        assert 1 <= int(stored.get_property("DELAY") or 0) <= 18 == len(sb.schedule.levels)


# --- LAYOUT-13 and STORE-22 through a send-back ------------------------------------------------


@pytest.mark.parametrize("profile", [Profile.V4_7, Profile.V4_9])
def test_layout_13_a_send_back_copies_a_message_stored_with_an_empty_tag_without_one(
    profile: Profile,
) -> None:
    sb, _ = make(profile)
    stored = original(sb, TAGS="", KEYS="k")  # the empty TAGS overrides "A"
    assert (None, {"KEYS": "k"}) == (stored.tags, dict(stored.properties))
    assert OK == sb.send_back(request(stored.commitlog_offset, delay_level=-1))
    copy = sb.last_stored
    assert copy is not None and "%DLQ%G" == copy.topic
    assert (None, "k") == (copy.tags, copy.get_property("KEYS"))


@pytest.mark.parametrize("profile", [Profile.V4_7, Profile.V4_9])
def test_store_22_a_send_back_of_an_offset_inside_a_record_is_a_system_error(
    profile: Profile,
) -> None:
    sb, _ = make(profile)
    stored = original(sb)
    for offset in (stored.commitlog_offset + 1, stored.commitlog_offset + 4, stored.size):
        assert SendBackResponse(
            ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}"
        ) == sb.send_back(request(offset))
        assert sb.last_stored is None


# --- the recorded vectors ---------------------------------------------------------------------


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_every_send_back_vector_passes(version: str) -> None:
    folder = VECTORS / version
    if not (folder / "send_back.jsonl").exists():
        pytest.fail(f"shared vectors missing: {folder / 'send_back.jsonl'}", pytrace=False)
    cases = list(load_cases(folder, ["send_back"]))
    assert len(cases) == 315
    results = [
        run_case(pullspec.reference.factories, case, VERSIONS[version], folder) for case in cases
    ]
    failed = [r.to_json() for r in results if r.verdict is not Verdict.PASS]
    assert failed == []
    # The runner skips keys absent from `expect`, so a property the version does not store would
    # pass unnoticed; every observation must also equal its expectation exactly.
    for case in cases:
        instance = adapter.create(
            pullspec.reference.factories, case["config"], VERSIONS[version], folder
        )
        for step in case["steps"]:
            assert adapter.apply(instance, step["op"], step["args"]) == step["expect"], case["id"]
