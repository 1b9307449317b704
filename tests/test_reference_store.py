"""ReferenceMessageStore scenarios on tiny files: 1 KiB commit-log files and 4-entry consume-queue
files. Every expected offset is computed by hand from the rulebook (LAYOUT-5: a record with the
single property TAGS of one character is 98 + body bytes in 4.9, 99 + body bytes in 4.7).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import (
    ErrorKind,
    IllegalCapacityError,
    IllegalTopicError,
    InvalidArgumentError,
    InvalidTypeError,
    MessageIllegalError,
)
from pullspec.spec.filter import java_string_hash, tag_filter
from pullspec.spec.message import (
    DEFAULT_BORN_HOST,
    DEFAULT_STORE_HOST,
    BrokerInnerMessage,
    HostAddress,
)
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.results import GetMessageResult
from pullspec.spec.status import BrokerRole, GetMessageStatus, PutMessageStatus

S = GetMessageStatus
V47, V49 = Profile.V4_7, Profile.V4_9
HOUR = 3_600_000
TINY = StoreConfig(mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80)


def body_for(record: int, profile: Profile, tag: str | None = "A") -> bytes:
    """The body that makes a record of `record` bytes on topic "T" (LAYOUT-5, LAYOUT-9)."""
    properties = 0 if tag is None else len("TAGS\x01") + len(tag) + (profile is V47)
    return bytes(record - 91 - 1 - properties)


def put(
    store: ReferenceMessageStore, queue: int, record: int = 200, tag: str | None = "A"
) -> tuple[int, int, int]:
    """Put one message of `record` bytes; return (wroteOffset, queueOffset, wroteBytes)."""
    result = store.put_message(
        BrokerInnerMessage(
            "T", queue, body_for(record, store.profile, tag), {"TAGS": tag} if tag else None
        )
    )
    assert PutMessageStatus.PUT_OK == result.status
    return result.wrote_offset, result.queue_offset, result.wrote_bytes


def new_store(
    profile: Profile = V49, clock: ManualClock | None = None, **config: Any
) -> ReferenceMessageStore:
    return ReferenceMessageStore(
        attrs.evolve(TINY, **config), profile, clock=clock or ManualClock(0)
    )


def snapshot(store: ReferenceMessageStore) -> tuple[int, int, list[tuple[int, int]]]:
    return (
        store.get_min_phy_offset(),
        store.get_max_phy_offset(),
        [
            (store.get_min_offset_in_queue("T", q), store.get_max_offset_in_queue("T", q))
            for q in (0, 1)
        ],
    )


def outcome(result: GetMessageResult) -> tuple[GetMessageStatus, int, list[int]]:
    return result.status, result.next_begin_offset, result.msg_offsets


# --- appends, file rolls and offsets -----------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_wrote_and_queue_offsets_with_the_end_of_file_roll(profile: Profile) -> None:
    store = new_store(profile)
    results = [put(store, queue) for queue in (0, 1, 0, 1, 0, 1, 0)]
    # five 200-byte records fill 1000 bytes; the 6th needs 208 > 24 left: blank, next file
    assert [
        (0, 0, 200),
        (200, 0, 200),
        (400, 1, 200),
        (600, 1, 200),
        (800, 2, 200),
        (1024, 2, 200),
        (1224, 3, 200),
    ] == results
    assert (0, 1424, [(0, 4), (0, 3)]) == snapshot(store)


def test_a_record_that_leaves_exactly_8_bytes_stays_in_the_file() -> None:
    store = new_store()
    assert [(0, 0, 500), (500, 1, 516)] == [put(store, 0, 500), put(store, 0, 516)]
    assert 1016 == store.get_max_phy_offset()
    assert (1024, 2, 100) == put(store, 0, 100)  # 108 > 8: blank of 8 bytes, next file
    assert 1124 == store.get_max_phy_offset()


def test_a_record_one_byte_longer_goes_to_the_next_file() -> None:
    store = new_store()
    assert [(0, 0, 500), (1024, 1, 517)] == [put(store, 0, 500), put(store, 0, 517)]
    assert (0, 1541) == (store.get_min_phy_offset(), store.get_max_phy_offset())


def test_empty_store_offsets() -> None:
    store = new_store()
    assert (-1, 0, [(0, 0), (0, 0)]) == snapshot(store)


def test_window_stops_at_the_consume_queue_file_and_overflow_one_is_caught_up() -> None:
    store = new_store()
    for _ in range(4):
        put(store, 0)
    assert (S.OFFSET_OVERFLOW_ONE, 4, []) == outcome(store.get_message("G", "T", 0, 4, 32))
    assert (800, 4, 200) == put(store, 0)  # index 4 opens consume-queue file 2
    assert (S.FOUND, 4, [0, 1, 2, 3]) == outcome(store.get_message("G", "T", 0, 0, 32))
    assert (S.FOUND, 5, [4]) == outcome(store.get_message("G", "T", 0, 4, 32))
    assert (0, 5) == (store.get_min_offset_in_queue("T", 0), store.get_max_offset_in_queue("T", 0))


def test_prepared_and_rollback_messages_take_no_queue_offset() -> None:
    store = new_store()
    put(store, 0)
    prepared = store.put_message(BrokerInnerMessage("T", 0, b"x", sys_flag=0x4))
    rollback = store.put_message(BrokerInnerMessage("T", 0, b"x", sys_flag=0xC))
    committed = store.put_message(BrokerInnerMessage("T", 0, b"x", sys_flag=0x8))
    assert [(0, 200), (0, 293), (1, 386)] == [
        (r.queue_offset, r.wrote_offset) for r in (prepared, rollback, committed)
    ]
    assert (1, 2) == (prepared.queue_offset + 1, store.get_max_offset_in_queue("T", 0))
    assert [0, 1] == store.get_message("G", "T", 0, 0, 32).msg_offsets


def test_max_msg_nums_zero_returns_at_most_one() -> None:
    store = new_store()
    for _ in range(3):
        put(store, 0)
    assert (S.FOUND, 1, [0]) == outcome(store.get_message("G", "T", 0, 0, 0))


def test_negative_max_msg_nums_per_profile() -> None:
    old, new = new_store(V47), new_store(V49)
    for store in (old, new):
        for _ in range(3):
            put(store, 0)
    assert (S.FOUND, 1, [0]) == outcome(old.get_message("G", "T", 0, 0, -1))
    with pytest.raises(IllegalCapacityError) as info:
        new.get_message("G", "T", 0, 0, -1)
    assert (ErrorKind.INVALID_ARGUMENT, -1) == (info.value.kind, info.value.max_msg_nums)
    assert (S.OFFSET_OVERFLOW_ONE, 3, []) == outcome(new.get_message("G", "T", 0, 3, -1))


# --- expiry ------------------------------------------------------------------------------------


def found_null_store(profile: Profile = V49) -> ReferenceMessageStore:
    """T/0: five records in commit-log file 0; T/1: one record opening file 1. file_reserved_time
    0 expires every file but the last at once."""
    store = new_store(profile, file_reserved_time=0)
    for _ in range(5):
        put(store, 0)
    put(store, 1)
    return store


def test_expiry_deletes_all_but_the_last_file_and_corrects_queues() -> None:
    store = found_null_store()
    assert 1 == store.delete_expired_files()
    # commit-log min 1024. T/0: consume-queue file [0-3] (last phys 600) deleted, [4] is the
    # last file and kept; no entry of it is backed (phys 800), so T/0's min stays 0.
    assert (1024, 1224, [(0, 5), (0, 1)]) == snapshot(store)
    assert store.look_message_by_offset(800) is None
    assert 0 == store.delete_expired_files()  # never the last file


@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_offset_found_null_when_the_consume_queue_file_is_gone(offset: int) -> None:
    store = found_null_store()
    store.delete_expired_files()
    assert (S.OFFSET_FOUND_NULL, 4, []) == outcome(store.get_message("G", "T", 0, offset, 32))
    store.set_role(BrokerRole.SLAVE, False)
    assert (S.OFFSET_FOUND_NULL, offset, []) == outcome(store.get_message("G", "T", 0, offset, 32))
    store.set_role(BrokerRole.SLAVE, True)
    assert (S.OFFSET_FOUND_NULL, 4, []) == outcome(store.get_message("G", "T", 0, offset, 32))


def test_offset_found_null_is_not_an_illegal_capacity_in_4_9() -> None:
    store = found_null_store()
    store.delete_expired_files()
    assert (S.OFFSET_FOUND_NULL, 4, []) == outcome(store.get_message("G", "T", 0, 0, -1))


def test_message_was_removing_on_a_deleted_record() -> None:
    store = found_null_store()
    store.delete_expired_files()
    result = store.get_message("G", "T", 0, 4, 32)
    assert (S.MESSAGE_WAS_REMOVING, 5, [], 0, 5) == (
        *outcome(result),
        result.min_offset,
        result.max_offset,
    )


def skip_store() -> ReferenceMessageStore:
    """Commit-log file 0 (written at time 0) expires, file 1 (written at 2 h) does not.

    T/0: index 0 tag A at phys 0, index 1 tag B at phys 200 (both in file 0).
    T/1: indices 0…2 at 400, 600, 800; index 3 at 1024 (written at 0 h, so file 0's blank is
    written at 0 h too); indices 4…8 at 1224 … 2048 (written at 2 h).
    """
    clock = ManualClock(0)
    store = new_store(clock=clock, file_reserved_time=1)
    put(store, 0, tag="A")
    put(store, 0, tag="B")
    for _ in range(4):
        put(store, 1, tag="C")
    clock.advance(2 * HOUR)
    for _ in range(5):
        put(store, 1, tag="C")
    assert 2248 == store.get_max_phy_offset()
    assert 1 == store.delete_expired_files()
    return store


def test_expiry_respects_file_reserved_time_and_moves_min_off_a_boundary() -> None:
    store = skip_store()
    # commit-log min 1024; T/0 keeps min 0 (no backed entry); T/1's min moves to index 3
    assert (1024, 2248, [(0, 2), (3, 9)]) == snapshot(store)
    assert (S.OFFSET_TOO_SMALL, 3, []) == outcome(store.get_message("G", "T", 1, 2, 32))
    assert (S.FOUND, 4, [3]) == outcome(store.get_message("G", "T", 1, 3, 32))


def test_scan_skips_the_rest_of_a_vanished_commit_log_file() -> None:
    store = skip_store()
    # index 1 (B, phys 200) is missing: MESSAGE_WAS_REMOVING, skip below 1024
    assert (S.MESSAGE_WAS_REMOVING, 2, []) == outcome(store.get_message("G", "T", 0, 1, 32))
    # from index 1 the B entry is filtered first: NO_MATCHED_MESSAGE
    assert (S.NO_MATCHED_MESSAGE, 2, []) == outcome(
        store.get_message("G", "T", 0, 1, 32, tag_filter("T", "A"))
    )


def test_store_21_phys_0_is_read_at_the_first_remaining_file_after_its_file_is_deleted() -> None:
    store = skip_store()
    # index 0 (A, phys 0, 200 bytes) reads the 200 bytes at 1024 — T/1's index 3 — and is
    # FOUND; index 1 (phys 200) is then missing but the status stays FOUND (something returned)
    for message_filter in (None, tag_filter("T", "A")):
        result = store.get_message("G", "T", 0, 0, 32, message_filter)
        assert (S.FOUND, 2, [3]) == outcome(result)
        assert [("T", 1, 1024)] == [
            (m.topic, m.queue_id, m.commitlog_offset) for m in result.messages
        ]
        # the bytes read are observed: served elsewhere than the entry names
        assert (200, [200]) == (result.buffer_total_size, [len(b) for b in result.bodies or ()])


def test_expiry_waits_for_file_reserved_time_and_deletes_in_batches() -> None:
    clock = ManualClock(0)
    store = new_store(clock=clock, file_reserved_time=1, delete_files_batch_max=2)
    for _ in range(26):  # files 0…4 hold 5 records each, file 5 holds index 25
        put(store, 0)
    assert (0, 5320, [(0, 26), (0, 0)]) == snapshot(store)
    clock.jump_to(HOUR - 1)
    assert 0 == store.delete_expired_files()
    clock.jump_to(HOUR)  # non-strict: now >= lastModified + fileReservedTime
    rounds = []
    for _ in range(4):
        deleted = store.delete_expired_files()
        rounds.append((deleted, *snapshot(store)[:2], store.get_min_offset_in_queue("T", 0)))
    # min index: first entry at or above the commit-log min (index k is at (k div 5)·1024 +
    # (k mod 5)·200): 2048 → index 10, 4096 → index 20, 5120 → index 25
    assert [
        (2, 2048, 5320, 10),
        (2, 4096, 5320, 20),
        (1, 5120, 5320, 25),
        (0, 5120, 5320, 25),
    ] == rounds
    assert (S.OFFSET_TOO_SMALL, 25, []) == outcome(store.get_message("G", "T", 0, 0, 32))
    assert (S.FOUND, 26, [25]) == outcome(store.get_message("G", "T", 0, 25, 32))


# --- roles -------------------------------------------------------------------------------------


def test_set_role_slave_corrects_only_with_offset_check_in_slave() -> None:
    store = new_store()
    for _ in range(6):
        put(store, 0)
    probes = [(0, 9), (0, -1), (1, 3), (0, 6)]

    def answers() -> list[tuple[GetMessageStatus, int]]:
        return [
            (r.status, r.next_begin_offset)
            for r in (store.get_message("G", "T", q, o, 32) for q, o in probes)
        ]

    corrected = [
        (S.OFFSET_OVERFLOW_BADLY, 6),
        (S.OFFSET_TOO_SMALL, 0),
        (S.NO_MESSAGE_IN_QUEUE, 0),
        (S.OFFSET_OVERFLOW_ONE, 6),
    ]
    assert corrected == answers()
    store.set_role(BrokerRole.SLAVE, False)
    assert (BrokerRole.SLAVE, False) == (store.broker_role, store.offset_check_in_slave)
    assert [
        (S.OFFSET_OVERFLOW_BADLY, 9),
        (S.OFFSET_TOO_SMALL, -1),
        (S.NO_MESSAGE_IN_QUEUE, 3),
        (S.OFFSET_OVERFLOW_ONE, 6),
    ] == answers()
    # a scan result is never corrected: a slave returns it too
    assert (S.FOUND, 4, [2, 3]) == outcome(store.get_message("G", "T", 0, 2, 32))
    store.set_role(BrokerRole.SLAVE, True)
    assert corrected == answers()
    store.set_role(BrokerRole.ASYNC_MASTER, False)
    assert corrected == answers()


def test_a_slave_refuses_puts_and_stays_unchanged() -> None:
    store = new_store()
    put(store, 0)
    before = snapshot(store)
    store.set_role(BrokerRole.SLAVE, False)
    result = store.put_message(BrokerInnerMessage("T", 0, b"x"))
    assert (PutMessageStatus.SERVICE_NOT_AVAILABLE, before) == (result.status, snapshot(store))


def test_store_4_7_overflow_badly_restarts_from_zero_only_when_min_is_zero() -> None:
    store = new_store(V47, file_reserved_time=0)
    for _ in range(12):
        put(store, 0)
    assert (S.OFFSET_OVERFLOW_BADLY, 0, []) == outcome(store.get_message("G", "T", 0, 20, 32))
    store.delete_expired_files()  # min moves to index 10
    assert (S.OFFSET_OVERFLOW_BADLY, 12, []) == outcome(store.get_message("G", "T", 0, 20, 32))


# --- bad input: typed errors naming the value, store unchanged ---------------------------------


def loaded_store(profile: Profile = V49, **config: Any) -> ReferenceMessageStore:
    store = new_store(profile, **config)
    put(store, 0)
    put(store, 1)
    return store


@pytest.mark.parametrize("topic", ["", "   ", "a b", "T.x", "中", "T" * 128])
def test_bad_input_topic_refused_by_the_validator(topic: str) -> None:
    store = loaded_store()
    before = snapshot(store)
    with pytest.raises(IllegalTopicError) as info:
        store.put_message(BrokerInnerMessage(topic, 0, b"x"))
    assert ("topic", topic, ErrorKind.ILLEGAL_TOPIC) == (
        info.value.name,
        info.value.value,
        info.value.kind,
    )
    assert before == snapshot(store)


def test_bad_input_topic_with_a_trailing_newline_is_refused() -> None:
    store = loaded_store()
    before = snapshot(store)
    with pytest.raises(IllegalTopicError):
        store.put_message(BrokerInnerMessage("T\n", 0, b"x"))
    assert before == snapshot(store)


@pytest.mark.parametrize("body", ["abc", 123, None, [1, 2]])
def test_bad_input_body_that_is_not_bytes(body: object) -> None:
    with pytest.raises(InvalidTypeError) as info:
        BrokerInnerMessage("T", 0, body)
    assert ("body", body, ErrorKind.INVALID_TYPE) == (
        info.value.name,
        info.value.value,
        info.value.kind,
    )
    assert repr(body) in str(info.value)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("offset", ("G", "T", 0, "3", 32)),
        ("offset", ("G", "T", 0, 3.0, 32)),
        ("offset", ("G", "T", 0, True, 32)),
        ("max_msg_nums", ("G", "T", 0, 0, "32")),
        ("queue_id", ("G", "T", None, 0, 32)),
        ("topic", ("G", b"T", 0, 0, 32)),
        ("group", (b"G", "T", 0, 0, 32)),
    ],
)
def test_bad_input_get_message_argument_types(name: str, args: tuple[Any, ...]) -> None:
    store = loaded_store()
    before = snapshot(store)
    value = args[("group", "topic", "queue_id", "offset", "max_msg_nums").index(name)]
    with pytest.raises(InvalidTypeError) as info:
        store.get_message(*args)
    assert (name, value) == (info.value.name, info.value.value)
    assert before == snapshot(store)


def test_bad_input_filter_that_is_not_a_message_filter() -> None:
    store = loaded_store()
    with pytest.raises(InvalidTypeError) as info:
        store.get_message("G", "T", 0, 0, 32, "A")  # type: ignore[arg-type]
    assert ("message_filter", "A") == (info.value.name, info.value.value)


@pytest.mark.parametrize(
    ("profile", "body", "accepted", "record"),
    [
        (V47, 908, True, 1000),  # 4.7: the record (92 + body) may be maxMessageSize
        (V47, 909, False, 1001),
        (V49, 1000, True, 1092),  # 4.9: the body may be maxMessageSize
        (V49, 1001, False, 1093),
    ],
)
def test_bad_input_message_size_per_profile(
    profile: Profile, body: int, accepted: bool, record: int
) -> None:
    store = loaded_store(profile, max_message_size=1000, mapped_file_size_commit_log=4096)
    before = snapshot(store)
    msg = BrokerInnerMessage("T", 0, bytes(body))
    if accepted:
        assert (PutMessageStatus.PUT_OK, record) == (
            store.put_message(msg).status,
            store.get_max_phy_offset() - before[1],
        )
        return
    with pytest.raises(MessageIllegalError) as info:
        store.put_message(msg)
    assert ("MESSAGE_ILLEGAL", ErrorKind.MESSAGE_ILLEGAL) == (info.value.status, info.value.kind)
    assert f"{record}-byte record" in str(info.value)
    assert before == snapshot(store)


@pytest.mark.parametrize(
    ("profile", "status"), [(V47, "MESSAGE_ILLEGAL"), (V49, "PROPERTIES_SIZE_EXCEEDED")]
)
def test_bad_input_properties_over_32767_bytes(profile: Profile, status: str) -> None:
    store = loaded_store(profile, mapped_file_size_commit_log=1 << 20)
    before = snapshot(store)
    with pytest.raises(MessageIllegalError) as info:
        store.put_message(BrokerInnerMessage("T", 0, b"x", {"KEYS": "中" * 11_000}))
    assert status == info.value.status
    assert before == snapshot(store)


@pytest.mark.parametrize("msg", ["T", {"topic": "T", "queue_id": 0, "body": b"x"}, None, 7])
def test_bad_input_not_a_broker_inner_message(msg: object) -> None:
    store = loaded_store()
    before = snapshot(store)
    with pytest.raises(InvalidTypeError) as info:
        store.put_message(msg)  # type: ignore[arg-type]
    assert ("msg", msg) == (info.value.name, info.value.value)
    assert before == snapshot(store)


def test_bad_input_put_messages_validates_every_message_first() -> None:
    store = loaded_store()
    before = snapshot(store)
    good = BrokerInnerMessage("T", 0, b"x")
    with pytest.raises(InvalidTypeError) as info:
        store.put_messages(good)  # type: ignore[arg-type]
    assert "msgs" == info.value.name
    with pytest.raises(InvalidTypeError):
        store.put_messages([good, "bad"])  # type: ignore[list-item]
    with pytest.raises(IllegalTopicError):
        store.put_messages([good, BrokerInnerMessage("a b", 0, b"x")])
    assert before == snapshot(store)


def test_bad_input_set_role() -> None:
    store = loaded_store()
    with pytest.raises(InvalidTypeError) as info:
        store.set_role("SLAVE", False)  # type: ignore[arg-type]
    assert ("broker_role", "SLAVE") == (info.value.name, info.value.value)
    with pytest.raises(InvalidTypeError):
        store.set_role(BrokerRole.SLAVE, 0)  # type: ignore[arg-type]
    assert (BrokerRole.ASYNC_MASTER, False) == (store.broker_role, store.offset_check_in_slave)


def test_a_record_longer_than_a_file_is_refused_and_never_spans_files() -> None:
    store = new_store()
    put(store, 0, 300)
    before = (store.get_max_phy_offset(), store.get_max_offset_in_queue("T", 0))
    with pytest.raises(MessageIllegalError):
        put(store, 0, 1900)
    assert before == (store.get_max_phy_offset(), store.get_max_offset_in_queue("T", 0))
    writes = [put(store, 0, 100), put(store, 0, 100)]
    assert [] == [w for w, _, n in writes if w // 1024 != (w + n - 1) // 1024]


# --- stateful: random puts, gets, expiry and role switches keep the invariants -----------------

TAGS = (None, "A", "B", "C")
#: subscription expression → accepted tags (None = every message, untagged included)
SUBSCRIPTIONS: dict[str | None, set[str] | None] = {
    None: None,
    "*": None,
    "A": {"A"},
    "A || C": {"A", "C"},
    "B": {"B"},
    "Z": set(),
}


@attrs.define
class Shadow:
    """What the test itself recorded about a put."""

    queue_offset: int
    phys: int
    size: int
    tag: str | None


class StoreMachine(RuleBasedStateMachine):
    """Random puts/gets/expiry/role switches over a tiny-file reference store."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(0)
        self.store = new_store()
        self.shadow: dict[int, list[Shadow]] = {0: [], 1: []}
        self.max_phy = 0
        self.min_phy = -1

    @initialize(profile=st.sampled_from(ALL_PROFILES))
    def start(self, profile: Profile) -> None:
        self.store = new_store(profile, self.clock, file_reserved_time=1, delete_files_batch_max=2)

    @rule(
        msgs=st.lists(
            st.tuples(st.sampled_from([0, 1]), st.integers(0, 400), st.sampled_from(TAGS)),
            min_size=1,
            max_size=8,
        )
    )
    def put(self, msgs: list[tuple[int, int, str | None]]) -> None:
        for queue, body, tag in msgs:
            msg = BrokerInnerMessage("T", queue, bytes(body), {"TAGS": tag} if tag else None)
            head = self.store.get_max_phy_offset()
            result = self.store.put_message(msg)
            if self.store.broker_role is BrokerRole.SLAVE:
                assert PutMessageStatus.SERVICE_NOT_AVAILABLE == result.status
                continue
            assert (PutMessageStatus.PUT_OK, len(self.shadow[queue])) == (
                result.status,
                result.queue_offset,
            )
            assert head <= result.wrote_offset  # appended after everything written before
            assert result.wrote_offset + result.wrote_bytes == self.store.get_max_phy_offset()
            self.shadow[queue].append(
                Shadow(result.queue_offset, result.wrote_offset, result.wrote_bytes, tag)
            )

    @rule(
        queue=st.sampled_from([0, 1]),
        delta=st.integers(-3, 3),
        base=st.sampled_from(["min", "max", "inside"]),
        max_msg_nums=st.sampled_from([-2, -1, 0, 1]) | st.integers(2, 40),
        sub=st.sampled_from(list(SUBSCRIPTIONS)),
    )
    def get(self, queue: int, delta: int, base: str, max_msg_nums: int, sub: str | None) -> None:
        min_offset = self.store.get_min_offset_in_queue("T", queue)
        max_offset = self.store.get_max_offset_in_queue("T", queue)
        if base == "inside":
            offset = min_offset + abs(delta) * (max_offset - min_offset) // 4
        else:
            offset = (max_offset if base == "max" else min_offset) + delta
        window_exists_possible = max_offset != 0 and min_offset <= offset < max_offset
        try:
            result = self.store.get_message(
                "G", "T", queue, offset, max_msg_nums, tag_filter("T", sub)
            )
        except IllegalCapacityError:
            event("IllegalCapacityError")
            assert (V49, True) == (self.store.profile, max_msg_nums < 0 and window_exists_possible)
            return
        event(result.status.value)
        assert (min_offset, max_offset) == (result.min_offset, result.max_offset)
        scan = result.status in (S.FOUND, S.NO_MATCHED_MESSAGE, S.MESSAGE_WAS_REMOVING)
        assert (result.status is S.FOUND) == bool(result.messages)
        if not scan:
            assert [] == result.msg_offsets
            assert (result.status is S.OFFSET_FOUND_NULL) <= window_exists_possible
            return
        assert window_exists_possible
        assert not (self.store.profile is V49 and max_msg_nums < 0)
        nxt = result.next_begin_offset
        file_end = (offset // 4 + 1) * 4  # 4-entry consume-queue files
        assert offset < nxt <= min(max_offset, file_end)
        assert len(result.messages) <= min(max(max_msg_nums, 1), 32)
        accepted = SUBSCRIPTIONS[sub]
        commit_log_min = self.store.get_min_phy_offset()
        max_phy = self.store.get_max_phy_offset()
        first_file_end = commit_log_min + TINY.mapped_file_size_commit_log
        readable = min(first_file_end, max_phy) - commit_log_min

        def read(s: Shadow) -> bool:
            # STORE-21: phys 0 of a deleted file is read at the first remaining file's start
            served_elsewhere = s.phys == 0 < commit_log_min and s.size <= readable
            return s.phys >= commit_log_min or served_elsewhere

        returned = [
            s
            for s in self.shadow[queue][offset:nxt]
            if read(s) and (accepted is None or s.tag in accepted)
        ]
        assert [max(s.phys, commit_log_min) for s in returned] == [
            m.commitlog_offset for m in result.messages
        ]
        assert sum(s.size for s in returned) == result.buffer_total_size
        if all(s.phys >= commit_log_min for s in returned):
            assert [s.queue_offset for s in returned] == result.msg_offsets
        else:  # the bytes read are observed; they begin with the first remaining file's record
            event("read at 0 served by the first remaining file")
            first = [s for q in self.shadow.values() for s in q if s.phys == commit_log_min]
            assert result.bodies is not None
            assert [first[0].queue_offset] == result.msg_offsets[:1]
        if not result.messages:
            assert min(max_offset, file_end) == nxt  # a scan without a message runs to the end
        codes = {java_string_hash(t) for t in accepted} if accepted is not None else None
        assert codes is None or all(m.tags_code in codes for m in result.messages)

    @rule(hours=st.integers(0, 3))
    def expire(self, hours: int) -> None:
        self.clock.advance(hours * HOUR)
        before = self.store.get_max_phy_offset()
        deleted = self.store.delete_expired_files()
        event(f"deleted {deleted}")
        assert 0 <= deleted <= 2
        assert before == self.store.get_max_phy_offset()

    @rule(role=st.sampled_from(list(BrokerRole)), check=st.booleans())
    def switch_role(self, role: BrokerRole, check: bool) -> None:
        self.store.set_role(role, check)
        assert (role, check) == (self.store.broker_role, self.store.offset_check_in_slave)

    @invariant()
    def offsets_are_consistent(self) -> None:
        max_phy, min_phy = self.store.get_max_phy_offset(), self.store.get_min_phy_offset()
        assert max_phy >= self.max_phy  # the commit-log max only grows
        assert min_phy >= self.min_phy
        assert min_phy == -1 or min_phy % 1024 == 0
        self.max_phy, self.min_phy = max_phy, min_phy
        for queue in (0, 1):
            low = self.store.get_min_offset_in_queue("T", queue)
            high = self.store.get_max_offset_in_queue("T", queue)
            assert 0 <= low <= high == len(self.shadow[queue])


StoreMachine.TestCase.settings = settings(
    max_examples=max(10, settings().max_examples // 2), stateful_step_count=40
)
test_reference_store_state_machine = StoreMachine.TestCase


IPV6_HOST = HostAddress(bytes(range(16)), 1234)


@pytest.mark.parametrize(
    ("born_host", "store_host", "sys_flag", "length"),
    [
        (IPV6_HOST, DEFAULT_STORE_HOST, 0x10, 105),
        (DEFAULT_BORN_HOST, IPV6_HOST, 0x20, 105),
        (IPV6_HOST, IPV6_HOST, 0x30, 117),
        (DEFAULT_BORN_HOST, DEFAULT_STORE_HOST, 0, 93),
    ],
)
def test_put_sets_the_ipv6_bit_of_each_ipv6_host(
    born_host: HostAddress, store_host: HostAddress, sys_flag: int, length: int
) -> None:
    # CommitLog.putMessage / asyncPutMessage set BORNHOST_V6 / STOREHOSTADDRESS_V6 from the
    # addresses before computing the record's length; a producer never has to.
    store = ReferenceMessageStore(clock=ManualClock(0))
    msg = BrokerInnerMessage(
        topic="T", queue_id=0, body=b"x", born_host=born_host, store_host=store_host
    )
    result = store.put_message(msg)
    record = store.look_message_by_offset(result.wrote_offset)
    assert record is not None
    assert (length, sys_flag) == (result.wrote_bytes, record.sys_flag)


def test_a_flag_claiming_an_ipv6_host_for_an_ipv4_one_is_refused_before_any_change() -> None:
    # RocketMQ never clears the bits, so such a record would be unreadable (spec.record).
    store = ReferenceMessageStore(clock=ManualClock(0))
    with pytest.raises(InvalidArgumentError):
        store.put_messages(
            [
                BrokerInnerMessage(topic="T", queue_id=0, body=b"x"),
                BrokerInnerMessage(topic="T", queue_id=0, body=b"x", sys_flag=0x10),
            ]
        )
    assert (0, 0) == (store.get_max_phy_offset(), store.get_max_offset_in_queue("T", 0))
