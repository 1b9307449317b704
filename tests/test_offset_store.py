"""OFFSET and REBAL-17 rules and the reference offset stores: one example per rule (expected values
worked out from the rulebook) and Hypothesis properties."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.reference.offset_store import (
    ReferenceLocalFileOffsetStore,
    ReferenceRemoteOffsetStore,
    decode_offset_table,
    encode_offset_table,
)
from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.client_errors import MQBrokerError, MQClientError
from pullspec.spec.consumer_config import ConsumeFromWhere, MessageModel, ReadOffsetType
from pullspec.spec.contracts import check_call
from pullspec.spec.errors import InvalidTypeError
from pullspec.spec.message import MessageQueue
from pullspec.spec.offset_store import (
    LocalNoOp,
    OffsetStore,
    OffsetStoreKind,
    OffsetWriter,
    PersistStep,
    increase_only_for,
    local_no_ops,
    local_offset_store_path,
    local_persist_steps,
    memory_after_rebalance_read,
    offset_broker_address_v47,
    offset_broker_address_v49,
    offset_store_kind,
    persist_consumer_offset_targets,
    read_local_offset,
    read_offset_from_memory,
    remote_persist_all_plan,
    remote_store_read_result,
    updated_offset,
)
from pullspec.spec.profiles import Profile
from pullspec.spec.pull_from_where import (
    compute_pull_from_where,
    compute_pull_from_where_with_exception,
)
from pullspec.spec.ruleset import Ruleset

MEM = ReadOffsetType.READ_FROM_MEMORY
STORE = ReadOffsetType.READ_FROM_STORE
FIRST = ReadOffsetType.MEMORY_FIRST_THEN_STORE
Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)
R0 = MessageQueue("%RETRY%G", "broker-a", 0)


class FakeBroker:
    """A broker offset source: stored offsets, plus an exception to raise on the next query."""

    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}
        self.fail: Exception | None = None
        self.sent: list[tuple[MessageQueue, int, bool]] = []

    def query_offset(self, mq: MessageQueue) -> int:
        if self.fail is not None:
            raise self.fail
        if mq not in self.offsets:
            raise MQBrokerError(22, "QUERY_NOT_FOUND")
        return self.offsets[mq]

    def update_offset(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append((mq, offset, oneway))
        self.offsets[mq] = offset


class FakeAdmin:
    """MQAdminImpl's maxOffset / searchOffset, optionally failing."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def max_offset(self, mq: MessageQueue) -> int:
        if self.fail:
            raise MQClientError("maxOffset failed")
        return 500

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        if self.fail:
            raise MQClientError("searchOffset failed")
        return 300


# --- rules --------------------------------------------------------------------------------------


def test_offset_1_which_store() -> None:
    assert offset_store_kind(MessageModel.BROADCASTING, False) is OffsetStoreKind.LOCAL_FILE
    assert offset_store_kind(MessageModel.CLUSTERING, False) is OffsetStoreKind.REMOTE_BROKER
    assert offset_store_kind(MessageModel.CLUSTERING, True) is OffsetStoreKind.USER_SUPPLIED


def test_offset_2_update_rule() -> None:
    assert updated_offset(None, 5, True) == 5  # the first write ignores increaseOnly
    assert updated_offset(10, 5, True) == 10
    assert updated_offset(10, 10, True) == 10
    assert updated_offset(10, 11, True) == 11
    assert updated_offset(10, 5, False) == 5


def test_offset_3_writers() -> None:
    assert [w for w in OffsetWriter if increase_only_for(w)] == [
        OffsetWriter.CONCURRENT_RESULT,
        OffsetWriter.CORRECT_TAGS_OFFSET,
    ]


def test_offset_4_and_5_reads() -> None:
    assert read_offset_from_memory(None, MEM) == -1
    assert read_offset_from_memory(7, MEM) == 7
    assert read_offset_from_memory(7, FIRST) == 7
    assert read_offset_from_memory(None, FIRST) is None
    assert read_offset_from_memory(7, STORE) is None
    assert remote_store_read_result(42) == (42, True)
    assert remote_store_read_result(MQBrokerError(22)) == (-1, False)
    assert remote_store_read_result(TimeoutError()) == (-2, False)
    assert remote_store_read_result(MQClientError("The broker[b] not exist")) == (-2, False)


def test_offset_6_to_8_remote_persistence_rules() -> None:
    assert remote_persist_all_plan((Q0, Q1), {Q1}) == ((Q1,), (Q0,))
    assert remote_persist_all_plan((Q0, Q1), set()) == ((), ())
    assert remote_persist_all_plan((Q0,), None) == ((), ())
    # The route lists the slave first, but the HashMap iterates id 0 first.
    slave_first = BrokerAddrs([(1, "slave"), (0, "master")])
    assert Ruleset.of(Profile.V4_7).offset_broker_address(slave_first, slave_first) == "master"
    assert Ruleset.of(Profile.V4_9).offset_broker_address(slave_first, slave_first) == "master"
    # No master: the lookup after the refresh takes any broker, even when the refresh changed
    # nothing (4.9 asks with onlyThisBroker = false the second time).
    slave = BrokerAddrs([(1, "slave")])
    assert Ruleset.of(Profile.V4_9).offset_broker_address(slave, slave) == "slave"
    assert Ruleset.of(Profile.V4_9).offset_broker_address(None, slave) == "slave"
    assert Ruleset.of(Profile.V4_7).offset_broker_address(slave, slave) == "slave"
    # The refresh is asked only when the first lookup finds nothing.
    assert Ruleset.of(Profile.V4_9).offset_broker_address(slave_first, slave) == "master"
    assert Ruleset.of(Profile.V4_7).offset_broker_address(slave, None) == "slave"
    assert Ruleset.of(Profile.V4_9).offset_broker_address(BrokerAddrs(), BrokerAddrs()) is None
    assert Ruleset.of(Profile.V4_7).offset_broker_address(None, None) is None
    # Bucket 0 (id 16) iterates before bucket 1 (ids 1 and 17): 4.7's first entry, and 4.9's
    # once no master answers.
    no_master = BrokerAddrs([(1, "s1"), (17, "s17"), (16, "s16")])
    assert ["s16", "s16"] == [
        Ruleset.of(p).offset_broker_address(no_master, no_master)
        for p in (Profile.V4_7, Profile.V4_9)
    ]
    assert persist_consumer_offset_targets(False, [Q0]) is None
    assert persist_consumer_offset_targets(True, [Q0, Q1]) == frozenset({Q0, Q1})


def test_offset_9_to_13_local_rules() -> None:
    assert local_offset_store_path("/home/u/.rocketmq_offsets", "10.0.0.1@DEFAULT", "G") == (
        "/home/u/.rocketmq_offsets/10.0.0.1@DEFAULT/G/offsets.json"
    )
    assert read_local_offset("1", "2", int) == 1
    assert read_local_offset("", "2", int) == 2
    assert read_local_offset("x", "2", int) == 2
    assert read_local_offset("1", "x", int) == 1
    assert read_local_offset(None, None, int) is None
    with pytest.raises(MQClientError):
        read_local_offset(None, "x", int)
    assert local_persist_steps(True) == (
        PersistStep.WRITE_TMP,
        PersistStep.COPY_TO_BAK,
        PersistStep.DELETE_MAIN,
        PersistStep.RENAME_TMP,
    )
    assert PersistStep.COPY_TO_BAK not in local_persist_steps(False)
    assert local_no_ops() == frozenset(LocalNoOp)
    assert memory_after_rebalance_read(12) == 12
    assert memory_after_rebalance_read(-1) is None
    assert memory_after_rebalance_read(-2) is None


LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
FIRST_OFFSET = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
TIMESTAMP = ConsumeFromWhere.CONSUME_FROM_TIMESTAMP


@pytest.mark.parametrize(
    ("where", "mq", "last", "expected"),
    [
        (LAST, Q0, 7, 7),
        (LAST, Q0, -1, 500),
        (LAST, R0, -1, 0),
        (LAST, Q0, -2, -1),
        (ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET, Q0, -1, 500),
        (ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET, R0, -1, 0),
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST, Q0, 0, 0),
        (FIRST_OFFSET, Q0, 7, 7),
        (FIRST_OFFSET, Q0, -1, 0),
        (FIRST_OFFSET, Q0, -2, -1),
        (TIMESTAMP, Q0, 7, 7),
        (TIMESTAMP, Q0, -1, 300),
        (TIMESTAMP, R0, -1, 500),
        (TIMESTAMP, Q0, -2, -1),
    ],
)
def test_rebal_17_compute_pull_from_where(
    where: ConsumeFromWhere, mq: MessageQueue, last: int, expected: int
) -> None:
    for profile in Profile:
        assert (
            Ruleset.of(profile).compute_pull_from_where(where, mq, last, FakeAdmin(), 0) == expected
        )


def test_rebal_17_failure_per_profile() -> None:
    assert compute_pull_from_where(LAST, Q0, -1, FakeAdmin(fail=True), 0) == -1
    assert compute_pull_from_where(TIMESTAMP, Q0, -1, FakeAdmin(fail=True), 0) == -1
    with pytest.raises(MQClientError):
        compute_pull_from_where_with_exception(TIMESTAMP, Q0, -1, FakeAdmin(fail=True), 0)
    # FIRST_OFFSET never queries the broker, so it cannot fail.
    assert compute_pull_from_where_with_exception(FIRST_OFFSET, Q0, -1, FakeAdmin(True), 0) == 0


# --- the reference stores -----------------------------------------------------------------------


def test_remote_store_reads_and_persists() -> None:
    broker = FakeBroker()
    broker.offsets[Q0] = 40
    store = ReferenceRemoteOffsetStore(broker, "G")
    assert isinstance(store, OffsetStore)
    assert store.read_offset(Q0, MEM) == -1
    assert store.read_offset(Q0, FIRST) == 40  # a successful store read fills memory
    assert store.read_offset(Q0, MEM) == 40
    assert store.read_offset(Q1, STORE) == -1  # QUERY_NOT_FOUND
    broker.fail = TimeoutError("wait response timeout")
    assert store.read_offset(Q1, STORE) == -2
    assert store.log[-1][0] == "warn" and store.clone_offset_table(None) == {Q0: 40}
    broker.fail = None
    store.update_offset(Q1, 9, increase_only=True)
    store.persist_all(set())  # empty: nothing sent, nothing pruned
    assert broker.sent == [] and set(store.clone_offset_table("")) == {Q0, Q1}
    store.persist_all({Q1})
    assert broker.sent == [(Q1, 9, True)] and store.clone_offset_table("T") == {Q1: 9}
    store.persist(Q1)
    store.remove_offset(Q1)
    assert store.read_offset(Q1, MEM) == -1 and len(broker.sent) == 2
    broker.fail = ConnectionError("down")
    store.update_offset(Q0, 1, False)
    store.persist(Q0)  # logged, not raised
    assert store.log[-1][0] == "error"
    with pytest.raises(ConnectionError):
        store.update_consume_offset_to_broker(Q0, 1, False)


def test_bad_input_is_typed_and_changes_nothing() -> None:
    store = ReferenceRemoteOffsetStore(FakeBroker(), "G")
    store.update_offset(Q0, 5, False)
    store.update_offset(None, 99, False)
    store.persist(None)
    store.remove_offset(None)
    assert store.read_offset(None, MEM) == -1
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: store.update_offset(Q0, "6", False), "offset"),  # type: ignore[arg-type]
        (lambda: store.update_offset(Q0, 6.0, False), "offset"),  # type: ignore[arg-type]
        (lambda: store.update_offset("T:0", 6, False), "mq"),  # type: ignore[arg-type]
        (lambda: store.read_offset(Q0, "READ_FROM_MEMORY"), "read_type"),  # type: ignore[arg-type]
        (lambda: store.persist_all(["T:0"]), "mqs"),  # type: ignore[list-item]
    ]
    for call, name in cases:
        with pytest.raises(InvalidTypeError) as info:
            call()
        assert info.value.name == name
    assert store.clone_offset_table(None) == {Q0: 5}


def test_local_store_file_order_and_fallback(tmp_path: Path) -> None:
    store: OffsetStore = ReferenceLocalFileOffsetStore(tmp_path)
    store.update_offset(Q0, 10, False)
    store.update_offset(Q1, 20, False)
    store.persist_all({Q0})
    main, bak = tmp_path / "offsets.json", tmp_path / "offsets.json.bak"
    assert decode_offset_table(main.read_text()) == {Q0: 10} and not bak.exists()
    first = main.read_text()
    store.update_offset(Q0, 11, True)
    store.persist_all({Q0, Q1})
    assert bak.read_text() == first and not (tmp_path / "offsets.json.tmp").exists()
    assert isinstance(store, ReferenceLocalFileOffsetStore)
    assert store.last_persist_steps == local_persist_steps(True)
    store.persist(Q0)
    store.remove_offset(Q0)  # no-ops: memory keeps Q0
    assert store.read_offset(Q0, MEM) == 11
    fresh = ReferenceLocalFileOffsetStore(tmp_path)
    fresh.load()
    assert fresh.clone_offset_table(None) == {Q0: 11, Q1: 20}
    main.write_text("{not json")
    # The main file is unparsable, so the backup (the first generation, Q0 only) answers.
    assert fresh.read_offset(Q1, STORE) == -1
    assert fresh.read_offset(Q0, STORE) == 10
    assert fresh.read_offset(Q0, MEM) == 10
    bak.write_text("garbage")
    assert fresh.read_offset(Q0, STORE) == -1  # corrupt backup: MQClientException → -1
    assert fresh.read_offset(Q0, MEM) == 10
    with pytest.raises(MQClientError):
        ReferenceLocalFileOffsetStore(tmp_path).load()


def test_local_store_rereads_the_file(tmp_path: Path) -> None:
    store = ReferenceLocalFileOffsetStore(tmp_path)
    assert store.read_offset(Q0, STORE) == -1
    (tmp_path / "offsets.json").write_text(encode_offset_table({Q0: 3}))
    assert store.read_offset(Q0, FIRST) == 3
    (tmp_path / "offsets.json").write_text(encode_offset_table({Q0: 1}))
    assert store.read_offset(Q0, FIRST) == 3  # memory first
    assert store.read_offset(Q0, STORE) == 1  # the store read overwrites memory
    assert store.read_offset(Q0, MEM) == 1


# --- properties ----------------------------------------------------------------------------------

queues = st.builds(MessageQueue, st.sampled_from(["T", "U"]), st.just("b"), st.integers(0, 2))
updates = st.lists(st.tuples(queues, st.integers(-2, 10**9), st.booleans()), max_size=30)


@settings(max_examples=4 * settings().max_examples)
@given(updates)
def test_increase_only_update_never_lowers(ops: list[tuple[MessageQueue, int, bool]]) -> None:
    store = ReferenceRemoteOffsetStore(FakeBroker(), "G")
    model: dict[MessageQueue, int] = {}
    for mq, offset, increase_only in ops:
        before = store.clone_offset_table(None).get(mq)
        store.update_offset(mq, offset, increase_only)
        after = store.clone_offset_table(None)[mq]
        if increase_only and before is not None:
            assert after >= before
        check_call(updated_offset, before, offset, increase_only)
        if mq not in model or not increase_only or offset > model[mq]:
            model[mq] = offset
    assert store.clone_offset_table(None) == model


@given(st.dictionaries(queues, st.integers(-(2**63), 2**63 - 1)), st.sets(queues))
def test_local_persist_round_trips_the_selected_entries(
    table: dict[MessageQueue, int], mqs: set[MessageQueue]
) -> None:
    assert decode_offset_table(encode_offset_table(table)) == table
    with tempfile.TemporaryDirectory() as directory:
        store = ReferenceLocalFileOffsetStore(directory)
        for mq, offset in table.items():
            store.update_offset(mq, offset, False)
        store.persist_all(mqs)
        loaded = ReferenceLocalFileOffsetStore(directory)
        loaded.load()
        assert loaded.clone_offset_table(None) == {m: v for m, v in table.items() if m in mqs}


@settings(max_examples=4 * settings().max_examples)
@given(
    st.sampled_from(ConsumeFromWhere),
    st.sampled_from([Q0, R0]),
    st.integers(-5, 10**6),
    st.booleans(),
    st.sampled_from(Profile),
)
def test_compute_pull_from_where_contracts(
    where: ConsumeFromWhere, mq: MessageQueue, last: int, fail: bool, profile: Profile
) -> None:
    fn = (
        compute_pull_from_where
        if profile is Profile.V4_7
        else compute_pull_from_where_with_exception
    )
    try:
        result = check_call(fn, where, mq, last, FakeAdmin(fail), 0)
    except MQClientError:
        assert profile is Profile.V4_9 and fail and last == -1
        return
    if last >= 0:
        assert result == last
    elif last <= -2:
        assert result == -1
    elif not fail:
        assert result in (0, 300, 500)
    else:
        assert result in (0, -1)


broker_maps = st.none() | st.lists(
    st.tuples(st.sampled_from([0, 1, 2, 16, 17, -1]), st.sampled_from(["a:1", "b:1", "c:1"])),
    max_size=5,
).map(BrokerAddrs)


@given(broker_maps, broker_maps)
def test_offset_7_contracts(before: BrokerAddrs | None, after: BrokerAddrs | None) -> None:
    # 4.7 answers the first map's first entry (HashMap order); 4.9 its master, else whatever the
    # second lookup finds; both find a broker whenever the refreshed map has one.
    v47 = check_call(offset_broker_address_v47, before, after)
    v49 = check_call(offset_broker_address_v49, before, after)
    refreshed = after.get(0, after[next(iter(after))]) if after else None
    if before:
        assert v47 == before[next(iter(before))]
        assert v49 == before.get(0, refreshed)
    elif not after:
        assert (v47, v49) == (None, None)
    else:
        assert (v47, v49) == (after[next(iter(after))], refreshed)
