"""mkdocs hooks (named in mkdocs.yml): the generated pages exist only inside the build.

- `on_config` collects the facts once per build and lists every area page in the nav, between the
  rule index and the gaps page, so a new area appears without editing mkdocs.yml;
- `on_files` adds the rule pages, the CLI reference, the pictures and the source and vector-case
  pages the rule pages link to (`conformance.docs.sources`, not in the nav) as virtual files;
- `on_page_markdown` replaces ``<!-- pullspec:NAME -->`` markers and ``[[RULE-ID]]`` references
  in hand-written pages.
"""

from __future__ import annotations

from typing import TypedDict

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

from pullspec.conformance.docs import extras as docs_extras
from pullspec.conformance.docs import facts as docs_facts
from pullspec.conformance.docs import pictures as docs_pictures
from pullspec.conformance.docs import render as docs_render
from pullspec.conformance.docs import sources as docs_sources


class _State(TypedDict, total=False):
    """What the hooks of one build share: its facts and its generated files."""

    facts: docs_facts.Facts
    files: dict[str, str]


_state: _State = {}
#: The nav section the area pages are inserted into, and the entry they follow.
RULES_SECTION = "Rules"
RULES_INDEX = "rules/index.md"
#: The nav section that collects hand-written pages mkdocs.yml does not list.
MORE_SECTION = "More pages"


def facts() -> docs_facts.Facts:
    """The facts of the build in progress."""
    found = _state.get("facts")
    if not isinstance(found, docs_facts.Facts):
        raise RuntimeError("the pullspec docs hooks ran out of order: no facts collected")
    return found


def generated(current: docs_facts.Facts) -> dict[str, str]:
    """Every generated file (pages and pictures) by path relative to docs/."""
    return {
        **docs_render.rule_pages(current),
        **docs_extras.extra_pages(current),
        **docs_pictures.pictures(),
        **docs_sources.pages(current),
    }


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Collect the facts and put one nav entry per area into the Rules section."""
    current = docs_facts.collect()
    _state["facts"] = current
    _state["files"] = generated(current)
    for item in config.nav or []:
        if isinstance(item, dict) and RULES_SECTION in item:
            section = item[RULES_SECTION]
            at = next(
                (i + 1 for i, e in enumerate(section) if RULES_INDEX in _targets(e)), len(section)
            )
            areas = [{area: docs_render.page_of(area)} for area in current.areas()]
            item[RULES_SECTION] = [*section[:at], *areas, *section[at:]]
            break
    else:
        raise RuntimeError(f"mkdocs.yml nav has no {RULES_SECTION!r} section for the area pages")
    return config


def _targets(entry: object) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, dict):
        return [v for v in entry.values() if isinstance(v, str)]
    return []


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated files (a committed file of the same name is an error), and list in the
    nav, under "More pages", any hand-written page mkdocs.yml does not name yet, so that a page
    another developer adds is reachable and strict mode stays green."""
    for path, content in _state["files"].items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(
                f"docs/{path} is generated at build time and must not exist in docs/"
            )
        # Source and case pages are reached through the rule pages' links, not the navigation.
        inclusion = (
            InclusionLevel.NOT_IN_NAV
            if docs_sources.is_reference_page(path)
            else InclusionLevel.UNDEFINED
        )
        files.append(File.generated(config, path, content=content, inclusion=inclusion))
    named = set(_all_targets(config.nav or []))
    unlisted = sorted(
        f.src_uri
        for f in files.documentation_pages()
        if f.src_uri not in named and not docs_sources.is_reference_page(f.src_uri)
    )
    if unlisted and config.nav is not None:
        config.nav.append({MORE_SECTION: unlisted})
    return files


def _all_targets(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [t for item in nav for t in _all_targets(item)]
    if isinstance(nav, dict):
        return [t for value in nav.values() for t in _all_targets(value)]
    return []


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the markers of hand-written pages by their generated fragments."""
    return docs_extras.expand(facts(), markdown, page.file.src_uri)
