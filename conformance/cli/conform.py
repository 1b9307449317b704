"""`pullspec conform`, `pullspec mutants` and `pullspec vectors export`.

`conform` runs everything the suite has against one candidate: the vectors exported from the
reference (plus any `--vectors` directory, e.g. the RocketMQ-recorded ones), then the lockstep
machine of every interface, and prints ops diffed, verdicts per interface and rules covered.
Each failure names a vector file and the one-line command that replays it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypedDict

import attrs
import click

from pullspec.conformance import client_vectors, export, vectors
from pullspec.conformance.cli.common import (
    Progress,
    allow_unsupported_option,
    candidate_of,
    close_candidate,
    nothing_checked,
    quiet_option,
    split_list,
    timeout_option,
    usage,
)
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.machines.run import (
    DEFAULT_EXAMPLES,
    DEFAULT_STEPS,
    MachineReport,
    run_machine,
)
from pullspec.conformance.machines.simulation import SimulationReport, run_simulation
from pullspec.conformance.observe import case_rules
from pullspec.conformance.ops import CLIENT_AREAS, MACHINE_AREAS, OP_RULES, rule_sort_key
from pullspec.conformance.vectors import CaseResultJSON, Verdict
from pullspec.spec import rules
from pullspec.spec.errors import PullspecError
from pullspec.spec.profiles import Profile

PROFILE_CHOICE = click.Choice(["4.7", "4.9"])
#: Where failing traces are written unless --replay-dir says otherwise.
DEFAULT_REPLAY_DIR = Path(tempfile.gettempdir()) / "pullspec-replays"
#: The rules the areas' ops exercise at all (the rest of the catalogue is client-side logic
#: that no vector area reaches).
IN_SCOPE = frozenset(r for ops in OP_RULES.values() for ids in ops.values() for r in ids)
_ORDER = (Verdict.DIVERGED, Verdict.CRASHED, Verdict.TIMEOUT, Verdict.PASS, Verdict.UNSUPPORTED)


class Failure(CaseResultJSON):
    """A failed vector case in the report: the case's result and the command replaying it."""

    replay: str


class InterfaceJSON(TypedDict):
    """One interface in `pullspec conform --json`."""

    verdict: str
    vectors: dict[str, int]
    machine: JSONObject | None
    failures: list[Failure]


class Figures(TypedDict):
    """The totals of `pullspec conform --json` ("summary")."""

    ops: int
    divergences: int
    crashed: int
    timeouts: int
    passed: int
    unsupported: int
    seconds: float


class Coverage(TypedDict):
    """The rules the run covered ("rules"), of those in scope and in the catalogue."""

    covered: list[str]
    count: int
    inScope: int
    total: int


class ConformJSON(TypedDict):
    """What `pullspec conform --json` prints."""

    impl: str
    profile: str
    seed: int
    summary: Figures
    interfaces: dict[str, InterfaceJSON]
    simulation: JSONObject | None
    rules: Coverage


class Budget(TypedDict, total=False):
    """How much of the suite `pullspec mutants` runs on each mutant (`runner.kill`'s options)."""

    seed: int
    vectors: bool
    examples: int
    steps: int


@attrs.define
class Interface:
    """What the suite saw of one interface (area)."""

    area: str
    cases: dict[str, int] = attrs.Factory(dict)
    machine: MachineReport | None = None
    failures: list[Failure] = attrs.Factory(list)

    @property
    def verdict(self) -> Verdict:
        """The worst verdict seen; UNSUPPORTED only when nothing ran."""
        seen = {Verdict(v) for v, n in self.cases.items() if n}
        if self.machine is not None:
            seen.add(self.machine.verdict)
        return next((v for v in _ORDER if v in seen), Verdict.UNSUPPORTED)

    def to_json(self) -> InterfaceJSON:
        """The JSON form of this interface's results."""
        return {
            "verdict": self.verdict.value,
            "vectors": self.cases,
            "machine": self.machine.to_json() if self.machine else None,
            "failures": self.failures,
        }


@attrs.define
class ConformReport:
    """Everything `pullspec conform` found."""

    impl: str
    profile: Profile
    seed: int
    interfaces: dict[str, Interface]
    ops: int = 0
    covered: set[str] = attrs.Factory(set)
    seconds: float = 0.0
    #: The whole-system lockstep ("simulation" interface), None when not run.
    simulation: SimulationReport | None = None

    def count(self, verdict: Verdict) -> int:
        """Vector cases plus machine runs (and the simulation lockstep) with `verdict`."""
        return sum(
            i.cases.get(verdict.value, 0)
            + int(i.machine is not None and i.machine.verdict is verdict)
            for i in self.interfaces.values()
        ) + int(self.simulation is not None and self.simulation.verdict is verdict)

    def to_json(self) -> ConformJSON:
        """The JSON form `pullspec conform --json` prints."""
        total = len(rules.catalogue())
        return {
            "impl": self.impl,
            "profile": self.profile.value,
            "seed": self.seed,
            "summary": {
                "ops": self.ops,
                "divergences": self.count(Verdict.DIVERGED),
                "crashed": self.count(Verdict.CRASHED),
                "timeouts": self.count(Verdict.TIMEOUT),
                "passed": self.count(Verdict.PASS),
                "unsupported": self.count(Verdict.UNSUPPORTED),
                "seconds": round(self.seconds, 2),
            },
            "interfaces": {a: i.to_json() for a, i in self.interfaces.items()},
            "simulation": self.simulation.to_json() if self.simulation else None,
            "rules": {
                "covered": sorted(self.covered, key=rule_sort_key),
                "count": len(self.covered),
                "inScope": len(IN_SCOPE),
                "total": total,
            },
        }

    @property
    def failed(self) -> bool:
        """True when anything diverged, crashed or timed out."""
        return any(self.count(v) for v in (Verdict.DIVERGED, Verdict.CRASHED, Verdict.TIMEOUT))

    @property
    def checked(self) -> bool:
        """True when at least one vector case or machine ran (was not UNSUPPORTED)."""
        return any(
            self.count(v)
            for v in (Verdict.PASS, Verdict.DIVERGED, Verdict.CRASHED, Verdict.TIMEOUT)
        )


def _replay_line(path: Path, impl: str, profile: Profile) -> str:
    import shlex

    return f"pullspec vectors check {shlex.quote(str(path))} --impl {shlex.quote(impl)} --profile {profile.value}"


def run_conformance(
    impl: str,
    *,
    profile: Profile = Profile.V4_9,
    areas: Iterable[str] = MACHINE_AREAS,
    examples: int = DEFAULT_EXAMPLES,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    vector_dirs: Iterable[Path] = (),
    machines: bool = True,
    replay_dir: Path = DEFAULT_REPLAY_DIR,
    timeout: float = 10.0,
    progress: Callable[[int, int, str], None] = lambda _done, _total, _what: None,
    simulation: bool = False,
) -> ConformReport:
    """Run the exported vectors, any extra vector directories and the machines on `impl`.

    `progress(done, total, what)` is told the work done so far, in vector cases and machine
    examples (a simulation counts as one example per machine)."""
    start = time.perf_counter()
    wanted = tuple(areas)
    extra = vectors.load_cases_with_base(vector_dirs, wanted)
    candidate = candidate_of(impl, timeout)
    report = ConformReport(impl, profile, seed, {a: Interface(a) for a in wanted})
    try:
        exported = [c for c in export.generate(profile, seed) if c["area"] in wanted]
        # The client areas' reference-generated cases (vectors/reference-*, computed afresh).
        exported += client_vectors.cases_for([a for a in wanted if a in CLIENT_AREAS], profile)
        cases = [(c, Path(".")) for c in exported] + extra
        total = len(cases) + examples * (len(wanted) * machines + simulation)
        done = 0
        for case, base in cases:
            if done % 25 == 0:
                progress(done, total, f"vectors ({len(cases)} cases)")
            done += 1
            result = vectors.run_case(candidate, case, profile, base)
            verdict, face = result.verdict, report.interfaces[case["area"]]
            face.cases[verdict.value] = face.cases.get(verdict.value, 0) + 1
            if verdict is Verdict.UNSUPPORTED:
                continue
            report.ops += len(case["steps"]) if result.step is None else result.step
            report.covered.update(case_rules(case))
            if verdict is not Verdict.PASS:
                replay_dir.mkdir(parents=True, exist_ok=True)
                path = replay_dir / f"{result.id}.jsonl"
                path.write_text(json.dumps(case) + "\n", encoding="utf-8")
                face.failures.append(
                    {
                        **result.to_json(),
                        "verdict": verdict.value,
                        "replay": _replay_line(path, impl, profile),
                    }
                )
        for area in wanted if machines else ():
            progress(done, total, f"machine {area}")
            done += examples
            machine = run_machine(
                area, candidate, impl=impl, profile=profile, examples=examples, steps=steps,
                seed=seed, replay_dir=replay_dir,
            )  # fmt: skip
            report.interfaces[area].machine = machine
            report.ops += machine.ops
            if machine.verdict is not Verdict.UNSUPPORTED:
                report.covered.update(machine.covered)
        if simulation:
            progress(done, total, "machine simulation")
            why = getattr(candidate, "simulation_unsupported", None)
            report.simulation = (
                SimulationReport(impl, Verdict.UNSUPPORTED, detail=str(why))
                if why
                else run_simulation(candidate, impl=impl, profile=profile)
            )
        progress(total, total, "done")
    finally:
        close_candidate(candidate)
    report.seconds = time.perf_counter() - start
    return report


def _print_report(report: ConformReport) -> None:
    data = report.to_json()
    s = data["summary"]
    click.echo(
        f"pullspec conform --impl {report.impl} (profile {report.profile.value}, seed {report.seed})"
    )
    for area, face in report.interfaces.items():
        counts = ", ".join(f"{n} {v.lower()}" for v, n in sorted(face.cases.items()))
        machine = face.machine
        m = f"machine {machine.verdict.value} ({machine.ops} ops)" if machine else "machine -"
        click.echo(f"  {area:<26} {face.verdict.value:<11} vectors: {counts or '-'}; {m}")
        for failure in face.failures:
            click.echo(
                f"    {failure['verdict']} {failure['id']} step {failure['step']} {failure['op']}: {failure['field']} expected {failure['expected']!r} actual {failure['actual']!r}"
            )
            click.echo(f"      replay: {failure['replay']}")
        if machine is not None and machine.verdict not in (Verdict.PASS, Verdict.UNSUPPORTED):
            click.echo("    " + machine.describe().replace("\n", "\n    "))
    sim = report.simulation
    if sim is not None:
        click.echo(
            f"  {'simulation':<26} {sim.verdict.value:<11} seeds {list(sim.seeds)} x "
            f"{sim.steps} steps, {sim.events} events"
        )
        if sim.divergence is not None:
            d = sim.divergence
            click.echo(f"    event {d.index} (seed {d.seed}, rules {', '.join(d.rules) or '-'})")
            click.echo(f"      expected {d.expected}\n      actual   {d.actual}")
            click.echo(f"      replay: {d.replay}")
        elif sim.detail:
            click.echo(f"    {sim.detail}")
    r = data["rules"]
    click.echo(
        f"{s['ops']} ops diffed; {s['divergences']} divergences, {s['crashed']} crashed, "
        f"{s['timeouts']} timeouts, {s['unsupported']} unsupported; rules covered "
        f"{r['count']} of {r['inScope']} in scope ({r['total']} in the catalogue); {s['seconds']} s"
    )


@click.command("conform")
@click.option(
    "--impl",
    default="reference",
    show_default=True,
    help="reference, fast, module:factory, cmd:<command>.",
)
@click.option("--profile", type=PROFILE_CHOICE, default="4.9", show_default=True)
@click.option(
    "--area",
    default=None,
    help="Comma-separated areas (default: the vector areas and the simulation lockstep).",
)
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=DEFAULT_EXAMPLES,
    show_default=True,
    help="Machine examples per interface.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=DEFAULT_STEPS,
    show_default=True,
    help="Ops per machine example.",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--vectors",
    "vector_dirs",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Extra vector directory or file (repeatable).",
)
@click.option(
    "--replay-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_REPLAY_DIR,
    show_default=True,
)
@timeout_option()
@allow_unsupported_option()
@quiet_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def conform_command(
    impl: str, profile: str, area: str | None, examples: int, steps: int, seed: int,
    vector_dirs: tuple[Path, ...], replay_dir: Path, timeout: float, allow_unsupported: bool,
    quiet: bool, as_json: bool,
) -> None:  # fmt: skip
    """Run the vectors and the lockstep machines against a candidate and summarise."""
    areas = split_list(area) if area is not None else list(MACHINE_AREAS)
    if not areas:
        raise usage("no area given", "--area")
    simulation = "simulation" in areas or area is None
    areas = [a for a in areas if a != "simulation"]
    for a in areas:
        if a not in MACHINE_AREAS:
            known = ", ".join((*MACHINE_AREAS, "simulation"))
            raise usage(f"unknown area {a!r} (expected {known})", "--area")
    if replay_dir.exists() and not replay_dir.is_dir():
        raise usage(f"{replay_dir} is not a folder", "--replay-dir")
    with Progress("conform", None, "examples", quiet=quiet) as shown:

        def progress(done: int, total: int, what: str) -> None:
            if shown.total != total:
                shown.set_total(total)
            shown.update(done, what)

        report = run_conformance(
            impl, profile=Profile.parse(profile), areas=areas, examples=examples, steps=steps,
            seed=seed, vector_dirs=vector_dirs, replay_dir=replay_dir, timeout=timeout,
            simulation=simulation, progress=progress,
        )  # fmt: skip
    if as_json:
        click.echo(json.dumps(report.to_json()))
    else:
        _print_report(report)
    if report.failed:
        sys.exit(1)
    if not report.checked:
        nothing_checked(
            f"{impl} supports none of the areas {', '.join(areas) or 'simulation'}: "
            "nothing was checked",
            allow_unsupported,
        )


@click.command("mutants")
@click.option("--profile", type=PROFILE_CHOICE, default="4.9", show_default=True)
@click.option("--mutant", "names", multiple=True, help="Only these mutants (repeatable).")
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=None,
    help="Machine examples per area (default: the runner's).",
)
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Ops per machine example.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--machines-only", is_flag=True, help="Skip the vectors: only machines may kill.")
@click.option("--list", "list_only", is_flag=True, help="List the bank and exit.")
@quiet_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def mutants_command(
    profile: str, names: tuple[str, ...], examples: int | None, steps: int | None, seed: int,
    machines_only: bool, list_only: bool, quiet: bool, as_json: bool,
) -> None:  # fmt: skip
    """Run the suite against every mutant of the bank and report which it killed."""
    from pullspec.conformance import mutants
    from pullspec.conformance.mutants import runner

    try:
        selected = [mutants.get(n) for n in names] if names else list(mutants.bank())
    except PullspecError as exc:
        raise usage(str(exc), "--mutant") from exc
    if list_only:
        for m in selected:
            click.echo(f"{m.name:<36} {m.rule:<9} {m.doc}")
        return
    budget: Budget = {"seed": seed, "vectors": not machines_only}
    if examples is not None:
        budget["examples"] = examples
    if steps is not None:
        budget["steps"] = steps
    start = time.perf_counter()
    results = []
    with Progress("mutants", len(selected), "mutants", quiet=quiet) as progress:
        for m in selected:
            progress.note(m.name)
            results.append(runner.kill(m, Profile.parse(profile), **budget))
            progress.advance()
    killed = sum(r.killed for r in results)
    if as_json:
        summary = {
            "total": len(results),
            "killed": killed,
            "survived": len(results) - killed,
            "seconds": round(time.perf_counter() - start, 2),
        }
        click.echo(json.dumps({"summary": summary, "mutants": [r.to_json() for r in results]}))
    else:
        for r in results:
            state = "killed" if r.killed else "SURVIVED"
            click.echo(
                f"{r.mutant.name:<36} {r.mutant.rule:<9} {state:<8} {r.seconds:7.3f}s  {r.by or ''}"
            )
        click.echo(f"{killed}/{len(results)} mutants killed in {time.perf_counter() - start:.1f} s")
    if killed < len(results):
        sys.exit(1)


@click.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--profile", type=PROFILE_CHOICE, default="4.9", show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--random",
    "random_cases",
    type=click.IntRange(min=0),
    default=export.RANDOM_CASES,
    show_default=True,
    help="Random traces per area.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the manifest.")
def export_command(
    directory: Path, profile: str, seed: int, random_cases: int, as_json: bool
) -> None:
    """Write vectors generated from the reference (edge cases and seeded random traces)."""
    if directory.exists() and not directory.is_dir():
        raise usage(f"{directory} is a file, not a folder", "DIRECTORY")
    prof = Profile.parse(profile)
    info = export.export(directory, prof, seed, random_cases)
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo(
        f"{len(info['cases'])} cases in {', '.join(info['files'].values())} and manifest.json under {directory}"
    )
    click.echo(
        f"rules covered: {len(info['rules'])}; replay with: pullspec vectors check {directory} --impl <candidate> --profile {prof.value}"
    )


#: Top-level commands registered by conformance.cli.
COMMANDS = [conform_command, mutants_command]
#: Sub-commands of `pullspec vectors`.
VECTOR_COMMANDS = [export_command]
