"""The fast store under threads (issue 17): writers append while readers pull, as a broker's
request threads do. Appends are serialised by the put lock; reads take no lock and must only
ever see whole messages; afterwards every acknowledged message is on disk exactly once, with its
own body, at the queue offset its put answered, queue offsets following commit-log order.

And kill -9 of a process whose four threads append at once: after reopening, every put
acknowledged (sync flush) is there; what is visible is whole, each writer's messages a prefix of
what it put, queue offsets without gaps or duplicates; the store verifies clean and takes writes
again. `make fuzz` runs 1000 trials (PULLSPEC_MULTI_KILL_TRIALS=n sets the number), `make test` a
few; the single-writer trials are in tests/test_fast_recovery.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pullspec.fast.batch import MessageBatch
from pullspec.fast.commitlog import CommitLog
from pullspec.fast.consumequeue import ConsumeQueue
from pullspec.fast.mapped import MappedFile
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock, SystemClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.layout import BLANK_MAGIC_CODE
from pullspec.spec.message import BrokerInnerMessage, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.results import GetMessageResult
from pullspec.spec.status import GetMessageStatus

#: Messages each writer puts in test_four_writers_two_readers: the issue's 2,000 under `make
#: fuzz` (HYPOTHESIS_PROFILE=fuzz) or PULLSPEC_THREAD_MESSAGES=n, fewer in `make test`.
MESSAGES = int(
    os.environ.get(
        "PULLSPEC_THREAD_MESSAGES",
        "2000" if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else "400",
    )
)
#: Small files: a few thousand messages roll many commit-log and consume-queue files.
CFG = StoreConfig(mapped_file_size_commit_log=1 << 14, mapped_file_size_consume_queue=400)
TOPICS = ("T", "U")
QUEUES = [(t, q) for t in TOPICS for q in range(3)]


def message(w: int, k: int) -> BrokerInnerMessage:
    """Message k of writer w: its born timestamp names it, its body is its own."""
    body = hashlib.sha256(f"{w}/{k}".encode()).digest() * (1 + k % 4)
    return BrokerInnerMessage(
        topic=TOPICS[k % 2],
        queue_id=(w + k) % 3,
        body=body[: 32 + (k * 13) % 97],
        properties={"TAGS": f"w{w}", "KEYS": f"{w}-{k}"},
        born_timestamp=w * 1_000_000 + k,
    )


def named(m: StoredMessage) -> BrokerInnerMessage:
    """The message a stored one claims to be."""
    return message(*divmod(m.born_timestamp, 1_000_000))


def wrong(m: StoredMessage, queue_offset: int | None = None) -> str | None:
    """What is wrong with a message a read returned, or None."""
    want = named(m)
    got = (m.topic, m.queue_id, m.body, dict(m.properties))
    if got != (want.topic, want.queue_id, want.body, dict(want.properties)):
        return f"message {m.born_timestamp} at {m.commitlog_offset} is not its own"
    if queue_offset is not None and m.queue_offset != queue_offset:
        return f"message {m.born_timestamp} returned at {queue_offset}, stored {m.queue_offset}"
    return None


@attrs.frozen
class Ack:
    """A put's answer for one message."""

    w: int
    k: int
    queue_offset: int
    wrote_offset: int


class Run:
    """Writers appending their messages with every put call, readers pulling beside them."""

    def __init__(self, store: MmapMessageStore, seed: int, expiring: bool = False) -> None:
        self.store = store
        self.seed = seed
        #: Files expire meanwhile: a message or an offset may be gone by the time it is read.
        self.expiring = expiring
        self.acks: list[Ack] = []
        self.errors: list[str] = []
        self.done = threading.Event()

    def _guard(self, work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # any exception in a thread fails the test
                self.errors.append(f"{type(exc).__name__}: {exc}")

        return run

    def writer(self, w: int, n: int) -> Callable[[], None]:
        rng = random.Random(self.seed * 100 + w)

        def work() -> None:
            k = 0
            while k < n:
                kind = rng.choice(("one", "one", "one", "list", "batch"))
                size = 1 if kind == "one" else rng.choice((1, 3, 7, 40))
                msgs = [message(w, j) for j in range(k, min(k + size, n))]
                if kind == "one":
                    results: Any = [self.store.put_message(msgs[0])]
                elif kind == "list":
                    results = self.store.put_messages(msgs)
                else:
                    results = self.store.put_batch(MessageBatch.from_messages(msgs))
                for j, r in enumerate(results):
                    self.acks.append(Ack(w, k + j, r.queue_offset, r.wrote_offset))
                k += len(msgs)

        return self._guard(work)

    def reader(self, r: int) -> Callable[[], None]:
        rng = random.Random(self.seed * 100 + 50 + r)
        store = self.store

        def check(res: GetMessageResult) -> None:
            if res.bodies is not None:
                # A read that is not the whole record its entry names: only an entry at
                # commit-log offset 0 once that file expired, served from the first remaining
                # file's start (STORE-21, RocketMQ's behaviour); its offsets are another's.
                if not self.expiring:
                    self.errors.append(f"a partial read without expiry: {res}")
                return
            for o, m in zip(res.msg_offsets, res.messages, strict=True):
                why = wrong(m, o)
                if why:
                    self.errors.append(why)

        def work() -> None:
            seen_max = dict.fromkeys(QUEUES, 0)
            while not self.done.is_set():
                topic, q = rng.choice(QUEUES)
                high = store.get_max_offset_in_queue(topic, q)
                if high < seen_max[(topic, q)]:
                    self.errors.append(f"max offset of {topic}/{q} went back")
                seen_max[(topic, q)] = high
                offset = rng.randrange(high + 2)
                how = rng.choice(("get", "get", "many", "through", "look"))
                if how == "get":
                    res = store.get_message("G", topic, q, offset, rng.choice((1, 4, 32)))
                    found = res.status is GetMessageStatus.FOUND
                    if offset < high and not found and not self.expiring:
                        self.errors.append(f"{topic}/{q} {offset} < {high}: {res.status}")
                    check(res)
                elif how == "many":
                    for res in store.get_messages(
                        [("G", t, i, offset, 8, None) for t, i in QUEUES]
                    ):
                        check(res)
                elif how == "through":
                    for res in store.pull_through("G", topic, q, offset, 16, max_calls=4):
                        check(res)
                elif self.acks:
                    # A put that answered is visible (its record and then its entry).
                    ack = self.acks[rng.randrange(len(self.acks))]
                    m = store.look_message_by_offset(ack.wrote_offset)
                    if ack.wrote_offset < store.get_min_phy_offset():
                        # Expired (the min only grows: it was when looked at). Not necessarily
                        # None: at offset 0 the first remaining file's record answers (STORE-21).
                        continue
                    if m is None or m.born_timestamp != ack.w * 1_000_000 + ack.k:
                        self.errors.append(f"acknowledged {ack} not visible")
                    elif why := wrong(m, ack.queue_offset):
                        self.errors.append(why)

        return self._guard(work)

    def go(self, writers: int, readers: int, n: int, extra: list[Callable[[], None]]) -> None:
        writing = [threading.Thread(target=self.writer(w, n)) for w in range(writers)]
        others = [threading.Thread(target=self.reader(r)) for r in range(readers)]
        others += [threading.Thread(target=self._guard(e)) for e in extra]
        for t in writing + others:
            t.start()
        for t in writing:
            t.join()
        self.done.set()
        for t in others:
            t.join()


def check_reopened(root: Path, acks: list[Ack], expired: bool = False) -> None:
    """Every acknowledged message (whose file was not expired) is on disk once, whole, at the
    queue offset its put answered; each queue holds exactly them, in commit-log order."""
    with MmapMessageStore(root, CFG, Profile.V4_9, ManualClock(0), read_only=True) as store:
        low = store.get_min_phy_offset()
        kept = [a for a in acks if a.wrote_offset >= low] if expired else acks
        for a in kept:
            m = store.look_message_by_offset(a.wrote_offset)
            assert m is not None and (m.born_timestamp, wrong(m, a.queue_offset)) == (
                a.w * 1_000_000 + a.k,
                None,
            )
        by_queue: dict[tuple[str, int], list[Ack]] = {key: [] for key in QUEUES}
        for a in acks:
            sent = message(a.w, a.k)
            by_queue[(sent.topic, sent.queue_id)].append(a)
        for (topic, q), mine in by_queue.items():
            # Queue offsets are handed out in commit-log order, 0, 1, 2, … without a gap.
            assert [a.queue_offset for a in sorted(mine, key=lambda a: a.wrote_offset)] == list(
                range(len(mine))
            )
            assert store.get_max_offset_in_queue(topic, q) == len(mine)
            offset = store.get_min_offset_in_queue(topic, q)
            if not expired:
                assert offset == 0
            at = {a.queue_offset: a for a in mine}
            while offset < len(mine):
                res = store.get_message("G", topic, q, offset, 32)
                assert res.status is GetMessageStatus.FOUND, (topic, q, offset, res.status)
                for o, m in zip(res.msg_offsets, res.messages, strict=True):
                    assert (wrong(m, o), m.commitlog_offset) == (None, at[o].wrote_offset)
                offset = res.next_begin_offset


@pytest.fixture(autouse=True)
def quick_switches() -> Iterator[None]:
    """Switch threads every 0.2 ms, not 5: writers queue on the put lock while readers hold the
    interpreter, so this runs several times faster (and interleaves more finely)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    yield
    sys.setswitchinterval(before)


def test_four_writers_two_readers(tmp_path: Path) -> None:
    """The issue's case: 4 writer and 2 reader threads over one store (2,000 messages each
    under `make fuzz`)."""
    store = MmapMessageStore(tmp_path, CFG, Profile.V4_9, SystemClock())
    run = Run(store, seed=int(os.environ.get("PULLSPEC_THREAD_SEED", "17")))
    run.go(writers=4, readers=2, n=MESSAGES, extra=[])
    store.close()
    assert run.errors == []
    assert len(run.acks) == 4 * MESSAGES
    check_reopened(tmp_path, run.acks)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("transient", [False, True], ids=["mapped", "pwrite"])
def test_writers_readers_and_expiry(tmp_path: Path, compiled: bool, transient: bool) -> None:
    """Expiry rounds beside the writers and readers, every file but the last expiring at once
    (spare files reused, fast.spares): reads stay whole and right; what was not expired is
    intact after reopening. Both read paths: compiled scans and numpy."""
    cfg = attrs.evolve(CFG, file_reserved_time=0)
    store = MmapMessageStore(
        tmp_path, cfg, Profile.V4_9, SystemClock(), transient_store_pool=transient
    )
    run = Run(store, seed=3, expiring=True)
    rounds = []

    def expire() -> None:
        while not run.done.is_set():
            rounds.append(store.delete_expired_files())

    # With pwrite, batches of more than 1 KB are committed in parts (fast.commitlog.commit_part)
    # by the committer thread while readers and expiry run.
    parts: Any = mock.patch("pullspec.fast.commitlog.COMMIT_PART", 512)
    with kernels(compiled), parts if transient else contextlib.nullcontext():
        run.go(writers=3, readers=2, n=600, extra=[expire])
    store.close()
    assert run.errors == []
    assert sum(rounds) > 0  # files did expire while the others ran
    check_reopened(tmp_path, run.acks, expired=True)


def test_an_expired_file_a_reader_holds_is_deleted_once_released(tmp_path: Path) -> None:
    """fast.retired: expiry removes a file from the list at once, deletes it only once the
    reader that took the old list lets it go (the next round, or close)."""
    cfg = StoreConfig(
        mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80, file_reserved_time=0
    )
    store = MmapMessageStore(tmp_path, cfg, Profile.V4_9, ManualClock(1))
    store.put_messages([message(0, k) for k in range(30)])
    end, held = store.commit_log.snapshot()  # what a reader in the middle of a pull holds
    first = tmp_path / "commitlog" / f"{0:020d}"
    assert store.delete_expired_files() == len(held) - 1
    assert store.get_min_phy_offset() == held[-1].start
    assert first.exists()  # held: still on disk and mapped
    m = store.commit_log.record_at(0, 10, (end, held))
    assert m is not None and bytes(m[0].mm[4:8]) == b"\xda\xa3\x20\xa7"  # a record's magic
    del held, m
    assert store.delete_expired_files() == 0
    assert not first.exists()  # released: gone (deleted, or kept as a spare) by the next round
    store.close()


def kernels(compiled: bool) -> contextlib.ExitStack[bool | None]:
    """A context in which reads use the compiled scans or, when not `compiled`, numpy only."""
    stack = contextlib.ExitStack()
    if not compiled:
        stack.enter_context(mock.patch("pullspec.fast.reader.read_kernels", lambda: None))
    return stack


# -- every step of a put, with reads between -------------------------------------------------


def walk_log(store: MmapMessageStore, phys: int) -> int:
    """Walk the commit log record by record from the record at `phys` up to its max offset, as
    a reader may: every record below it is whole and right, and between records there are only
    end-of-file blanks. Returns the number of records."""
    end, count = store.get_max_phy_offset(), 0
    size = store.config.mapped_file_size_commit_log
    while 0 <= phys < end:
        m = store.look_message_by_offset(phys)
        if m is None:  # only an end-of-file blank may stand here: the next file follows
            f = store.commit_log.file_of(phys)
            assert f is not None
            magic = int.from_bytes(
                f.mm[phys - f.start + 4 : phys - f.start + 8], "big", signed=True
            )
            assert magic == BLANK_MAGIC_CODE, f"no record at {phys} below the max offset {end}"
            phys += size - phys % size
            continue
        assert wrong(m) is None
        phys += m.size
        count += 1
    return count


#: The steps of a put after which another thread may run: a file created, bytes written to the
#: commit log or a consume queue, the max offset published.
STEPS = (
    (CommitLog, "_new_file"),
    (CommitLog, "write"),
    (CommitLog, "commit_region"),
    (CommitLog, "publish"),
    (ConsumeQueue, "_write"),
    (ConsumeQueue, "_create"),
    (MappedFile, "create"),
)


@given(data=st.data(), plan=st.lists(st.sampled_from(("one", "list", "batch")), max_size=10))
@settings(max_examples=30, deadline=None)
def test_reads_between_any_two_steps_of_a_put(tmp_path_factory: Any, data: Any, plan: Any) -> None:
    """Hypothesis picks after which steps of the puts a reader runs and what it reads: every
    read sees only whole, right messages, max offsets that never go back, and — once a put has
    answered — its messages."""
    root = tmp_path_factory.mktemp("steps")
    small = StoreConfig(mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80)
    store = MmapMessageStore(root, small, Profile.V4_9, ManualClock(5))
    acked: list[Ack] = []
    highs: dict[tuple[str, int], int] = {}

    def read() -> None:
        for _ in range(data.draw(st.integers(0, 2), label="reads")):
            topic, q = data.draw(st.sampled_from(QUEUES), label="queue")
            high = store.get_max_offset_in_queue(topic, q)
            assert high >= highs.get((topic, q), 0)
            highs[(topic, q)] = high
            offset = data.draw(st.integers(0, high + 1), label="offset")
            res = store.get_message("G", topic, q, offset, data.draw(st.sampled_from((1, 8))))
            for o, m in zip(res.msg_offsets, res.messages, strict=True):
                assert wrong(m, o) is None
            if offset < high:
                assert (res.status, res.msg_offsets[:1]) == (GetMessageStatus.FOUND, [offset])
            for a in acked[-3:]:
                looked = store.look_message_by_offset(a.wrote_offset)
                assert looked is not None and wrong(looked, a.queue_offset) is None
        # From the last acknowledged record on: only the tail may be being written.
        walk_log(store, acked[-1].wrote_offset if acked else 0)

    with Interleaved(read):
        k = 0
        for kind in plan:
            msgs = [message(0, j) for j in range(k, k + (1 if kind == "one" else 5))]
            if kind == "one":
                results: Any = [store.put_message(msgs[0])]
            elif kind == "list":
                results = store.put_messages(msgs)
            else:
                results = store.put_batch(MessageBatch.from_messages(msgs))
            acked += [Ack(0, k + j, r.queue_offset, r.wrote_offset) for j, r in enumerate(results)]
            k += len(msgs)
        read()
    store.close()


class Interleaved:
    """Run `read` before and after every step of a put (STEPS), as another thread might."""

    def __init__(self, read: Callable[[], None]) -> None:
        self.read = read
        self.patches: list[Any] = []

    def __enter__(self) -> None:
        for owner, name in STEPS:
            original = getattr(owner, name)
            is_class = isinstance(owner.__dict__[name], classmethod)
            self.patches.append(
                mock.patch.object(owner, name, self._wrap(original, is_class), create=False)
            )
        for p in self.patches:
            p.start()

    def __exit__(self, *exc: object) -> None:
        for p in self.patches:
            p.stop()

    def _wrap(self, original: Callable[..., Any], is_class: bool) -> Any:
        read = self.read

        def step(*args: Any, **kwargs: Any) -> Any:
            read()
            out = original(*args[1:], **kwargs) if is_class else original(*args, **kwargs)
            read()
            return out

        return classmethod(step) if is_class else step


# -- kill -9 of four writer threads -----------------------------------------------------------

TRIALS = int(
    os.environ.get(
        "PULLSPEC_MULTI_KILL_TRIALS",
        "1000" if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else "3",
    )
)
SMALL = StoreConfig(mapped_file_size_commit_log=8192, mapped_file_size_consume_queue=200)
WRITERS = 4

WRITER = """
import random, sys, threading
sys.path.insert(0, sys.argv[3])
from test_fast_threads import SMALL, WRITERS, message
from pullspec.fast.batch import MessageBatch
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import SystemClock
from pullspec.spec.profiles import Profile
store = MmapMessageStore(sys.argv[1], SMALL, Profile.V4_9, SystemClock(), flush="sync")
printing = threading.Lock()

def write(w):
    rng = random.Random(int(sys.argv[2]) * 10 + w)
    k = 0
    while True:
        kind = rng.choice(("one", "one", "list", "batch"))
        msgs = [message(w, k + i) for i in range(1 if kind == "one" else rng.choice((2, 5, 33)))]
        if kind == "one":
            results = [store.put_message(msgs[0])]
        elif kind == "list":
            results = store.put_messages(msgs)
        else:
            results = store.put_batch(MessageBatch.from_messages(msgs))
        lines = "".join(f"{w} {k + i} {r.queue_offset} {r.wrote_offset}\\n"
                        for i, r in enumerate(results))
        with printing:  # whole lines: a line cut by the kill acknowledges nothing
            sys.stdout.write(lines)
            sys.stdout.flush()
        k += len(msgs)

threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(WRITERS)]
print("ready", flush=True)
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


@pytest.mark.parametrize("trial", range(TRIALS))
def test_kill_nine_four_writers(tmp_path: Path, trial: int) -> None:
    rng = random.Random(trial)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), str(trial), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    # Killed after a random number of acknowledgements (0 included: mid-first-put).
    for _ in range(rng.choice((0, rng.randrange(1, 40), rng.randrange(40, 200)))):
        if not proc.stdout.readline():
            break
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    acked = [tuple(map(int, line.split())) for line in out.split("\n")[:-1]]
    with MmapMessageStore(tmp_path, SMALL, Profile.V4_9, ManualClock(0)) as store:
        for w, k, queue_offset, phys in acked:
            m = store.look_message_by_offset(phys)
            assert m is not None and m.born_timestamp == w * 1_000_000 + k
            assert wrong(m, queue_offset) is None
        seen: dict[int, set[int]] = {w: set() for w in range(WRITERS)}
        for topic, q in QUEUES:
            offset = store.get_min_offset_in_queue(topic, q)
            assert offset == 0
            while offset < store.get_max_offset_in_queue(topic, q):
                r = store.get_message("G", topic, q, offset, 32)
                assert r.status is GetMessageStatus.FOUND  # no gap
                for o, m in zip(r.msg_offsets, r.messages, strict=True):
                    assert wrong(m, o) is None  # whole and its own
                    w, k = divmod(m.born_timestamp, 1_000_000)
                    assert k not in seen[w]  # once
                    seen[w].add(k)
                offset = r.next_begin_offset
        for ks in seen.values():  # each writer's puts followed one another
            assert ks == set(range(len(ks)))
        assert {(w, k) for w, k, _, _ in acked} <= {(w, k) for w, ks in seen.items() for k in ks}
        assert store.verify().problems == ()
        store.put_message(message(0, len(seen[0])))  # and the store takes writes again
