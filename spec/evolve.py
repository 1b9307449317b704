"""`evolve`: the next value of a frozen attrs class, as `attrs.evolve` makes it, for less.

The spec's states and messages are frozen values: every transition returns a copy with a few
fields changed (`evolve(state, dropped=True)`). `attrs.evolve` looks the class's fields up and
reads them one `getattr` at a time on every call, which cost more than building the copy (a
ProcessQueueState of 13 fields: 4.8 µs, of which calling the class is 1.9; `evolve` 2.2, timeit):
the client areas' campaign spent about a tenth of its time there. `evolve` keeps each class's plan — one C-level getter
for its `__init__` fields, and where each field goes — and then calls the class exactly as
`attrs.evolve` does, so every converter, validator and `__attrs_post_init__` runs as before.

Type checkers see `attrs.evolve` itself, so each call's field names and types are still checked
by mypy's attrs plugin.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

T = TypeVar("T")

#: How to copy an instance of one attrs class: its `__init__` fields' values in one call (the
#: positional ones first, in order, then the keyword-only ones), where each field's argument is
#: in that tuple by its `__init__` name, and how many are positional.
_Plan = tuple[Callable[[Any], tuple[Any, ...]], dict[str, int], int]
_PLANS: dict[type, _Plan] = {}
#: Classes whose plan is kept (classes made on the fly must not grow it forever).
_PLANS_KEPT = 4096


def _plan(cls: type) -> _Plan:
    """The copy plan of `cls`; NotAnAttrsClassError for anything but an attrs class."""
    # sorted is stable: the positional fields keep their order, the keyword-only ones follow.
    fields = sorted((a for a in attrs.fields(cls) if a.init), key=lambda a: a.kw_only)
    names = [a.name for a in fields]
    getter: Callable[[Any], tuple[Any, ...]]
    if len(names) == 1:  # attrgetter of one name answers the value, not a tuple
        one = operator.attrgetter(names[0])
        getter = lambda inst: (one(inst),)  # noqa: E731
    elif names:
        getter = operator.attrgetter(*names)
    else:
        getter = lambda _inst: ()  # noqa: E731
    positions = {a.alias: i for i, a in enumerate(fields)}
    # A class with its own __init__ (attrs' init=False makes __attrs_init__ instead) is called
    # by keyword, as attrs.evolve calls every class: only attrs' own __init__ has their order.
    custom = hasattr(cls, "__attrs_init__")
    return getter, positions, 0 if custom else sum(not a.kw_only for a in fields)


def _evolve(inst: T, /, **changes: Any) -> T:
    """A copy of the attrs instance `inst` with `changes` (by `__init__` argument name) applied,
    made by calling its class with every `__init__` field — `attrs.evolve`'s contract.

    Example: ``evolve(MessageQueue("T", "b", 0), queue_id=1).queue_id`` is 1."""
    cls = inst.__class__
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _plan(cls)
        if len(_PLANS) < _PLANS_KEPT:
            _PLANS[cls] = plan
    getter, positions, n = plan
    values = list(getter(inst))
    for name, value in changes.items():
        at = positions.get(name)
        if at is None:
            raise TypeError(
                f"{cls.__name__}.__init__() got an unexpected keyword argument {name!r}"
            )
        values[at] = value
    if n < len(values):
        keyword = {alias: values[i] for alias, i in positions.items() if i >= n}
        return cls(*values[:n], **keyword)
    return cls(*values)


if TYPE_CHECKING:
    from attrs import evolve
else:
    evolve = _evolve

__all__ = ["evolve"]
