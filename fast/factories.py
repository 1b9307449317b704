"""The fast candidate: factories the conformance suite calls (`--impl fast`)."""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path

from pullspec.fast.process_queue import FastProcessQueue
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import Clock
from pullspec.spec.config import StoreConfig
from pullspec.spec.profiles import Profile

NAME = "fast"


class TemporaryMmapMessageStore(MmapMessageStore):
    """An MmapMessageStore in a fresh temporary directory, removed on close or when the store is
    garbage-collected."""

    _fresh_directory = True

    def __init__(self, config: StoreConfig, profile: Profile, clock: Clock) -> None:
        directory = tempfile.mkdtemp(prefix="pullspec-fast-")
        self._cleanup = weakref.finalize(self, remove_tree, directory)
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


def remove_tree(path: str) -> None:
    """Delete a directory tree (a symlink in it is removed, never followed); nothing when it is
    gone. For a store's few directories a plain walk makes fewer system calls than
    shutil.rmtree's descriptor-based one, which takes over if the walk meets a surprise."""
    try:
        _remove(path)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def _remove(path: str) -> None:
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _remove(entry.path)
            else:
                os.unlink(entry.path)
    os.rmdir(path)


def message_store(config: StoreConfig, profile: Profile, clock: Clock) -> MmapMessageStore:
    """A fresh MmapMessageStore in a temporary directory (cleaned up on close or collection)."""
    return TemporaryMmapMessageStore(config, profile, clock)


def open_store(path: Path, config: StoreConfig, profile: Profile, clock: Clock) -> MmapMessageStore:
    """An existing store directory (e.g. one a RocketMQ 4.x broker wrote) opened read-only."""
    return MmapMessageStore(path, config, profile, clock, read_only=True)


def process_queue(clock: Clock, profile: Profile) -> FastProcessQueue:
    """A fresh FastProcessQueue with RocketMQ's default lock and pull timeouts."""
    return FastProcessQueue(clock, profile)
