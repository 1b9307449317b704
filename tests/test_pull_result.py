"""RESULT rules: one example per rule (expected values worked out from the rulebook) and
Hypothesis properties of the result handling."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.consumer_config import ConsumerConfig, MessageModel
from pullspec.spec.contracts import check_call
from pullspec.spec.filter import SubscriptionData, build_subscription_data
from pullspec.spec.message import StoredMessage
from pullspec.spec.offset_store import OffsetUpdate
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_actions import Delay, DelayReason, Immediately
from pullspec.spec.pull_result import (
    JAVA_LONG_MAX,
    OffsetIllegalFixUp,
    PullResult,
    PullResultHandling,
    bug_warning,
    copies_after_on_success_exception,
    correct_tags_offset,
    filter_by_tags,
    fix_up_reaches_storage,
    on_success,
    process_pull_result,
    pull_from_which_node,
    stamp_offsets,
    stores_despite_drop,
    transaction_id,
)
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import PullStatus

CONFIG = ConsumerConfig()
SD_AB = build_subscription_data("T", "A || B")
SD_ALL = build_subscription_data("T", "*")


def msg(offset: int, tags: str | None = None, **props: str) -> StoredMessage:
    properties = dict(props)
    if tags is not None:
        properties["TAGS"] = tags
    return StoredMessage("T", 0, offset, 1000 + offset, 100, 0, b"x", properties)


def found(next_begin: int, *messages: StoredMessage) -> PullResult:
    return PullResult(PullStatus.FOUND, next_begin, 0, 42, messages, 1)


def test_result_1_and_12_null_result() -> None:
    assert on_success(None, 10, SD_ALL, 0, CONFIG) == PullResultHandling(next_offset=10)


def test_result_2_pull_from_which_node_for_every_status() -> None:
    for status in PullStatus:
        result = PullResult(status, 5, 0, 9, None, suggest_which_broker_id=1)
        assert pull_from_which_node(result) == 1
        assert on_success(result, 5, SD_ALL, 0, CONFIG).pull_from_which_node == 1


def test_result_3_client_tag_filter() -> None:
    messages = (msg(1, "A"), msg(2, "C"), msg(3), msg(4, "B"), msg(5, "a"))
    assert filter_by_tags(messages, SD_AB) == (messages[0], messages[3])
    assert filter_by_tags(messages, SD_ALL) == messages
    class_mode = SubscriptionData("T", "A", frozenset({"A"}), class_filter_mode=True)
    assert filter_by_tags(messages, class_mode) == messages
    emptied = process_pull_result(found(6, msg(2, "C")), SD_AB)
    assert emptied.pull_status is PullStatus.FOUND and emptied.msg_found_list == ()


def test_result_4_offset_properties_and_transaction_id() -> None:
    (stamped,) = stamp_offsets((msg(1, "A", KEYS="k"),), 3, 42)
    assert stamped.get_property("MIN_OFFSET") == "3"
    assert stamped.get_property("MAX_OFFSET") == "42"
    assert stamped.get_property("KEYS") == "k" and stamped.tags == "A"
    assert transaction_id(msg(1, TRAN_MSG="TRUE", UNIQ_KEY="u1")) == "u1"
    assert transaction_id(msg(1, TRAN_MSG="false", UNIQ_KEY="u1")) is None
    assert transaction_id(msg(1, UNIQ_KEY="u1")) is None


def test_result_4_stamps_again_a_message_that_has_the_offsets() -> None:
    # putProperty of MIN_OFFSET then MAX_OFFSET: each present name moves to the end, once.
    old = msg(1, "A", MAX_OFFSET="1", KEYS="k", MIN_OFFSET="0")
    (stamped,) = stamp_offsets((old,), 3, 42)
    expected = (("KEYS", "k"), ("TAGS", "A"), ("MIN_OFFSET", "3"), ("MAX_OFFSET", "42"))
    assert expected == stamped.properties


def test_result_5_found_with_messages() -> None:
    h = on_success(found(12, msg(10, "A"), msg(11, "B")), 10, SD_AB, 0, CONFIG)
    assert h.next_offset == 12 and [m.queue_offset for m in h.messages] == [10, 11]
    assert h.reenqueue == Immediately() and not h.correct_tags_offset and not h.bug_warning
    slow = ConsumerConfig(pull_interval=200)
    h = on_success(found(12, msg(10, "A")), 10, SD_AB, 0, slow)
    assert h.reenqueue == Delay(200, DelayReason.PULL_INTERVAL)


def test_result_6_found_emptied_by_filter() -> None:
    slow = ConsumerConfig(pull_interval=200)
    h = on_success(found(12, msg(10, "C"), msg(11, "D")), 10, SD_AB, 0, slow)
    assert h == PullResultHandling(next_offset=12, reenqueue=Immediately(), pull_from_which_node=1)


def test_result_7_bug_warning() -> None:
    assert bug_warning(12, 10, 10) is False
    assert bug_warning(12, 9, 10) is True
    assert bug_warning(9, JAVA_LONG_MAX, 10) is True
    h = on_success(found(8, msg(10, "A")), 10, SD_AB, 0, CONFIG)
    assert h.bug_warning and h.next_offset == 8


def test_result_8_and_9_no_new_and_no_matched() -> None:
    for status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
        result = PullResult(status, 20, 0, 20)
        h = on_success(result, 15, SD_ALL, 0, CONFIG)
        assert h.next_offset == 20 and h.reenqueue == Immediately() and h.correct_tags_offset
        assert h.offset_update == OffsetUpdate(20, increase_only=True)
        cached = on_success(result, 15, SD_ALL, 3, CONFIG)
        assert cached.correct_tags_offset and cached.offset_update is None
    assert correct_tags_offset(0, 7) == OffsetUpdate(7, True)
    assert correct_tags_offset(1, 7) is None


def test_result_10_and_11_offset_illegal() -> None:
    h = on_success(PullResult(PullStatus.OFFSET_ILLEGAL, 5, 5, 90), 200, SD_ALL, 0, CONFIG)
    assert h.next_offset == 5 and h.reenqueue is None and h.drop_process_queue
    assert h.fix_up == OffsetIllegalFixUp(5, 10000, False, True, True)
    assert fix_up_reaches_storage(MessageModel.CLUSTERING) is True
    assert fix_up_reaches_storage(MessageModel.BROADCASTING) is False


def test_result_13_on_exception_both_profiles() -> None:
    flow = MQBrokerError(215, "flow control")
    assert Ruleset.of(Profile.V4_7).on_exception(flow, "T", CONFIG).delay == Delay(
        1000, DelayReason.PULL_EXCEPTION
    )
    h = Ruleset.of(Profile.V4_9).on_exception(flow, "T", CONFIG)
    assert h.delay == Delay(20, DelayReason.BROKER_FLOW_CONTROL) and h.log_warning
    stale = Ruleset.of(Profile.V4_9).on_exception(MQBrokerError(25), "T", CONFIG)
    assert stale.delay == Delay(1000, DelayReason.PULL_EXCEPTION)
    quiet = Ruleset.of(Profile.V4_9).on_exception(MQClientError("timeout"), "%RETRY%G", CONFIG)
    assert quiet.log_warning is False and quiet.delay.ms == 1000


def test_result_14_and_15() -> None:
    assert copies_after_on_success_exception(True) == 2
    assert copies_after_on_success_exception(False) == 1
    assert stores_despite_drop(True) is True


# --- properties ----------------------------------------------------------------------------------

tags = st.sampled_from(["A", "B", "C", "a", "A ", ""]) | st.none()
messages = st.lists(st.tuples(st.integers(0, 10**6), tags), max_size=8).map(
    lambda rows: tuple(msg(o, t) for o, t in rows)
)
subscriptions = st.sampled_from(["*", "A", "A || B", "C||a", "||B"]).map(
    lambda s: build_subscription_data("T", s)
) | st.just(SubscriptionData("T", "A", frozenset({"A"}), class_filter_mode=True))
results = st.builds(
    PullResult,
    st.sampled_from(PullStatus),
    st.integers(-1, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    messages | st.none(),
    st.integers(0, 3),
)


@settings(max_examples=4 * settings().max_examples)
@given(messages, subscriptions)
def test_filter_keeps_an_ordered_subset_of_subscribed_tags(
    batch: tuple[StoredMessage, ...], sd: SubscriptionData
) -> None:
    kept = check_call(filter_by_tags, batch, sd)
    it = iter(batch)
    assert all(any(k is m for m in it) for k in kept)  # a subsequence, order preserved
    if sd.tags_set and not sd.class_filter_mode:
        expected = [m for m in batch if m.tags in sd.tags_set]
        assert list(kept) == expected
    else:
        assert kept == batch


@settings(max_examples=4 * settings().max_examples)
@given(
    results | st.none(),
    st.integers(-1, 10**6),
    subscriptions,
    st.integers(0, 50),
    st.integers(0, 300),
)
def test_on_success_handling(
    result: PullResult | None, prev: int, sd: SubscriptionData, msg_count: int, interval: int
) -> None:
    config = ConsumerConfig(pull_interval=interval)
    h = check_call(on_success, result, prev, sd, msg_count, config)
    if result is None:
        assert h == PullResultHandling(next_offset=prev)
        return
    status = result.pull_status
    assert (h.reenqueue is None) == (status is PullStatus.OFFSET_ILLEGAL)
    assert h.drop_process_queue == (h.fix_up is not None) == (status is PullStatus.OFFSET_ILLEGAL)
    assert h.correct_tags_offset == (status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG))
    assert h.offset_update is None or (h.correct_tags_offset and msg_count == 0)
    if h.messages:
        assert status is PullStatus.FOUND
        assert all(m.get_property("MIN_OFFSET") == str(result.min_offset) for m in h.messages)
    if isinstance(h.reenqueue, Delay):
        assert h.messages and h.reenqueue.ms == interval > 0


@given(st.integers(-5, 300), st.text(max_size=10), st.sampled_from(Profile), st.booleans())
def test_on_exception_short_backoff_only_for_broker_flow_control_in_4_9(
    code: int, topic: str, profile: Profile, broker: bool
) -> None:
    error: Exception = MQBrokerError(code) if broker else MQClientError("x")
    h = Ruleset.of(profile).on_exception(error, topic, CONFIG)
    short = profile is Profile.V4_9 and broker and code == 215
    assert h.delay.ms == (20 if short else 1000)
    assert h.log_warning == (not topic.startswith("%RETRY%"))
