"""The inputs of the reference-generated vectors (`conformance.client_vectors`).

Each area module lists hand-chosen edge cases — one or more per rule the area reaches, each
aimed at the rule's boundary — and a few seeded random traces. A case is only ops and args:
the expects are what the reference observes when `client_vectors` runs it.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Iterator

from pullspec.conformance.client_cases.base import Case
from pullspec.spec.evolve import evolve

__all__ = ["AREAS", "RANDOM_CASES", "Case", "all_cases", "factories"]

#: An area's edge cases, and its seeded random traces (rng, index → cases).
EdgeFactory = Callable[[], list[Case]]
RandomFactory = Callable[[random.Random, int], list[Case]]


def factories(area: str) -> tuple[EdgeFactory, RandomFactory | None]:
    """The case factories of `area`: module `conformance.client_cases.<area>`'s EDGES and
    RANDOM."""
    module = importlib.import_module(f"pullspec.conformance.client_cases.{area}")
    return module.EDGES, module.RANDOM


#: The generated areas, in file order.
AREAS: tuple[str, ...] = (
    *("pull_loop", "pull_decision", "pull_service", "pull_request", "pull_result"),
    *("offset_store", "allocate", "rebalance"),
    *("consume_concurrently", "consume_orderly", "process_queue_maintenance"),
    *("broker_pull", "schedule", "store_layout", "invariants"),
)

#: Random traces per area that has a random generator.
RANDOM_CASES = 4


def all_cases(seed: int) -> Iterator[Case]:
    """Every case: per area its edge cases, then its seeded random traces."""
    for area in AREAS:
        edges, randoms = factories(area)
        yield from edges()
        if randoms is not None:
            for i in range(RANDOM_CASES):
                # A string seed is hashed the same way in every process (random.seed, version 2).
                rng = random.Random(f"{area}-{seed}-{i}")
                for case in randoms(rng, i):
                    yield evolve(case, area=area, kind="random", name=f"{seed}-{case.name}")
