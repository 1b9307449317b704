"""The rulebooks' structure: area order and titles, each rule's short title and full text.

The site orders areas as the rulebooks do (broker, then client) and shows each rule's rulebook
entry under its generated section, so a reviewer reads the authoritative English beside the
Python.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import attrs

_AREA = re.compile(r"^## \d+\. ([A-Z]+)(?: —|:) (.+)$")
_RULE = re.compile(r"^\*\*([A-Z]+-\d+)(?:\.| —) (.+?)\*\*", re.S)
_END = re.compile(r"^(?:#{1,6} |---\s*$)")


@attrs.frozen
class RulebookEntry:
    """One rule as a rulebook states it."""

    rulebook: str
    title: str
    text: str


@attrs.frozen
class Rulebooks:
    """Area titles in rulebook order, and the entry of every rule ID."""

    areas: dict[str, tuple[str, str]]
    entries: dict[str, RulebookEntry]

    def area_order(self, areas: Iterable[str]) -> list[str]:
        """`areas` in rulebook order; areas the rulebooks do not have follow alphabetically."""
        known = list(self.areas)
        wanted = set(areas)
        return [a for a in known if a in wanted] + sorted(wanted - set(known))

    def area_title(self, area: str) -> str:
        """The rulebook's title of an area, or the area name."""
        return self.areas[area][1] if area in self.areas else area


def parse(paths: Iterable[Path]) -> Rulebooks:
    """Read the rulebooks (absent files are skipped)."""
    areas: dict[str, tuple[str, str]] = {}
    entries: dict[str, RulebookEntry] = {}
    for path in paths:
        if not path.exists():
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        current: tuple[str, str, list[str]] | None = None
        name = path.name

        def close(state: tuple[str, str, list[str]] | None, name: str = name) -> None:
            if state is not None:
                rid, title, body = state
                entries.setdefault(rid, RulebookEntry(name, title, "\n".join(body).strip()))

        for n, line in enumerate(lines):
            area = _AREA.match(line)
            if area:
                areas.setdefault(area.group(1), (path.name, area.group(2).strip()))
            # A long bold title may wrap onto the next line.
            rule = _RULE.match(line) or (
                _RULE.match(f"{line}\n{lines[n + 1]}") if n + 1 < len(lines) else None
            )
            if rule or _END.match(line):
                close(current)
                current = None
            if rule:
                title = " ".join(rule.group(2).split()).rstrip(".").strip()
                current = (rule.group(1), title, [line])
            elif current is not None:
                current[2].append(line)
        close(current)
    return Rulebooks(areas, entries)
