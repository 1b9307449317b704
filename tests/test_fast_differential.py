"""Differential: random put / get / delete / set_role sequences give identical answers on the
reference store and the fast store, in both profiles."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import pullspec.fast.factories
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.delay import SCHEDULE_TOPIC
from pullspec.spec.errors import PullspecError
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage, StoredMessage
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.status import BrokerRole

TOPICS = ("T", "U", SCHEDULE_TOPIC)


class RejectEveryThird:
    """A MessageFilter that is not an ExpressionMessageFilter."""

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return tags_code != 2598920  # "TagB"

    def is_matched_by_commit_log(self, message: StoredMessage | None) -> bool:
        return message is not None and message.queue_offset % 3 != 2


def _message(topic: str, queue_id: int, tag: str | None, body: int, sys_flag: int) -> Any:
    props: dict[str, str] = {} if tag is None else {"TAGS": tag}
    if body % 5 == 0:
        props["KEYS"] = f"k{body}"
    if body % 7 == 0:
        props["DELAY"] = str((1, 2, 3, 25)[body % 4])  # RETRY-8: to the schedule topic
    stored = {**props, "DELAY": "1"} if body % 11 == 0 else None
    return BrokerInnerMessage(
        topic=topic,
        queue_id=queue_id,
        body=bytes([body % 256]) * body,
        properties=props,
        stored_properties=stored,
        sys_flag=sys_flag,
        born_timestamp=body,
    )


messages = st.builds(
    _message,
    st.sampled_from(("T", "T", "T", "U")),
    st.integers(0, 1),
    st.sampled_from(["TagA", "TagB", "TagC", None]),
    st.integers(0, 400),
    st.sampled_from([0, 0, 0, 4, 8, 12]),
)
filters = st.sampled_from([None, "*", "TagA", "TagA || TagC", "TagX", "third"])
puts = st.tuples(st.just("put"), st.lists(messages, min_size=1, max_size=12))
gets = st.tuples(
    st.just("get"),
    st.sampled_from(("T", "T", "T", "U", SCHEDULE_TOPIC)),
    st.sampled_from((0, 0, 1, 1, 2)),
    st.integers(0, 1000),
    st.integers(-1, 40),
    filters,
)
ops = st.one_of(
    puts,
    puts,
    gets,
    gets,
    gets,
    st.tuples(st.just("delete"), st.integers(0, 4)),
    st.tuples(
        st.just("role"),
        st.sampled_from([BrokerRole.ASYNC_MASTER, BrokerRole.SYNC_MASTER, BrokerRole.SLAVE]),
        st.booleans(),
    ),
    st.tuples(st.just("look"), st.integers(0, 40)),
    st.tuples(
        st.just("disk"),
        st.sampled_from(("T", SCHEDULE_TOPIC)),
        st.integers(0, 2),
        st.integers(-1, 40),
    ),
    st.tuples(st.just("clock"), st.integers(-5, 3_600_000)),
)


def _filter(topic: str, name: str | None) -> Any:
    if name == "third":
        return RejectEveryThird()
    return tag_filter(topic, name)


def _run(store: Any, clock: ManualClock, op: tuple[Any, ...], wrote: list[int]) -> Any:
    kind = op[0]
    if kind == "put":
        results = store.put_messages(op[1])
        wrote.extend(r.wrote_offset for r in results if r.wrote_offset >= 0)
        return results
    if kind == "get":
        _, topic, queue_id, pick, max_nums, name = op
        # Aim at the queue's contents: offsets from min − 1 to max + 1 (both stores agree on
        # min and max, which are compared after every step).
        low = store.get_min_offset_in_queue(topic, queue_id)
        offset = low - 1 + pick % (store.get_max_offset_in_queue(topic, queue_id) - low + 3)
        r = store.get_message("G", topic, queue_id, offset, max_nums, _filter(topic, name))
        event(r.status.value)
        return (r, r.msg_offsets, r.buffer_total_size, tuple(r.messages))
    if kind == "delete":
        clock.advance(op[1] * 1_800_000)
        return store.delete_expired_files()
    if kind == "role":
        store.set_role(op[1], op[2])
        return (store.broker_role, store.offset_check_in_slave)
    if kind == "disk":
        return store.check_in_disk_by_consume_offset(op[1], op[2], op[3])
    if kind == "look":
        return store.look_message_by_offset(wrote[op[1] % len(wrote)] if wrote else 0)
    clock.jump_to(clock.now_ms() + op[1])
    return clock.now_ms()


def _observe(store: Any) -> tuple[Any, ...]:
    queues = tuple(
        (store.get_min_offset_in_queue(t, q), store.get_max_offset_in_queue(t, q))
        for t in TOPICS
        for q in range(2)
    )
    return (queues, store.get_min_phy_offset(), store.get_max_phy_offset())


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
@given(
    initial=st.lists(messages, min_size=5, max_size=40),
    sequence=st.lists(ops, min_size=1, max_size=30),
    file_size=st.sampled_from([1024, 2048]),
    units=st.sampled_from([2, 4, 7]),
    reserved=st.sampled_from([0, 1]),
    batch_max=st.sampled_from([1, 10]),
)
@settings(max_examples=max(40, settings().max_examples // 2))
def test_reference_and_fast_agree(
    profile: Profile,
    initial: list[BrokerInnerMessage],
    sequence: list[tuple[Any, ...]],
    file_size: int,
    units: int,
    reserved: int,
    batch_max: int,
) -> None:
    config = StoreConfig(
        mapped_file_size_commit_log=file_size,
        mapped_file_size_consume_queue=units * 20,
        file_reserved_time=reserved,
        delete_files_batch_max=batch_max,
        max_transfer_bytes_on_message_in_memory=2_000,
        max_transfer_count_on_message_in_memory=6,
        max_transfer_count_on_message_in_disk=3,
        total_physical_memory_size=6_000,
    )
    ref_clock, fast_clock = ManualClock(1_000), ManualClock(1_000)
    ref = ReferenceMessageStore(config, profile, clock=ref_clock)
    fst = pullspec.fast.factories.message_store(config, profile, fast_clock)
    ref_wrote: list[int] = []
    fast_wrote: list[int] = []
    try:
        for op in [("put", initial), *sequence]:
            outcomes = []
            for store, clock, wrote in ((ref, ref_clock, ref_wrote), (fst, fast_clock, fast_wrote)):
                try:
                    outcomes.append(("ok", _run(store, clock, op, wrote)))
                except PullspecError as exc:
                    outcomes.append(("error", exc.kind))
            assert outcomes[1] == outcomes[0], op
            assert _observe(fst) == _observe(ref), op
    finally:
        fst.close()
