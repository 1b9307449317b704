"""The interpreter a benchmark ran on, named in its JSON so that two figures can be told apart
by their build as well as by their code.

The same code on the same machine diffed a campaign op in 33.6–36.0 µs under Debian's Python
3.11.2, whose executable has libpython linked in, and in 39.0–41.1 µs under a pyenv build of
3.11.7 configured with `--enable-shared` and without `--enable-optimizations`, whose
executable calls a shared libpython: about an eighth slower.
`sysconfig` cannot tell the two apart (Debian's reports `Py_ENABLE_SHARED` too, for the
library it also ships), so the running process's own mappings are read.

    >>> libpython_linking("7f00-7f01 r-xp 0 08:01 5 /usr/lib/libpython3.11.so.1.0\\n")
    'shared'
    >>> libpython_linking("5600-5601 r-xp 0 08:01 9 /usr/bin/python3.11\\n")
    'linked in'
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path


def libpython_linking(maps: str | None) -> str:
    """'shared' when the mappings `maps` (a /proc/<pid>/maps text) hold a libpython shared
    library, 'linked in' when they do not, 'unknown' without them (no /proc)."""
    if maps is None:
        return "unknown"
    return "shared" if "/libpython" in maps else "linked in"


def _own_maps() -> str | None:
    try:
        return Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def describe() -> str:
    """This interpreter: implementation, version, executable and how libpython is linked.

    Example: ``CPython 3.11.2 (/usr/bin/python3.11, libpython linked in)``."""
    return (
        f"{platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable}, libpython {libpython_linking(_own_maps())})"
    )
