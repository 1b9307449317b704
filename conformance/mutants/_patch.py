"""How a mutant changes one rule without touching the reference everyone else uses.

`mutate(cls, patches)` answers a subclass of a reference class whose methods run against
private copies ("forks") of module namespaces: `patches` maps a module name to the names it
replaces there. Every function of a forked module is rebound to the fork, so a replaced rule is
also what the module's other functions call; a fork also takes, in place of the functions it
imported from an earlier fork, that fork's versions. The class's own methods are rebound to a
fork of the class's module that sees all of them. Nothing global changes: the reference, and
every other mutant, keep the original functions.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

C = TypeVar("C", bound=type)


def _rebind(fn: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    """A copy of `fn` whose global names resolve in `namespace`."""
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__dict__.update(fn.__dict__)
    copy.__qualname__, copy.__doc__, copy.__module__ = fn.__qualname__, fn.__doc__, fn.__module__
    copy.__annotations__ = dict(fn.__annotations__)
    return copy


def _fork(
    module_name: str,
    replace: Mapping[str, Any],
    earlier: Mapping[str, dict[str, Any]],
) -> dict[str, Any]:
    """A fork of `module_name`'s namespace with `replace` applied (see the module docstring)."""
    module = importlib.import_module(module_name)
    original = vars(module)
    fork: dict[str, Any] = dict(original)
    for name, value in original.items():
        if isinstance(value, types.ModuleType) and value.__name__ in earlier:
            fork[name] = types.SimpleNamespace(**earlier[value.__name__])
        elif isinstance(value, types.FunctionType):
            if value.__globals__ is original:
                fork[name] = _rebind(value, fork)
            elif value.__module__ in earlier:
                fork[name] = earlier[value.__module__].get(value.__name__, value)
    fork.update(replace)
    return fork


#: What a fork replaces: a mapping, or a function of the forks made before it answering one.
Replace = Mapping[str, Any] | Callable[[Mapping[str, dict[str, Any]]], Mapping[str, Any]]


def forks(patches: Mapping[str, Replace]) -> dict[str, dict[str, Any]]:
    """Fork each patched module in order, each seeing the forks before it."""
    done: dict[str, dict[str, Any]] = {}
    for module_name, replace in patches.items():
        given = replace(done) if callable(replace) else replace
        done[module_name] = _fork(module_name, given, done)
    return done


def mutate(cls: C, patches: Mapping[str, Replace], **methods: Any) -> C:
    """A subclass of `cls` whose methods see the forks of `patches` (plus extra `methods`)."""
    done = forks(patches)
    home = done.get(cls.__module__) or _fork(cls.__module__, {}, done)
    original = vars(importlib.import_module(cls.__module__))

    def rebound(fn: Any) -> Any:
        # Only the methods written in the module: generated ones (attrs' __init__…) keep theirs.
        mine = isinstance(fn, types.FunctionType) and fn.__globals__ is original
        return _rebind(fn, home) if mine else fn

    namespace: dict[str, Any] = {"__doc__": f"{cls.__name__} with {', '.join(patches)} forked."}
    for name, value in vars(cls).items():
        if isinstance(value, types.FunctionType) and rebound(value) is not value:
            namespace[name] = rebound(value)
        elif isinstance(value, property):
            namespace[name] = property(
                rebound(value.fget), rebound(value.fset), None, value.__doc__
            )
    namespace.update(methods)
    mutant = types.new_class(f"Mutant{cls.__name__}", (cls,), {}, lambda ns: ns.update(namespace))
    return cast(C, mutant)


def wrap(module_name: str, name: str, change: Callable[..., Any]) -> Callable[..., Any]:
    """`change(original, *args, **kwargs)` bound to the original `module_name.name`."""
    original = getattr(importlib.import_module(module_name), name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return change(original, *args, **kwargs)

    wrapped.__name__ = wrapped.__qualname__ = name
    return wrapped


class Candidate:
    """A candidate object: its factories are attributes (see conformance.candidates)."""

    def __init__(self, name: str, **factories: Callable[..., Any]) -> None:
        self.NAME = name
        for key, factory in factories.items():
            setattr(self, key, factory)

    def __repr__(self) -> str:
        return f"<mutant {self.NAME}>"
