"""The generated rule pages: an index, one page per area (a section per rule) and the gaps page.

Pages are Markdown for mkdocs; every rule section carries its ID as its anchor
(``rules/store.md#STORE-5``).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

from pullspec.conformance import vectors
from pullspec.conformance.docs.coverage import TestRef, VectorHit
from pullspec.conformance.docs.facts import Facts
from pullspec.conformance.docs.sources import (
    case_link,
    function_location,
    function_source,
    shown_cases,
    source_link,
)
from pullspec.spec import rules
from pullspec.spec.profiles import Profile

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def escape(text: str) -> str:
    """`text` as inline Markdown: code spans kept, everything else literal."""
    out: list[str] = []
    last = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_escape_plain(text[last : m.start()]))
        out.append(m.group(0).replace("|", "&#124;"))
        last = m.end()
    out.append(_escape_plain(text[last:]))
    return "".join(out)


def _escape_plain(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\*_\[\]|{}#`])", r"\\\1", text)


def _html_lt(text: str) -> str:
    """Rulebook Markdown with `<init>`-like words outside code spans made literal."""
    out: list[str] = []
    last = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(text[last : m.start()].replace("<", "&lt;"))
        out.append(m.group(0))
        last = m.end()
    out.append(text[last:].replace("<", "&lt;"))
    return "".join(out)


def blank_before_blocks(markdown: str) -> str:
    """Python-Markdown needs a blank line before a list or table that follows a paragraph line;
    the rulebooks do without one."""
    out: list[str] = []
    for line in markdown.splitlines():
        starts_block = line.startswith(("- ", "* ", "| ", "1. "))
        if (
            starts_block
            and out
            and out[-1].strip()
            and not out[-1].startswith(("- ", "* ", "|", "  ", "1. "))
        ):
            out.append("")
        out.append(line)
    return "\n".join(out)


def code(text: str) -> str:
    """`text` as an inline code span."""
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fenced(body: str, lang: str = "text", indent: str = "") -> str:
    """A fenced code block (longer fence when the body holds backticks)."""
    fence = "````" if "```" in body else "```"
    lines = [f"{fence}{lang}", *body.splitlines(), fence]
    return "\n".join(indent + line if line else line for line in lines)


def page_of(area: str) -> str:
    """The generated page of an area, relative to docs/."""
    return f"rules/{area.lower()}.md"


def link(rule_id: str, from_dir: str = "rules") -> str:
    """A Markdown link to a rule's section."""
    target = page_of(rule_id.split("-", maxsplit=1)[0])
    if from_dir == "rules":
        target = target.removeprefix("rules/")
    return f"[{rule_id}]({target}#{rule_id})"


def _tests(facts: Facts, rule_id: str) -> tuple[TestRef, ...]:
    return facts.coverage.tests.get(rule_id, ())


def _vectors(facts: Facts, rule_id: str) -> tuple[VectorHit, ...]:
    return facts.coverage.passing_vectors(rule_id)


def _profiles_text(profiles: Iterable[Profile]) -> str:
    return ", ".join(f"{p.value} ({p.tag})" for p in profiles)


# -- one rule ------------------------------------------------------------------------------------


def rule_section(facts: Facts, rule: rules.Rule) -> str:
    """The Markdown section of one rule."""
    entry = facts.rulebooks.entries.get(rule.id)
    title = f"{rule.id} — {entry.title}" if entry else rule.id
    parts = [f"## {title} {{#{rule.id}}}", "", f"**{escape(rule.statement)}**", ""]
    parts += [
        "| Property | Value |",
        "|---|---|",
        f"| RocketMQ method | {code(rule.source)} |",
        f"| Profiles | {'**changed** between 4.7 and 4.9' if rule.changed else 'same in 4.7 and 4.9'} |",
        f"| Seeds named | {', '.join(code(s) for s in rule.seeds) or 'none (source only)'} |",
        "",
    ]
    for variant in rule.variants:
        parts += _variant(variant, rule.changed)
    if rule.versions != "same" or rule.changed:
        parts += [f"**Version difference.** {escape(rule.versions)}", ""]
    parts += _passages(facts, rule)
    parts += _test_list(_tests(facts, rule.id))
    parts += _vector_list(_vectors(facts, rule.id))
    if entry:
        parts += [
            f'??? quote "The rulebook entry ({entry.rulebook})"',
            "",
            textwrap.indent(blank_before_blocks(_html_lt(entry.text)), "    "),
            "",
        ]
    return "\n".join(parts)


def _variant(variant: rules.RuleVariant, changed: bool) -> list[str]:
    label = f"Profile {_profiles_text(variant.profiles)}: " if changed else ""
    out = [f"**{label}{code(variant.function)}**", ""]
    if changed:
        out += [escape(variant.statement), ""]
    if variant.contracts:
        out += ["Contracts (`pre`/`post`/`raises`, checked by CrossHair and at run time):", ""]
        out += [fenced("\n".join(variant.contracts)), ""]
    else:
        out += ["No contract lines.", ""]
    source = _source_of(variant.function)
    location = function_location(variant.function)
    if location is not None:
        rel, line = location
        out += [f"Source: {source_link(rel, line, f'{rel}:{line}')}", ""]
    if source is not None:
        where, text = source
        out += [
            f'??? example "Python: {variant.function} ({where})"',
            "",
            fenced(text, "python", "    "),
            "",
        ]
    return out


def _source_of(function: str) -> tuple[str, str] | None:
    found = function_source(function)
    if found is None:
        return None
    rel, start, text = found
    return f"{rel}:{start}", textwrap.dedent(text).rstrip()


def _passages(facts: Facts, rule: rules.Rule) -> list[str]:
    found = facts.passages.get(rule.id, [])
    if not rule.seeds:
        return ["**Seed passages.** None: no seed states this rule (source only).", ""]
    if not found:
        return [
            "**Seed passages.** None found by the digests' citations or a search of the seeds.",
            "",
        ]
    out = ["**Seed passages.**", ""]
    for p in found:
        shown_last = p.excerpt_first + len(p.excerpt) - 1
        excerpt = (
            ""
            if (p.excerpt_first, shown_last) == (p.first, p.last)
            else f", excerpt lines {p.excerpt_first}–{shown_last}"
        )
        out += [
            f"- {code(p.seed)} lines {p.first}–{p.last}{excerpt} — found by {escape(p.found_by)}",
            "",
            fenced("\n".join(p.excerpt), "text", "    "),
            "",
        ]
    return out


def _test_list(tests: tuple[TestRef, ...]) -> list[str]:
    if not tests:
        return ["**Tests.** None found ([gaps](gaps.md)).", ""]
    out = [f"**Tests** ({len(tests)}):", ""]
    out += [
        f"- {source_link(t.file, t.line, code(t.node_id))} (line {t.line}; names the {t.how})"
        for t in tests
    ]
    return [*out, ""]


def _vector_list(hits: tuple[VectorHit, ...]) -> list[str]:
    if not hits:
        return ["**Vector cases.** None ran this rule ([gaps](gaps.md)).", ""]
    out = [
        f"**Vector cases** ({len(hits)} passing cases during which the reference ran this rule):",
        "",
        "| Profile | Vector area | Cases | Case ids |",
        "|---|---|---|---|",
    ]
    for (profile, area), found, total in shown_cases(hits):
        more = f" and {total - len(found)} more" if total > len(found) else ""
        shown = ", ".join(
            case_link(h.path, h.case_id) if h.path else escape(h.case_id) for h in found
        )
        out.append(f"| {profile} | {area} | {total} | {shown}{more} |")
    return [*out, ""]


# -- pages ---------------------------------------------------------------------------------------


def area_page(facts: Facts, area: str) -> str:
    """The page of one area."""
    members = facts.rules_of(area)
    title = facts.rulebooks.area_title(area)
    with_tests = sum(1 for r in members if _tests(facts, r.id))
    with_vectors = sum(1 for r in members if _vectors(facts, r.id))
    changed = sum(1 for r in members if r.changed)
    parts = [
        f"# {area} — {_html_lt(title)}",
        "",
        f"{len(members)} rules · {changed} changed between 4.7 and 4.9 · {with_tests} with tests · "
        f"{with_vectors} with vector cases. Generated from `spec.rules.catalogue()`; "
        "see [how this page is made](index.md#how-these-pages-are-made).",
        "",
        "| Rule | Statement | Tests | Vectors |",
        "|---|---|---|---|",
    ]
    for r in members:
        parts.append(
            f"| [{r.id}](#{r.id}) | {escape(r.statement)} | {len(_tests(facts, r.id))} | "
            f"{len(_vectors(facts, r.id))} |"
        )
    parts.append("")
    for r in members:
        parts += [rule_section(facts, r), ""]
    return "\n".join(parts)


def index_page(facts: Facts) -> str:
    """The rule index: areas, every rule, the vector replay summary and how it was all found."""
    cat = facts.catalogue
    parts = [
        "# Rule index",
        "",
        f"The specification holds **{len(cat)} rules** in {len(facts.areas())} areas; "
        f"{sum(1 for r in cat if r.changed)} of them differ between the 4.7 (rocketmq-all-4.7.1) "
        "and 4.9 (rocketmq-all-4.9.7) profiles. Rules without a test or a vector case are on the "
        "[gaps page](gaps.md).",
        "",
        "| Area | Title | Rules | Changed | With tests | With vectors |",
        "|---|---|---|---|---|---|",
    ]
    for area in facts.areas():
        members = facts.rules_of(area)
        parts.append(
            f"| [{area}]({page_of(area).removeprefix('rules/')}) | "
            f"{_html_lt(facts.rulebooks.area_title(area))} | {len(members)} | "
            f"{sum(1 for r in members if r.changed)} | "
            f"{sum(1 for r in members if _tests(facts, r.id))} | "
            f"{sum(1 for r in members if _vectors(facts, r.id))} |"
        )
    parts += [
        "",
        "## Every rule",
        "",
        "| Rule | Statement | Tests | Vectors |",
        "|---|---|---|---|",
    ]
    for r in cat:
        mark = " *(changed)*" if r.changed else ""
        parts.append(
            f"| {link(r.id)} | {escape(r.statement)}{mark} | {len(_tests(facts, r.id))} | "
            f"{len(_vectors(facts, r.id))} |"
        )
    parts += ["", "## Vector replay", "", *_runs_table(facts), "", _HOW]
    return "\n".join(parts)


def _runs_table(facts: Facts) -> list[str]:
    out = [
        "Every case of `../shared/vectors` replayed on the reference candidate while these pages "
        "were generated:",
        "",
        "| Profile | Vector area | Cases | Verdicts | Rule areas that ran |",
        "|---|---|---|---|---|",
    ]
    for run in sorted(facts.coverage.runs, key=lambda r: (r.profile.value, r.area)):
        verdicts = ", ".join(f"{v} {n}" for v, n in sorted(run.verdicts.items()))
        areas = ", ".join(f"[{a}]({page_of(a).removeprefix('rules/')})" for a in run.rule_areas)
        out.append(
            f"| {run.profile.value} | {run.area} | {run.total} | {verdicts} | {areas or '—'} |"
        )
    return out


_HOW = """## How these pages are made

`python -m pullspec.conformance.docs build` (or `make docs`) generates these pages while mkdocs builds the
site; none of them is in the repository.

- **Rules** come from `spec.rules.catalogue()`: ID, statement (the first paragraph of the rule
  function's docstring), RocketMQ method, seeds, version note, and per profile the function and its
  contract lines. The title after the ID and the collapsed rulebook entry come from
  `../shared/semantics/rulebook-*.md`.
- **Seed passages** are the blocks of `../shared/semantics/seed-digests/*.md` that cite a seed by
  line and name the rule's Java method or the identifiers of its statement; seeds no digest cites
  by line are searched for the method. The excerpt is read from the seed file.
- **Tests** are found by parsing `tests/`: a test covers a rule when it names the rule ID, uses
  one of the rule's functions (through its imports), carries the ID in its name
  (`test_flow_5_to_8_...`), or calls a helper of its file that does.
- **Vector cases** are found by replaying every case on the reference candidate with a profiler:
  a case covers a rule when one of the rule's functions ran during it and the case passed.
"""


def gaps_page(facts: Facts) -> str:
    """Rules without a test or without a vector case, and vector areas that could not run."""
    no_test = [r for r in facts.catalogue if not _tests(facts, r.id)]
    no_vector = [r for r in facts.catalogue if not _vectors(facts, r.id)]
    neither = [r for r in no_test if r in no_vector]
    parts = [
        "# Gaps",
        "",
        f"Of {len(facts.catalogue)} rules, **{_count(no_test)} no test** and "
        f"**{_count(no_vector)} no passing vector case** ({_count(neither)} neither). "
        "Both lists are computed at build time (see "
        "[how the rule pages are made](index.md#how-these-pages-are-made)).",
        "",
    ]
    parts += _gap_table("Rules without a test", no_test, facts)
    parts += _gap_table("Rules without a vector case", no_vector, facts)
    reached = {a for run in facts.coverage.runs for a in run.rule_areas}
    unreached = [a for a in facts.areas() if a not in reached]
    vector_areas = sorted({run.area for run in facts.coverage.runs})
    parts += [
        f"The recorded vectors cover the vector areas {', '.join(vector_areas) or 'none'}; no "
        f"recorded case runs any rule of {', '.join(unreached) or 'no area'}. Those rules need "
        "new recorded vectors (or vectors exported from the reference, once that exists) "
        "before this list can shrink.",
        "",
    ]
    stuck = [
        r
        for r in facts.coverage.runs
        if r.verdicts.get(vectors.Verdict.UNSUPPORTED.value)
        or r.verdicts.get(vectors.Verdict.DIVERGED.value)
        or r.verdicts.get(vectors.Verdict.CRASHED.value)
    ]
    parts += ["## Vector cases the reference did not pass", ""]
    if not stuck:
        parts += ["None: every recorded case passed on the reference candidate.", ""]
    else:
        parts += ["| Profile | Vector area | Verdicts | First reason |", "|---|---|---|---|"]
        for run in sorted(stuck, key=lambda r: (r.profile.value, r.area)):
            verdicts = ", ".join(f"{v} {n}" for v, n in sorted(run.verdicts.items()))
            parts.append(
                f"| {run.profile.value} | {run.area} | {verdicts} | {escape(run.detail or '')} |"
            )
        parts.append("")
    return "\n".join(parts)


def _count(found: list[rules.Rule]) -> str:
    return f"{len(found)} {'has' if len(found) == 1 else 'have'}"


def _gap_table(title: str, missing: list[rules.Rule], facts: Facts) -> list[str]:
    out = [f"## {title}", ""]
    if not missing:
        return [*out, "None.", ""]
    by_area: dict[str, list[rules.Rule]] = {}
    for r in missing:
        by_area.setdefault(r.area, []).append(r)
    out += ["| Area | Rules |", "|---|---|"]
    for area in facts.rulebooks.area_order(by_area):
        out.append(
            f"| {area} ({len(by_area[area])}) | {', '.join(link(r.id) for r in by_area[area])} |"
        )
    return [*out, ""]


def rule_pages(facts: Facts) -> dict[str, str]:
    """Every generated rule page, by path relative to docs/."""
    pages = {"rules/index.md": index_page(facts), "rules/gaps.md": gaps_page(facts)}
    for area in facts.areas():
        pages[page_of(area)] = area_page(facts, area)
    return pages
