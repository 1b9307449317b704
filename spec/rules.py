"""The rule catalogue: every rule of the rulebooks as a registered function.

Each rule function carries its rule ID (``STORE-4``), a one-sentence docstring (the statement),
the RocketMQ method it states, the seeds that describe it and its contracts (PEP 316 ``pre:`` /
``post:`` lines in the docstring, checked by CrossHair and by `spec.contracts` at run time).
A rule that changed between 4.7.1 and 4.9.7 registers one function per profile under the same
ID; each variant is marked ``# [4.7]`` / ``# [Modified in 4.9]`` at its definition, the way
consensus-specs marks forks. A rule may be stated by more than one function (LAYOUT-7: when a
file ends in a blank, and what the blank holds); the first one registered states the rule itself.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from types import CodeType
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
            _REGISTRY[rule_id] = attrs.evolve(
                existing, variants=(*existing.variants, variant), versions=versions_text
            )
        for p in profs:
            _FUNCTIONS.setdefault((rule_id, p), []).append(fn)
        fn.rule_id = rule_id  # type: ignore[attr-defined]
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


def rule_codes() -> dict[CodeType, set[str]]:
    """The code object of every rule function → the IDs of the rules it states (for tracing
    which rules a run calls)."""
    catalogue()
    codes: dict[CodeType, set[str]] = {}
    for (rule_id, _profile), fns in _FUNCTIONS.items():
        for fn in fns:
            code = getattr(inspect.unwrap(fn), "__code__", None)
            if isinstance(code, CodeType):
                codes.setdefault(code, set()).add(rule_id)
    return codes
