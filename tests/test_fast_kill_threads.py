"""kill -9 of a process whose four threads append to one fast store at once (issue 17): after
reopening, every put acknowledged (sync flush) is on disk with its own body at the queue offset
it answered; what is visible is whole and right, each writer's messages a prefix of what it put,
queue offsets without gaps or duplicates; the store verifies clean and takes writes again.

`make fuzz` runs 1000 trials (PULLSPEC_MULTI_KILL_TRIALS=n sets the number); `make test` a few.
The single-writer trials are in tests/test_fast_recovery.py.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_fast_threads import QUEUES, message, wrong

from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.profiles import Profile
from pullspec.spec.status import GetMessageStatus

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
from test_fast_threads import message
from test_fast_kill_threads import SMALL, WRITERS
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
