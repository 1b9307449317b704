"""The rule catalogue: every rule of the rulebooks as a registered function.

Each rule function carries its rule ID (``STORE-4``), a one-sentence docstring (the statement),
the RocketMQ method it states, the seeds that describe it and its contracts (PEP 316 ``pre:`` /
``post:`` lines in the docstring, checked by CrossHair and by `spec.contracts` at run time).
A rule that changed between 4.7.1 and 4.9.7 registers one function per profile under the same
ID; each variant is marked ``# [4.7]`` / ``# [Modified in 4.9]`` at its definition, the way
consensus-specs marks forks.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import attrs

from pullspec.spec.errors import InvalidArgumentError
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
        """The variant that applies to `profile`."""
        for v in self.variants:
            if profile in v.profiles:
                return v
        raise InvalidArgumentError("profile", profile.value, f"rule {self.id} has no variant")

    @property
    def changed(self) -> bool:
        """True when the profiles state the rule with different functions."""
        return len(self.variants) > 1

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
                }
                for p in profiles
            },
        }


_REGISTRY: dict[str, Rule] = {}
_FUNCTIONS: dict[tuple[str, Profile], Callable[..., Any]] = {}


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
            taken = {p for v in existing.variants for p in v.profiles}
            if taken & set(profs):
                if any(v.function == variant.function for v in existing.variants):
                    return fn  # module re-import
                raise ValueError(f"rule {rule_id} registered twice for {taken & set(profs)}")
            versions_text = existing.versions if versions == "same" else versions
            _REGISTRY[rule_id] = attrs.evolve(
                existing, variants=(*existing.variants, variant), versions=versions_text
            )
        for p in profs:
            _FUNCTIONS[(rule_id, p)] = fn
        fn.rule_id = rule_id  # type: ignore[attr-defined]
        return fn

    return register


def catalogue() -> list[Rule]:
    """Every registered rule, sorted by area order then number."""
    package = importlib.import_module(__package__ or "pullspec.spec")
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
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


def function(rule_id: str, profile: Profile) -> Callable[..., Any]:
    """The function stating `rule_id` in `profile`."""
    catalogue()
    try:
        return _FUNCTIONS[(rule_id, profile)]
    except KeyError:
        raise InvalidArgumentError("rule_id", rule_id, f"no variant for {profile.value}") from None
