"""The reviewers' spec site: ``python -m pullspec.conformance.docs build [--out site]``.

`build` runs the narrative pages' examples (doctest), then ``mkdocs build --strict`` with
mkdocs.yml, whose hooks (`conformance.docs.hooks`) generate the rule pages from
`spec.rules.catalogue()` inside the build, so no generated file is ever written to docs/.
`generate DIR` writes the generated pages to DIR for inspection; `examples` only runs the
examples. Every command exits non-zero on failure.
"""

from __future__ import annotations

import contextlib
import doctest
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import click

from pullspec.conformance.docs.facts import PROJECT, SHARED_ENV

DOCS = PROJECT / "docs"
CONFIG = PROJECT / "mkdocs.yml"
_FENCE = re.compile(r"^(\s*)(`{3,})python\s*$")


@attrs.frozen
class ExampleReport:
    """The outcome of running the narrative pages' examples."""

    pages: tuple[str, ...]
    attempted: int
    failures: tuple[str, ...]


def example_text(markdown: str) -> str:
    """The page with everything but its ```python blocks blanked, so doctest line numbers are
    the page's own."""
    out: list[str] = []
    fence: str | None = None
    indent = ""
    for line in markdown.splitlines():
        if fence is None:
            m = _FENCE.match(line)
            if m:
                indent, fence = m.group(1), m.group(2)
            out.append("")
        elif line.strip() == fence:
            fence = None
            out.append("")
        else:
            out.append(line.removeprefix(indent))
    return "\n".join(out)


def run_examples(docs_dir: Path = DOCS) -> ExampleReport:
    """Run every ``>>>`` example of the hand-written pages, then those in the docstrings of
    `pullspec.fast`'s public names; a page's blocks share one namespace. They run from the
    project's folder, as a reader would (paths such as ../shared/stores/basic)."""
    with contextlib.chdir(docs_dir.parent):
        pages = _run_pages(docs_dir)
        api = _run_api_examples()
    return ExampleReport(
        (*pages.pages, *api.pages),
        pages.attempted + api.attempted,
        (*pages.failures, *api.failures),
    )


#: Modules whose public names (`__all__`) must each carry a docstring example that runs.
API_MODULES = ("pullspec.fast",)


def _run_api_examples() -> ExampleReport:
    import importlib

    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    finder = doctest.DocTestFinder(recurse=False)
    failures: list[str] = []
    attempted = 0
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            tests = [t for t in finder.find(obj, f"{module_name}.{name}") if t.examples]
            if not tests:
                failures.append(f"{module_name}.{name}: no example in its docstring\n")
            for test in tests:
                report: list[str] = []
                result = doctest.DocTestRunner(optionflags=flags).run(test, out=report.append)
                attempted += result.attempted
                if result.failed:
                    failures.append(f"{test.name}: {result.failed} failed\n" + "".join(report))
    return ExampleReport(tuple(f"api:{m}" for m in API_MODULES), attempted, tuple(failures))


def _run_pages(docs_dir: Path) -> ExampleReport:
    parser = doctest.DocTestParser()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    failures: list[str] = []
    pages: list[str] = []
    attempted = 0
    for path in sorted(docs_dir.rglob("*.md")):
        rel = path.relative_to(docs_dir).as_posix()
        text = example_text(path.read_text(encoding="utf-8"))
        if ">>>" not in text:
            continue
        pages.append(rel)
        test = parser.get_doctest(text, {"__name__": "__docs__"}, rel, str(path), 0)
        report: list[str] = []
        runner = doctest.DocTestRunner(optionflags=flags)
        result = runner.run(test, out=report.append, clear_globs=True)
        attempted += result.attempted
        if result.failed:
            failures.append(f"docs/{rel}: {result.failed} failed\n" + "".join(report))
    return ExampleReport(tuple(pages), attempted, tuple(failures))


def mkdocs_build(out: Path, config: Path = CONFIG, shared: Path | None = None) -> int:
    """``mkdocs build --strict`` into `out`; returns its exit status (output passes through)."""
    # mkdocs-material prints a banner about its successor on every build; it is not a warning.
    env = {"NO_MKDOCS_2_WARNING": "1", **os.environ}
    if shared is not None:
        env[SHARED_ENV] = str(shared.resolve())
    command = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "--clean",
        "--config-file",
        str(config),
        "--site-dir",
        str(out.resolve()),
    ]
    return subprocess.run(command, cwd=config.parent, env=env, check=False).returncode


def build(
    out: Path, config: Path = CONFIG, shared: Path | None = None, examples: bool = True
) -> int:
    """Run the examples, then build the site strictly; 0 on success."""
    if examples:
        report = run_examples(config.parent / "docs")
        for failure in report.failures:
            click.echo(failure, err=True)
        if report.failures:
            click.echo(f"error: {len(report.failures)} page(s) with failing examples", err=True)
            return 1
        click.echo(f"examples: {report.attempted} passed in {len(report.pages)} pages")
    return mkdocs_build(out, config, shared)


@click.group()
def main() -> None:
    """Build the pullspec documentation site."""


@main.command("build")
@click.option("--out", type=click.Path(path_type=Path), default=PROJECT / "site", show_default=True)
@click.option("--config", type=click.Path(exists=True, path_type=Path), default=CONFIG)
@click.option(
    "--shared",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="The shared material (default: $PULLSPEC_SHARED or ../shared).",
)
@click.option("--no-examples", is_flag=True, help="Skip running the narrative examples.")
def build_command(out: Path, config: Path, shared: Path | None, no_examples: bool) -> None:
    """Run the examples, generate the rule pages and build the site with mkdocs --strict."""
    sys.exit(build(out, config, shared, not no_examples))


@main.command("generate")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--shared", type=click.Path(exists=True, path_type=Path), default=None)
def generate_command(directory: Path, shared: Path | None) -> None:
    """Write the generated pages and pictures into DIRECTORY (for inspection)."""
    from pullspec.conformance.docs import facts as docs_facts
    from pullspec.conformance.docs import hooks as docs_hooks

    files = docs_hooks.generated(docs_facts.collect(shared))
    for rel, content in files.items():
        target = directory / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    click.echo(f"{len(files)} files written to {directory}")


@main.command("examples")
def examples_command() -> None:
    """Run the narrative pages' examples (doctest)."""
    report = run_examples()
    for failure in report.failures:
        click.echo(failure, err=True)
    click.echo(
        f"{report.attempted} examples in {len(report.pages)} pages, {len(report.failures)} failing pages"
    )
    sys.exit(1 if report.failures else 0)
