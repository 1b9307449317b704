"""Everything the generated pages show, collected once per build from spec/, tests/ and ../shared.

Nothing here is typed by hand: the rules come from `spec.rules.catalogue()`, the tests from
parsing tests/, the vector cases from replaying ../shared/vectors on the reference candidate,
the seed passages from the digests' citations, and the area titles from the rulebooks.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import attrs

from pullspec.conformance.docs import coverage as docs_coverage
from pullspec.conformance.docs import rulebook as docs_rulebook
from pullspec.conformance.docs import seeds as docs_seeds
from pullspec.spec import rules
from pullspec.spec.profiles import ALL_PROFILES

#: The project root (the directory holding spec/, tests/ and docs/).
PROJECT = Path(__file__).resolve().parents[2]
#: Environment variable naming the shared directory (default: ../shared beside the project).
SHARED_ENV = "PULLSPEC_SHARED"


def shared_dir() -> Path:
    """The shared material: $PULLSPEC_SHARED, else ../shared beside the project."""
    return Path(os.environ.get(SHARED_ENV) or PROJECT.parent / "shared").resolve()


@attrs.frozen
class SharedPaths:
    """Where the shared material lives."""

    root: Path

    @property
    def vectors(self) -> Path:
        """The recorded vectors."""
        return self.root / "vectors"

    @property
    def seeds(self) -> Path:
        """The Chinese seed documents."""
        return self.root / "seeds"

    @property
    def digests(self) -> Path:
        """The seed digests."""
        return self.root / "semantics" / "seed-digests"

    @property
    def rulebooks(self) -> list[Path]:
        """The broker and client rulebooks, in reading order."""
        base = self.root / "semantics"
        return [base / "rulebook-broker.md", base / "rulebook-client.md"]

    def missing(self) -> list[Path]:
        """The shared paths the site needs that do not exist."""
        wanted = [self.vectors, self.seeds, self.digests, *self.rulebooks]
        return [p for p in wanted if not p.exists()]


@attrs.frozen
class Facts:
    """The catalogue and what covers and describes each rule."""

    catalogue: tuple[rules.Rule, ...]
    rulebooks: docs_rulebook.Rulebooks
    coverage: docs_coverage.Coverage
    passages: dict[str, list[docs_seeds.Passage]]
    shared: SharedPaths

    def areas(self) -> list[str]:
        """The registered areas, in rulebook order."""
        return self.rulebooks.area_order({r.area for r in self.catalogue})

    def rules_of(self, area: str) -> list[rules.Rule]:
        """The rules of one area, in catalogue order."""
        return [r for r in self.catalogue if r.area == area]


class SharedMaterialMissingError(RuntimeError):
    """The shared directory lacks what the site is generated from."""


def collect(shared: Path | None = None, tests_dir: Path | None = None) -> Facts:
    """Collect the facts (replays the vectors: a few seconds)."""
    paths = SharedPaths(shared or shared_dir())
    missing = paths.missing()
    if missing:
        raise SharedMaterialMissingError(
            "shared material missing (set PULLSPEC_SHARED or put it in ../shared): "
            + ", ".join(str(p) for p in missing)
        )
    catalogue = tuple(rules.catalogue())
    # The vector replay is the slow part: run one process per profile while this one reads the
    # seeds and the tests.
    with ProcessPoolExecutor(max_workers=len(ALL_PROFILES)) as pool:
        futures = [pool.submit(docs_coverage.trace_profile, paths.vectors, p) for p in ALL_PROFILES]
        library = docs_seeds.SeedLibrary(paths.seeds, paths.digests)
        passages = docs_seeds.passages_for(library, catalogue)
        tests = docs_coverage.scan_tests(tests_dir or PROJECT / "tests", catalogue)
        hits, runs = docs_coverage.merge(f.result() for f in futures)
    return Facts(
        catalogue=catalogue,
        rulebooks=docs_rulebook.parse(paths.rulebooks),
        coverage=docs_coverage.Coverage(tests, hits, runs),
        passages=passages,
        shared=paths,
    )
