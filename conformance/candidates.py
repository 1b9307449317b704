"""Candidates: the implementations the conformance suite runs (`--impl`).

A candidate is any object with factory attributes named after the interfaces it implements:
``message_store(config, profile, clock)``, ``broker(store_config, broker_config, profile, clock)``,
``process_queue(clock, profile)``, ``lock_manager(clock, lock_max_live_time_ms)``, ... An absent
factory means the candidate does not implement that interface: its cases are UNSUPPORTED.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from pullspec.spec.errors import InvalidArgumentError

BUILTIN = {"reference": "pullspec.reference.factories", "fast": "pullspec.fast.factories"}


def resolve(impl: str) -> Any:
    """Resolve `reference`, `fast`, `module:factory` or a `pullspec.implementations` entry."""
    if impl.startswith("cmd:"):
        import shlex

        from pullspec.conformance.subprocess_candidate import SubprocessCandidate

        command = shlex.split(impl[len("cmd:") :])
        if not command:
            raise InvalidArgumentError("impl", impl, "cmd: needs a command")
        return SubprocessCandidate(command)
    if impl in BUILTIN:
        return importlib.import_module(BUILTIN[impl])
    if ":" in impl and not impl.startswith("cmd:"):
        module_name, _, attr = impl.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InvalidArgumentError("impl", impl, f"cannot import {module_name}: {exc}") from exc
        factory = getattr(module, attr, None)
        if factory is None:
            raise InvalidArgumentError("impl", impl, f"{module_name} has no attribute {attr}")
        return factory() if callable(factory) else factory
    for ep in entry_points(group="pullspec.implementations"):
        if ep.name == impl:
            loaded = ep.load()
            return loaded() if callable(loaded) else loaded
    raise InvalidArgumentError(
        "impl", impl, "expected reference, fast, module:factory or a pullspec.implementations entry"
    )
