"""The mutation bank: named, documented one-rule changes to the reference.

Each mutant is a candidate (`--impl pullspec.conformance.mutants.impl:<name>`, `-` spelt `_`)
whose factories build reference objects with exactly one rule changed (conformance.mutants._patch
explains how, without touching the reference itself). `pullspec mutants` runs the suite against
every mutant and reports which it killed; a mutant that survives shows a rule the suite does not
check closely enough.
"""

from __future__ import annotations

from pullspec.conformance.mutants.base import Mutant
from pullspec.spec.errors import InvalidArgumentError

__all__ = ["Mutant", "bank", "get"]


def bank() -> tuple[Mutant, ...]:
    """Every mutant, grouped by area."""
    # imported when the bank is first asked for: the area modules load the reference
    from pullspec.conformance.mutants import (
        client,
        lock_manager,
        process_queue,
        pull_code,
        send_back,
        store,
    )

    modules = (store, pull_code, process_queue, lock_manager, send_back, client)
    return tuple(m for module in modules for m in module.MUTANTS)


def get(name: str) -> Mutant:
    """The mutant called `name` (`-` and `_` are the same)."""
    wanted = name.replace("_", "-")
    for m in bank():
        if m.name == wanted:
            return m
    raise InvalidArgumentError("mutant", name, "no such mutant (see `pullspec mutants --list`)")
