"""Configs and ops of the client areas for the lockstep machines and the campaign.

A client area's machine replays seeded client cases (`conformance.client_cases`, the same
generators that write the reference-generated vectors): an example draws one seed, takes that
case's config, and runs its steps; when they run out, another drawn seed's steps follow on the
same instance. Drawing through `gen.Draw` keeps a campaign trace reproducible from its key and
lets Hypothesis vary (and `minimize` shorten) a failing trace.

Example: ``op("allocate", RandomDraw(random.Random(1)), Context("allocate"))`` is the first step
of a seeded allocate case.
"""

from __future__ import annotations

import random

from pullspec.conformance.client_cases import Case, factories
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.machines.draw import Context, Draw
from pullspec.conformance.ops import Op

#: Ops a continuation never repeats: they may run once per instance.
ONCE: dict[str, frozenset[str]] = {"pull_loop": frozenset({"start"})}
_SEEDS = 2**31 - 1


def case(area: str, seed: int) -> Case:
    """The seeded random case of `area` numbered `seed` (its generator's first case)."""
    _, randoms = factories(area)
    if randoms is None:
        raise ValueError(f"area {area} has no random case generator")
    return randoms(random.Random(f"machine-{area}-{seed}"), seed)[0]


def config(area: str, d: Draw) -> JSONObject:
    """A fresh config of `area`: that of a drawn seeded case."""
    return dict(case(area, d.integer(0, _SEEDS)).config)


def op(area: str, d: Draw, ctx: Context) -> Op:
    """The next op: the next step of the current seeded case, or the first of a new one."""
    while not ctx.script:
        steps = [Op(name, dict(args)) for name, args in case(area, d.integer(0, _SEEDS)).steps]
        once = ONCE.get(area, frozenset())
        if ctx.started & once:
            steps = [s for s in steps if s.name not in once]
        ctx.script.extend(steps)
    nxt = ctx.script.pop(0)
    if nxt.name in ONCE.get(area, frozenset()):
        ctx.started.add(nxt.name)
    return nxt
