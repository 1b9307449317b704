"""A micro-benchmark of FastProcessQueue against the reference ProcessQueue, for `pullspec bench`.

The baseline is the reference model (resolved as the `reference` candidate) unless another
ProcessQueue factory is passed.

Workload: a queue holding `depth` cached messages (RocketMQ's pullThresholdForQueue default,
1000) takes batches of 32: concurrently (put 32 new offsets, remove the 32 oldest, as the
concurrent service acknowledges them) and orderly (put 32, take 32, commit). Times are CPU
seconds of this process, best of several passes, so other load on a shared machine does not
skew them (the convention of conformance.bench). Each figure is measured in the same run.

It lives in conformance, the one layer that sees both fast and the reference model.
"""

from __future__ import annotations

import functools
import gc
import time
from collections.abc import Callable, Sequence

from pullspec.conformance.candidates import factory
from pullspec.conformance.resolve import resolve
from pullspec.fast.process_queue import FastProcessQueue
from pullspec.spec.clock import Clock, ManualClock
from pullspec.spec.message import StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue

#: A ProcessQueue factory, as candidates provide it: `process_queue(clock, profile)`.
ProcessQueueFactory = Callable[[Clock, Profile], ProcessQueue]

BATCH = 32  #: messages per put / remove / take (a pull's default batch size)
DEPTH = 1000  #: cached messages throughout (pullThresholdForQueue's default)
BODY = 128  #: body bytes per message


def _messages(n: int) -> list[StoredMessage]:
    return [StoredMessage("T", 0, i, i * 200, 200, 0, bytes(BODY)) for i in range(n)]


def _batches(msgs: Sequence[StoredMessage], start: int, rounds: int) -> list[list[StoredMessage]]:
    return [list(msgs[start + r * BATCH : start + (r + 1) * BATCH]) for r in range(rounds)]


def _filled(factory: ProcessQueueFactory, msgs: Sequence[StoredMessage]) -> ProcessQueue:
    """A queue holding the first DEPTH messages (put in batches, untimed)."""
    q = factory(ManualClock(0), Profile.V4_9)
    for b in _batches(msgs, 0, DEPTH // BATCH):
        q.put_messages(b)
    q.put_messages(list(msgs[(DEPTH // BATCH) * BATCH : DEPTH]))
    return q


def _put_remove(factory: ProcessQueueFactory, rounds: int, msgs: Sequence[StoredMessage]) -> float:
    """CPU seconds of `rounds` × (put 32 new, remove the 32 oldest) at a steady DEPTH."""
    q = _filled(factory, msgs)
    puts, removes = _batches(msgs, DEPTH, rounds), _batches(msgs, 0, rounds)
    t0 = time.process_time()
    for put, remove in zip(puts, removes, strict=True):
        q.put_messages(put)
        q.remove_messages(remove)
    return time.process_time() - t0


def _put_take_commit(
    factory: ProcessQueueFactory, rounds: int, msgs: Sequence[StoredMessage]
) -> float:
    """CPU seconds of `rounds` × (put 32 new, take 32, commit) at a steady DEPTH."""
    q = _filled(factory, msgs)
    puts = _batches(msgs, DEPTH, rounds)
    t0 = time.process_time()
    for put in puts:
        q.put_messages(put)
        q.take_messages(BATCH)
        q.commit()
    return time.process_time() - t0


def _best(fn: Callable[[], float], passes: int) -> float:
    """The fastest of `passes` runs (garbage collection off while timing)."""
    best = float("inf")
    for _ in range(passes):
        gc.collect()
        gc.disable()
        try:
            best = min(best, fn())
        finally:
            gc.enable()
    return max(best, 1e-9)


def bench_process_queue(
    quick: bool, baseline: ProcessQueueFactory | None = None
) -> dict[str, float]:
    """Batch-32 put/remove and put/take/commit rates of FastProcessQueue and `baseline`.

    Keys: `pq_put_remove32_{fast,reference}_ops_per_s` (one op = one 32-message put or remove
    call), `pq_put_remove32_fast_vs_reference` (the ops/s ratio), and the same three for
    `pq_put_take_commit32` (one op = one put, take or commit call). `quick` runs fewer rounds.
    """
    if baseline is None:
        baseline = factory(resolve("reference"), "process_queue")
    ref: ProcessQueueFactory = baseline
    fast_rounds, ref_rounds, passes = (200, 10, 2) if quick else (2000, 60, 3)
    msgs = _messages(DEPTH + fast_rounds * BATCH)
    out: dict[str, float] = {}
    for name, workload, calls in (
        ("pq_put_remove32", _put_remove, 2),
        ("pq_put_take_commit32", _put_take_commit, 3),
    ):
        fast_s = _best(functools.partial(workload, FastProcessQueue, fast_rounds, msgs), passes)
        ref_s = _best(functools.partial(workload, ref, ref_rounds, msgs), passes)
        fast_rate = calls * fast_rounds / fast_s
        ref_rate = calls * ref_rounds / ref_s
        out[f"{name}_fast_ops_per_s"] = fast_rate
        out[f"{name}_reference_ops_per_s"] = ref_rate
        out[f"{name}_fast_vs_reference"] = fast_rate / ref_rate
    return out


if (
    __name__ == "__main__"
):  # pragma: no cover - manual run: python -m pullspec.conformance.pq_bench [--quick]
    import json
    import sys

    print(json.dumps(bench_process_queue("--quick" in sys.argv), indent=2))
