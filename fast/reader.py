"""The read path of MmapMessageStore: DefaultMessageStore.getMessage (STORE-5 … STORE-17) as one
planner and interchangeable scanners.

`ReadPlanner` (fast.read_plan) makes every decision of a pull once by calling the spec; a pull
that scans becomes a ScanPlan, which the compiled scanner (fast.read_compiled, when numba is
loaded), the numpy scanner or the entry-by-entry scan (fast.read_numpy) answers, each declining
what it does not model to the next. get_messages plans every request and scans the plans in one
kernel call or one numpy pass; pull_through runs the compiled chain (fast.read_through).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from pullspec.fast.commitlog import CommitLog
from pullspec.fast.consumequeue import ConsumeQueue
from pullspec.fast.kernels import load
from pullspec.fast.read_compiled import CompiledScanner
from pullspec.fast.read_numpy import NumpyScanner
from pullspec.fast.read_plan import (
    GetRequest,
    Pull,
    ReadPlanner,
    ScanPlan,
)
from pullspec.fast.read_through import pull_through
from pullspec.fast.results import MultiGetResult
from pullspec.spec.config import StoreConfig
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult
from pullspec.spec.status import BrokerRole


def _numba_read() -> ModuleType:
    """Import fast.numba_read (the window scans); see fast.kernels.load."""
    return importlib.import_module("pullspec.fast.numba_read")


def read_kernels() -> ModuleType | None:
    """The compiled scans (fast.numba_read), or None without numba."""
    return load(_numba_read)


class Reader:
    """The pulls of one store over its commit log.

    >>> import tempfile
    >>> from pullspec.fast import MmapMessageStore
    >>> from pullspec.spec import BrokerRole, ManualClock, Profile, StoreConfig
    >>> store = MmapMessageStore(tempfile.mkdtemp(), StoreConfig(), Profile.V4_9, ManualClock(0))
    >>> reader = Reader(store.commit_log, StoreConfig(), Profile.V4_9, ())
    >>> reader.get(store.consume_queue("T", 0), 0, 32, None, BrokerRole.ASYNC_MASTER, False).status
    <GetMessageStatus.NO_MESSAGE_IN_QUEUE: 'NO_MESSAGE_IN_QUEUE'>
    >>> store.close()
    """

    def __init__(
        self,
        commit_log: CommitLog,
        config: StoreConfig,
        profile: Profile,
        delay_levels: tuple[int, ...],
    ) -> None:
        self.planner = ReadPlanner(config, profile)
        self.compiled = CompiledScanner(commit_log, self.planner, delay_levels)
        self.numpy = NumpyScanner(commit_log, self.planner, delay_levels)
        #: `read_kernels()` once `load_kernels` has looked it up (at the first pull, so that
        #: numba is imported then, not when the store opens), else None. A plain attribute,
        #: not a cached_property, as the single pull reads it on every call: see
        #: fast.putsmall.prepared_cache.
        self.kernels: ModuleType | None = None
        self.kernels_loaded = False

    def load_kernels(self) -> ModuleType | None:
        """Look up `read_kernels()` once and keep it in `kernels`."""
        if not self.kernels_loaded:
            self.kernels = read_kernels()
            self.kernels_loaded = True
        return self.kernels

    def get(
        self,
        q: ConsumeQueue,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None,
        role: BrokerRole,
        offset_check_in_slave: bool,
        compiled: bool = True,
        vectorized: bool = True,
    ) -> GetMessageResult:
        """get_message's answer for validated arguments on queue `q`: its plan scanned by the
        compiled scanner, else by numpy, else entry by entry (without `compiled` the compiled
        scanner is skipped, without `vectorized` numpy too)."""
        kernels = (self.kernels or self.load_kernels()) if compiled else None
        if kernels is not None:  # planned and scanned in one call, or left to numpy
            plan = self.compiled.pull(
                kernels, q, offset, max_msg_nums, message_filter, role, offset_check_in_slave
            )
        else:
            plan = self.planner.plan(q, offset, max_msg_nums, role, offset_check_in_slave)
        if type(plan) is not ScanPlan:
            return plan  # type: ignore[return-value]
        return self.numpy.scan(plan, message_filter, vectorized)

    def get_many(
        self,
        requests: Sequence[GetRequest | tuple[Any, ...]],
        role: BrokerRole,
        check: bool,
        queues: dict[tuple[str, int], ConsumeQueue],
        queue: Callable[[str, int], ConsumeQueue],
    ) -> MultiGetResult:
        """get_messages: every request checked and planned (its queue found in `queues`, else
        made by `queue(topic, id)`), the scans made in one kernel call (or one numpy pass), the
        rest by get_message's path."""
        planned = self.planner.plan_pulls(requests, queues, queue, role, check)

        def answer(r: Pull) -> GetMessageResult:
            return self.get(queue(r[1], r[2]), r[3], r[4], r[5], role, check, compiled=False)

        kernels = read_kernels()
        if kernels is None:
            return MultiGetResult.of(self.numpy.scan_many(planned.pulls, planned.plans(), answer))
        items, row_of, rows = self.compiled.scan_many(kernels, planned, answer)
        return MultiGetResult(items, row_of, rows)

    def pull_through(
        self,
        q: ConsumeQueue,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None,
        limit: int,
        role: BrokerRole,
        check: bool,
    ) -> MultiGetResult:
        """The pulls of `q` from `offset` on, each at the previous nextBeginOffset, at most
        `limit` (fast.read_through)."""

        def answer(at: int) -> GetMessageResult:
            return self.get(q, at, max_msg_nums, message_filter, role, check, compiled=False)

        return pull_through(
            read_kernels(),
            self.compiled,
            self.planner,
            q,
            offset,
            max_msg_nums,
            message_filter,
            limit,
            answer,
        )
