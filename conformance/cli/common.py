"""What every `pullspec` command shares: exit codes, one-line errors, option checks, progress.

Exit codes: 0 everything asked for was checked and passed; 1 a divergence, crash, timeout or
violation was found; 2 a usage or input error, or nothing was checked; 130 interrupted (SIGINT).
A bad option, a missing file or a malformed vector is one line on stderr, never a traceback.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Literal, NoReturn, overload

import click
from click.decorators import FC

from pullspec.conformance.candidates import Candidate
from pullspec.spec.errors import PullspecError

if TYPE_CHECKING:
    from tqdm import tqdm

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: Spark master URLs a campaign accepts (Spark's own forms: local, standalone, YARN, Kubernetes).
MASTER_URL = re.compile(
    r"^(local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^/\s:]+:\d+(,[^/\s:]+:\d+)*"
    r"|yarn"
    r"|k8s://\S+)$"
)


def one_line(text: str) -> str:
    """`text` with its line breaks and runs of blanks folded into single spaces."""
    return " ".join(text.split())


class PullspecGroup(click.Group):
    """A click group whose errors are one line: usage errors and typed input errors exit 2,
    an interrupt (Ctrl-C, SIGINT) exits 130."""

    # click's own overloads: standalone, main never returns; otherwise it answers what the
    # command answered.
    @overload
    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: Literal[True] = True,
        **extra: object,
    ) -> NoReturn: ...
    @overload
    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: object,
    ) -> object: ...
    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: object,
    ) -> object:
        """Run the command line; in standalone mode, exit with the codes above."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            returned = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Abort:  # click turns KeyboardInterrupt and EOF into Abort
            click.echo("pullspec: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "pullspec"
            click.echo(f"error: {one_line(exc.format_message())} (see {where} --help)", err=True)
            sys.exit(EXIT_USAGE)
        except click.ClickException as exc:
            click.echo(f"error: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except PullspecError as exc:
            click.echo(f"error: {one_line(str(exc))}", err=True)
            sys.exit(EXIT_USAGE)
        except UnicodeDecodeError as exc:
            click.echo(f"error: not UTF-8 text: {exc.reason} at byte {exc.start}", err=True)
            sys.exit(EXIT_USAGE)
        except OSError as exc:
            what = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)
            click.echo(f"error: {one_line(what)}", err=True)
            sys.exit(EXIT_USAGE)
        sys.exit(returned if isinstance(returned, int) else EXIT_OK)


def usage(message: str, param: str | None = None) -> click.UsageError:
    """A usage error about `param` (an option name such as --area) or the command."""
    if param is not None:
        return click.BadParameter(message, param_hint=param)
    return click.UsageError(message)


def split_list(value: str | None) -> list[str]:
    """A comma-separated option value as its non-blank items."""
    return [a.strip() for a in (value or "").split(",") if a.strip()]


def candidate_of(impl: str, timeout: float) -> Candidate:
    """The candidate `--impl` names; a cmd: whose program cannot be found is a usage error."""
    if impl.startswith("cmd:"):
        try:
            argv = shlex.split(impl.removeprefix("cmd:"))
        except ValueError as exc:
            raise usage(f"cannot split {impl!r}: {exc}", "--impl") from None
        if not argv:
            raise usage("cmd: needs a command, e.g. cmd:'python3 my_adapter.py'", "--impl")
        if shutil.which(argv[0]) is None:
            raise usage(f"cannot find the program {argv[0]!r} of {impl!r}", "--impl")
    from pullspec.conformance.resolve import resolve

    return resolve(impl, timeout)


def close_candidate(candidate: Candidate) -> None:
    """Stop a subprocess candidate (others have no close())."""
    close = getattr(candidate, "close", None)
    if callable(close):
        close()


def nothing_checked(message: str, allow: bool) -> NoReturn:
    """End a run that checked nothing: exit 2 with `message`, or 0 under --allow-unsupported."""
    click.echo(f"{'note' if allow else 'error'}: {message}", err=True)
    sys.exit(EXIT_OK if allow else EXIT_USAGE)


def check_master(
    _ctx: click.Context | None, _param: click.Parameter | None, value: str | None
) -> str | None:
    """A click callback: `value` must be a Spark master URL Spark knows."""
    if value is not None and not MASTER_URL.match(value):
        raise click.BadParameter(
            f"{value!r} is not a Spark master URL (local[*], local[N], spark://host:port, "
            "yarn, k8s://...)"
        )
    return value


def check_new_file(
    _ctx: click.Context | None, _param: click.Parameter | None, value: Path | None
) -> Path | None:
    """A click callback: a file to write, whose folder must exist (and that is no folder)."""
    if value is None:
        return value
    if value.is_dir():
        raise click.BadParameter(f"{value} is a directory")
    parent = value.parent if str(value.parent) else Path(".")
    if not parent.is_dir():
        raise click.BadParameter(f"the folder {parent} does not exist")
    return value


def allow_unsupported_option() -> Callable[[FC], FC]:
    """The --allow-unsupported flag: a run that checked nothing exits 0 instead of 2."""
    return click.option(
        "--allow-unsupported",
        is_flag=True,
        help="Exit 0 when nothing could be checked (every case unsupported, no area matched).",
    )


def timeout_option() -> Callable[[FC], FC]:
    """The --timeout option: seconds a cmd: candidate may take per reply."""
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=10.0,
        show_default=True,
        help="Seconds a cmd: candidate may take per reply.",
    )


def quiet_option() -> Callable[[FC], FC]:
    """The --quiet flag: no progress on stderr."""
    return click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")


class Progress:
    """Progress of a long command on stderr: a tqdm bar on a terminal; elsewhere (a log, a pipe)
    a plain line when the work starts (`start()` or the first update; unless `announce` is
    false) and then every `every` seconds; nothing when `quiet`. Nothing is shown before the
    work starts, so that an input error found first stays the only line.

    `advance(n)` counts work done; `note(text)` names what runs now (shown beside the bar and in
    the lines)."""

    def __init__(
        self,
        label: str,
        total: int | None,
        unit: str,
        *,
        quiet: bool = False,
        every: float = 10.0,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        announce: bool = True,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.done = 0
        self.extra = ""
        self._stream = stream if stream is not None else sys.stderr
        self._quiet, self._every, self._clock = quiet, every, clock
        self._started = clock()
        self._next_line = self._started if announce else self._started + every
        self._bar: tqdm | None = None
        self._shown = False

    def start(self) -> None:
        """Show the bar, or the first line (the first update does it when not called)."""
        if self._shown or self._quiet:
            return
        self._shown = True
        if is_terminal(self._stream):
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total, desc=self.label, unit=f" {self.unit}", file=self._stream,
                leave=False, dynamic_ncols=True, mininterval=0.5, initial=self.done,
            )  # fmt: skip
        else:
            self._tick()

    def set_total(self, total: int | None) -> None:
        """Change the amount of work expected."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def line(self) -> str:
        """The plain progress line."""
        elapsed = self._clock() - self._started
        if self.total:
            count = f"{self.done:,}/{self.total:,} {self.unit} ({100 * self.done // self.total}%)"
        else:
            count = f"{self.done:,} {self.unit}"
        extra = f", {self.extra}" if self.extra else ""
        return f"{self.label}: {count}{extra}, {elapsed:.0f} s"

    def _tick(self) -> None:
        now = self._clock()
        if now >= self._next_line:
            self._next_line = now + self._every
            print(self.line(), file=self._stream, flush=True)

    def advance(self, n: int = 1) -> None:
        """Count `n` more units done."""
        self.update(self.done + n)

    def update(self, done: int, extra: str | None = None) -> None:
        """Set the units done (and the text shown beside them)."""
        step, self.done = done - self.done, done
        if extra is not None:
            self.extra = extra
        if self._quiet:
            return
        if not self._shown:
            self.start()
        if self._bar is not None:
            if extra is not None:
                self._bar.set_postfix_str(extra, refresh=False)
            self._bar.update(step)
        else:
            self._tick()

    def note(self, extra: str) -> None:
        """Name what runs now."""
        self.update(self.done, extra)

    def close(self) -> None:
        """Remove the bar (the lines stay)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def is_terminal(stream: IO[str]) -> bool:
    """True when `stream` is a terminal (a progress bar may redraw it)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False
