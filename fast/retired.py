"""Files a store removed from its lists while readers may still be using them.

Readers run beside the put lock without taking it (fast.store): a reader takes what the store
publishes once per call — the commit log's `files` (a `FileList`, through `snapshot`), a consume
queue's `layout` (a `Layout`, holding its files list) — and may read any file it names for as
long as it holds that object. So the writer never removes a file from a published object.
Appends extend the current one in place (a reader does not read past the `end` it took first);
expiry publishes a new one — copy on write — and hands the files it left out to `Retired`, with a
weak reference to the object it replaced. A file left out when P was replaced was named by P,
maybe by objects replaced before P, and by nothing published after it; so it is destroyed
(unmapped and deleted, or kept as a spare) by the writer's first sweep after P and everything
replaced before P are gone. Until then it stays mapped and on disk, and a reader holding an old
one reads the bytes it read before the removal.

This is RocketMQ's MappedFile.hold/release counted per published object instead of per read:
readers do nothing more than hold what they read from, and the writer looks at the weak
references when it expires files (`sweep`, under the put lock; never in a reader's thread).
A published object lives as long as anything holds it — a returned ScannedResult keeps the
commit-log list its records are read from — and its files wait for it. It dies when its last
reference goes, on CPython at once, elsewhere when the collector finds it: a file may then be
destroyed some rounds later, never earlier. What a reader keeps beyond its call are views of a
file's bytes, each a FileLease (fast.mapped): those keep the mapping alive after the file is
deleted and the file from being reused as a spare, and need no published object.
"""

from __future__ import annotations

import weakref
from typing import Any, Generic, Protocol, TypeVar


class Destroyable(Protocol):
    """A file `Retired` can destroy (fast.mapped.MappedFile)."""

    def destroy(self) -> None: ...


T = TypeVar("T")
D = TypeVar("D", bound=Destroyable)


class FileList(list[T]):
    """A list of files as a store publishes it to readers: a list that can be weakly referenced,
    so that `Retired` learns when no reader holds it any more. Appending to it in place is safe;
    removing from it is not (publish a new FileList instead).

    >>> import weakref
    >>> files = FileList([1, 2])
    >>> seen = weakref.ref(files)
    >>> del files
    >>> seen() is None
    True
    """

    __slots__ = ("__weakref__",)


class Retired(Generic[D]):
    """Files left out of a store's published lists, destroyed once no reader can hold them."""

    def __init__(self) -> None:
        #: (the published object replaced, the files left out of its successor), oldest first.
        self._pending: list[tuple[weakref.ref[Any], list[D]]] = []

    def __len__(self) -> int:
        return sum(len(files) for _, files in self._pending)

    def add(self, replaced: weakref.ref[Any], files: list[D]) -> None:
        """Retire `files`, left out when the object `replaced` refers to was replaced by a new
        one (the caller has published that and drops its own references to the old one first,
        or the sweep sees them), then `sweep`. `files` is taken over."""
        self._pending.append((replaced, files))
        self.sweep()

    def sweep(self) -> None:
        """Destroy the files retired before the oldest replaced object that still lives (a
        reader or a result holds it): every object that named them is gone."""
        pending = self._pending
        live = next((i for i, (ref, _) in enumerate(pending) if ref() is not None), len(pending))
        if not live:
            return
        done, self._pending = pending[:live], pending[live:]
        for _, files in done:
            for f in files:
                f.destroy()

    def close(self) -> None:
        """Destroy every retired file (the store is closing: no reader may run)."""
        pending, self._pending = self._pending, []
        for _, files in pending:
            for f in files:
                f.destroy()
