"""Generated pieces of the hand-written pages: tables, pictures and reference lists.

A hand-written page asks for one with a marker line ``<!-- pullspec:NAME [ARG] -->``; the
mkdocs hook replaces it with what `fragment` returns. Every table and picture is computed at
build time from the recorded vectors or by running the reference model, never typed by hand.
"""

from __future__ import annotations

import ast
import importlib
import posixpath
import re
from collections.abc import Callable

import click

from pullspec.conformance import vectors
from pullspec.conformance.docs import diagrams as docs_diagrams
from pullspec.conformance.docs.facts import PROJECT, Facts
from pullspec.conformance.docs.render import code, escape, fenced, page_of
from pullspec.conformance.jsontypes import JSONValue
from pullspec.conformance.resolve import resolve
from pullspec.conformance.vectors import profile_folder
from pullspec.spec.profiles import ALL_PROFILES, Profile

MARKER = re.compile(r"^<!-- pullspec:([a-z-]+)(?: ([^>]*?))? -->$", re.M)
RULE_REF = re.compile(r"\[\[([A-Z]+-[0-9]+)\]\]")


class UnknownFragmentError(KeyError):
    """A page asked for a fragment that does not exist."""


# -- offset correction table, from the recorded pull_code vectors -------------------------------


def offset_table(facts: Facts) -> str:
    """Status, response code and next offset per queue state and offset, master vs slave,
    4.7.1 vs 4.9.7, as the real RocketMQ answered (pull_code vectors)."""
    rows: dict[tuple[JSONValue, ...], dict[tuple[str, Profile], str]] = {}
    cases: dict[tuple[JSONValue, ...], list[str]] = {}
    failed: list[str] = []
    reference = resolve("reference")
    for profile in ALL_PROFILES:
        folder = facts.shared.vectors / profile_folder(profile)
        for case in vectors.load_cases(folder, ["pull_code"]):
            cfg, pull = case["config"], case["steps"][-1]
            args, expect = pull["args"], pull["expect"]
            key = (
                expect["status"],
                cfg["setup"],
                expect["minOffset"],
                expect["maxOffset"],
                args["offset"],
                args.get("subscription"),
            )
            role = "slave" if cfg["brokerRole"] == "SLAVE" else "master"
            rows.setdefault(key, {})[(role, profile)] = (
                f"{expect['code']} → {expect['nextBeginOffset']}"
            )
            cases.setdefault(key, []).append(f"{case['id']}@{profile.value}")
            result = vectors.run_case(reference, case, profile, folder)
            if result.verdict is not vectors.Verdict.PASS:
                failed.append(f"{case['id']}@{profile.value}")
    out = [
        "| Store status | Queue [min, max) | Offset | Filter | Master 4.7.1 | Master 4.9.7 | "
        "Slave 4.7.1 | Slave 4.9.7 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for parts, cells in rows.items():
        status, setup, lo, hi, offset, sub = parts
        shown = []
        for role in ("master", "slave"):
            a, b = cells.get((role, ALL_PROFILES[0]), "—"), cells.get((role, ALL_PROFILES[1]), "—")
            if a != b:
                a, b = f"**{a}**", f"**{b}**"
            shown += [a, b]
        queue = "empty" if hi == 0 else f"[{lo}, {hi})"
        out.append(
            f"| {status} | {queue} ({setup}) | {offset} | {escape(str(sub or '*'))} | {' | '.join(shown)} |"
        )
    verdict = (
        "Every one of these cases passes on the reference candidate."
        if not failed
        else f"The reference candidate does **not** pass: {', '.join(failed)}."
    )
    return "\n".join(
        [
            *out,
            "",
            f"Each cell is *response code → nextBeginOffset*; bold cells differ between versions. "
            f"Recorded from the real RocketMQ (`pull_code` vectors, {sum(map(len, cases.values()))} "
            f"cases; the slave runs with `offsetCheckInSlave` false and `slaveReadEnable` true). "
            f"{verdict}",
        ]
    )


# -- delay levels, from the store config's default messageDelayLevel -----------------------------


def delay_table(facts: Facts) -> str:
    """The delay levels RETRY-7 parses from the default messageDelayLevel."""
    from pullspec.spec.config import StoreConfig
    from pullspec.spec.delay import parse_delay_levels

    config = StoreConfig()
    levels = parse_delay_levels(config.message_delay_level)
    out = [
        "| Level | Delay | ms | Used for the retry after reconsumeTimes *r* (level 3 + r) |",
        "|---|---|---|---|",
    ]
    for level, ms in enumerate(levels, 1):
        r = level - 3
        out.append(f"| {level} | {_human(ms)} | {ms} | {r if r >= 0 else '—'} |")
    return "\n".join(
        [f'Parsed from `messageDelayLevel = "{config.message_delay_level}"`:', "", *out]
    )


def _human(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


# -- CLI reference, from the click group ---------------------------------------------------------


def cli_page(facts: Facts) -> str:
    """Every `pullspec` command's help text, as the installed CLI prints it."""
    from pullspec.conformance.cli import main

    parts = [
        "# Command-line reference",
        "",
        "Generated from the `pullspec` command itself at build time.",
        "",
    ]

    def walk(command: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(command, info_name=path[-1], parent=parent)
        parts.extend([f"## `{' '.join(path)}`", "", fenced(command.get_help(ctx)), ""])
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*path, name], ctx)

    walk(main, ["pullspec"], None)
    return "\n".join(parts)


def command_status(facts: Facts, arg: str) -> str:
    """An admonition saying whether `pullspec <command>` exists in this build."""
    from pullspec.conformance.cli import main

    name, _, issue = arg.partition(" ")
    ctx = click.Context(main, info_name="pullspec")
    if main.get_command(ctx, name) is not None:
        return (
            f'!!! success "Available"\n    `pullspec {name}` exists in this build; its options are '
            f"in the [command-line reference](../using/cli.md)."
        )
    where = f" ({issue})" if issue else ""
    return (
        f'!!! warning "Planned, not built yet"\n    `pullspec {name}` does not exist in this build'
        f"{where}. What follows describes the design it is being built to."
    )


#: The page another developer writes for the subprocess protocol (linked only when present).
PROTOCOL_PAGE = "protocol.md"


def impl_cmd_status(facts: Facts) -> str:
    """Whether subprocess candidates (`pullspec conform --impl cmd:"<command>"`) exist in this
    build, with a link to the protocol page when docs/ has one."""
    from pullspec.conformance.cli import main

    ctx = click.Context(main, info_name="pullspec")
    page = (
        f" The protocol is specified in [the conformance protocol](../{PROTOCOL_PAGE})."
        if (PROJECT / "docs" / PROTOCOL_PAGE).exists()
        else ""
    )
    if main.get_command(ctx, "conform") is not None:
        return (
            '!!! success "Available"\n    `pullspec conform --impl cmd:"<command>"` drives an '
            f"implementation in any language through a subprocess adapter.{page}"
        )
    return (
        '!!! warning "Planned, not built yet"\n    Subprocess candidates (`--impl cmd:"<command>"`, '
        f"issue 7) do not exist in this build; what follows is their design.{page}"
    )


# -- the fast package's public API ---------------------------------------------------------------


def fast_api(facts: Facts) -> str:
    """What `fast` exports (its `__all__`), or its modules when it exports nothing yet."""
    try:
        fast = importlib.import_module("pullspec.fast")
    except Exception as exc:  # a half-written package must not break the site
        return f"`fast` cannot be imported in this build: {escape(str(exc))}"
    exported = getattr(fast, "__all__", None)
    lines: list[str] = []
    if exported:
        lines += [f"`pullspec.fast.__all__` lists {len(exported)} names:", ""]
        for name in exported:
            obj = getattr(fast, name, None)
            doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
            lines.append(
                f"- {code('pullspec.fast.' + name)} — {escape(doc[0]) if doc else 'undocumented'}"
            )
        return "\n".join(lines)
    lines += [
        "`fast` does not define `__all__` yet, so it has no public API to list. Its modules, "
        "read from their docstrings:",
        "",
    ]
    for path in sorted((PROJECT / "fast").glob("*.py")):
        if path.name == "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "undocumented"
        lines.append(f"- {code('pullspec.fast.' + path.stem)} — {escape(doc.splitlines()[0])}")
    return "\n".join(lines)


# -- registry ------------------------------------------------------------------------------------


def client_vocabulary(facts: Facts) -> str:
    """One subsection per client area: its vocabulary, from the area adapter's docstring (the
    same text vectors/README.md carries)."""
    import inspect

    from pullspec.conformance.ops import CLIENT_AREAS

    parts = []
    for area in CLIENT_AREAS:
        doc = inspect.getdoc(vectors.adapter(area)) or ""
        text = doc.removeprefix(f"Adapter for area `{area}`: ")
        parts += [f"### `{area}`", "", text[:1].upper() + text[1:], ""]
    return "\n".join(parts).rstrip() + "\n"


FRAGMENTS: dict[str, Callable[[Facts, str], str]] = {
    "offset-table": lambda facts, _: offset_table(facts),
    "delay-table": lambda facts, _: delay_table(facts),
    "fast-api": lambda facts, _: fast_api(facts),
    "command": command_status,
    "impl-cmd": lambda facts, _: impl_cmd_status(facts),
    "diagram": lambda _, name: docs_diagrams.diagram(name),
    "client-vocabulary": lambda facts, _: client_vocabulary(facts),
}


def fragment(facts: Facts, name: str, arg: str = "") -> str:
    """The generated Markdown a marker asks for."""
    try:
        make = FRAGMENTS[name]
    except KeyError:
        raise UnknownFragmentError(f"no generated fragment {name!r}") from None
    return make(facts, arg)


def rule_reference(facts: Facts, rule_id: str, page: str) -> str:
    """``[[STORE-5]]`` on `page`: a link to the rule's section, or the bare ID (marked as not in
    the spec yet) while its area is not registered, so narrative pages may name rules early."""
    if rule_id not in {r.id for r in facts.catalogue}:
        return f'<abbr title="not in the specification yet">{rule_id}</abbr>'
    target = posixpath.relpath(
        page_of(rule_id.split("-", maxsplit=1)[0]), posixpath.dirname(page) or "."
    )
    return f"[{rule_id}]({target}#{rule_id})"


def expand(facts: Facts, markdown: str, page: str = "index.md") -> str:
    """`markdown` (of `page`, relative to docs/) with every marker replaced by its fragment and
    every ``[[RULE-ID]]`` by a link to the rule."""
    markdown = MARKER.sub(lambda m: fragment(facts, m.group(1), m.group(2) or ""), markdown)
    return RULE_REF.sub(lambda m: rule_reference(facts, m.group(1), page), markdown)


def extra_pages(facts: Facts) -> dict[str, str]:
    """Generated pages outside rules/: the CLI reference."""
    return {"using/cli.md": cli_page(facts)}
