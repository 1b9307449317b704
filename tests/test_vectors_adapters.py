"""The vector runner looks each area's adapter module up by name (`vectors.adapter`), where no
type is checked: the table below names every module as an `AreaAdapter`, so that mypy checks each
one's `create` and `apply` against the protocol, and the test that the table is the runner's."""

from __future__ import annotations

from typing import TypeVar

from pullspec.conformance import vectors
from pullspec.conformance.adapters import (
    allocate,
    broker_pull,
    consume_concurrently,
    consume_orderly,
    invariants,
    lock_manager,
    offset_store,
    process_queue,
    process_queue_maintenance,
    pull_code,
    pull_decision,
    pull_loop,
    pull_request,
    pull_result,
    pull_service,
    rebalance,
    schedule,
    send_back,
    store,
    store_layout,
)
from pullspec.conformance.vectors import AreaAdapter

Instance = TypeVar("Instance")


def _adapter(module: AreaAdapter[Instance]) -> AreaAdapter[Instance]:
    """`module`, which mypy has checked is an AreaAdapter of some instance type."""
    return module


ADAPTERS = {
    "allocate": _adapter(allocate),
    "broker_pull": _adapter(broker_pull),
    "consume_concurrently": _adapter(consume_concurrently),
    "consume_orderly": _adapter(consume_orderly),
    "invariants": _adapter(invariants),
    "lock_manager": _adapter(lock_manager),
    "offset_store": _adapter(offset_store),
    "process_queue": _adapter(process_queue),
    "process_queue_maintenance": _adapter(process_queue_maintenance),
    "pull_code": _adapter(pull_code),
    "pull_decision": _adapter(pull_decision),
    "pull_loop": _adapter(pull_loop),
    "pull_request": _adapter(pull_request),
    "pull_result": _adapter(pull_result),
    "pull_service": _adapter(pull_service),
    "rebalance": _adapter(rebalance),
    "schedule": _adapter(schedule),
    "send_back": _adapter(send_back),
    "store": _adapter(store),
    "store_layout": _adapter(store_layout),
}


def test_every_area_s_adapter_is_a_checked_area_adapter() -> None:
    assert sorted(vectors.AREAS) == sorted(ADAPTERS)
    assert {a: ADAPTERS[a] for a in vectors.AREAS} == {a: vectors.adapter(a) for a in vectors.AREAS}
