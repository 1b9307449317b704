"""fast.read_plan: the planner's fast path decides every pull as the full chain of spec calls
does (STORE-5, STORE-8, STORE-9, STORE-10, BATCH-1, BATCH-4)."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest

from pullspec.fast.read_plan import ReadPlanner, ScanPlan
from pullspec.fast.reader import read_kernels
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import IllegalCapacityError
from pullspec.spec.filter import tag_filter
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.status import BrokerRole, GetMessageStatus

# 4 entries per consume-queue file, so offsets fall in several files, some expired.
CONFIG = StoreConfig(
    mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
)
NUMS = (-(1 << 27), -3, -1, 0, 1, 2, 32, 800, 801, 1 << 26, (1 << 26) + 1)
ROLES = ((BrokerRole.ASYNC_MASTER, False), (BrokerRole.SLAVE, False), (BrokerRole.SLAVE, True))


def _decide(planner: ReadPlanner, how: str, *args: object) -> object:
    try:
        return getattr(planner, how)(*args)
    except IllegalCapacityError:
        return IllegalCapacityError


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_the_fast_path_plans_as_the_spec_chain(tmp_path: Path, profile: Profile) -> None:
    store = MmapMessageStore(tmp_path, CONFIG, profile, ManualClock(1_000))
    store.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=bytes(60))] * 30)
    store.delete_expired_files()
    q = store.consume_queue("T", 0)
    empty = store.consume_queue("T", 1)
    planner = store.reader.planner
    assert 0 < q.min_offset() < q.max_offset() == 30  # some files expired
    seen: set[object] = set()
    for queue in (q, empty):
        for offset in range(-2, q.max_offset() + 6):
            for nums in NUMS:
                for role, check in ROLES:
                    args = (queue, offset, nums, role, check)
                    expected = _decide(planner, "plan_by_spec", *args)
                    assert expected == _decide(planner, "plan", *args), args
                    seen.add(type(expected) if isinstance(expected, ScanPlan) else expected)
    statuses = {getattr(s, "status", s) for s in seen}
    assert {ScanPlan, IllegalCapacityError} <= statuses or profile is Profile.V4_7
    assert {
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_ONE,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
    } <= statuses
    store.close()


def test_a_scan_is_cut_to_the_batch_1_budget_and_the_file_end(tmp_path: Path) -> None:
    config = StoreConfig(mapped_file_size_consume_queue=20 * 1000)
    store = MmapMessageStore(tmp_path, config, Profile.V4_9, ManualClock(0))
    store.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=b"x")] * 1500)
    q = store.consume_queue("T", 0)
    planner = store.reader.planner
    master = BrokerRole.ASYNC_MASTER
    # BATCH-1: max(16000, 32 × 20) bytes = 800 entries; 1000 per file; 1500 written.
    expected = [(0, 800), (990, 10), (1000, 500), (1400, 100)]
    actual = []
    for offset in (0, 990, 1000, 1400):
        plan = planner.plan(q, offset, 32, master, False)
        assert isinstance(plan, ScanPlan)
        actual.append((offset, plan.n))
    assert expected == actual
    store.close()


def test_a_scanned_answer_reads_pickles_and_compares_as_a_plain_result(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, StoreConfig(), Profile.V4_9, ManualClock(0))
    store.put_messages([BrokerInnerMessage(topic="T", queue_id=0, body=b"x")] * 5)
    answer = store.get_message("G", "T", 0, 1, 3)
    # A record of topic "T", a 1-byte body and no properties is 93 bytes (LAYOUT-5).
    expected = (GetMessageStatus.FOUND, 4, 0, 5, [1, 2, 3], 3 * 93, False)
    for result in (answer, pickle.loads(pickle.dumps(answer)), copy.copy(answer)):
        actual = (
            result.status,
            result.next_begin_offset,
            result.min_offset,
            result.max_offset,
            result.msg_offsets,
            result.buffer_total_size,
            result.suggest_pulling_from_slave,
        )
        assert expected == actual
        assert [1, 2, 3] == [m.queue_offset for m in result.messages]
        assert answer == result
    store.close()


def test_a_scanned_answer_decodes_its_records_after_the_store_closes(tmp_path: Path) -> None:
    store = MmapMessageStore(tmp_path, StoreConfig(), Profile.V4_9, ManualClock(0))
    store.put_messages(
        [BrokerInnerMessage(topic="T", queue_id=0, body=b"b%d" % k) for k in range(4)]
    )
    answer = store.get_message("G", "T", 0, 1, 2)
    store.close()
    assert [b"b1", b"b2"] == [m.body for m in answer.messages]


def test_a_pull_keeps_the_log_facts_it_read_while_another_reader_replaces_them(
    tmp_path: Path,
) -> None:
    # Readers share the scanner's cached commit-log facts. One that reads them while another
    # replaces them must use one reading throughout: pairing its files with the other's views
    # decodes another file's bytes (a record "with magic 0" in a threaded expiry run).
    kernels = read_kernels()
    if kernels is None:
        pytest.skip("the compiled scan needs numba")
    store = MmapMessageStore(tmp_path, StoreConfig(), Profile.V4_9, ManualClock(0))
    store.put_messages(
        [
            BrokerInnerMessage(topic="T", queue_id=0, body=b"b%d" % k, properties={"TAGS": "a"})
            for k in range(4)
        ]
    )
    facts = store.reader.compiled.facts

    def meanwhile(real: Callable[..., object]) -> Callable[..., object]:
        def another_reader_meanwhile(*args: object) -> object:
            answer = real(*args)
            facts.read(0, [])  # another reader's reading: a log without files
            return answer

        return another_reader_meanwhile

    # The match-all window (no filter) and the tag window (a filter with codes) alike.
    for name, message_filter in (("window_all", None), ("window_one", tag_filter("T", "a"))):
        with mock.patch.object(kernels, name, meanwhile(getattr(kernels, name))):
            answer = store.get_message("G", "T", 0, 1, 2, message_filter)
        assert [b"b1", b"b2"] == [m.body for m in answer.messages]
    store.close()
