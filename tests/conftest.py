"""Shared fixtures of the test suite and the Hypothesis profiles.

Profiles (select with the environment variable HYPOTHESIS_PROFILE):
- ``default``: 100 examples per property, no deadline;
- ``ci``: the same, derandomized so that a CI run is reproducible;
- ``fuzz``: 5000 examples per property, for long local runs.

Tests that read the shared RocketMQ material (vectors, store directories, rulebook) FAIL with a
clear message when it is missing; they never skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig

settings.register_profile("default", deadline=None, max_examples=100)
settings.register_profile("ci", deadline=None, max_examples=100, derandomize=True, print_blob=True)
settings.register_profile("fuzz", deadline=None, max_examples=5000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

SHARED = Path(__file__).resolve().parents[2] / "shared"


def require_shared(path: Path) -> Path:
    """`path` if it exists; otherwise FAIL the calling test, naming what is missing."""
    if not path.exists():
        pytest.fail(
            f"shared test material missing: {path} (expected beside the project, in ../shared)",
            pytrace=False,
        )
    return path


@pytest.fixture
def shared_dir() -> Path:
    """The shared directory beside the project (../shared)."""
    return require_shared(SHARED)


@pytest.fixture
def vectors_dir() -> Path:
    """The recorded RocketMQ vectors (../shared/vectors)."""
    return require_shared(SHARED / "vectors")


@pytest.fixture
def stores_dir() -> Path:
    """The store directories written by a real 4.9.7 broker (../shared/stores)."""
    return require_shared(SHARED / "stores")


@pytest.fixture
def rulebook_path() -> Path:
    """The authoritative broker rulebook."""
    return require_shared(SHARED / "semantics" / "rulebook-broker.md")


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at time 0."""
    return ManualClock(0)


@pytest.fixture
def small_config() -> StoreConfig:
    """A store with 1 KiB commit-log files and 4-entry (80-byte) consume-queue files."""
    return StoreConfig(mapped_file_size_commit_log=1024, mapped_file_size_consume_queue=80)
