"""fast.retired: a file expiry leaves out of a store's published list (the commit log's FileList, a
queue's Layout) is destroyed only once no reader holds a list that names it, and then at the
writer's next sweep. Readers are played here by holding what a pull holds while it reads."""

from __future__ import annotations

import weakref
from pathlib import Path

import numpy as np
import pytest

from pullspec.fast.retired import FileList, Retired
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile

#: 1 KiB commit-log files (about five of the messages below each) and 4-entry queue files,
#: every file but the last expiring at each round, at most one commit-log file per round.
CFG = StoreConfig(
    mapped_file_size_commit_log=1024,
    mapped_file_size_consume_queue=80,
    file_reserved_time=0,
    delete_files_batch_max=1,
)


def _messages(first: int, n: int) -> list[BrokerInnerMessage]:
    return [
        BrokerInnerMessage(topic="T", queue_id=0, body=b"%03d" % k * 40)
        for k in range(first, first + n)
    ]


def _store(root: Path) -> MmapMessageStore:
    store = MmapMessageStore(root, CFG, Profile.V4_9, ManualClock(1))
    store.put_messages(_messages(0, 30))
    return store


class _File:
    """A retired file that records when it is destroyed."""

    def __init__(self, name: str, destroyed: list[str]) -> None:
        self.name, self._destroyed = name, destroyed

    def destroy(self) -> None:
        self._destroyed.append(self.name)


@pytest.mark.parametrize(
    ("held", "destroyed"),
    [
        # Which of the three replaced lists a reader still holds → the files destroyed by the
        # sweep: those retired before the oldest list still held (a list names the files
        # retired with it and, maybe, every file retired with a later one).
        ((), ["a", "b", "c"]),
        ((0,), []),
        ((1,), ["a"]),
        ((2,), ["a", "b"]),
        ((1, 2), ["a"]),
        ((0, 2), []),
    ],
)
def test_a_file_waits_for_every_list_replaced_before_its_own(
    held: tuple[int, ...], destroyed: list[str]
) -> None:
    seen: list[str] = []
    retired = Retired[_File]()
    # List i names the file retired with it and those retired later (file c is in all three).
    files = [_File(name, seen) for name in "abc"]
    lists = [FileList(files[i:]) for i in range(3)]
    kept = [lists[i] for i in held]
    for i in range(3):
        replaced = weakref.ref(lists[i])
        lists[i] = FileList()  # the writer lets go of the list it replaced
        retired.add(replaced, [files[i]])
    del files
    assert destroyed == seen
    assert 3 - len(destroyed) == len(retired)
    del kept
    retired.sweep()
    assert ["a", "b", "c"] == seen
    assert 0 == len(retired)


def test_commit_log_files_stay_while_a_reader_holds_a_list_from_before_two_rounds(
    tmp_path: Path,
) -> None:
    """The reader took the list before round 1; round 2 removes a file the list of round 1
    (which nobody holds) also named: both stay on disk and readable until the reader lets go."""
    store = _store(tmp_path)
    end, held = store.commit_log.snapshot()  # what a pull holds while it reads
    assert len(held) >= 4
    paths = [Path(f.file or "") for f in held[:2]]
    heads = [bytes(f.mm[:64]) for f in held[:2]]
    assert 1 == store.delete_expired_files()
    assert 1 == store.delete_expired_files()
    assert held[2].start == store.get_min_phy_offset()
    assert [True, True] == [p.exists() for p in paths]
    assert heads == [bytes(f.mm[:64]) for f in held[:2]]
    found = store.commit_log.record_at(held[1].start, 8, (end, held))
    assert found is not None and found[0] is held[1]
    del held, found
    assert 1 == store.delete_expired_files()  # its sweep destroys the two retired files
    assert [False, False] == [p.exists() for p in paths]
    store.close()


def test_a_file_no_reader_holds_is_destroyed_in_its_round(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = Path(store.commit_log.files[0].file or "")
    assert 1 == store.delete_expired_files()
    assert not first.exists()
    store.close()


def test_queue_files_stay_while_a_reader_holds_the_layout(tmp_path: Path) -> None:
    """A pull holds its queue's Layout through the scan: the queue files expiry leaves out stay
    mapped and on disk, their entries as they were, until it lets go; the queue's next round
    (once the commit log's min moves again) destroys them."""
    store = _store(tmp_path)
    q = store.consume_queue("T", 0)
    lay = q.layout  # what a pull's ScanPlan holds
    first = Path(lay.files[0].file or "")
    entries = lay.views[0].copy()
    while q.layout.files[0] is lay.files[0]:
        assert 1 == store.delete_expired_files()
    assert 1 == store.delete_expired_files()  # one more round: the queue sweeps, the file stays
    assert first.exists()
    assert np.array_equal(entries, lay.views[0])
    del lay
    store.put_messages(_messages(30, 10))
    assert 1 == store.delete_expired_files()  # the commit-log min moves: every queue sweeps
    assert not first.exists()
    store.close()


def test_a_match_all_answer_keeps_its_queue_file_until_its_records_are_read(
    tmp_path: Path,
) -> None:
    """A match-all pull's answer reads its records' commit-log offsets from the queue's file
    only when the records are first read (fast.read_compiled): it holds the queue's Layout, so
    that file outlives expiry's rounds as long as the answer does, entries and all."""
    store = _store(tmp_path)
    q = store.consume_queue("T", 0)
    first = Path(q.layout.files[0].file or "")
    answer = store.get_message("G", "T", 0, 1, 3)  # entries 1, 2, 3 of the first 4-entry file
    while q.layout.files[0].file == str(first):
        assert 1 == store.delete_expired_files()
    store.put_messages(_messages(30, 10))
    assert 1 == store.delete_expired_files()  # the sweep that would destroy a file nobody holds
    assert first.exists()
    assert [b"%03d" % k * 40 for k in (1, 2, 3)] == [m.body for m in answer.messages]
    del answer
    store.put_messages(_messages(40, 10))
    assert 1 == store.delete_expired_files()
    assert not first.exists()
    store.close()
