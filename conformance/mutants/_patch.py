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
from typing import Concatenate, ParamSpec, TypeVar, cast

C = TypeVar("C", bound=type)
P = ParamSpec("P")
R = TypeVar("R")
#: A method, a property's getter or setter (or its absence).
F = TypeVar("F", bound=Callable[..., object] | None)

#: A module's namespace (its globals): names bound to values of every kind.
Namespace = dict[str, object]


def _rebind(fn: types.FunctionType, namespace: Namespace) -> types.FunctionType:
    """A copy of `fn` whose global names resolve in `namespace`."""
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__dict__.update(fn.__dict__)
    copy.__qualname__, copy.__doc__, copy.__module__ = fn.__qualname__, fn.__doc__, fn.__module__
    copy.__annotations__ = dict(fn.__annotations__)
    return copy


def _fork(
    module_name: str,
    replace: Mapping[str, object],
    earlier: Mapping[str, Namespace],
) -> Namespace:
    """A fork of `module_name`'s namespace with `replace` applied (see the module docstring)."""
    module = importlib.import_module(module_name)
    original: Namespace = vars(module)
    fork: Namespace = dict(original)
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
Replace = Mapping[str, object] | Callable[[Mapping[str, Namespace]], Mapping[str, object]]


def forks(patches: Mapping[str, Replace]) -> dict[str, Namespace]:
    """Fork each patched module in order, each seeing the forks before it."""
    done: dict[str, Namespace] = {}
    for module_name, replace in patches.items():
        given = replace(done) if callable(replace) else replace
        done[module_name] = _fork(module_name, given, done)
    return done


def mutate(cls: C, patches: Mapping[str, Replace], **methods: object) -> C:
    """A subclass of `cls` whose methods see the forks of `patches` (plus extra `methods`)."""
    done = forks(patches)
    home = done.get(cls.__module__) or _fork(cls.__module__, {}, done)
    original: Namespace = vars(importlib.import_module(cls.__module__))

    def rebound(fn: F) -> F:
        # Only the methods written in the module: generated ones (attrs' __init__…) keep theirs.
        if isinstance(fn, types.FunctionType) and fn.__globals__ is original:
            return cast(F, _rebind(fn, home))  # a copy of `fn`: the same signature
        return fn

    namespace: Namespace = {"__doc__": f"{cls.__name__} with {', '.join(patches)} forked."}
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


def wrap(
    original: Callable[P, R], change: Callable[Concatenate[Callable[P, R], P], R]
) -> Callable[P, R]:
    """`change(original, *args, **kwargs)`, named as `original` (a spec function, whose
    signature is `change`'s after its first parameter), for a fork to put in its place."""

    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        return change(original, *args, **kwargs)

    wrapped.__name__ = wrapped.__qualname__ = original.__name__
    return wrapped


class Candidate:
    """A candidate object: its factories are attributes (see conformance.candidates)."""

    def __init__(self, name: str, **factories: Callable[..., object]) -> None:
        self.NAME = name
        for key, factory in factories.items():
            setattr(self, key, factory)

    def __repr__(self) -> str:
        return f"<mutant {self.NAME}>"
