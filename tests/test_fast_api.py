"""The fast library's public face: `pullspec.fast.__all__`, an example per name, and opening a
real broker's store read-only without knowing its file sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pullspec import fast
from pullspec.conformance.docs import build as docs
from pullspec.fast import MmapMessageStore, broker_file_sizes, open_broker_store
from pullspec.spec import BrokerInnerMessage, BrokerRole, ManualClock, Profile, StoreConfig
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError, ReadOnlyStoreError

BASIC = Path(__file__).resolve().parents[2] / "shared" / "stores" / "basic"
EXPIRED = BASIC.with_name("expired")


def test_the_package_exports_its_store_process_queue_and_result_types() -> None:
    assert {
        "MmapMessageStore",
        "FastProcessQueue",
        "MessageBatch",
        "PutResults",
        "MultiGetResult",
        "GetRequest",
        "RecoveryReport",
        "open_broker_store",
        "broker_file_sizes",
    } == set(fast.__all__)
    assert all(getattr(fast, name).__module__.startswith("pullspec.fast.") for name in fast.__all__)


def test_every_exported_name_has_an_example_that_runs() -> None:
    report = docs._run_api_examples()
    assert () == report.failures
    assert len(fast.__all__) <= report.attempted


def test_broker_file_sizes_are_read_from_the_files(tmp_path: Path) -> None:
    # stores/README.md: 16 KiB commit-log files, consume-queue files of 20 entries (400 bytes).
    assert (16384, 400) == broker_file_sizes(BASIC)
    assert (16384, 400) == broker_file_sizes(EXPIRED)
    assert (None, None) == broker_file_sizes(tmp_path)
    with pytest.raises(InvalidArgumentError):
        broker_file_sizes(tmp_path / "missing")


def test_open_broker_store_answers_as_the_broker_did() -> None:
    # stores/README.md: TopicA/0 holds offsets 0…117; the expired store's queue min is 54 and its
    # commit-log min 65536 (four 16 KiB files expired).
    with open_broker_store(BASIC) as store:
        assert (True, BrokerRole.ASYNC_MASTER) == (store.read_only, store.broker_role)
        assert (0, 118) == (
            store.get_min_offset_in_queue("TopicA", 0),
            store.get_max_offset_in_queue("TopicA", 0),
        )
        with pytest.raises(ReadOnlyStoreError):
            store.put_message(BrokerInnerMessage(topic="TopicA", queue_id=0, body=b"x"))
    with open_broker_store(EXPIRED, profile="4.9") as store:
        assert (54, 65536) == (
            store.get_min_offset_in_queue("TopicA", 0),
            store.get_min_phy_offset(),
        )


def test_open_broker_store_takes_the_role_and_refuses_a_bad_one() -> None:
    # answers.jsonl, store-basic-050: a SLAVE without offsetCheckInSlave keeps offset 125.
    with open_broker_store(BASIC, broker_role="SLAVE") as slave:
        assert 125 == slave.get_message("GID_reader", "TopicA", 0, 125, 32).next_begin_offset
    with open_broker_store(BASIC, broker_role=BrokerRole.SLAVE, offset_check_in_slave=True) as s:
        assert s.offset_check_in_slave
    with pytest.raises(InvalidArgumentError):
        open_broker_store(BASIC, broker_role="LEADER")
    with pytest.raises(InvalidTypeError):
        open_broker_store(BASIC, broker_role=3)  # type: ignore[arg-type]


def test_the_default_config_refuses_the_broker_files_that_open_broker_store_sizes() -> None:
    """Why the helper exists: the default 1 GiB commit-log size does not match 16 KiB files."""
    from pullspec.spec.errors import CorruptStoreError

    with pytest.raises(CorruptStoreError):
        MmapMessageStore(BASIC, StoreConfig(), Profile.V4_9, ManualClock(0), read_only=True)
