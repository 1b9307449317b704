"""CrossHair over the rule contracts: `pullspec verify` reports each rule's result.

CrossHair checks the PEP 316 ``pre:`` / ``post:`` / ``raises:`` lines of every rule function
symbolically. A condition is CONFIRMED (proved over all paths), UNKNOWN (no counterexample found
within the time budget) or FAILED (CrossHair found a counterexample).
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from pullspec.spec import rules

_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<level>\w+): (?P<message>.*)$")

#: The bounded subset `make test` runs: small integer rules whose conditions prove quickly.
QUICK_MODULES: tuple[str, ...] = (
    "pullspec.spec.batch",
    "pullspec.spec.commit",
    "pullspec.spec.hold",
)


class Outcome(enum.Enum):
    """CrossHair's verdict on one rule."""

    CONFIRMED = "CONFIRMED"
    UNKNOWN = "UNKNOWN"
    FAILED = "FAILED"
    NO_CONTRACT = "NO_CONTRACT"


@attrs.frozen
class RuleVerification:
    """The CrossHair result of one rule variant."""

    rule_id: str
    function: str
    outcome: Outcome
    messages: tuple[str, ...] = ()


def crosshair_executable() -> str:
    """The crosshair command next to this interpreter (the `verify` extra installs it)."""
    local = Path(sys.executable).with_name("crosshair")
    if local.exists():
        return str(local)
    found = shutil.which("crosshair")
    if found is None:
        raise RuntimeError("crosshair is not installed: pip install 'rocketmq-pullspec[verify]'")
    return found


def _source_file(module: str) -> str:
    """The source file of `module` (imported by the caller already)."""
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        raise ModuleNotFoundError(f"no module named {module!r}", name=module)
    return found.origin


def _check_module(module: str, per_condition_timeout: float) -> list[tuple[str, int, str, str]]:
    proc = subprocess.run(
        [
            crosshair_executable(),
            "check",
            "--analysis_kind=PEP316",
            f"--per_condition_timeout={per_condition_timeout}",
            "--report_all",
            # A file, not the module name: CrossHair cannot resolve a module inside the
            # editable install's `pullspec` namespace package.
            _source_file(module),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    out = []
    for line in proc.stdout.splitlines():
        m = _LINE.match(line.strip())
        if m:
            out.append((m["file"], int(m["line"]), m["level"], m["message"]))
    return out


def _functions_by_module() -> dict[str, list[tuple[str, str]]]:
    by_module: dict[str, list[tuple[str, str]]] = {}
    for r in rules.catalogue():
        for v in r.variants:
            mod = v.function.rsplit(".", 1)[0]
            by_module.setdefault(mod, []).append((r.id, v.function))
    return by_module


def rule_modules() -> list[str]:
    """The modules that define rule functions (`pullspec.spec.store`, ...), sorted."""
    return sorted(_functions_by_module())


def verify(
    modules: Iterable[str] | None = None,
    per_condition_timeout: float = 4.0,
    on_module: Callable[[int, str], None] | None = None,
) -> list[RuleVerification]:
    """Run CrossHair over the rule modules and attribute each reported condition to its rule;
    `on_module(i, name)` is called before the i-th module (0-based) is checked."""
    modules = list(modules) if modules is not None else None
    for mod in modules or ():
        importlib.import_module(mod)
    by_module = _functions_by_module()
    selected = list(modules) if modules is not None else sorted(by_module)
    results: list[RuleVerification] = []
    for i, mod in enumerate(selected):
        if on_module is not None:
            on_module(i, mod)
        module = importlib.import_module(mod)
        spans: list[tuple[int, int, str, str, bool]] = []
        for rule_id, fqname in by_module.get(mod, []):
            fn = getattr(module, fqname.rsplit(".", 1)[1])
            lines, start = inspect.getsourcelines(fn)
            has_contract = any(
                re.match(r"\s*(pre|post|raises):", line) for line in (fn.__doc__ or "").splitlines()
            )
            spans.append((start, start + len(lines), rule_id, fqname, has_contract))
        reports = _check_module(mod, per_condition_timeout)
        for start, end, rule_id, fqname, has_contract in spans:
            mine = [(lvl, msg) for _f, line, lvl, msg in reports if start <= line < end]
            if not has_contract:
                outcome = Outcome.NO_CONTRACT
            elif any(lvl == "error" for lvl, _ in mine):
                outcome = Outcome.FAILED
            elif mine and all("Confirmed" in msg for _, msg in mine):
                outcome = Outcome.CONFIRMED
            else:
                outcome = Outcome.UNKNOWN
            results.append(RuleVerification(rule_id, fqname, outcome, tuple(m for _, m in mine)))
    return results
