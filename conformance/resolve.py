"""`--impl`: from a name on the command line to the candidate it names.

Example: ``factory(resolve("reference"), "message_store")`` is
`reference.factories.message_store` (`conformance.candidates.factory`).
"""

from __future__ import annotations

import importlib
import shlex
from importlib.metadata import entry_points

from pullspec.conformance.candidates import Candidate
from pullspec.spec.errors import InvalidArgumentError

BUILTIN = {"reference": "pullspec.reference.factories", "fast": "pullspec.fast.factories"}


def resolve(impl: str, timeout: float = 10.0) -> Candidate:
    """The candidate `--impl` names; InvalidArgumentError when it names none.

    - ``reference`` and ``fast``: the built-in candidates' factory modules;
    - ``module:attribute``: an object, or a callable answering one (a class, a factory);
    - ``cmd:<command>``: a process speaking the JSON Lines protocol (docs/protocol.md,
      `conformance.remote`), which gets `timeout` seconds per answer;
    - any other name: an entry point of the group ``pullspec.implementations``.
    """
    if impl.startswith("cmd:"):
        from pullspec.conformance.remote.candidate import SubprocessCandidate

        command = shlex.split(impl[len("cmd:") :])
        if not command:
            raise InvalidArgumentError("impl", impl, "cmd: needs a command")
        return SubprocessCandidate(command, timeout=timeout)
    if impl in BUILTIN:
        return importlib.import_module(BUILTIN[impl])
    if ":" in impl:
        module_name, _, attr = impl.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InvalidArgumentError("impl", impl, f"cannot import {module_name}: {exc}") from exc
        found: object = getattr(module, attr, None)
        if found is None:
            raise InvalidArgumentError("impl", impl, f"{module_name} has no attribute {attr}")
        return _called(found)
    for ep in entry_points(group="pullspec.implementations"):
        if ep.name == impl:
            return _called(ep.load())
    raise InvalidArgumentError(
        "impl", impl, "expected reference, fast, module:factory or a pullspec.implementations entry"
    )


def _called(found: object) -> Candidate:
    """A factory's answer, or the object itself when it is not callable."""
    return found() if callable(found) else found
