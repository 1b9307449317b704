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
It imports the suite (which needs the `cli` extra: hypothesis) only when the option is given, so
an environment with the library alone still runs pytest. A candidate that cannot be loaded is one
usage error (`pytest --pullspec-impl=nosuch` exits 4 with one line), not a failure per item.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pullspec.spec.errors import PullspecError
from pullspec.spec.profiles import Profile

if TYPE_CHECKING:
    from _pytest._code.code import TracebackStyle

    from pullspec.conformance.candidates import Candidate
    from pullspec.conformance.vectors import Case

_CANDIDATE = pytest.StashKey["Candidate"]()
#: The machines' default budget (conformance.machines.run.DEFAULT_EXAMPLES / DEFAULT_STEPS), repeated
#: here so that registering the options imports nothing of the suite.
DEFAULT_EXAMPLES, DEFAULT_STEPS = 40, 25


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


def pytest_configure(config: pytest.Config) -> None:
    """Load the candidate once, up front: a bad --pullspec-* value is one usage error."""
    impl = config.getoption("pullspec_impl", None)
    if not impl:
        return
    for name, value in (("examples", config.getoption("pullspec_examples")),
                        ("steps", config.getoption("pullspec_steps"))):  # fmt: skip
        if value < 1:
            raise pytest.UsageError(f"--pullspec-{name} must be at least 1, not {value}")
    try:
        from pullspec.conformance.cli.common import candidate_of
    except ModuleNotFoundError as exc:
        raise pytest.UsageError(
            f"--pullspec-impl needs {exc.name}: pip install 'rocketmq-pullspec[cli]'"
        ) from None
    for folder in config.getoption("pullspec_vectors"):
        if not Path(folder).exists():
            raise pytest.UsageError(f"--pullspec-vectors {folder}: no such file or folder")
    try:
        config.stash[_CANDIDATE] = candidate_of(impl, config.getoption("pullspec_timeout"))
    except PullspecError as exc:
        raise pytest.UsageError(f"--pullspec-impl {impl}: {exc}") from None
    except Exception as exc:  # click's usage errors, a factory that raised: still one line
        formatter = getattr(exc, "format_message", None)
        message = formatter() if callable(formatter) else str(exc)
        raise pytest.UsageError(f"--pullspec-impl {impl}: {message}") from None


def _candidate(config: pytest.Config) -> Candidate:
    return config.stash[_CANDIDATE]


@functools.cache
def _exported(profile: Profile, seed: int) -> tuple[Case, ...]:
    from pullspec.conformance import client_vectors, export
    from pullspec.conformance.ops import CLIENT_AREAS

    return (*export.generate(profile, seed), *client_vectors.cases_for(CLIENT_AREAS, profile))


class ConformanceItem(pytest.Item):
    """One area's vectors or machine, run against the --pullspec-impl candidate."""

    # pytest's Node keywords (name, parent, ...), which pytest itself leaves untyped.
    def __init__(self, *, kind: str, area: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind, self.area = kind, area

    def runtest(self) -> None:
        """Run the vectors or the machine and fail with every divergence found."""
        from pullspec.conformance import vectors
        from pullspec.conformance.machines.run import run_machine
        from pullspec.conformance.vectors import Verdict

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
        exported = _exported(profile, opt("pullspec_seed"))
        cases = [(c, Path(".")) for c in exported if c["area"] == self.area]
        extra = [Path(d) for d in opt("pullspec_vectors")]
        cases += vectors.load_cases_with_base(extra, [self.area])
        results = [vectors.run_case(candidate, c, profile, base) for c, base in cases]
        bad = [r for r in results if r.verdict not in (Verdict.PASS, Verdict.UNSUPPORTED)]
        if bad:
            lines = [r.describe() for r in bad]
            raise ConformanceFailure(
                f"{len(bad)} of {len(results)} cases failed:\n" + "\n".join(lines)
            )
        if results and all(r.verdict is Verdict.UNSUPPORTED for r in results):
            pytest.skip(f"{impl}: {results[0].detail}")

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str:
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
    from pullspec.conformance.ops import MACHINE_AREAS

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
def pullspec_candidate(request: pytest.FixtureRequest) -> Iterator[Candidate]:
    """The candidate --pullspec-impl names (skips the test when the option is absent)."""
    if not request.config.getoption("pullspec_impl"):
        pytest.skip("no --pullspec-impl given")
    yield _candidate(request.config)
