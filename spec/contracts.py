"""Run-time evaluation of the PEP 316 contracts written in rule docstrings.

CrossHair checks the same ``pre:`` / ``post:`` lines symbolically (`make verify`); tests use
`check_call` to assert them on the inputs Hypothesis generates.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

_CONTRACT = re.compile(r"^\s*(pre|post)(\[[^\]]*\])?:\s*(.+)$")


class ContractViolationError(AssertionError):
    """A postcondition of a rule function did not hold."""


def conditions(fn: Callable[..., Any]) -> tuple[list[str], list[str]]:
    """The (preconditions, postconditions) written in `fn`'s docstring."""
    pre: list[str] = []
    post: list[str] = []
    for line in (fn.__doc__ or "").splitlines():
        m = _CONTRACT.match(line)
        if m:
            (pre if m.group(1) == "pre" else post).append(m.group(3).strip())
    return pre, post


def check_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call `fn`; if its preconditions hold, assert its postconditions on the result."""
    pre, post = conditions(fn)
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    env: dict[str, Any] = dict(fn.__globals__)
    env.update(bound.arguments)
    if not all(eval(p, env) for p in pre):
        return fn(*args, **kwargs)
    result = fn(*args, **kwargs)
    env["__return__"] = result
    for p in post:
        if not eval(p, env):
            raise ContractViolationError(
                f"{fn.__qualname__}: post {p} failed for {bound.arguments}"
            )
    return result
