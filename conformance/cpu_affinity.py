"""Holding a process tree to a number of CPUs (Linux `sched_setaffinity`), so that a benchmark
run on `local[1]` has one CPU, not one task slot beside a second CPU its other processes use.

A Spark `local[1]` session runs one task at a time, but the driver, the JVM's own threads
(scheduling, the Parquet write, garbage collection) and the Python worker's daemon may run on
any CPU the machine lets them: on a 2-CPU machine the 1-core runs of `pullspec
bench-campaign` got 1.00–1.10 CPU seconds per second of wall time, the part over 1 taken
from the second CPU. Their 1→2-core speed-up then compared one CPU and a bit against two.

`pinned(n)` sets the affinity of every thread of the process and of its descendants (the JVM,
the Python workers) to the first `n` CPUs this process may use; a thread or process they start
inherits it. Leaving the block gives the whole tree, those started inside included, the CPUs
the process had on entering.

    >>> with pinned(1) as cpus:
    ...     held = cpus is None or len(os.sched_getaffinity(0)) == 1
    >>> held
    True
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator

from pullspec.conformance.cpu_times import tree_pids


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may run on (every CPU `os.cpu_count` counts where the platform
    cannot say). Example: ``len(allowed_cpus()) >= 1`` is True."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is None:
        return frozenset(range(os.cpu_count() or 1))
    return frozenset(getaffinity(0))


def _threads(pid: int) -> list[int]:
    """The thread ids of process `pid` (just `pid` where /proc lists none)."""
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return [pid]


def set_tree(cpus: Collection[int], root: int | None = None) -> None:
    """Let every thread of process `root` (default: this one) and of its descendants run on
    `cpus` only; nothing where the platform has no `sched_setaffinity`. A thread or process
    that ends meanwhile is skipped. Example: ``set_tree(allowed_cpus())`` lets this process's
    whole tree run on every CPU it may use."""
    setaffinity = getattr(os, "sched_setaffinity", None)
    if setaffinity is None:
        return
    # Twice: a thread started while the first pass ran inherits its creator's old set when
    # its creator was not yet done.
    for _ in range(2):
        for pid in tree_pids(root):
            for tid in _threads(pid):
                with contextlib.suppress(OSError):  # ended, or not ours to change
                    setaffinity(tid, cpus)


@contextlib.contextmanager
def pinned(count: int, root: int | None = None) -> Iterator[frozenset[int] | None]:
    """Within the block, process `root` (default: this one) and its descendants run on the
    first `count` CPUs it may use, lowest numbers first; yields that set, or None when nothing
    was held: `count` is at least the CPUs allowed, or the platform has no
    `sched_setaffinity`. Afterwards the tree gets back the CPUs `root` had on entering."""
    if count < 1:
        raise ValueError(f"pinned needs at least one CPU, got {count}")
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is None or not hasattr(os, "sched_setaffinity"):
        yield None
        return
    before = frozenset(getaffinity(0 if root is None else root))
    if count >= len(before):
        yield None
        return
    held = frozenset(sorted(before)[:count])
    set_tree(held, root)
    try:
        yield held
    finally:
        set_tree(before, root)
