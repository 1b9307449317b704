"""Benchmarks of the fast store on the workloads of ../shared/bench (W1: one queue, W2: 64 queues
round robin), measured in one run beside the reference model and the machine's raw numbers.

`run(quick)` returns a flat dict of figures (rates per second, ratios, seconds). Pull and put
timings are CPU seconds of this process (best of several passes), so other load on a shared
machine does not skew them; file-system figures (durable appends, raw writes, reopens) are
wall-clock, best of several. Ratios are reference time / fast time (higher is better for fast)
or fast rate / raw rate. The issue's figures:

- `w1_*_fast_vs_reference`, `w2_*_fast_vs_reference`: get_message per call (batch 32), ≥ 10×.
- `w2_*_batched_vs_reference`, `w2_*_batched_msgs_per_s`: get_messages, one call per round of
  64 queues, per request against the reference's get_message; ≥ 100× and ≥ 1 M messages/s.
- `filtered_scan_fraction_of_copy`: consume-queue bytes scanned per second by the W1 Tag3 pulls,
  made by `pull_through` (one compiled pass, the same 3,127 answers as the per-call loop), over a
  numpy copy of as many bytes; ≥ 50 %. `pull_loop_scan_fraction_of_copy` is the same through
  one get_message call per pull, `bulk_tag_mask_fraction_of_copy` the tag-mask stage alone.
- `append_fraction_of_raw_write`: W1 appended as MessageBatches and flushed (durable), against
  writing as many bytes and fdatasync — the README's `dd conv=fdatasync`; ≥ 50 %.
  `append_fraction_of_page_cache_write` compares the appends' CPU rate with an unsynced write.
- `recovery_gb_per_s`: bytes validated (headers and body CRCs) per second of a clean reopen; ≥ 1.

The stores are opened with warm_mapped_files (RocketMQ's warmMapedFileEnable), as a broker tuned
for throughput is, and the compiled kernels are loaded before timing (as a JVM is warm). The Java
peer's figures (bench README, run A) are included under `peer_java_*` for comparison; they were
measured on a machine of the same kind, not in this run.
"""

from __future__ import annotations

import functools
import gc
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import attrs
import numpy as np

from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.filter import ExpressionMessageFilter, tag_filter
from pullspec.spec.message import BrokerInnerMessage, HostAddress
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter, MessageStore

if TYPE_CHECKING:
    from pullspec.fast.batch import MessageBatch
    from pullspec.fast.store import MmapMessageStore
    from pullspec.reference.store import ReferenceMessageStore

T = TypeVar("T")

MIB = 1 << 20
BORN_HOST = HostAddress(b"\x7f\x00\x00\x01", 8123)
STORE_HOST = HostAddress(b"\x7f\x00\x00\x01", 10911)
PEER_JAVA = {
    "peer_java_w1_all_us_per_call": 4.0,
    "peer_java_w1_tag3_us_per_call": 11.8,
    "peer_java_w1_tag3_entries_per_s": 27.1e6,
    "peer_java_w2_all_msgs_per_s": 6.6e6,
    "peer_java_w2_tag3_msgs_per_s": 2.62e6,
    "peer_java_w2_tag3_us_per_call": 12.0,
    "peer_java_w1_put_msgs_per_s": 275e3,
    "peer_java_w1_reopen_clean_s": 1.12,
    "peer_java_w1_reopen_abort_s": 1.09,
    "peer_java_cq_rebuild_s": 2.35,
}
#: The ratios to the Java peer (README run A, measured on a machine of the same kind, not in
#: this run), each > 1 when fast is better: (ratio, fast figure, peer figure, whether the figure
#: is a rate, else a time).
VS_JAVA = (
    ("w1_put_single_vs_java", "w1_put_single_msgs_per_s", "peer_java_w1_put_msgs_per_s", True),
    ("w1_all_per_call_vs_java", "w1_all_us_per_call", "peer_java_w1_all_us_per_call", False),
    ("w1_tag3_per_call_vs_java", "w1_tag3_us_per_call", "peer_java_w1_tag3_us_per_call", False),
    ("w1_tag3_entries_vs_java", "w1_tag3_entries_per_s", "peer_java_w1_tag3_entries_per_s", True),
    (
        "w2_all_batched_msgs_vs_java",
        "w2_all_batched_msgs_per_s",
        "peer_java_w2_all_msgs_per_s",
        True,
    ),
    (
        "w2_tag3_batched_msgs_vs_java",
        "w2_tag3_batched_msgs_per_s",
        "peer_java_w2_tag3_msgs_per_s",
        True,
    ),
    ("w2_tag3_per_call_vs_java", "w2_tag3_us_per_request", "peer_java_w2_tag3_us_per_call", False),
    ("w1_reopen_clean_vs_java", "w1_reopen_clean_s", "peer_java_w1_reopen_clean_s", False),
    ("w1_reopen_abort_vs_java", "w1_reopen_abort_s", "peer_java_w1_reopen_abort_s", False),
    ("cq_rebuild_vs_java", "w1_reopen_cq_rebuild_s", "peer_java_cq_rebuild_s", False),
)


@attrs.frozen
class Sizes:
    """How much each part of the bench runs: the full workloads, `quick` (about 20× smaller) or
    a tiny one for tests (the figures' names, not their values)."""

    w1: int = 1_000_000
    w2_queues: int = 64
    w2_per_queue: int = 16_000
    reference: int = 100_000
    passes: int = 5
    file_size: int = 128 * MIB
    #: Steps of the simulation whose peak memory is measured (0: not measured). 10^6 steps need
    #: about 1 GB and took 93 s to 32 minutes on the development machine: `--sim-steps 1000000`.
    sim_steps: int = 100_000

    @property
    def full(self) -> bool:
        """The README's workloads exactly (its invariants then hold)."""
        return self.w1 == 1_000_000 and self.w2_per_queue == 16_000

    @classmethod
    def quick(cls) -> Sizes:
        """About 20× smaller."""
        return cls(50_000, 64, 800, 10_000, 3, 8 * MIB, 10_000)


def vs_java(out: dict[str, float]) -> dict[str, float]:
    """The `*_vs_java` ratios of the figures `out` has (peer time / fast time, or fast rate /
    peer rate)."""
    ratios = {}
    for name, figure, peer, rate in VS_JAVA:
        if out.get(figure):
            ratios[name] = out[figure] / PEER_JAVA[peer] if rate else PEER_JAVA[peer] / out[figure]
    return ratios


#: (calls, messages, entries scanned) of a W1 pass, as ../shared/bench/README.md records them.
W1_INVARIANTS = {"all": (31_250, 1_000_000, 1_000_000), "tag3": (3_127, 100_000, 1_000_000)}
#: (calls, messages) of a W2 pass.
W2_INVARIANTS = {"all": (32_000, 1_024_000), "tag3": (3_264, 102_400)}


def w_message(k: int, queue_id: int, tag: int, born: int) -> BrokerInnerMessage:
    """Message k of the workloads: topic T, TAGS Tag<d> only, a 100-byte ASCII body."""
    return BrokerInnerMessage(
        topic="T",
        queue_id=queue_id,
        body=(b"%010d" % k) * 10,
        properties={"TAGS": f"Tag{tag}"},
        born_timestamp=born,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )


def w1(n: int, born: int) -> list[BrokerInnerMessage]:
    """W1: n messages to queue 0, tag Tag(k mod 10)."""
    return [w_message(k, 0, k % 10, born) for k in range(n)]


#: Messages per MessageBatch in the columnar append: 20 000 W1 messages encode (client side,
#: MessageDecoder.encodeMessages) to about 2.6 MB, within a broker's default 4 MiB
#: maxMessageSize for a batch.
BATCH = 20_000


def w1_batch(lo: int, hi: int, born: int) -> MessageBatch:
    """W1 messages lo … hi − 1 as a fast.MessageBatch: the same messages as w1's."""
    from pullspec.fast.batch import MessageBatch

    bodies = b"".join((b"%010d" % k) * 10 for k in range(lo, hi))
    return MessageBatch(
        "T",
        bodies,
        np.arange(0, (hi - lo + 1) * 100, 100, dtype=np.int64),
        queue_ids=0,
        property_sets=[{"TAGS": f"Tag{d}"} for d in range(10)],
        property_index=np.arange(lo, hi, dtype=np.int64) % 10,
        born_timestamps=born,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )


def w2_batch(lo: int, hi: int, queues: int, born: int) -> MessageBatch:
    """W2 messages lo … hi − 1 as a fast.MessageBatch: the same messages as w2's."""
    from pullspec.fast.batch import MessageBatch

    k = np.arange(lo, hi, dtype=np.int64)
    return MessageBatch(
        "T",
        b"".join((b"%010d" % i) * 10 for i in range(lo, hi)),
        np.arange(0, (hi - lo + 1) * 100, 100, dtype=np.int64),
        queue_ids=k % queues,
        property_sets=[{"TAGS": f"Tag{d}"} for d in range(10)],
        property_index=(k // queues) % 10,
        born_timestamps=born,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )


def w2(queues: int, per_queue: int, born: int) -> list[BrokerInnerMessage]:
    """W2: message k to queue k mod 64, tag Tag((k div 64) mod 10)."""
    return [w_message(k, k % queues, (k // queues) % 10, born) for k in range(queues * per_queue)]


def _median_time(fn: Callable[[], T], passes: int) -> tuple[float, T]:
    """The fastest of `passes` (at least one) runs of `fn` in CPU seconds of this process (the
    machine is shared: other processes' load must not count), and its last result."""
    times = []
    for _ in range(passes - 1):
        gc.collect()
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    gc.collect()
    t = time.process_time()
    out = fn()
    times.append(time.process_time() - t)
    return min(times), out


def pull_loop(
    store: MessageStore, queues: Sequence[int], filt: MessageFilter | None, batched: bool = False
) -> list[int]:
    """The bench driver: from offset 0, pull 32 at a time until nextBeginOffset ≥ maxOffset,
    round robin over `queues`; returns [calls, messages, bytes, entries scanned]. Batched, each
    round is one get_messages call (the fast store's) whose columns are read without building
    result objects."""
    if batched:
        from pullspec.fast.store import MmapMessageStore

        if not isinstance(store, MmapMessageStore):
            raise UnsupportedError("only the fast store pulls batched (get_messages)")
        return _pull_loop_batched(store, queues, filt)
    # Each queue's (queue id, offset, max offset); a round pulls every queue not yet at its max.
    # The driver spends as little per call as it can (a bound method, one field read each): its
    # own cost is counted in every figure it gives.
    active = [(q, 0, store.get_max_offset_in_queue("T", q)) for q in queues]
    active = [a for a in active if a[1] < a[2]]
    get = store.get_message
    calls = msgs = size = scanned = 0
    while active:
        following: list[tuple[int, int, int]] = []
        for q, offset, maximum in active:
            r = get("G", "T", q, offset, 32, filt)
            calls += 1
            msgs += r.message_count
            size += r.buffer_total_size
            next_offset = r.next_begin_offset
            scanned += next_offset - offset
            if next_offset < maximum:
                following.append((q, next_offset, maximum))
        active = following
    return [calls, msgs, size, scanned]


def _pull_loop_batched(
    store: MmapMessageStore, queues: Sequence[int], filt: MessageFilter | None
) -> list[int]:
    qs = np.array(queues, dtype=np.int64)
    offsets = np.zeros(len(qs), dtype=np.int64)
    maxima = np.array([store.get_max_offset_in_queue("T", q) for q in queues], dtype=np.int64)
    calls = msgs = size = scanned = 0
    active = np.flatnonzero(offsets < maxima)
    while len(active):
        at = offsets[active]
        res = store.get_messages(
            [
                ("G", "T", q, o, 32, filt)
                for q, o in zip(qs[active].tolist(), at.tolist(), strict=True)
            ]
        )
        calls += len(active)
        msgs += int(res.message_counts.sum())
        size += int(res.buffer_total_sizes.sum())
        nexts = res.next_begin_offsets
        scanned += int((nexts - at).sum())
        offsets[active] = nexts
        active = active[nexts < maxima[active]]
    return [calls, msgs, size, scanned]


def _raw_write_rate(directory: Path, total: int, sync: bool) -> float:
    """Bytes per second of writing `total` bytes sequentially in 1 MiB chunks (wall clock),
    then fdatasync when `sync`."""
    chunk = np.frombuffer(os.urandom(MIB), dtype=np.uint8).tobytes()
    path = directory / "raw"
    n = max(1, total // MIB)
    t = time.perf_counter()
    with path.open("wb") as fh:
        for _ in range(n):
            fh.write(chunk)
        fh.flush()
        if sync:
            os.fdatasync(fh.fileno())
    elapsed = time.perf_counter() - t
    path.unlink()
    return n * MIB / elapsed


def _copy_rate(nbytes: int) -> float:
    src = np.frombuffer(os.urandom(min(nbytes, 16 * MIB)), dtype=np.uint8)
    src = np.resize(src, nbytes)
    dst = np.empty_like(src)
    elapsed, _ = _median_time(lambda: np.copyto(dst, src), 5)
    return nbytes / elapsed


def _fast(
    directory: Path,
    config: StoreConfig,
    clock: ManualClock,
    *,
    warm_mapped_files: bool = True,
    transient_store_pool: bool = True,
) -> MmapMessageStore:
    from pullspec.fast.store import MmapMessageStore

    # Tuned as a broker for throughput is: warmMapedFileEnable.
    return MmapMessageStore(
        directory,
        config,
        Profile.V4_9,
        clock,
        warm_mapped_files=warm_mapped_files,
        transient_store_pool=transient_store_pool,
    )


def _reference(config: StoreConfig, clock: ManualClock) -> ReferenceMessageStore:
    from pullspec.reference.store import ReferenceMessageStore

    return ReferenceMessageStore(config, Profile.V4_9, clock=clock)


def _put(store: MessageStore, msgs: list[BrokerInnerMessage], batch: int) -> None:
    for i in range(0, len(msgs), batch):
        store.put_messages(msgs[i : i + batch])


def run(quick: bool = False, sizes: Sizes | None = None) -> dict[str, float]:
    """Measure everything in one run; `quick` scales the workloads down about 20×, `sizes`
    sets them."""
    if sizes is None:
        sizes = Sizes.quick() if quick else Sizes()
    n1 = sizes.w1
    w2_queues, w2_per = sizes.w2_queues, sizes.w2_per_queue
    n_ref = sizes.reference
    passes = sizes.passes
    reopens = 3
    file_size = sizes.file_size
    config = StoreConfig(mapped_file_size_commit_log=file_size)
    out: dict[str, float] = {"quick": float(not sizes.full), "w1_messages": float(n1)}
    tag3 = tag_filter("T", "Tag3")
    root = Path(tempfile.mkdtemp(prefix="pullspec-bench-"))
    clock = ManualClock(int(time.time() * 1000))
    try:
        born = clock.now_ms()
        # Appends as BrokerInnerMessage lists (built, then stored 1000 at a time) and one by
        # one, on a tenth of W1.
        t = time.process_time()
        part = w1(n1 // 10, born)
        build = time.process_time() - t
        listed = _fast(root / "list", config, clock)
        t = time.process_time()
        _put(listed, part, 1000)
        put_s = time.process_time() - t
        out["w1_put_msgs_per_s"] = len(part) / (put_s + build)
        out["w1_put_list_store_only_msgs_per_s"] = len(part) / put_s
        out["w1_put_list_store_only_mb_per_s"] = listed.get_max_phy_offset() / put_s / 1e6
        listed.close()
        # One put_message per message (store time, best of `passes` fresh stores).
        best = float("inf")
        for i in range(passes):
            single = _fast(root / f"single-{i}", config, clock)
            gc.collect()
            t = time.process_time()
            for m in part:
                single.put_message(m)
            best = min(best, time.process_time() - t)
            single.close()
            shutil.rmtree(root / f"single-{i}")
        out["w1_put_single_msgs_per_s"] = len(part) / best
        out["w1_put_single_us_per_msg"] = best / len(part) * 1e6
        del part
        # The columnar append: W1 as MessageBatches of BATCH messages (CPU seconds, store only),
        # after loading the compiled encoder (as a JVM's JIT is warm).
        from pullspec.fast.encode_kernels import warm_up

        warm_up()
        t = time.process_time()
        batches = [w1_batch(lo, min(lo + BATCH, n1), born) for lo in range(0, n1, BATCH)]
        out["w1_batch_build_s"] = time.process_time() - t
        store = _fast(root / "w1", config, clock)
        t = time.process_time()
        for b in batches:
            store.put_batch(b)
        put_s = time.process_time() - t
        log_bytes = store.get_max_phy_offset()
        out["w1_put_batch_msgs_per_s"] = n1 / put_s
        out["w1_put_batch_mb_per_s"] = log_bytes / put_s / 1e6
        store.flush()  # nothing of it left for the disk to write while the next runs are timed
        # Durable: the same appends into a fresh store then flush (msync, checkpoint), wall
        # clock, against writing as many bytes and fdatasync — the README's `dd conv=fdatasync`.
        # The two alternate, so that both meet the same state of the machine (whose disk
        # latency swings widely from one run to the next); best of 5 each.
        durable, raw, cached, cpu = float("inf"), 0.0, 0.0, float("inf")
        pairs = []
        for i in range(5):
            raw_i = _raw_write_rate(root, log_bytes, sync=True)
            raw = max(raw, raw_i)
            d = _fast(root / f"durable-{i}", config, clock)
            t, c = time.perf_counter(), time.process_time()
            for b in batches:
                d.put_batch(b)
            d.flush()
            durable_i = time.perf_counter() - t
            # The process's CPU (encoding, the copies into the page cache, the flusher thread).
            cpu = min(cpu, time.process_time() - c)
            durable = min(durable, durable_i)
            pairs.append((log_bytes / durable_i) / raw_i)
            d.close()
            shutil.rmtree(root / f"durable-{i}")
            cached = max(cached, _raw_write_rate(root, log_bytes, sync=False))
        del batches
        out["append_durable_mb_per_s"] = log_bytes / durable / 1e6
        out["append_durable_cpu_s"] = cpu
        out["raw_write_mb_per_s"] = raw / 1e6
        out["raw_write_page_cache_mb_per_s"] = cached / 1e6
        out["append_fraction_of_raw_write"] = (log_bytes / durable) / raw
        # The spread of the five pairs, each durable run against the raw write just before it,
        # and what the CPU would allow if it were spent on one core and the disk wrote for free.
        # The committer thread (fast.commitlog.commit_part) spreads it over two, so a fraction
        # above this one shows that overlap at work.
        out["append_fraction_of_raw_write_pair_min"] = min(pairs)
        out["append_fraction_of_raw_write_pair_max"] = max(pairs)
        out["append_cpu_ceiling_fraction_of_raw_write"] = (log_bytes / cpu) / raw
        out["append_fraction_of_page_cache_write"] = (log_bytes / put_s) / cached

        # Pulls on W1: '*' and Tag3; the filtered scan against a numpy copy of the CQ bytes.
        for name, filt in (("all", None), ("tag3", tag3)):
            pull_loop(store, [0], filt)
            elapsed, (calls, got, _size, scanned) = _median_time(
                functools.partial(pull_loop, store, [0], filt), passes
            )
            if sizes.full:  # the bench README's invariants, which both Java runs gave
                assert W1_INVARIANTS[name] == (calls, got, scanned)
            out[f"w1_{name}_calls"] = calls
            out[f"w1_{name}_messages"] = got
            out[f"w1_{name}_us_per_call"] = elapsed / calls * 1e6
            out[f"w1_{name}_msgs_per_s"] = got / elapsed
            out[f"w1_{name}_entries_per_s"] = scanned / elapsed
        # The same pulls made by pull_through: one compiled pass through the queue.
        for name, filt in (("all", None), ("tag3", tag3)):
            elapsed, chain = _median_time(
                functools.partial(store.pull_through, "G", "T", 0, 0, 32, filt), passes
            )
            assert out[f"w1_{name}_calls"] == len(chain)
            assert out[f"w1_{name}_messages"] == int(chain.message_counts.sum())
            out[f"w1_{name}_pull_through_msgs_per_s"] = int(chain.message_counts.sum()) / elapsed
            out[f"w1_{name}_pull_through_entries_per_s"] = n1 / elapsed
        copy = _copy_rate(n1 * 20)
        out["numpy_copy_gb_per_s"] = copy / 1e9
        out["pull_loop_scan_fraction_of_copy"] = out["w1_tag3_entries_per_s"] * 20 / copy
        out["filtered_scan_fraction_of_copy"] = (
            out["w1_tag3_pull_through_entries_per_s"] * 20 / copy
        )
        out["bulk_tag_mask_fraction_of_copy"] = _bulk_mask_rate(store, tag3) * 20 / copy

        # Recovery: clean reopen (validate + CRC), crash reopen (everything re-dispatched from
        # a zeroed checkpoint), consume queues rebuilt from the commit log. Wall-clock, best of
        # `reopens` after one untimed clean reopen (compiled kernels loaded, as a JVM is warm).
        store.close()
        _fast(root / "w1", config, clock).close()
        for label in ("clean", "abort", "cq_rebuild"):
            best = float("inf")
            for _ in range(reopens):
                if label == "abort":
                    _crash(root / "w1")
                if label == "cq_rebuild":
                    shutil.rmtree(root / "w1" / "consumequeue", ignore_errors=True)
                    (root / "w1" / "abort").unlink(missing_ok=True)
                gc.collect()
                t = time.perf_counter()
                reopened = _fast(root / "w1", config, clock)
                elapsed = time.perf_counter() - t
                if elapsed < best:
                    best, report = elapsed, reopened.recovery
                assert reopened.get_max_offset_in_queue("T", 0) == n1
                reopened.close()
            out[f"w1_reopen_{label}_s"] = best
            if label == "clean":
                out["recovery_gb_per_s"] = report.bytes_validated / best / 1e9
                out["recovery_bytes_validated"] = float(report.bytes_validated)
        # Memory: the W1 store opened and pulled through, in a child process.
        _memory(out, "w1_pulled", "w1", str(root / "w1"), str(file_size))

        # W2: interleaved puts, round-robin pulls one by one and batched.
        batches = [
            w2_batch(lo, min(lo + BATCH, w2_queues * w2_per), w2_queues, born)
            for lo in range(0, w2_queues * w2_per, BATCH)
        ]
        store2 = _fast(root / "w2", config, clock)
        t = time.process_time()
        for b in batches:
            store2.put_batch(b)
        out["w2_put_batch_msgs_per_s"] = w2_queues * w2_per / (time.process_time() - t)
        del batches
        queues = list(range(w2_queues))
        for name, filt in (("all", None), ("tag3", tag3)):
            for batched in (False, True):
                key = f"w2_{name}{'_batched' if batched else ''}"
                elapsed, (calls, got, _size, _scanned) = _median_time(
                    functools.partial(pull_loop, store2, queues, filt, batched), passes
                )
                if sizes.full:
                    assert W2_INVARIANTS[name] == (calls, got), key
                out[f"{key}_us_per_request"] = elapsed / calls * 1e6
                out[f"{key}_msgs_per_s"] = got / elapsed
        store2.close()

        # The reference model on scaled-down copies of the same workloads.
        _versus_reference(out, root, config, clock, n_ref, tag3, passes)
        if sizes.sim_steps:  # last: minutes for 10^6 steps, and nothing else is timed then
            _memory(out, "sim", "simulate", str(sizes.sim_steps))
        out.update(PEER_JAVA)
        out.update(vs_java(out))
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _memory(out: dict[str, float], prefix: str, *args: str) -> None:
    """Peak memory of `bench_memory` run with `args` in a child process, as `<prefix>_*`
    figures."""
    from pullspec.conformance.bench_memory import measure

    try:
        report = measure(*args)
    except (OSError, ValueError, subprocess.SubprocessError):
        return  # the other figures still count; these are then missing from the output
    for key, value in report.items():
        out[f"{prefix}_{key}"] = float(value)


def _bulk_mask_rate(store: MmapMessageStore, filt: MessageFilter | None) -> float:
    """Entries per second of the consume-queue stage alone: the tag mask of every entry of
    queue T/0, read file by file from the mapped big-endian entries."""
    from pullspec.fast.scan import tag_mask

    queue = store.queues[("T", 0)]

    def scan() -> int:
        hits = 0
        for i in range(len(queue.files)):
            tags = queue.views[i]["tags"][: queue.readable(i) // 20].astype(np.int64)
            mask = tag_mask(filt, tags)
            hits += int(np.count_nonzero(mask)) if mask is not None else 0
        return hits

    elapsed, _ = _median_time(scan, 5)
    return float(store.get_max_offset_in_queue("T", 0) / elapsed)


def _crash(directory: Path) -> None:
    """Make the directory look like a crashed writer's with an empty checkpoint."""
    (directory / "abort").touch()
    with (directory / "checkpoint").open("r+b") as fh:
        fh.write(bytes(4096))


def _versus_reference(
    out: dict[str, float],
    root: Path,
    config: StoreConfig,
    clock: ManualClock,
    n_ref: int,
    tag3: ExpressionMessageFilter | None,
    passes: int,
) -> None:
    per_queue = max(n_ref // 64, 100)
    for label, msgs, queues in (
        ("w1", w1(n_ref, clock.now_ms()), [0]),
        ("w2", w2(64, per_queue, clock.now_ms()), list(range(64))),
    ):
        fast_store = _fast(root / f"ref-{label}", config, clock)
        ref_store = _reference(config, clock)
        _put(fast_store, msgs, 1000)
        _put(ref_store, msgs, 1000)
        for name, filt in (("all", None), ("tag3", tag3)):
            times = {}
            for side, st, batched in (
                ("fast", fast_store, False),
                ("fast_batched", fast_store, True),
                ("reference", ref_store, False),
            ):
                elapsed, (calls, _got, _s, _n) = _median_time(
                    functools.partial(pull_loop, st, queues, filt, batched), passes
                )
                times[side] = elapsed / calls
            out[f"{label}_{name}_reference_us_per_call"] = times["reference"] * 1e6
            out[f"{label}_{name}_fast_vs_reference"] = times["reference"] / times["fast"]
            out[f"{label}_{name}_batched_vs_reference"] = times["reference"] / times["fast_batched"]
        fast_store.close()
        del ref_store
