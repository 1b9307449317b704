"""The rule catalogue: every rule of the rulebooks as a registered function.

Each rule function carries its rule ID (``STORE-4``), a one-sentence docstring (the statement),
the RocketMQ method it states, the seeds that describe it and its contracts (PEP 316 ``pre:`` /
``post:`` lines in the docstring, checked by CrossHair and by `spec.contracts` at run time).
A rule that changed between 4.7.1 and 4.9.7 registers one function per profile under the same
ID; each variant is marked ``# [4.7]`` / ``# [Modified in 4.9]`` at its definition, the way
consensus-specs marks forks. A rule may be stated by more than one function (LAYOUT-7: when a
file ends in a blank, and what the blank holds); the first one registered states the rule itself.

Code never chooses a variant by comparing profiles: it calls the rules object of its profile
(`spec.ruleset.Ruleset.of(profile).overflow_badly_target(...)`). To add a profile difference,
register one function per profile under the rule's ID (``profiles=(Profile.V4_7,)`` …, with a
``versions=`` sentence) and declare them in the module's `Rules` class
(``overflow_badly_target = stated(overflow_badly_target_v47, overflow_badly_target_v49)``);
`spec.ruleset.Ruleset` combines those classes, and tests/test_ruleset.py fails until a changed
rule is declared there.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Generic, Self, TypeVar, cast, overload

import attrs

from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import ALL_PROFILES, Profile

F = TypeVar("F", bound=Callable[..., Any])

_RULE_ID = re.compile(r"^[A-Z]+-[0-9]+$")
_CONTRACT = re.compile(r"^\s*(pre|post|raises)(\[[^\]]*\])?:\s*(.+)$")


@attrs.frozen
class RuleVariant:
    """One function stating a rule for some profiles."""

    profiles: tuple[Profile, ...]
    function: str
    statement: str
    contracts: tuple[str, ...]


@attrs.frozen
class Rule:
    """A rule of the rulebook: ID, statement, Java source and one variant per profile set."""

    id: str
    area: str
    statement: str
    source: str
    seeds: tuple[str, ...]
    versions: str
    variants: tuple[RuleVariant, ...]

    def variant(self, profile: Profile) -> RuleVariant:
        """The variant stating the rule itself in `profile` (its first function there)."""
        return self.variants_for(profile)[0]

    def variants_for(self, profile: Profile) -> tuple[RuleVariant, ...]:
        """Every function stating the rule in `profile`, the rule's own first."""
        found = tuple(v for v in self.variants if profile in v.profiles)
        if not found:
            raise InvalidArgumentError("profile", profile.value, f"rule {self.id} has no variant")
        return found

    @property
    def changed(self) -> bool:
        """True when the profiles state the rule with different functions."""
        return any(set(v.profiles) != set(ALL_PROFILES) for v in self.variants)

    def to_json(self, profile: Profile | None = None) -> dict[str, Any]:
        """The JSON form used by `pullspec rules --json`."""
        profiles = [profile] if profile else list(ALL_PROFILES)
        return {
            "id": self.id,
            "area": self.area,
            "statement": self.statement,
            "source": self.source,
            "seeds": list(self.seeds),
            "versions": self.versions,
            "profiles": {
                p.value: {
                    "statement": self.variant(p).statement,
                    "function": self.variant(p).function,
                    "contracts": list(self.variant(p).contracts),
                    "functions": [v.function for v in self.variants_for(p)],
                }
                for p in profiles
            },
        }


_REGISTRY: dict[str, Rule] = {}
_FUNCTIONS: dict[tuple[str, Profile], list[Callable[..., Any]]] = {}


def _split_docstring(fn: Callable[..., Any]) -> tuple[str, tuple[str, ...]]:
    doc = (fn.__doc__ or "").strip()
    if not doc:
        raise ValueError(f"rule function {fn.__qualname__} has no docstring")
    lines = doc.splitlines()
    statement_lines: list[str] = []
    for line in lines:
        if not line.strip():
            break
        statement_lines.append(line.strip())
    statement = " ".join(statement_lines)
    contracts = tuple(
        f"{m.group(1)}: {m.group(3).strip()}" for line in lines if (m := _CONTRACT.match(line))
    )
    return statement, contracts


def rule(
    rule_id: str,
    *,
    source: str,
    seeds: Iterable[str] = (),
    profiles: Iterable[Profile] = ALL_PROFILES,
    versions: str = "same",
) -> Callable[[F], F]:
    """Register the decorated function as (a variant of) rule `rule_id`."""
    if not _RULE_ID.match(rule_id):
        raise ValueError(f"bad rule id {rule_id!r}")
    profs = tuple(profiles)

    def register(fn: F) -> F:
        fn.rule_id = rule_id  # type: ignore[attr-defined]
        fn.rule_profiles = profs  # type: ignore[attr-defined]
        statement, contracts = _split_docstring(fn)
        variant = RuleVariant(profs, f"{fn.__module__}.{fn.__qualname__}", statement, contracts)
        existing = _REGISTRY.get(rule_id)
        if existing is None:
            _REGISTRY[rule_id] = Rule(
                id=rule_id,
                area=rule_id.split("-", maxsplit=1)[0],
                statement=statement,
                source=source,
                seeds=tuple(seeds),
                versions=versions,
                variants=(variant,),
            )
        else:
            if any(v.function == variant.function for v in existing.variants):
                return fn  # module re-import
            versions_text = existing.versions if versions == "same" else versions
            _REGISTRY[rule_id] = evolve(
                existing, variants=(*existing.variants, variant), versions=versions_text
            )
        for p in profs:
            _FUNCTIONS.setdefault((rule_id, p), []).append(fn)
        return fn

    return register


def catalogue() -> list[Rule]:
    """Every registered rule, sorted by area order then number."""
    # The spec's modules by file, not through the package: `pullspec.spec` imports this module.
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__name__.rpartition('.')[0]}.{info.name}")
    return sorted(_REGISTRY.values(), key=_sort_key)


def _sort_key(r: Rule) -> tuple[str, int]:
    area, num = r.id.split("-")
    return (area, int(num))


def get(rule_id: str) -> Rule:
    """The rule with ID `rule_id`."""
    catalogue()
    try:
        return _REGISTRY[rule_id]
    except KeyError:
        raise InvalidArgumentError("rule_id", rule_id, "no such rule") from None


def functions(rule_id: str, profile: Profile) -> tuple[Callable[..., Any], ...]:
    """Every function stating `rule_id` in `profile`, the rule's own first."""
    catalogue()
    try:
        return tuple(_FUNCTIONS[(rule_id, profile)])
    except KeyError:
        raise InvalidArgumentError("rule_id", rule_id, f"no variant for {profile.value}") from None


def function(rule_id: str, profile: Profile) -> Callable[..., Any]:
    """The function stating `rule_id` itself in `profile`."""
    return functions(rule_id, profile)[0]


def rule_codes() -> dict[types.CodeType, set[str]]:
    """The code object of every rule function → the IDs of the rules it states (for tracing
    which rules a run calls)."""
    catalogue()
    codes: dict[types.CodeType, set[str]] = {}
    for (rule_id, _profile), fns in _FUNCTIONS.items():
        for fn in fns:
            code = getattr(inspect.unwrap(fn), "__code__", None)
            if isinstance(code, types.CodeType):
                codes.setdefault(code, set()).add(rule_id)
    return codes


# -- rulesets ------------------------------------------------------------------------------------
#
# consensus-specs builds one spec object per fork from the fork's functions, and code takes the
# spec object instead of branching on the fork. A `Rules` object is that for one profile: each of
# its attributes is the function stating one rule (or one part of a rule) in that profile, chosen
# from the registered variants. The classes say which functions exist and type them (one class per
# spec module, `spec.ruleset.Ruleset` combines them); the registry says which variant applies to
# which profile. A rule that calls a changed rule takes the rules object (`rules: StoreRules`) and
# calls it through that (`rules.overflow_badly_target(...)`), so that a ruleset with one function
# swapped (`Rules.swapped`, the mutation bank) changes that rule everywhere it is used.

RulesT = TypeVar("RulesT", bound="Rules")


def _registered(fn: Callable[..., Any]) -> tuple[str, tuple[Profile, ...]]:
    rule_id = getattr(fn, "rule_id", None)
    profiles = getattr(fn, "rule_profiles", None)
    if not isinstance(rule_id, str) or not isinstance(profiles, tuple):
        raise TypeError(f"{fn.__qualname__} is not a registered rule function")
    return rule_id, profiles


class Stated(Generic[F]):
    """A ruleset attribute: the function stating a rule in the ruleset's profile, one of the
    variants it was declared with (`stated`)."""

    def __init__(self, *variants: F) -> None:
        ids = {_registered(v)[0] for v in variants}
        covered = [p for v in variants for p in _registered(v)[1]]
        if len(ids) != 1 or sorted(covered, key=str) != sorted(ALL_PROFILES, key=str):
            names = ", ".join(v.__qualname__ for v in variants)
            raise TypeError(f"{names}: not one rule's variants covering each profile once")
        self.rule_id = ids.pop()
        self.variants = variants
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def variant_for(self, profile: Profile) -> F:
        """The variant registered for `profile`."""
        return next(v for v in self.variants if profile in _registered(v)[1])

    @overload
    def __get__(self, rules: None, owner: type) -> Self: ...

    @overload
    def __get__(self, rules: Rules, owner: type) -> F: ...

    def __get__(self, rules: Rules | None, owner: type) -> Self | F:
        # A ruleset keeps its functions in its own __dict__, which shadows this descriptor.
        return self if rules is None else cast(F, rules.__dict__[self.name])


def stated(*variants: F) -> Stated[F]:
    """The ruleset attribute for a rule stated by `variants` (one per profile set)."""
    return Stated(*variants)


#: Each class's rules of each profile, keyed by the ids of the class and the Profile member (a
#: tuple of ints hashes in C; an Enum member hashes in Python, which the read paths would feel).
_BUILT: dict[tuple[int, int], Rules] = {}


class Rules:
    """The rules of one profile: every attribute declared with `stated` in this class or a base
    is the function stating that rule in `profile`.

    Example: ``Ruleset(Profile.V4_7).overflow_badly_target(0, 5)`` is 0 (STORE-8 in 4.7).
    """

    profile: Profile

    def __init__(self, profile: Profile | str) -> None:
        prof = Profile.parse(profile)
        self._install(prof, {name: slot.variant_for(prof) for name, slot in self.slots().items()})

    @classmethod
    def of(cls: type[RulesT], profile: Profile | str) -> RulesT:
        """The rules of `profile`, built once per class and profile."""
        built = _BUILT.get((id(cls), id(profile)))
        if built is None:
            prof = Profile.parse(profile)  # a name such as "4.7": never a key (ids get reused)
            built = _BUILT.get((id(cls), id(prof)))
            if built is None:
                built = _BUILT[(id(cls), id(prof))] = cls(prof)
        return cast(RulesT, built)

    @classmethod
    def slots(cls) -> dict[str, Stated[Any]]:
        """Every rule attribute of this class, by name."""
        found: dict[str, Stated[Any]] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, Stated):
                    if found.get(name, value) is not value:
                        raise TypeError(f"{cls.__name__}: two rules are called {name}")
                    found[name] = value
        return found

    def _install(self, profile: Profile, chosen: dict[str, Callable[..., Any]]) -> None:
        self.__dict__.update({"profile": profile, **chosen})

    def swapped(self, name: str, function: Callable[..., Any]) -> Self:
        """A copy of this ruleset in which the rule attribute `name` is `function`; every rule
        that calls it through the ruleset calls `function` (the mutation bank's one change)."""
        slots = self.slots()
        if name not in slots:
            raise InvalidArgumentError("name", name, f"not a rule of {type(self).__name__}")
        copy = object.__new__(type(self))
        chosen = {n: self.__dict__[n] for n in slots}
        copy._install(self.profile, {**chosen, name: function})
        return copy

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a ruleset is frozen (setting {name})")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.profile.value}>"
