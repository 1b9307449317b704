"""pytest plugin: run the pullspec conformance suite inside another project's test run.

    pytest --pullspec-impl=<candidate> [--pullspec-profile 4.9] [--pullspec-examples N]
           [--pullspec-steps K] [--pullspec-seed S] [--pullspec-vectors DIR ...]

`<candidate>` is anything `pullspec conform --impl` takes: `reference`, `fast`,
`module:factory`, an entry of `pullspec.implementations`, or `cmd:<command>`. With the option,
two items per area join the run — the broker-side areas and the client areas
(`conformance.ops.MACHINE_AREAS`): `pullspec-vectors[<area>]` (the vectors exported from the
reference or, for a client area, its reference-generated cases, plus any --pullspec-vectors)
and `pullspec-machine[<area>]` (the lockstep machine); an area the candidate does not implement
is skipped. Without the option the plugin does
nothing. The `pullspec_candidate` fixture gives tests of one's own the resolved candidate.

Registered through the `pytest11` entry point `pullspec` (or `-p pullspec.conformance.plugin`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pullspec.conformance import client_vectors, export, vectors
from pullspec.conformance.machines import DEFAULT_EXAMPLES, DEFAULT_STEPS, run_machine
from pullspec.conformance.observe import Verdict, resolve_candidate, verdict_of
from pullspec.conformance.ops import CLIENT_AREAS, MACHINE_AREAS
from pullspec.spec.profiles import Profile

_CANDIDATE = pytest.StashKey[Any]()


class ConformanceFailure(Exception):  # noqa: N818 - pytest shows the class name: it reads well
    """A conformance item found divergences; its text lists them with their replay commands."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """The --pullspec-* options."""
    group = parser.getgroup("pullspec", "pullspec conformance suite")
    group.addoption("--pullspec-impl", default=None, help="candidate to run the suite against")
    group.addoption("--pullspec-profile", default="4.9", choices=("4.7", "4.9"))
    group.addoption("--pullspec-examples", type=int, default=DEFAULT_EXAMPLES)
    group.addoption("--pullspec-steps", type=int, default=DEFAULT_STEPS)
    group.addoption("--pullspec-seed", type=int, default=0)
    group.addoption("--pullspec-vectors", action="append", default=[], help="extra vector dir")
    group.addoption("--pullspec-timeout", type=float, default=10.0, help="cmd: reply timeout (s)")


def _candidate(config: pytest.Config) -> Any:
    if _CANDIDATE not in config.stash:
        impl = config.getoption("pullspec_impl")
        config.stash[_CANDIDATE] = resolve_candidate(impl, config.getoption("pullspec_timeout"))
    return config.stash[_CANDIDATE]


@functools.cache
def _exported(profile: Profile, seed: int) -> tuple[dict[str, Any], ...]:
    return (*export.generate(profile, seed), *client_vectors.cases_for(CLIENT_AREAS, profile))


class ConformanceItem(pytest.Item):
    """One area's vectors or machine, run against the --pullspec-impl candidate."""

    def __init__(self, *, kind: str, area: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind, self.area = kind, area

    def runtest(self) -> None:
        """Run the vectors or the machine and fail with every divergence found."""
        opt = self.config.getoption
        profile = Profile.parse(opt("pullspec_profile"))
        candidate, impl = _candidate(self.config), opt("pullspec_impl")
        if self.kind == "machine":
            cache = getattr(self.config, "cache", None)  # absent with -p no:cacheprovider
            report = run_machine(
                self.area, candidate, impl=impl, profile=profile, seed=opt("pullspec_seed"),
                examples=opt("pullspec_examples"), steps=opt("pullspec_steps"),
                replay_dir=Path(str(cache.mkdir("pullspec-replays"))) if cache else None,
            )  # fmt: skip
            if report.verdict is Verdict.UNSUPPORTED:
                pytest.skip(f"{impl}: {report.detail}")
            if report.verdict is not Verdict.PASS:
                raise ConformanceFailure(report.describe())
            return
        cases = [c for c in _exported(profile, opt("pullspec_seed")) if c["area"] == self.area]
        cases += [
            c for d in opt("pullspec_vectors") for c in vectors.load_cases(Path(d), [self.area])
        ]
        results = [vectors.run_case(candidate, c, profile, Path(".")) for c in cases]
        bad = [r for r in results if verdict_of(r) not in (Verdict.PASS, Verdict.UNSUPPORTED)]
        if bad:
            lines = [
                f"{verdict_of(r).value} {r.id} step {r.step} {r.op}: {r.field} expected {r.expected!r} actual {r.actual!r} {r.detail or ''}"
                for r in bad
            ]
            raise ConformanceFailure(
                f"{len(bad)} of {len(results)} cases failed:\n" + "\n".join(lines)
            )
        if results and all(verdict_of(r) is Verdict.UNSUPPORTED for r in results):
            pytest.skip(f"{impl}: {results[0].detail}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The divergence report itself, without a traceback into the suite."""
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where pytest says the item lives."""
        return self.path, None, f"pullspec {self.kind} {self.area}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Add the suite's items (first, so that -k and -m select among them too)."""
    if not config.getoption("pullspec_impl"):
        return
    for kind in ("vectors", "machine"):
        for area in MACHINE_AREAS:
            items.append(
                ConformanceItem.from_parent(
                    session, name=f"pullspec-{kind}[{area}]", kind=kind, area=area
                )
            )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop a subprocess candidate."""
    candidate = session.config.stash.get(_CANDIDATE, None)
    close = getattr(candidate, "close", None)
    if callable(close):
        close()


@pytest.fixture
def pullspec_candidate(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The candidate --pullspec-impl names (skips the test when the option is absent)."""
    if not request.config.getoption("pullspec_impl"):
        pytest.skip("no --pullspec-impl given")
    yield _candidate(request.config)
