"""The reviewers' site: built strictly, one section per rule, a gaps page, runnable examples, and
pages that a real browser renders with the rule on them."""

from __future__ import annotations

import functools
import html
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pullspec.conformance.docs import build as docs
from pullspec.conformance.docs import coverage as docs_coverage
from pullspec.conformance.docs import render as docs_render
from pullspec.spec import rules

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: Bound on one headless page load (the only wait in this file).
BROWSER_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built once, strictly, into a temporary directory (examples run separately)."""
    shared = Path(__file__).resolve().parents[2] / "shared"
    if not shared.exists():
        pytest.fail(f"shared test material missing: {shared}", pytrace=False)
    out = tmp_path_factory.mktemp("site")
    assert 0 == docs.build(out, shared=shared, examples=False)
    return out


def _text(page: str) -> str:
    """The visible text of an HTML page, whitespace collapsed (tags vanish without a space, so
    `<code>x</code>,` reads "x," as on screen)."""
    without_tags = re.sub(r"<[^>]+>", "", page)
    return " ".join(html.unescape(without_tags).split())


def _plain(statement: str) -> str:
    """A statement as it reads once rendered (code spans lose their backticks)."""
    return " ".join(statement.replace("`", "").split())


def test_every_rule_has_a_section_on_its_area_page(site: Path) -> None:
    missing = []
    for rule in rules.catalogue():
        page = site / "rules" / rule.area.lower() / "index.html"
        content = page.read_text(encoding="utf-8") if page.exists() else ""
        if f'id="{rule.id}"' not in content or _plain(rule.statement) not in _text(content):
            missing.append(rule.id)
    assert [] == missing


def test_gaps_page_lists_rules_without_tests_or_vectors(site: Path) -> None:
    text = _text((site / "rules" / "gaps" / "index.html").read_text(encoding="utf-8"))
    assert "Rules without a test" in text
    assert "Rules without a vector case" in text


def test_generated_pages_are_not_in_docs() -> None:
    generated = {"rules", "images"} & {p.name for p in docs.DOCS.iterdir()}
    assert set() == generated


def test_narrative_examples_run() -> None:
    report = docs.run_examples()
    assert () == report.failures
    assert {"narrative/offset-correction.md", "narrative/process-queue.md"} <= set(report.pages)


def test_example_text_keeps_page_line_numbers() -> None:
    page = "intro\n```python\n>>> 1 + 1\n2\n```\n```text\n>>> not run\n```\n"
    assert ["", "", ">>> 1 + 1", "2", "", "", "", ""] == docs.example_text(page).split("\n")


def test_test_names_spell_rule_ids() -> None:
    known = {"FLOW-5", "FLOW-6", "FLOW-7", "FLOW-8", "PULLQ-4", "PULLQ-6", "PULLQ-8"}
    assert {"FLOW-5", "FLOW-6", "FLOW-7", "FLOW-8"} == docs_coverage._ids_in_name(
        "test_flow_5_to_8_thresholds", known
    )
    assert {"PULLQ-4", "PULLQ-6", "PULLQ-8"} == docs_coverage._ids_in_name(
        "test_pullq_4_6_8_circulation", known
    )
    assert set() == docs_coverage._ids_in_name("test_flow_rule_contracts", known)


def test_statements_are_escaped_for_markdown() -> None:
    assert r'exactly "\*" or "\|\|" &lt;init&gt; `a | b`' == docs_render.escape(
        'exactly "*" or "||" <init> `a | b`'
    ).replace("&#124;", "|")


# -- a real browser ------------------------------------------------------------------------------


class _QuietHandler(SimpleHTTPRequestHandler):
    """Serves the site without logging every request to stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        """Drop the access log."""


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site on 127.0.0.1 at a free port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _chromium() -> str:
    found = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if found is None:
        pytest.skip("chromium not installed: apt-get install chromium")
    return found


def _dump_dom(url: str, tmp_path: Path) -> str:
    profile = tmp_path / "chromium-profile"
    result = subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
        check=False,
    )
    assert 0 == result.returncode, result.stderr[-2000:]
    return result.stdout


def test_browser_shows_the_rule_index_and_a_rule(served: str, tmp_path: Path) -> None:
    rule = rules.get("STORE-5") if "STORE-5" in {r.id for r in rules.catalogue()} else None
    rule = rule or rules.catalogue()[0]
    index = _text(_dump_dom(f"{served}/rules/", tmp_path))
    assert rule.id in index
    assert _plain(rule.statement) in index
    dom = _dump_dom(f"{served}/rules/{rule.area.lower()}/#{rule.id}", tmp_path)
    assert f'id="{rule.id}"' in dom
    assert _plain(rule.statement) in _text(dom)


#: Each narrative diagram: its page and labels that must be drawn in it.
DIAGRAM_LABELS = {
    "flow-control": ("take PullRequest", "request dies — FLOW-1", "send the pull"),
    "offset-correction": ("OFFSET_TOO_SMALL", "next = corr(offset, min)"),
    "pull-loop": ("RebalanceImpl", "PULLQ-9", "loop"),
    "retry-dlq": ("RECONSUME_LATER", "%DLQ%group", "alt"),
}


def _diagram(page: str) -> str:
    """The page's generated diagram (the inline <svg>), or "" when it has none."""
    found = re.search(r'<svg[^>]*class="pullspec-diagram".*?</svg>', page, re.S)
    return found.group(0) if found else ""


def test_no_page_uses_mermaid() -> None:
    # mkdocs-material loads mermaid from a CDN: offline, the reader would see the source text.
    pages = sorted(docs.DOCS.rglob("*.md"))
    assert [] == [p.name for p in pages if "```mermaid" in p.read_text(encoding="utf-8")]


def test_narrative_diagrams_are_drawn_in_the_build(site: Path) -> None:
    for name, labels in DIAGRAM_LABELS.items():
        page = (site / "narrative" / name / "index.html").read_text(encoding="utf-8")
        svg = _diagram(page)
        assert svg, name
        assert "mermaid" not in page, name
        drawn = {html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)}
        assert set(labels) <= drawn, (name, set(labels) - drawn)


def test_browser_shows_a_narrative_diagram_as_a_picture(served: str, tmp_path: Path) -> None:
    dom = _dump_dom(f"{served}/narrative/flow-control/", tmp_path)
    svg = _diagram(dom)
    assert svg, "no diagram drawn on the flow-control page"
    assert "request dies — FLOW-1" in _text(svg)
    assert "flowchart LR" not in _text(dom)
    assert 'class="mermaid"' not in dom


def _href_target(site: Path, page: Path, href: str) -> tuple[str, str]:
    """The text of the page an href of `page` leads to, and its anchor."""
    path, _, anchor = href.partition("#")
    target = (page.parent / path / "index.html").resolve()
    assert target.is_relative_to(site.resolve()), href
    return target.read_text(encoding="utf-8"), anchor


def test_a_rule_section_links_its_source_its_tests_and_its_vector_cases(site: Path) -> None:
    """STORE-8 (a tag filter skips and still advances): its function's line in spec/store.py,
    a test naming it, and a vector case the reference passed while running it, each a link whose
    target page holds the anchor."""
    import inspect

    from pullspec.spec import store

    page = site / "rules" / "store" / "index.html"
    content = page.read_text(encoding="utf-8")
    section = content[content.index('id="STORE-8"') : content.index('id="STORE-9"')]
    hrefs = re.findall(r'href="([^"#]+#[^"]+)"', section)
    by_kind = {
        kind: [h for h in hrefs if f"/{kind}/" in h]
        for kind in ("source/spec", "source/tests", "cases")
    }
    variant = rules.get("STORE-8").variants[0]
    function = getattr(store, variant.function.rsplit(".", 1)[1])
    _, line = inspect.getsourcelines(inspect.unwrap(function))
    assert f"../../source/spec/store/#L{line}" in by_kind["source/spec"]
    assert by_kind["source/tests"] and by_kind["cases"]
    for href in (by_kind["source/spec"][0], by_kind["source/tests"][0], by_kind["cases"][0]):
        target, anchor = _href_target(site, page, href)
        assert f'id="{anchor}"' in target, href
