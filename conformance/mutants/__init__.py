"""The mutation bank: named, documented one-rule changes to the reference.

Each mutant is a candidate (`--impl pullspec.conformance.mutants.impl:<name>`, `-` spelt `_`)
whose factories build reference objects with exactly one rule changed (conformance.mutants._patch
explains how, without touching the reference itself). `pullspec mutants` runs the suite against
every mutant and reports which it killed; a mutant that survives shows a rule the suite does not
check closely enough.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import attrs

from pullspec.spec.errors import InvalidArgumentError


@attrs.frozen
class Mutant:
    """One mutant: its name, the rule it breaks, the areas that can see it and what it does."""

    name: str
    rule: str
    areas: tuple[str, ...]
    doc: str
    build: Callable[[], Any] = attrs.field(eq=False, repr=False)

    @property
    def impl(self) -> str:
        """The `--impl` spelling of this mutant."""
        return f"pullspec.conformance.mutants.impl:{self.name.replace('-', '_')}"

    def candidate(self) -> Any:
        """The mutant candidate (built once)."""
        return _built(self.name)


@functools.cache
def _built(name: str) -> Any:
    return get(name).build()


def bank() -> tuple[Mutant, ...]:
    """Every mutant, grouped by area."""
    areas = ("store", "pull_code", "process_queue", "lock_manager", "send_back", "client")
    modules = [importlib.import_module(f"pullspec.conformance.mutants.{area}") for area in areas]
    return tuple(m for module in modules for m in module.MUTANTS)


def get(name: str) -> Mutant:
    """The mutant called `name` (`-` and `_` are the same)."""
    wanted = name.replace("_", "-")
    for m in bank():
        if m.name == wanted:
            return m
    raise InvalidArgumentError("mutant", name, "no such mutant (see `pullspec mutants --list`)")
