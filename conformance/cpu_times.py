"""CPU seconds a process and all its descendants have used (Linux /proc), to tell a contended
run from a poorly scaling one: a job that got less CPU per core of wall time than its cores
waited for them (other processes on the machine ran instead).

A process's fields 14–17 of /proc/<pid>/stat are its user and system time and those of its
reaped children, in clock ticks. Summing all four over the live tree counts every process once:
a child still running by its own fields, one that ended in its parent's reaped fields.

    >>> stat = "42 (java -x) S 1 42 42 0 -1 4194560 9 0 0 0 150 50 7 3 20 0 30 0 5 1 2"
    >>> parse_stat(stat)
    (42, 1, 210)
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def parse_stat(text: str) -> tuple[int, int, int]:
    """(pid, parent pid, utime + stime + cutime + cstime in ticks) of a /proc/<pid>/stat line
    (the command name, in parentheses, may hold spaces)."""
    pid = int(text[: text.index(" ")])
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is the state (field 3): field n is fields[n - 3].
    return pid, int(fields[1]), sum(int(f) for f in fields[11:15])


def _processes() -> tuple[dict[int, int], dict[int, list[int]]]:
    """({pid: CPU ticks}, {parent pid: child pids}) of every live process; empty without /proc."""
    ticks: dict[int, int] = {}
    children: dict[int, list[int]] = {}
    try:
        entries = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return ticks, children
    for name in entries:
        try:
            pid, parent, used = parse_stat(Path(f"/proc/{name}/stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        ticks[pid] = used
        children.setdefault(parent, []).append(pid)
    return ticks, children


def _tree(children: dict[int, list[int]], root: int) -> list[int]:
    """`root` and its descendants in `children` ({parent pid: child pids}), root first."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_pids(root: int | None = None) -> list[int]:
    """Process `root` (default: this one) and its live descendants, root first; just `root`
    where /proc is missing."""
    return _tree(_processes()[1], os.getpid() if root is None else root)


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds used so far by process `root` (default: this one) and every descendant
    (reaped ones included); 0.0 where /proc is missing."""
    ticks, children = _processes()
    pids = _tree(children, os.getpid() if root is None else root)
    return sum(ticks.get(pid, 0) for pid in pids) / _TICK
