"""The pages rule pages link to: Python sources with an anchor per line, and vector cases with an
anchor per case. Generated inside the build like the rule pages, kept out of the navigation.

- `source/<path>.md` (`source/spec/store.md#L45`): a rule function's module and every test file
  that covers a rule, each line numbered and linkable;
- `cases/<folder>/<file>.md` (`cases/rocketmq-4.9.7/store.md#case-store-000123`): the cases of a
  vector file that rule pages name, each with its steps one per line.
"""

from __future__ import annotations

import html
import importlib
import inspect
import json
import re
from pathlib import Path
from types import ModuleType

from pullspec.conformance.docs.coverage import VectorHit
from pullspec.conformance.docs.facts import PROJECT, Facts
from pullspec.conformance.vectors import Case

#: Folders of generated reference pages (not listed in the navigation).
SOURCE_DIR, CASES_DIR = "source", "cases"
#: Vector case ids a rule page names per (profile, area) before "and N more".
CASES_SHOWN = 12
REFERENCE_DIRS = (f"{SOURCE_DIR}/", f"{CASES_DIR}/")


def source_page_of(rel: str) -> str:
    """The page showing the project file `rel` (``spec/store.py`` → ``source/spec/store.md``)."""
    return f"{SOURCE_DIR}/{rel.removesuffix('.py')}.md"


def source_link(rel: str, line: int, text: str, from_dir: str = "rules") -> str:
    """A Markdown link from a page in `from_dir` to line `line` of the project file `rel`."""
    up = "../" * len(from_dir.split("/"))
    return f"[{text}]({up}{source_page_of(rel)}#L{line})"


def case_page_of(path: str) -> str:
    """The page showing the cases of the vector file `path` (by its folder and file name)."""
    file = Path(path)
    return f"{CASES_DIR}/{file.parent.name}/{file.stem}.md"


def case_anchor(case_id: str) -> str:
    """The HTML id of a case on its page."""
    return "case-" + re.sub(r"[^A-Za-z0-9_.-]", "-", case_id)


def case_link(path: str, case_id: str, from_dir: str = "rules") -> str:
    """A Markdown link from a page in `from_dir` to one case."""
    up = "../" * len(from_dir.split("/"))
    return f"[{case_id}]({up}{case_page_of(path)}#{case_anchor(case_id)})"


def function_source(function: str) -> tuple[str, int, str] | None:
    """(project-relative file, first line, source text) of a rule function
    (``pullspec.spec.store.f``), or None when it cannot be found."""
    module_name, _, qualname = function.rpartition(".")
    try:
        obj: object = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        target: object = inspect.unwrap(obj) if callable(obj) else obj
        if not (callable(target) or isinstance(target, ModuleType)):
            raise TypeError(f"{function} has no source")  # as getsourcelines would raise
        lines, start = inspect.getsourcelines(target)
    except (ImportError, AttributeError, OSError, TypeError):
        return None
    rel = module_name.removeprefix("pullspec.").replace(".", "/") + ".py"
    return rel, start, "".join(lines)


def function_location(function: str) -> tuple[str, int] | None:
    """(project-relative file, first line) of a rule function."""
    found = function_source(function)
    return None if found is None else found[:2]


def linked_files(facts: Facts) -> set[str]:
    """Every project file a rule page links to: rule functions' modules and covering tests."""
    files = {
        found[0]
        for rule in facts.catalogue
        for variant in rule.variants
        if (found := function_location(variant.function)) is not None
    }
    files |= {t.file for refs in facts.coverage.tests.values() for t in refs}
    return files


def source_page(rel: str) -> str:
    """The page of one project file: its lines, each with an anchor ``L<n>``."""
    text = (PROJECT / rel).read_text(encoding="utf-8")
    lines = [
        f'<span id="L{n}"><a class="pullspec-ln" href="#L{n}">{n:>5}</a>  {html.escape(line)}</span>'
        for n, line in enumerate(text.splitlines(), 1)
    ]
    return "\n".join(
        [
            f"# {rel}",
            "",
            f"The source of `{rel}` as built into this site; every line has an anchor "
            "(`#L<n>`). Rule pages link here.",
            "",
            '<pre class="pullspec-source"><code>' + "\n".join(lines) + "</code></pre>",
            "",
        ]
    )


def source_pages(facts: Facts) -> dict[str, str]:
    """The pages of every linked project file."""
    return {source_page_of(rel): source_page(rel) for rel in sorted(linked_files(facts))}


def _case_block(case: Case) -> str:
    head = {k: v for k, v in case.items() if k != "steps"}
    body = [json.dumps(head, separators=(", ", ": "))]
    body += [
        f"step {n}: " + json.dumps(step, separators=(", ", ": "))
        for n, step in enumerate(case.get("steps", ()), 1)
    ]
    cid = str(case.get("id", "?"))
    return (
        f'<div class="pullspec-case" id="{html.escape(case_anchor(cid))}">'
        f"<p><strong>{html.escape(cid)}</strong></p>"
        f"<pre><code>{html.escape(chr(10).join(body))}</code></pre></div>"
    )


def shown_cases(
    hits: tuple[VectorHit, ...],
) -> list[tuple[tuple[str, str], list[VectorHit], int]]:
    """A rule's passing cases by (profile, area): the first CASES_SHOWN and how many in all."""
    groups: dict[tuple[str, str], list[VectorHit]] = {}
    for h in hits:
        groups.setdefault((h.profile.value, h.area), []).append(h)
    return [(key, found[:CASES_SHOWN], len(found)) for key, found in sorted(groups.items())]


def linked_cases(facts: Facts) -> dict[str, set[str]]:
    """Vector file → the ids of its cases that some rule page names."""
    out: dict[str, set[str]] = {}
    for rule in facts.catalogue:
        for _, shown, _ in shown_cases(facts.coverage.passing_vectors(rule.id)):
            for h in shown:
                if h.path:
                    out.setdefault(h.path, set()).add(h.case_id)
    return out


def case_page(path: str, wanted: set[str]) -> str:
    """The page of one vector file: the cases in `wanted`, with their config and steps."""
    from pullspec.conformance import vectors

    file = Path(path)
    every = list(vectors.load_cases(file))
    cases = [c for c in every if str(c.get("id", "?")) in wanted]
    return "\n\n".join(
        [
            f"# {file.parent.name}/{file.name}",
            f"{len(cases)} of the file's {len(every)} vector cases: those the rule pages name, "
            "one per block — the case's fields, then its steps (1-based, as `pullspec vectors "
            "check` numbers them). Replay the file with "
            f"`pullspec vectors check {file.parent.name}/{file.name}`.",
            *(_case_block(c) for c in cases),
            "",
        ]
    )


def case_pages(facts: Facts) -> dict[str, str]:
    """The pages of every vector file a rule page links a case of."""
    linked = linked_cases(facts)
    return {case_page_of(p): case_page(p, linked[p]) for p in sorted(linked)}


def pages(facts: Facts) -> dict[str, str]:
    """Every source and case page, by path relative to docs/."""
    return {**source_pages(facts), **case_pages(facts)}


def is_reference_page(src_uri: str) -> bool:
    """True for a generated source or case page (kept out of the navigation)."""
    return src_uri.startswith(REFERENCE_DIRS)
