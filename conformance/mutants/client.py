"""Mutants of the client: one rule broken in the reference's client classes, seen through the
client areas' drivers (`reference.areas`), including the five realistic bugs of issue 16 (the span
as the process queue computes it, the consume-timeout sweep's schedule, lockAll's timestamps, a
pull-expired queue's re-creation, the offset a removal persists).

A mutant candidate provides the factory of each area that can see it: the reference driver of
that area with one class of its `classes` record replaced (`reference.areas._wiring.Classes`) —
a copy of a reference class whose spec rule is forked (conformance.mutants._patch), or a
subclass changing one method the way the bug does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from pullspec.conformance.candidates import AreaDriver
from pullspec.conformance.jsontypes import JSONValue
from pullspec.conformance.mutants._patch import Candidate, Replace, mutate, wrap
from pullspec.conformance.mutants.base import Mutant
from pullspec.spec import consume_concurrently, consume_orderly, pull_decision, pull_request
from pullspec.spec import pull_result as spec_pull_result
from pullspec.spec.consume_concurrently import (
    AckResult,
    ConsumeConcurrentlyStatus,
    PeriodicTask,
)
from pullspec.spec.consumer_config import ConsumerConfig, MessageModel
from pullspec.spec.evolve import evolve
from pullspec.spec.message import MessageQueue
from pullspec.spec.process_queue import Tree
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue
from pullspec.spec.pull_actions import Delay
from pullspec.spec.pull_request import CommitOffset
from pullspec.spec.pull_result import PullResult, PullResultHandling
from pullspec.spec.rebalance import LockMarks, Removal
from pullspec.spec.ruleset import Ruleset

if TYPE_CHECKING:
    from pullspec.spec.message import StoredMessage

#: A rule function a ruleset holds.
F = TypeVar("F", bound=Callable[..., object])

#: Where each spec module lives.
_CONC = "pullspec.spec.consume_concurrently"
_ORDER = "pullspec.spec.consume_orderly"
_FLOW = "pullspec.spec.pull_decision"
_RESULT = "pullspec.spec.pull_result"
_REQ = "pullspec.spec.pull_request"
_ACTIONS = "pullspec.spec.pull_actions"
_PQ = "pullspec.spec.process_queue"
_ALLOCATE = "pullspec.spec.allocate"


def _client_mutant(
    name: str,
    rule: str,
    areas: tuple[str, ...],
    doc: str,
    classes: Callable[[], Mapping[str, type]] = dict,
    patches: Mapping[str, Replace] | None = None,
) -> Mutant:
    """A mutant whose drivers of `areas` build the classes `classes()` answers (by field of
    `Classes`) and, with `patches`, run their own methods against forked spec modules."""

    def build() -> Candidate:
        from pullspec.reference.areas import _wiring

        record = evolve(_wiring.REFERENCE, **classes())
        factories: dict[str, Callable[..., object]] = {}
        for area in areas:
            module = importlib.import_module(f"pullspec.reference.areas.{area}")
            base = mutate(module.Driver, patches) if patches else module.Driver
            driver = type(f"Mutant{base.__name__}", (base,), {"classes": record})

            def factory(
                config: Mapping[str, JSONValue],
                profile: Profile,
                d: Callable[[dict[str, JSONValue], Profile], AreaDriver] = driver,
            ) -> AreaDriver:
                return d(dict(config), Profile.parse(profile))

            factories[area] = factory
        return Candidate(name, **factories)

    return Mutant(name, rule, areas, doc, build)


def _forked(module: str, cls: str, replace: Mapping[str, Replace]) -> Callable[[], type]:
    """A copy of reference class `module.cls` whose methods see spec forks `replace`."""

    def make() -> type:
        base: type = getattr(importlib.import_module(module), cls)
        return mutate(base, replace)

    return make


class _HoldsRules(Protocol):
    """A reference class that looks its rules up once, at construction."""

    rules: Ruleset


def _swapped(
    module: str,
    cls: str,
    name: str,
    change: Callable[[F], Callable[..., object]],
) -> Callable[[], type]:
    """A copy of reference class `module.cls` whose ruleset has its function `name` swapped for
    `change(original)` (the class looks its rules up once, into its `rules` attribute)."""

    def make() -> type:
        base: type = getattr(importlib.import_module(module), cls)
        base_init: Callable[..., None] = vars(base)["__init__"]

        def init(self: _HoldsRules, *args: object, **kwargs: object) -> None:
            base_init(self, *args, **kwargs)
            original: Ruleset = self.rules
            self.rules = original.swapped(name, change(getattr(original, name)))

        return mutate(base, {}, __init__=init)

    return make


# -- the five bugs of issue 16 ---------------------------------------------------------------------


def _span_from_count() -> Mapping[str, type]:
    # The process queue estimates its span from its count: {0, 2001..2010} reads 10, not 2010.
    return {
        "process_queue": _forked(
            "pullspec.reference.process_queue",
            "ReferenceProcessQueue",
            {_PQ: {"max_span": lambda offsets: max(len(offsets) - 1, 0)}},
        )()
    }


def _clean_every_second(timeout: int) -> PeriodicTask:
    return PeriodicTask(timeout * 1000, timeout * 1000, True)


def _sweep_in_seconds() -> Mapping[str, type]:
    return {
        "concurrent_service": _swapped(
            "pullspec.reference.consume_concurrently",
            "ReferenceConsumeConcurrentlyService",
            "clean_expire_schedule",
            lambda _original: _clean_every_second,
        )()
    }


def _lock_keeps_timestamp() -> Mapping[str, type]:
    from pullspec.reference.rebalance import ReferenceRebalancePushImpl

    class KeepsTimestamp(ReferenceRebalancePushImpl):
        """A granted lock sets locked but not lastLockTimestamp."""

        def _apply(self, marks: LockMarks) -> None:
            table = self.process_queues()
            for mq in marks.locked:
                table[mq].locked = True
            for mq in marks.unlocked:
                table[mq].locked = False

    return {"rebalance": KeepsTimestamp}


def _expired_not_recreated() -> Mapping[str, type]:
    from pullspec.reference.rebalance import ReferenceRebalancePushImpl

    class NotRecreated(ReferenceRebalancePushImpl):
        """A pull-expired queue is removed but not re-created in the same rebalance."""

        def update_process_queue_table_in_rebalance(
            self, topic: str, mq_set: Collection[MessageQueue]
        ) -> bool:
            expired = {q for q, pq in self.process_queues().items() if pq.is_pull_expired()}
            changed = super().update_process_queue_table_in_rebalance(
                topic, [q for q in mq_set if q not in expired]
            )
            return changed

    return {"rebalance": NotRecreated}


def _removal_persists_max() -> Mapping[str, type]:
    from pullspec.reference.rebalance import ReferenceRebalancePushImpl

    class PersistsMax(ReferenceRebalancePushImpl):
        """A removed queue's offset is first set to queueOffsetMax + 1, the highest pulled."""

        def _apply_removal(self, mq: MessageQueue, pq: ProcessQueue, removal: Removal) -> None:
            if pq.queue_offset_max > 0:
                self.offset_store.update_offset(mq, pq.queue_offset_max + 1, False)
            super()._apply_removal(mq, pq, removal)

    return {"rebalance": PersistsMax}


# -- one per client rule area ------------------------------------------------------------------------


def _push_consumer(replace: Mapping[str, Replace]) -> Callable[[], Mapping[str, type]]:
    def make() -> Mapping[str, type]:
        cls = _forked("pullspec.reference.push_consumer", "ReferencePushConsumer", replace)()
        return {"push_consumer": cls}

    return make


def _count_inclusive(
    f: Callable[[int, ConsumerConfig], Delay | None], msg_count: int, config: ConsumerConfig, /
) -> Delay | None:
    return f(msg_count + 1, config)


def _found_empty_keeps_offset(
    f: Callable[[PullResult, int], PullResultHandling], result: PullResult, prev: int, /
) -> PullResultHandling:
    return evolve(f(result, prev), next_offset=prev)


def _commit_zero(
    f: Callable[[MessageModel, int], CommitOffset], model: MessageModel, memory: int, /
) -> CommitOffset:
    answer = f(model, memory)
    return evolve(answer, enable=answer.enable or memory == 0)


def _overwriting_store() -> Mapping[str, type]:
    from pullspec.reference.offset_store import (
        ReferenceLocalFileOffsetStore,
        ReferenceRemoteOffsetStore,
    )

    class RemoteOverwrites(ReferenceRemoteOffsetStore):
        """updateOffset(increaseOnly=true) lowers the offset too."""

        def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
            super().update_offset(mq, offset, False)

    class LocalOverwrites(ReferenceLocalFileOffsetStore):
        """updateOffset(increaseOnly=true) lowers the offset too."""

        def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
            super().update_offset(mq, offset, False)

    return {"remote_offset_store": RemoteOverwrites, "local_offset_store": LocalOverwrites}


def _ack_off_by_one(
    f: Callable[[ConsumeConcurrentlyStatus, int, int], AckResult | None],
    status: ConsumeConcurrentlyStatus,
    ack_index: int,
    size: int,
    /,
) -> AckResult | None:
    return f(status, ack_index - 1 if ack_index >= 0 else ack_index, size)


def _suspend_default_zero(f: Callable[[int, int], int], suspend_ms: int, default_ms: int, /) -> int:
    return int(f(10 if suspend_ms == -1 else suspend_ms, default_ms))


#: spec.process_queue.expired_head (either variant): (tree, now, consumeTimeout) → its head.
ExpiredHead = Callable[[Tree, int, int], "StoredMessage | None"]


def _expired_at_timeout(original: ExpiredHead) -> ExpiredHead:
    def expired_head(tree: Tree, now: int, timeout: int) -> StoredMessage | None:
        return original(tree, now + 1, timeout)

    return expired_head


def _without_remainder(
    group: str, cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    from pullspec.spec import allocate

    if not allocate.check_allocate_args(cid, mq_all, cid_all):
        return []
    size = len(mq_all) // len(cid_all)
    start = cid_all.index(cid) * size
    return list(mq_all[start : start + size])


def _pull_service_later_when_stopped() -> Mapping[str, type]:
    return {
        "pull_service": _forked(
            "pullspec.reference.pull_service",
            "PullMessageService",
            {_ACTIONS: {"schedules_later": lambda stopped: True}},
        )()
    }


MUTANTS: tuple[Mutant, ...] = (
    _client_mutant(
        "pq-span-from-count",
        "FLOW-8",
        ("pull_loop",),
        "The process queue reports its span as its count − 1: {0, 2001…2010} is never "
        "flow-controlled for MAX_SPAN (issue 16, bug 1).",
        _span_from_count,
    ),
    _client_mutant(
        "clean-expire-in-seconds",
        "CONC-13",
        ("consume_concurrently",),
        "The consume-timeout sweep is scheduled every consumeTimeout seconds, not minutes "
        "(issue 16, bug 2).",
        _sweep_in_seconds,
    ),
    _client_mutant(
        "lock-keeps-old-timestamp",
        "REBAL-20",
        ("rebalance",),
        "A granted lock sets locked but leaves lastLockTimestamp, so the queue soon reads "
        "lock-expired (issue 16, bug 3).",
        _lock_keeps_timestamp,
    ),
    _client_mutant(
        "pull-expired-not-recreated",
        "REBAL-9",
        ("rebalance",),
        "A pull-expired queue is removed but not re-created in the same rebalance (issue 16, "
        "bug 4).",
        _expired_not_recreated,
    ),
    _client_mutant(
        "removal-persists-max-offset",
        "REBAL-14",
        ("pull_loop",),
        "Removing a queue persists queueOffsetMax + 1 instead of the committed offset, skipping "
        "the messages still cached (issue 16, bug 5).",
        _removal_persists_max,
    ),
    _client_mutant(
        "flow6-count-inclusive",
        "FLOW-6",
        ("pull_decision",),
        "A cached count equal to pullThresholdForQueue already flow-controls.",
        _push_consumer(
            {
                _FLOW: {
                    "check_cached_message_count": wrap(
                        pull_decision.check_cached_message_count, _count_inclusive
                    )
                }
            }
        ),
    ),
    _client_mutant(
        "result6-found-empty-keeps-offset",
        "RESULT-6",
        ("pull_result",),
        "A FOUND result filtered empty leaves nextOffset where it was.",
        _push_consumer(
            {
                _RESULT: {
                    "found_empty": wrap(spec_pull_result.found_empty, _found_empty_keeps_offset)
                }
            }
        ),
    ),
    _client_mutant(
        "req2-commits-zero",
        "REQ-2",
        ("pull_request",),
        "A memory offset of 0 is committed with the pull (only a positive one is).",
        _push_consumer(
            {
                _REQ: {
                    "commit_offset_for_pull": wrap(
                        pull_request.commit_offset_for_pull, _commit_zero
                    )
                }
            }
        ),
    ),
    _client_mutant(
        "pullq4-later-after-shutdown",
        "PULLQ-4",
        ("pull_service",),
        "executePullRequestLater still schedules after the pull service shut down.",
        _pull_service_later_when_stopped,
    ),
    _client_mutant(
        "offset2-increase-only-ignored",
        "OFFSET-2",
        ("offset_store",),
        "updateOffset(increaseOnly=true) overwrites a higher offset with a lower one.",
        _overwriting_store,
    ),
    _client_mutant(
        "rebal7-average-drops-remainder",
        "REBAL-7",
        ("allocate",),
        "AllocateMessageQueueAveragely leaves the remainder queues unassigned.",
        patches={_ALLOCATE: {"allocate_averagely": _without_remainder}},
    ),
    _client_mutant(
        "conc6-ack-index-off-by-one",
        "CONC-6",
        ("consume_concurrently",),
        "processConsumeResult takes ackIndex as one lower: one message too few succeeds.",
        lambda: {
            "concurrent_service": _forked(
                "pullspec.reference.consume_concurrently",
                "ReferenceConsumeConcurrentlyService",
                {_CONC: {"ack_result": wrap(consume_concurrently.ack_result, _ack_off_by_one)}},
            )()
        },
    ),
    _client_mutant(
        "order12-suspend-default-ignored",
        "ORDER-12",
        ("consume_orderly",),
        "A suspend of −1 waits 10 ms instead of suspendCurrentQueueTimeMillis.",
        lambda: {
            "orderly_service": _forked(
                "pullspec.reference.consume_orderly",
                "ReferenceConsumeOrderlyService",
                {
                    _ORDER: {
                        "suspend_delay": wrap(consume_orderly.suspend_delay, _suspend_default_zero)
                    }
                },
            )()
        },
    ),
    _client_mutant(
        "pq18-expired-at-timeout",
        "PQ-18",
        ("process_queue_maintenance",),
        "cleanExpiredMsg sends back a message consumed for exactly consumeTimeout minutes.",
        lambda: {
            "process_queue": _swapped(
                "pullspec.reference.process_queue",
                "ReferenceProcessQueue",
                "expired_head",
                _expired_at_timeout,
            )()
        },
    ),
)
