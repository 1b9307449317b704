"""Peak memory of the bench's long runs, each measured in a child process of its own (so that
nothing the bench itself holds counts): a W1 store opened and pulled from offset 0 to its max
offset, and a simulation of many steps.

A child reports, in one JSON line, its peak resident set (VmHWM, which counts the mapped pages
of the store files it read, that is page cache) and its peak anonymous memory (RssAnon, sampled
as it runs: the memory the process itself allocated, beyond the page cache), with the anonymous
memory it had before the run (the interpreter and the imported modules) to subtract.

    >>> fields = status_kib("VmHWM:\\t 1000 kB\\nRssAnon:\\t  200 kB\\nName:\\tpython\\n")
    >>> fields == {"VmHWM": 1000, "RssAnon": 200}
    True
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

#: Pulls (or simulation steps) between two samples of RssAnon.
SAMPLE_EVERY = 1000


def status_kib(text: str) -> dict[str, int]:
    """The kB fields of a /proc/<pid>/status text, by name."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[name] = int(parts[0])
    return out


def _status() -> dict[str, int]:
    return status_kib(Path("/proc/self/status").read_text())


class _Peak:
    """The largest RssAnon seen by `sample`."""

    def __init__(self) -> None:
        self.baseline = _status().get("RssAnon", 0)
        self.anon = self.baseline

    def sample(self) -> None:
        self.anon = max(self.anon, _status().get("RssAnon", 0))

    def report(self, **extra: float) -> dict[str, float]:
        self.sample()
        hwm = _status().get("VmHWM", 0)
        return {
            "peak_rss_mb": hwm / 1024,
            "peak_anon_mb": self.anon / 1024,
            "baseline_anon_mb": self.baseline / 1024,
            "anon_growth_mb": (self.anon - self.baseline) / 1024,
            **extra,
        }


def pull_w1(store_dir: str, file_size: int) -> dict[str, float]:
    """Open the W1 store at `store_dir` and pull queue T/0 from 0 to its max offset, 32 at a
    time with no filter (the bench's pull loop)."""
    from pullspec.fast.store import MmapMessageStore
    from pullspec.spec.clock import ManualClock
    from pullspec.spec.config import StoreConfig
    from pullspec.spec.profiles import Profile

    peak = _Peak()
    config = StoreConfig(mapped_file_size_commit_log=file_size)
    t = time.perf_counter()
    messages = calls = 0
    with MmapMessageStore(store_dir, config, Profile.V4_9, ManualClock(0)) as store:
        peak.sample()
        offset, end = 0, store.get_max_offset_in_queue("T", 0)
        while offset < end:
            r = store.get_message("G", "T", 0, offset, 32, None)
            messages += r.message_count
            offset = r.next_begin_offset
            calls += 1
            if calls % SAMPLE_EVERY == 0:
                peak.sample()
        peak.sample()
    return peak.report(messages=messages, seconds=time.perf_counter() - t)


def simulate(steps: int) -> dict[str, float]:
    """Run `steps` steps of the reference simulator (seed 1, the CLI's defaults) and check it."""
    from pullspec.reference.sim.config import SimConfig
    from pullspec.reference.sim.simulator import simulate as run_simulation

    peak = _Peak()
    t = time.perf_counter()
    result, _sim = run_simulation(
        SimConfig(seed=1), steps, progress=lambda _done, _ms: peak.sample(), every=SAMPLE_EVERY
    )
    return peak.report(steps=result.steps, seconds=time.perf_counter() - t)


def measure(*args: str) -> dict[str, float]:
    """Run `python -m pullspec.conformance.bench_memory *args` and answer its report."""
    done = subprocess.run(
        [sys.executable, "-m", "pullspec.conformance.bench_memory", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    report: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def main(argv: list[str]) -> None:
    """`w1 <store dir> <commit-log file size>` or `simulate <steps>`: print the report."""
    if argv[:1] == ["w1"] and len(argv) == 3:
        print(json.dumps(pull_w1(argv[1], int(argv[2]))))
    elif argv[:1] == ["simulate"] and len(argv) == 2:
        print(json.dumps(simulate(int(argv[1]))))
    else:
        raise SystemExit("usage: bench_memory w1 <store dir> <file size> | simulate <steps>")


if __name__ == "__main__":  # pragma: no cover - the child process of `measure`
    main(sys.argv[1:])
