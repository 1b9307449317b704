"""The fast candidate: factories the conformance suite calls (`--impl fast`)."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

from fast.process_queue import FastProcessQueue
from fast.store import MmapMessageStore
from spec.clock import Clock
from spec.config import StoreConfig
from spec.profiles import Profile

NAME = "fast"


class TemporaryMmapMessageStore(MmapMessageStore):
    """An MmapMessageStore in a fresh temporary directory, removed on close or when the store is
    garbage-collected."""

    def __init__(self, config: StoreConfig, profile: Profile, clock: Clock) -> None:
        directory = Path(tempfile.mkdtemp(prefix="pullspec-fast-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, directory, True)
        try:
            super().__init__(directory, config, profile, clock)
        except BaseException:
            self._cleanup()
            raise

    def close(self) -> None:
        """Close the store and delete its directory."""
        try:
            super().close()
        finally:
            self._cleanup()


def message_store(config: StoreConfig, profile: Profile, clock: Clock) -> MmapMessageStore:
    """A fresh MmapMessageStore in a temporary directory (cleaned up on close or collection)."""
    return TemporaryMmapMessageStore(config, profile, clock)


def open_store(path: Path, config: StoreConfig, profile: Profile, clock: Clock) -> MmapMessageStore:
    """An existing store directory (e.g. one a RocketMQ 4.x broker wrote) opened read-only."""
    return MmapMessageStore(path, config, profile, clock, read_only=True)


def process_queue(clock: Clock, profile: Profile) -> FastProcessQueue:
    """A fresh FastProcessQueue with RocketMQ's default lock and pull timeouts."""
    return FastProcessQueue(clock, profile)
