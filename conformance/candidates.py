"""Candidates: the implementations the conformance suite runs (`--impl`).

A candidate is any object with factory attributes named after the interfaces it implements; an
absent factory means the candidate does not implement that interface: its cases are UNSUPPORTED.

The broker side hands the suite objects, which the area adapters drive:

- ``message_store(config: StoreConfig, profile, clock) -> spec.protocols.MessageStore``
- ``broker(store_config, broker_config, profile, clock)`` (area `pull_code`)
- ``process_queue(clock, profile) -> spec.protocols.ProcessQueue``
- ``lock_manager(clock, lock_max_live_time_ms, profile=…)`` (`profile` may be left out)
- ``send_back(store_config, group_config, profile, clock)``

Every client area — `pull_loop`, `pull_decision`, `pull_result`, `pull_request`,
`pull_service`, `offset_store`, `allocate`, `rebalance`, `consume_concurrently`,
`consume_orderly`, `process_queue_maintenance` (and `schedule`) — is a factory of the same name
answering an `AreaDriver`: ``candidate.pull_loop(config, profile).apply(op, args)`` runs one op
of the area's vocabulary (docs/protocol.md) on the candidate's own client classes and answers the
observation, exactly as a `cmd:` adapter answers the same op over the subprocess protocol
(`AreaDriverFactory`). The reference's drivers (`reference.areas`) are the worked example:
each wires the reference's own consumer classes to stand-ins for what lies outside the area.

Example::

    class MyClient:
        def pull_loop(self, config, profile):
            return MyPullLoopDriver(config, profile)   # .apply(op, args) -> dict

    pullspec conform --impl mypackage:MyClient --area pull_loop
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.profiles import Profile


@runtime_checkable
class AreaDriver(Protocol):
    """One fresh instance of a client area: runs its ops (docs/protocol.md, the area's
    vocabulary) and answers each observation as the flat JSON object a vector step expects; a
    RocketMQ failure raises a typed `spec.errors` error, an op it does not implement
    `UnsupportedError`."""

    def apply(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run `op` with `args`; answer its observation."""
        ...


class AreaDriverFactory(Protocol):
    """``candidate.<area>``: a fresh AreaDriver from a case's config and the profile."""

    def __call__(self, config: Mapping[str, Any], profile: Profile) -> AreaDriver:
        """A fresh instance of the area."""
        ...


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
