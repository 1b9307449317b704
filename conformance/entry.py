"""The `pullspec` console script: checks that the `cli` extra is installed, then runs the CLI.

The library needs only attrs and numpy; the command line and the conformance suite also need
click, hypothesis and tqdm (the `cli` extra). Without them the script says what to install in one
line (exit 2) instead of a ModuleNotFoundError traceback.
"""

from __future__ import annotations

import sys

#: The distributions of the `cli` extra, by the import name the command needs.
CLI_EXTRA = ("click", "hypothesis", "tqdm")
INSTALL_HINT = "pip install 'rocketmq-pullspec[cli]'"


def missing_extra() -> str | None:
    """The first module of the `cli` extra that cannot be imported, else None."""
    from importlib.util import find_spec

    for name in CLI_EXTRA:
        try:
            if find_spec(name) is None:
                return name
        except (ImportError, ValueError):  # a module set to None in sys.modules, or broken
            return name
    return None


def run() -> None:
    """The console script's entry point."""
    missing = missing_extra()
    if missing is not None:
        print(
            f"error: the pullspec command needs {missing}, from the cli extra: {INSTALL_HINT}",
            file=sys.stderr,
        )
        sys.exit(2)
    from pullspec.conformance.cli import main

    main(prog_name="pullspec")


if __name__ == "__main__":
    run()
