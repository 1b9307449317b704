"""`--impl pullspec.conformance.mutants.impl:<name>`: every mutant of the bank as a `module:factory`.

The attribute `<name>` (the mutant's name with `-` spelt `_`) is a factory answering the mutant
candidate, which is what `conformance.resolve.resolve` calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pullspec.spec.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pullspec.conformance.candidates import Candidate


def __getattr__(name: str) -> Callable[[], Candidate]:
    """The factory of the mutant called `name`."""
    from pullspec.conformance.mutants import get

    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return get(name).candidate
    except InvalidArgumentError:
        raise AttributeError(name) from None
