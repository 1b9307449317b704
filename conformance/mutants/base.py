"""A mutant (`Mutant`): the unit of the bank, which each area's module (`conformance.mutants.store`,
…) lists as its MUTANTS; the bank itself is the package (`conformance.mutants.bank`, `get`)."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pullspec.conformance.candidates import Candidate

#: Each mutant's candidate, built once per run (a candidate holds no state between cases).
_BUILT: dict[str, Candidate] = {}


@attrs.frozen
class Mutant:
    """One mutant: its name, the rule it breaks, the areas that can see it and what it does."""

    name: str
    rule: str
    areas: tuple[str, ...]
    doc: str
    build: Callable[[], Candidate] = attrs.field(eq=False, repr=False)

    @property
    def impl(self) -> str:
        """The `--impl` spelling of this mutant."""
        return f"pullspec.conformance.mutants.impl:{self.name.replace('-', '_')}"

    def candidate(self) -> Candidate:
        """The mutant candidate (built once)."""
        if self.name not in _BUILT:
            _BUILT[self.name] = self.build()
        return _BUILT[self.name]
