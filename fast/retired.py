"""Files a store removed from its lists while readers may still be using them.

Readers run beside the put lock without taking it (fast.store): a reader takes the store's list
of files once and may then read any of them. A file that expiry removes is therefore destroyed
(unmapped and deleted, or kept as a spare) only once nothing but this list holds it — the
reference counting RocketMQ's MappedFile.hold/release does, read here from CPython's own counts.
Until then it stays mapped and on disk, and a reader holding the old list reads the bytes it
read before the removal.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pullspec.fast.mapped import MappedFile

_getrefcount = getattr(sys, "getrefcount", None)
#: References to a retired file when nothing else holds it: the `_files` list, the loop
#: variable of `sweep` and getrefcount's own argument.
_UNHELD = 3


class Retired:
    """Files removed from a store's lists, destroyed once no reader holds them."""

    def __init__(self) -> None:
        self._files: list[MappedFile] = []

    def __len__(self) -> int:
        return len(self._files)

    def add(self, files: list[MappedFile]) -> None:
        """Retire `files` (already removed from every list a reader can take) and destroy those
        nothing else holds. The caller must hold no other reference to them."""
        self._files.extend(files)
        files.clear()
        self.sweep()

    def sweep(self) -> None:
        """Destroy every retired file no reader holds any more."""
        if not self._files:
            return
        held: list[MappedFile] = []
        for f in self._files:
            # Without reference counts (another interpreter) nothing is known: keep it for close.
            if _getrefcount is None or _getrefcount(f) > _UNHELD:
                held.append(f)
            else:
                f.destroy()
        self._files = held

    def close(self) -> None:
        """Destroy every retired file (the store is closing: no reader may run)."""
        files, self._files = self._files, []
        for f in files:
            f.destroy()
