"""The `pullspec` command line: rules, vectors, demo, verify, bench."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from pullspec.conformance import candidates, vectors
from pullspec.spec import rules
from pullspec.spec.errors import PullspecError
from pullspec.spec.profiles import Profile

PROFILE_CHOICE = click.Choice(["4.7", "4.9"])


@click.group()
@click.version_option(package_name="rocketmq-pullspec")
def main() -> None:
    """pullspec: the executable specification of RocketMQ 4.x consumer-pull semantics."""


@main.command("rules")
@click.option("--profile", type=PROFILE_CHOICE, default=None, help="Only this profile's variants.")
@click.option("--area", default=None, help="Comma-separated areas (STORE,BATCH,...).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rules_command(profile: str | None, area: str | None, as_json: bool) -> None:
    """List every rule with its ID, statement, RocketMQ source and profile differences."""
    prof = Profile.parse(profile) if profile else None
    areas = {a.strip().upper() for a in area.split(",")} if area else None
    selected = [r for r in rules.catalogue() if areas is None or r.area in areas]
    if as_json:
        click.echo(json.dumps({"rules": [r.to_json(prof) for r in selected]}, indent=2))
        return
    for r in selected:
        marker = " [changed]" if r.changed else ""
        click.echo(f"{r.id:<10} {r.statement}{marker}")
        click.echo(f"{'':<10} source: {r.source}")
        if r.changed:
            for v in r.variants:
                if prof is None or prof in v.profiles:
                    names = ",".join(p.value for p in v.profiles)
                    click.echo(f"{'':<10} [{names}] {v.statement}")
    click.echo(f"{len(selected)} rules")


@main.group("vectors")
def vectors_group() -> None:
    """Run test vectors recorded from the real RocketMQ."""


@vectors_group.command("check")
@click.argument("directory", type=click.Path(exists=True, path_type=Path))
@click.option("--impl", default="reference", show_default=True, help="Candidate implementation.")
@click.option("--profile", type=PROFILE_CHOICE, default=None, help="Default: from the folder.")
@click.option("--area", default=None, help="Comma-separated areas (store,pull_code,...).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def vectors_check(
    directory: Path, impl: str, profile: str | None, area: str | None, as_json: bool
) -> None:
    """Run every vector case in DIRECTORY against a candidate and report each divergence."""
    try:
        candidate = candidates.resolve(impl)
        prof = Profile.parse(profile) if profile else _profile_of(directory)
        areas = [a.strip() for a in area.split(",")] if area else None
        if areas:
            for a in areas:
                if a not in vectors.AREAS:
                    raise click.BadParameter(f"unknown area {a!r}", param_hint="--area")
        base = directory if directory.is_dir() else directory.parent
        results = [
            vectors.run_case(candidate, case, prof, base)
            for case in vectors.load_cases(directory, areas)
        ]
    except PullspecError as exc:
        raise click.UsageError(str(exc)) from exc
    summary = _summary(results)
    if as_json:
        click.echo(json.dumps({"summary": summary, "cases": [r.to_json() for r in results]}))
    else:
        for r in results:
            if r.verdict is not vectors.Verdict.PASS:
                click.echo(
                    f"{r.verdict.value:<11} {r.id} step {r.step} {r.op}: {r.field} "
                    f"expected {r.expected!r} actual {r.actual!r} {r.detail or ''}".rstrip()
                )
        click.echo(
            f"{summary['total']} cases: {summary['passed']} passed, {summary['diverged']} "
            f"diverged, {summary['crashed']} crashed, {summary['timeout']} timed out, "
            f"{summary['unsupported']} unsupported"
        )
    if summary["total"] == 0:
        click.echo("error: no vector case selected", err=True)
        sys.exit(2)
    if summary["diverged"] or summary["crashed"] or summary["timeout"]:
        sys.exit(1)


def _profile_of(directory: Path) -> Profile:
    folder = directory if directory.is_dir() else directory.parent
    manifest = folder / "manifest.json"
    if manifest.exists():
        profile = json.loads(manifest.read_text(encoding="utf-8")).get("profile")
        if profile:
            return Profile.parse(str(profile))
    name = folder.name
    if "4.7" in name:
        return Profile.V4_7
    return Profile.V4_9


def _summary(results: list[vectors.CaseResult]) -> dict[str, Any]:
    def count(v: vectors.Verdict) -> int:
        return sum(1 for r in results if r.verdict is v)

    return {
        "total": len(results),
        "passed": count(vectors.Verdict.PASS),
        "diverged": count(vectors.Verdict.DIVERGED),
        "crashed": count(vectors.Verdict.CRASHED),
        "timeout": count(vectors.Verdict.TIMEOUT),
        "unsupported": count(vectors.Verdict.UNSUPPORTED),
    }


@main.command("demo")
@click.option("--profile", type=PROFILE_CHOICE, default="4.9", show_default=True)
def demo_command(profile: str) -> None:
    """Show the broker's answers to a few pulls on the reference model."""
    from pullspec.conformance import demo

    demo.run(Profile.parse(profile), click.echo)


@main.command("verify")
@click.option("--quick", is_flag=True, help="Only the bounded subset make test runs.")
@click.option("--module", "modules", multiple=True, help="Only these spec modules.")
@click.option("--per-condition-timeout", type=float, default=4.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify_command(
    quick: bool, modules: tuple[str, ...], per_condition_timeout: float, as_json: bool
) -> None:
    """Check every rule's contracts with CrossHair and report each rule's result."""
    from pullspec.conformance import verify

    selected = list(modules) or (list(verify.QUICK_MODULES) if quick else None)
    timeout = min(per_condition_timeout, 1.0) if quick else per_condition_timeout
    try:
        results = verify.verify(selected, timeout)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    failed = [r for r in results if r.outcome is verify.Outcome.FAILED]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "summary": {
                        o.value: sum(r.outcome is o for r in results) for o in verify.Outcome
                    },
                    "rules": [
                        {
                            "id": r.rule_id,
                            "function": r.function,
                            "outcome": r.outcome.value,
                            "messages": list(r.messages),
                        }
                        for r in results
                    ],
                }
            )
        )
    else:
        for r in results:
            click.echo(f"{r.outcome.value:<11} {r.rule_id:<10} {r.function}")
            for m in r.messages:
                if r.outcome is verify.Outcome.FAILED:
                    click.echo(f"{'':<22} {m}")
        counts = ", ".join(
            f"{sum(r.outcome is o for r in results)} {o.value.lower()}" for o in verify.Outcome
        )
        click.echo(f"{len(results)} rule variants: {counts}")
    if failed:
        sys.exit(1)


#: Modules that contribute commands: each may define COMMANDS (top-level click commands) and
#: VECTOR_COMMANDS (sub-commands of `pullspec vectors`).
COMMAND_MODULES = (
    "pullspec.conformance.cli_conform",
    "pullspec.conformance.cli_simulate",
    "pullspec.conformance.cli_campaign",
    "pullspec.conformance.cli_bench",
    "pullspec.conformance.cli_bench_store",
    "pullspec.conformance.cli_store",
)


def _register_command_modules() -> None:
    import importlib

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        for command in getattr(module, "COMMANDS", ()):
            main.add_command(command)
        for command in getattr(module, "VECTOR_COMMANDS", ()):
            vectors_group.add_command(command)


_register_command_modules()
