"""The seed passages that describe a rule, found through the seed digests' line citations.

Digest B cites seed 002 as ``[S:1799-2008]`` and digest C cites seed 004 as ``[S L1320-1500]``.
Each cited block of a digest (a bullet, paragraph or table row, under its headings) is matched
against the rule: the Java methods of its `source` and the identifiers of its statement. A seed the
rule names that no digest cites by line (000, 001 and 003, which digest A tags without lines) is
searched directly for the same names. The excerpt is read from the seed file itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import attrs

from pullspec.spec import rules

_SEED_NAME = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b")
_CITED = re.compile(r"\s*\[[^\[\]]*\]\s*$")
_BRACKET = re.compile(r"\[[^\[\]]*\]")
_RANGE = re.compile(r"L?(\d+)(?:\s*[-–]\s*L?(\d+))?")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_UPPER = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")
_CAMEL = re.compile(r"\b[a-z]+[A-Z][A-Za-z0-9]*\b")
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_BLOCK_START = re.compile(r"^\s*(?:[-*] |\d+\. |\|)")

#: Excerpts show at most this many lines of this many characters.
EXCERPT_LINES = 8
EXCERPT_WIDTH = 150
#: A method named by more digest blocks than this counts half (see SeedLibrary._common).
COMMON_METHOD_BLOCKS = 40
#: A rule shows at most this many passages.
MAX_PASSAGES = 3


@attrs.frozen
class Citation:
    """A digest block citing lines of one seed."""

    digest: str
    heading: str
    text: str
    seed: str
    first: int
    last: int


@attrs.frozen
class Passage:
    """A seed passage shown on a rule page."""

    seed: str
    first: int
    last: int
    excerpt_first: int
    excerpt: tuple[str, ...]
    found_by: str


def parse_digest(path: Path) -> list[Citation]:
    """Every block of a digest that cites its seed by line, with the headings above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    head = "\n".join(lines[:12])
    seeds = sorted(set(_SEED_NAME.findall(head)))
    if len(seeds) != 1:
        return []  # digest A covers three seeds and cites none of them by line
    seed = seeds[0]
    out: list[Citation] = []
    headings: dict[int, str] = {}
    block: list[str] = []

    def flush() -> None:
        if not block:
            return
        text = " ".join(s.strip() for s in block)
        heading = " / ".join(headings[k] for k in sorted(headings))
        for first, last in _citations(text) or _citations(
            headings.get(max(headings, default=0), "")
        ):
            out.append(Citation(path.name, heading, text, seed, first, last))
        block.clear()

    for line in lines:
        if line.startswith("#"):
            flush()
            level = len(line) - len(line.lstrip("#"))
            headings = {k: v for k, v in headings.items() if k < level}
            headings[level] = line.lstrip("#").strip()
            # The section itself, cited by its heading, as a block with no text of its own.
            joined = " / ".join(headings[k] for k in sorted(headings))
            for first, last in _citations(headings[level]):
                out.append(Citation(path.name, joined, "", seed, first, last))
            continue
        if not line.strip() or _BLOCK_START.match(line):
            flush()
        if line.strip():
            block.append(line)
    flush()
    return out


def _citations(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for bracket in _BRACKET.findall(text):
        inner = bracket[1:-1]
        if "S:" in inner:
            inner = inner.split("S:", 1)[1]
        elif inner.startswith("S "):
            inner = inner[2:]
        else:
            continue
        for m in _RANGE.finditer(inner):
            first = int(m.group(1))
            last = int(m.group(2)) if m.group(2) else first
            if first <= last:
                found.append((first, last))
    return found


@attrs.frozen
class Keywords:
    """The names that identify a rule in seed text."""

    methods: tuple[tuple[str, str], ...]
    tokens: tuple[str, ...]

    def method_names(self) -> tuple[str, ...]:
        """The bare method (or class) names."""
        return tuple(m for _, m in self.methods)


def keywords(rule: rules.Rule) -> Keywords:
    """The (class, method) pairs of the rule's source and its statement's identifiers."""
    methods: list[tuple[str, str]] = []
    cls = ""
    for piece in re.split(r"[;,]", rule.source):
        # "A.b (C.d)" names two methods; a bare "b" after "A.x, b" is another method of A.
        for dotted in _DOTTED.findall(piece):
            parts = dotted.split(".")
            if len(parts) > 1:
                cls = parts[-2]
            name = parts[-1]
            if name not in ("init", "clinit") and (cls, name) not in methods:
                methods.append((cls, name))
    names = {m for _, m in methods}
    tokens = dict.fromkeys(_UPPER.findall(rule.statement) + _CAMEL.findall(rule.statement))
    return Keywords(tuple(methods), tuple(t for t in tokens if t not in names))


#: Method name → the names written before it ("" when bare): {"getMessage": {"this", ""}}.
Index = dict[str, set[str]]


def _index(text: str) -> Index:
    out: Index = {}
    for dotted in _DOTTED.findall(text):
        parts = dotted.split(".")
        for i, part in enumerate(parts):
            out.setdefault(part, set()).add(parts[i - 1] if i else "")
    return out


def _mentions(index: Index, cls: str, method: str) -> bool:
    """True when `method` appears bare, on `this`, or on `cls` (not on another class)."""
    before = index.get(method)
    if not before:
        return False
    return not cls or bool(before & {cls, "this", ""})


def _line_score(line: str, kw: Keywords) -> int:
    """How well a seed line shows the rule: its statement's names first, then its method."""
    return 3 * sum(1 for t in kw.tokens if t in line) + sum(
        1 for m in kw.method_names() if m in line
    )


class SeedLibrary:
    """The seeds and digests of ../shared, read once."""

    def __init__(self, seeds_dir: Path, digests_dir: Path) -> None:
        self.seeds_dir = seeds_dir
        self._lines: dict[str, list[str]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self.citations: list[Citation] = []
        for digest in sorted(digests_dir.glob("*.md")):
            self.citations.extend(parse_digest(digest))
        # Only the innermost heading says what a block is about; its ancestors are too broad.
        self._names = [(_index(c.text), _index(c.heading.split(" / ")[-1])) for c in self.citations]

    def lines(self, seed: str) -> list[str]:
        """The lines of a seed file (empty when the file is absent)."""
        if seed not in self._lines:
            path = self.seeds_dir / seed
            self._lines[seed] = (
                path.read_text(encoding="utf-8").splitlines() if path.exists() else []
            )
        return self._lines[seed]

    def _common(self, cls: str, method: str) -> bool:
        """True for a method so many digest blocks mention (pullMessage, getMessage) that naming
        it says little about which part of it a block covers."""
        key = (cls, method)
        if key not in self._counts:
            self._counts[key] = sum(
                1
                for text, heading in self._names
                if _mentions(text, cls, method) or _mentions(heading, cls, method)
            )
        return self._counts[key] > COMMON_METHOD_BLOCKS

    def _score(self, index: int, kw: Keywords) -> int:
        text, heading = self._names[index]
        score = 0
        for cls, method in kw.methods:
            weight = 0
            if cls and cls in heading.get(method, ()):
                weight += 6
            elif _mentions(heading, cls, method):
                weight += 5
            if _mentions(text, cls, method):
                weight += 4
            score += weight // 2 if self._common(cls, method) else weight
        score += 4 * min(2, sum(1 for t in kw.tokens if t in heading))
        return score + min(3, sum(1 for t in kw.tokens if t in text))

    def _excerpt(self, seed: str, first: int, last: int, kw: Keywords) -> tuple[int, list[str]]:
        lines = self.lines(seed)
        last = min(last, len(lines))
        if last - first + 1 <= EXCERPT_LINES:
            start = first
        else:
            best = max(
                range(first, last + 1),
                key=lambda n: (_line_score(lines[n - 1], kw), -n),
                default=first,
            )
            start = max(first, min(best - 2, last - EXCERPT_LINES + 1))
        end = min(last, start + EXCERPT_LINES - 1)
        shown = [_clip(lines[n - 1]) for n in range(start, end + 1)]
        return start, shown

    def passages(self, rule: rules.Rule, limit: int = MAX_PASSAGES) -> list[Passage]:
        """The seed passages that describe `rule`, best first."""
        kw = keywords(rule)
        allowed = set(rule.seeds)
        if not allowed:
            return []
        ranked: list[tuple[int, int, Citation]] = []
        for i, c in enumerate(self.citations):
            if c.seed not in allowed or c.first > len(self.lines(c.seed)):
                continue
            score = self._score(i, kw)
            if score >= 3:
                ranked.append((score, c.last - c.first, c))
        # Best score first; on a tie the whole section (a heading citation) before its blocks.
        ranked.sort(key=lambda t: (-t[0], t[2].text != "", t[1], t[2].first))
        floor = ranked[0][0] // 2 if ranked else 0
        out: list[Passage] = []
        for score, _, c in ranked:
            if len(out) >= limit or score < floor:
                break
            if any(p.seed == c.seed and p.first <= c.last and c.first <= p.last for p in out):
                continue
            start, shown = self._excerpt(c.seed, c.first, c.last, kw)
            section = _CITED.sub("", c.heading.split(" / ")[-1]) if c.heading else ""
            where = f"{c.digest} § {section}" if section else c.digest
            out.append(Passage(c.seed, c.first, c.last, start, tuple(shown), where))
        for seed in rule.seeds:
            if len(out) >= limit:
                break
            if any(p.seed == seed for p in out):
                continue
            found = self._search(seed, kw)
            if found is not None:
                out.append(found)
        return out

    def _search(self, seed: str, kw: Keywords) -> Passage | None:
        lines = self.lines(seed)
        names = kw.method_names()
        if not lines or not names:
            return None
        # The method as a whole word (getMessage, not getMessageQueue); a call scores higher.
        word = re.compile(r"(?<![\w$])(" + "|".join(map(re.escape, names)) + r")(?![\w$])(\s*\()?")
        best_line, best_score, hit = 0, 0, ""
        for n, line in enumerate(lines, 1):
            m = word.search(line)
            if m is None:
                continue
            score = 1 + _line_score(line, kw) + (2 if m.group(2) else 0)
            if score > best_score:
                best_line, best_score, hit = n, score, m.group(1)
        if best_score == 0:
            return None
        first = max(1, best_line - 2)
        last = min(len(lines), first + EXCERPT_LINES - 1)
        shown = tuple(_clip(lines[n - 1]) for n in range(first, last + 1))
        return Passage(seed, first, last, first, shown, f"search of the seed for {hit}")


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= EXCERPT_WIDTH else line[: EXCERPT_WIDTH - 1] + "…"


def passages_for(library: SeedLibrary, catalogue: Iterable[rules.Rule]) -> dict[str, list[Passage]]:
    """Rule ID → its passages."""
    return {r.id: library.passages(r) for r in catalogue}
