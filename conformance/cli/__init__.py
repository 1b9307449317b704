"""The `pullspec` command line: rules, vectors, demo, verify, bench.

Exit codes (conformance.cli.common): 0 all checked and passed, 1 a divergence or violation, 2 a
usage or input error or nothing checked, 130 interrupted.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TypedDict

import click

from pullspec.conformance import vectors
from pullspec.conformance.cli.common import (
    Progress,
    PullspecGroup,
    allow_unsupported_option,
    candidate_of,
    close_candidate,
    nothing_checked,
    quiet_option,
    split_list,
    timeout_option,
    usage,
)
from pullspec.spec import rules
from pullspec.spec.profiles import Profile

PROFILE_CHOICE = click.Choice(["4.7", "4.9"])
#: Cases from which `vectors check` prints its first progress line at once when not on a terminal.
LARGE_CHECK = 1000


@click.group(cls=PullspecGroup)
@click.version_option(package_name="rocketmq-pullspec")
def main() -> None:
    """pullspec: the executable specification of RocketMQ 4.x consumer-pull semantics.

    Exit status: 0 everything asked for was checked and passed; 1 a divergence, crash, timeout
    or violation; 2 a usage or input error, or nothing could be checked; 130 interrupted."""


@main.command("rules")
@click.option("--profile", type=PROFILE_CHOICE, default=None, help="Only this profile's variants.")
@click.option("--area", default=None, help="Comma-separated areas (STORE,BATCH,...).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rules_command(profile: str | None, area: str | None, as_json: bool) -> None:
    """List every rule with its ID, statement, RocketMQ source and profile differences."""
    prof = Profile.parse(profile) if profile else None
    catalogue = rules.catalogue()
    known = list(dict.fromkeys(r.area for r in catalogue))
    areas = {a.upper() for a in split_list(area)} if area is not None else None
    if areas is not None:
        unknown = sorted(areas - set(known)) or ([] if areas else [""])
        if unknown:
            raise usage(f"unknown area {unknown[0]!r} (expected {', '.join(known)})", "--area")
    selected = [r for r in catalogue if areas is None or r.area in areas]
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
@click.argument("path", metavar="PATH", type=click.Path(exists=True, path_type=Path))
@click.option("--impl", default="reference", show_default=True, help="Candidate implementation.")
@click.option("--profile", type=PROFILE_CHOICE, default=None, help="Default: from the folder.")
@click.option("--area", default=None, help="Comma-separated areas (store,pull_code,...).")
@timeout_option()
@allow_unsupported_option()
@quiet_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def vectors_check(
    path: Path,
    impl: str,
    profile: str | None,
    area: str | None,
    timeout: float,
    allow_unsupported: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Run every vector case in PATH against a candidate and report each divergence.

    PATH is a vector file, a folder of them, or a store directory of ../shared/stores (its
    answers.jsonl). Exit 1 on any divergence, crash or timeout; 2 when no case could be checked
    (none selected, or every one UNSUPPORTED) unless --allow-unsupported."""
    areas = split_list(area) if area is not None else None
    for a in areas if areas is not None else ():
        if a not in vectors.AREAS:
            raise usage(f"unknown area {a!r} (expected {', '.join(vectors.AREAS)})", "--area")
    if areas == []:
        raise usage("no area given", "--area")
    prof = Profile.parse(profile) if profile else _profile_of(path)
    cases = list(vectors.load_cases(path, areas))
    if not cases:
        chosen = f" of area {', '.join(areas)}" if areas else ""
        nothing_checked(f"no vector case{chosen} in {path}: nothing was checked", allow_unsupported)
    base = vectors.base_of(path)
    candidate = candidate_of(impl, timeout)
    results: list[vectors.CaseResult] = []
    try:
        # Only a large folder announces itself at once (a short check would just be noisier).
        large = len(cases) >= LARGE_CHECK
        with Progress(
            "vectors check", len(cases), "cases", quiet=quiet, announce=large
        ) as progress:
            for case in cases:
                progress.start()
                results.append(vectors.run_case(candidate, case, prof, base))
                progress.advance()
    finally:
        close_candidate(candidate)
    summary = _summary(results)
    if as_json:
        click.echo(json.dumps({"summary": summary, "cases": [r.to_json() for r in results]}))
    else:
        _print_results(results, summary)
    if summary["diverged"] or summary["crashed"] or summary["timeout"]:
        sys.exit(1)
    if summary["passed"] == 0:
        nothing_checked(
            f"{impl} supports none of the {summary['total']} cases: nothing was checked",
            allow_unsupported,
        )


def _print_results(results: list[vectors.CaseResult], summary: Counts) -> None:
    unsupported: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    for r in results:
        if r.verdict is vectors.Verdict.UNSUPPORTED:
            unsupported[r.area] += 1
            reasons.setdefault(r.area, r.detail or "")
        elif r.verdict is not vectors.Verdict.PASS:
            click.echo(r.describe())
    for area, n in unsupported.items():
        click.echo(f"{'UNSUPPORTED':<11} {area}: {n} cases ({reasons[area]})")
    click.echo(
        f"{summary['total']} cases: {summary['passed']} passed, {summary['diverged']} "
        f"diverged, {summary['crashed']} crashed, {summary['timeout']} timed out, "
        f"{summary['unsupported']} unsupported"
    )


def _profile_of(path: Path) -> Profile:
    """The profile a vector folder is for: its manifest's, else the one its name or its cases'
    `version` names, else 4.9."""
    folder = path if path.is_dir() else path.parent
    manifest = folder / "manifest.json"
    if manifest.is_file():
        try:
            profile = json.loads(manifest.read_text(encoding="utf-8")).get("profile")
        except (ValueError, AttributeError) as exc:
            raise vectors.VectorFormatError(str(manifest), f"not a manifest: {exc}") from None
        if profile:
            return Profile.parse(str(profile))
    if "4.7" in folder.name:
        return Profile.V4_7
    return Profile.V4_9


class Counts(TypedDict):
    """How many cases `pullspec vectors check` ran, by verdict ("summary" of its JSON)."""

    total: int
    passed: int
    diverged: int
    crashed: int
    timeout: int
    unsupported: int


def _summary(results: list[vectors.CaseResult]) -> Counts:
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


class EnvironmentProblem(click.ClickException):
    """Something the command needs is not installed: one line, exit 2."""

    exit_code = 2


@main.command("verify")
@click.option("--quick", is_flag=True, help="Only the bounded subset make test runs.")
@click.option(
    "--module", "modules", multiple=True, help="Only these spec modules (spec.store, ...)."
)
@click.option(
    "--per-condition-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=4.0,
    show_default=True,
)
@quiet_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify_command(
    quick: bool, modules: tuple[str, ...], per_condition_timeout: float, quiet: bool, as_json: bool
) -> None:
    """Check every rule's contracts with CrossHair and report each rule's result."""
    from pullspec.conformance import verify

    known = verify.rule_modules()
    wanted = [m if m.startswith("pullspec.") else f"pullspec.{m}" for m in modules]
    for given, name in zip(modules, wanted, strict=True):
        if name not in known:
            short = ", ".join(k.removeprefix("pullspec.") for k in known)
            raise usage(f"no rule module {given!r} (expected one of {short})", "--module")
    selected = wanted or (list(verify.QUICK_MODULES) if quick else None)
    timeout = min(per_condition_timeout, 1.0) if quick else per_condition_timeout
    count = len(selected) if selected is not None else len(known)
    try:
        with Progress("verify", count, "modules", quiet=quiet) as progress:
            results = verify.verify(selected, timeout, on_module=progress.update)
    except RuntimeError as exc:  # crosshair missing: the environment, not the rules
        raise EnvironmentProblem(str(exc)) from exc
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
    "pullspec.conformance.cli.conform",
    "pullspec.conformance.cli.simulate",
    "pullspec.conformance.cli.campaign",
    "pullspec.conformance.cli.bench",
    "pullspec.conformance.cli.bench_store",
    "pullspec.conformance.cli.store",
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
