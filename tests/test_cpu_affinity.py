"""conformance.cpu_affinity: a process tree held to a number of CPUs, and given back its own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from pullspec.conformance import cpu_affinity

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(cpu_affinity.allowed_cpus()) < 2,
    reason="needs sched_setaffinity and at least two CPUs to hold a tree to one",
)


def _thread_cpus(thread: threading.Thread) -> set[int]:
    assert thread.native_id is not None
    return os.sched_getaffinity(thread.native_id)


def test_pinned_holds_the_threads_and_children_to_the_first_cpus_and_gives_them_back() -> None:
    before = os.sched_getaffinity(0)
    first = min(before)
    release = threading.Event()
    old_thread = threading.Thread(target=release.wait)
    old_thread.start()
    wait_for_stdin = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    old_child = subprocess.Popen(wait_for_stdin, stdin=subprocess.PIPE)
    new_thread = threading.Thread(target=release.wait)
    new_child: subprocess.Popen[bytes] | None = None
    try:
        with cpu_affinity.pinned(1) as held:
            new_child = subprocess.Popen(wait_for_stdin, stdin=subprocess.PIPE)
            new_thread.start()
            assert frozenset({first}) == held
            # This thread, one started before and one inside; a child started before, and one
            # started inside (it inherits the set).
            assert {first} == os.sched_getaffinity(0)
            assert {first} == _thread_cpus(old_thread)
            assert {first} == _thread_cpus(new_thread)
            assert {first} == os.sched_getaffinity(old_child.pid)
            assert {first} == os.sched_getaffinity(new_child.pid)
        # All of them get the CPUs this process had, the child started inside included.
        assert before == os.sched_getaffinity(0)
        assert before == _thread_cpus(old_thread)
        assert before == _thread_cpus(new_thread)
        assert before == os.sched_getaffinity(old_child.pid)
        assert before == os.sched_getaffinity(new_child.pid)
    finally:
        release.set()
        for child in (old_child, new_child):
            if child is not None:
                child.communicate(b"")
        old_thread.join()
        if new_thread.ident is not None:
            new_thread.join()


def test_pinned_gives_the_cpus_back_when_the_block_raises() -> None:
    before = os.sched_getaffinity(0)
    with pytest.raises(KeyError), cpu_affinity.pinned(1):
        raise KeyError("inside")
    assert before == os.sched_getaffinity(0)


def test_pinned_to_as_many_cpus_as_allowed_holds_nothing() -> None:
    before = os.sched_getaffinity(0)
    with cpu_affinity.pinned(len(before)) as held:
        assert held is None
        assert before == os.sched_getaffinity(0)
    with cpu_affinity.pinned(len(before) + 5) as held:
        assert held is None


def test_pinned_refuses_no_cpus() -> None:
    with pytest.raises(ValueError, match="at least one CPU, got 0"), cpu_affinity.pinned(0):
        pass
