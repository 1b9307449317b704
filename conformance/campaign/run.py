"""Campaign traces: one deterministic lockstep trace per (seed, area, profile), and its row.

A campaign (`pullspec campaign`, conformance.campaign.spark) hands ranges of seeds to Spark
tasks; each task calls `run_seeds`, which for every seed, profile and area draws a config and
`steps` ops with the conformance generators (conformance.machines.gen, a RandomDraw seeded by
`trace_key`), applies each op to the reference and to the candidate and compares what they
observed, stopping at the first difference. It answers one row per trace in the order of
`COLUMNS` — the Parquet schema the campaign writes and docs/using/campaigns.md documents.

The loop is the lockstep machine's (conformance.machines.lockstep.Pair) with the same
verdicts, but without Hypothesis and without building an Observation for the candidate when
both sides answered exactly the same thing: that is where a campaign spends its time. The
driver replays a divergent trace through `Pair` itself (conformance.campaign.shrink), so the
vector it writes is checked by the same code as `pullspec conform`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import pickle
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NoReturn, TypeVar

import attrs

from pullspec.conformance import vectors
from pullspec.conformance.campaign.rows import (
    DEFAULT_SIM_STEPS,
    SIMULATION,
    Row,
    trace_key,
)
from pullspec.conformance.candidates import Candidate, CandidateTimeoutError
from pullspec.conformance.jsontypes import JSONObject, is_array, is_object
from pullspec.conformance.machines import gen
from pullspec.conformance.machines.draw import Context, RandomDraw
from pullspec.conformance.observe import compare
from pullspec.conformance.ops import (
    MACHINE_AREAS,
    OP_RULES,
    Observation,
    Op,
    error_kind,
    rule_sort_key,
    rules_for,
    state_fields,
)
from pullspec.conformance.resolve import resolve
from pullspec.conformance.vectors import Verdict
from pullspec.spec.errors import PullspecError, UnsupportedError
from pullspec.spec.profiles import Profile

T = TypeVar("T")

#: The pickle protocol `_same` compares observations under.
_PICKLE = pickle.HIGHEST_PROTOCOL


@attrs.frozen
class Plan:
    """What every task of one campaign runs: the candidate, areas, profiles and trace length."""

    impl: str
    areas: tuple[str, ...] = MACHINE_AREAS
    profiles: tuple[str, ...] = ("4.9",)
    steps: int = 200
    #: Directory for the candidates' scratch files (fast stores); None: the system default.
    scratch: str | None = None
    #: Seconds a `cmd:` candidate may take to answer.
    timeout: float = 10.0
    #: Simulator steps per seed in the `simulation` area.
    sim_steps: int = DEFAULT_SIM_STEPS


@functools.cache
def candidates_for(impl: str, timeout: float) -> tuple[Candidate, Candidate]:
    """(reference, candidate), resolved once per process: Spark reuses its Python workers."""
    import pullspec.reference.factories as reference

    return reference, resolve(impl, timeout)


def _observe(adapter: vectors.AreaAdapter[object], instance: object, op: Op) -> JSONObject:
    """The raw observation of `op` (a typed spec error becomes `{"error": kind}`, as a Session)."""
    try:
        raw = adapter.apply(instance, op.name, dict(op.args))
    except UnsupportedError:
        raise
    except PullspecError as exc:
        return {"error": exc.kind.value}
    return raw


def _same(expected: JSONObject, actual: JSONObject) -> bool:
    """True only when no comparison could find a difference: equal values whose pickles are
    equal too (a pickle tells True from 1 and an int from a numpy integer, which == does not;
    it is about twice as fast as comparing reprs). Anything else goes to `compare`, so a pickle
    that differs only by sharing (memoised repeats) merely costs the full comparison."""
    if expected != actual:
        return False
    try:
        return pickle.dumps(expected, _PICKLE) == pickle.dumps(actual, _PICKLE)
    except Exception:  # an unpicklable candidate value: let `compare` judge it
        return False


def _statuses(raw: JSONObject, into: set[str]) -> None:
    """Collect the statuses, codes and error kinds of one reference observation."""
    for key in ("status", "code"):
        value = raw.get(key)
        if isinstance(value, str):
            into.add(value)
    results = raw.get("results")
    for result in results if is_array(results) else ():
        status = result.get("status") if is_object(result) else None
        if isinstance(status, str):
            into.add(status)
    if raw.get("error") is not None:
        try:  # adapters report a Java exception name or an ErrorKind: count the kind
            into.add(f"error:{error_kind(raw['error']).value}")
        except PullspecError:
            into.add(f"error:{raw['error']}")


@attrs.define
class _Outcome:
    """The mutable result of one trace while it runs."""

    verdict: Verdict = Verdict.PASS
    ops: int = 0
    kind: str | None = None
    step: int | None = None
    op: str | None = None
    field: str | None = None
    rules: tuple[str, ...] = ()
    detail: str | None = None

    def fail(self, verdict: Verdict, exc: BaseException | None, op: str, step: int) -> None:
        """Record a candidate failure (crash, timeout, unsupported op) at `step`."""
        self.verdict, self.op, self.step = verdict, op, step
        self.detail = f"{type(exc).__name__}: {exc}" if exc is not None else None


def _guarded(out: _Outcome, area: str, op: str, step: int, call: Callable[[], T]) -> T | None:
    """Run a candidate call; its failure becomes the trace's verdict and None is answered."""
    try:
        return call()
    except UnsupportedError as exc:
        out.fail(Verdict.UNSUPPORTED, exc, op, step)
    except CandidateTimeoutError as exc:
        out.fail(Verdict.TIMEOUT, exc, op, step)
    except Exception as exc:  # a candidate bug is a verdict, not a harness error
        out.fail(Verdict.CRASHED, exc, op, step)
    out.rules = rules_for(area, op)
    return None


def run_trace(
    reference: Candidate,
    candidate: Candidate,
    impl: str,
    area: str,
    seed: int,
    profile: Profile,
    steps: int,
) -> Row:
    """Run the trace of (`area`, `seed`, `profile`) in lockstep and answer its row."""
    started, cpu = time.perf_counter(), time.process_time()
    draw = RandomDraw(random.Random(trace_key(area, seed, profile)))
    config = gen.config(area, draw)
    ctx = Context.start(area, config)
    adapter = vectors.adapter(area)
    ref = adapter.create(reference, dict(config), profile, Path("."))
    out = _Outcome()
    names, statuses = {"create"}, set[str]()
    cand = _guarded(
        out, area, "create", 0, lambda: adapter.create(candidate, dict(config), profile, Path("."))
    )
    step = 0
    next_op, apply = gen.op, adapter.apply
    while out.verdict is Verdict.PASS and step < steps:
        step += 1
        op = next_op(area, draw, ctx)
        names.add(op.name)
        raw = _observe(adapter, ref, op)
        if raw.get("error") is not None:
            error_kind(raw["error"])  # a reference error no ErrorKind names is a harness bug
        _statuses(raw, statuses)
        out.ops += 1
        # The candidate's call inlined (as _guarded, _observe): it runs once per diffed op.
        got: JSONObject | None
        try:
            got = apply(cand, op.name, dict(op.args))
        except PullspecError as exc:
            if isinstance(exc, UnsupportedError):
                got = _guarded(out, area, op.name, step, functools.partial(_raise, exc))
            else:
                got = {"error": exc.kind.value}
        except Exception as exc:
            got = _guarded(out, area, op.name, step, functools.partial(_raise, exc))
        if got is not None and not _same(raw, got):
            expected = Observation.from_json(area, raw)
            actual = _guarded(
                out, area, op.name, step, functools.partial(Observation.from_json, area, got)
            )
            diff = compare(expected, actual) if actual is not None else None
            if diff is not None:
                out.verdict, out.kind, out.step, out.op = (
                    Verdict.DIVERGED,
                    diff.kind.value,
                    step,
                    op.name,
                )
                out.field = diff.field
                out.rules = rules_for(
                    area, op.name, diff.field, state_fields(area, config), expected.fields
                )
        ctx.note_raw(op, raw)
    hit = {r for name in names for r in OP_RULES[area].get(name, ())}
    return (
        seed,
        area,
        profile.value,
        impl,
        out.ops,
        out.verdict.value,
        out.kind,
        out.step,
        out.op,
        out.field,
        list(out.rules) if out.verdict is not Verdict.PASS else [],
        sorted(hit, key=rule_sort_key),
        sorted(statuses),
        out.detail,
        time.perf_counter() - started,
        time.process_time() - cpu,
    )


def _raise(exc: BaseException) -> NoReturn:
    """Raise `exc` again (inside `_guarded`, which turns it into the trace's verdict)."""
    raise exc


@contextlib.contextmanager
def _scratch(directory: str | None) -> Iterator[None]:
    """Candidates' temporary files go to a fresh folder under `directory`, removed afterwards.

    The fast store keeps its files in `tempfile` directories; on tmpfs (/dev/shm) creating,
    syncing and deleting its many small files costs about half as much as on disk."""
    if directory is None:
        yield
        return
    folder = tempfile.mkdtemp(prefix="pullspec-campaign-", dir=directory)
    saved, tempfile.tempdir = tempfile.tempdir, folder
    try:
        yield
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(folder, ignore_errors=True)


_WARM: set[tuple[str, str]] = set()


def _warm_up(plan: Plan, reference: Candidate, candidate: Candidate) -> None:
    """Open and drop one instance per area on both sides, once per process, so that the first
    trace's elapsed time does not include importing the adapters and the implementations."""
    for area in plan.areas:
        if (plan.impl, area) in _WARM or area == SIMULATION:
            continue
        _WARM.add((plan.impl, area))
        config = gen.config(area, RandomDraw(random.Random(0)))
        for impl in (reference, candidate):
            with contextlib.suppress(Exception):  # a failing create is the trace's verdict
                vectors.adapter(area).create(impl, dict(config), Profile.V4_9, Path("."))


@functools.cache
def _freeze_once() -> None:
    """`gc.freeze()` once per process: the modules, the adapters' caches and everything else
    alive after the warm-up are left out of every later collection. A collection walks every
    object of its generations, and these few tens of thousands live as long as the process:
    the collector took 1.3 µs a diffed op with them and 0.4 without (200 seeds of the `fast`
    areas in one process). Garbage they make later is still freed by reference counting; only
    a cycle among them is never collected. The garbage of the warm-up itself is collected first
    (124 objects in cycles after warming both `fast` areas): frozen, it would never be."""
    gc.collect()
    gc.freeze()


def run_seeds(plan: Plan, seeds: Iterable[int], *, freeze: bool = False) -> Iterator[Row]:
    """Every row of `seeds`: for each seed, each profile, each area of `plan`. With `freeze`
    (a Spark task's worker, whose process does nothing else), the objects alive once the
    sides are warm are frozen out of the cyclic garbage collector (`_freeze_once`)."""
    reference, candidate = candidates_for(plan.impl, plan.timeout)
    profiles = [Profile.parse(p) for p in plan.profiles]
    with _scratch(plan.scratch):
        _warm_up(plan, reference, candidate)
        if freeze:
            _freeze_once()
        for seed in seeds:
            for profile in profiles:
                for area in plan.areas:
                    if area == SIMULATION:
                        from pullspec.conformance.campaign.sim import run_simulation

                        yield run_simulation(candidate, plan.impl, seed, profile, plan.sim_steps)
                        continue
                    yield run_trace(
                        reference, candidate, plan.impl, area, seed, profile, plan.steps
                    )


def unsupported_areas(plan: Plan) -> dict[str, str]:
    """The areas of `plan` the candidate (or the reference) has no interface for, with why."""
    reference, candidate = candidates_for(plan.impl, plan.timeout)
    profile = Profile.parse(plan.profiles[0])
    why: dict[str, str] = {}
    for area in plan.areas:
        if area == SIMULATION:
            from pullspec.conformance.campaign import sim as campaign_sim

            if not campaign_sim.available():
                why[area] = "this build has no whole-system lockstep"
            elif (reason := campaign_sim.unsupported(candidate)) is not None:
                why[area] = reason
            continue
        config = gen.config(area, RandomDraw(random.Random(0)))
        for name, impl in (("reference", reference), ("candidate", candidate)):
            try:
                vectors.adapter(area).create(impl, dict(config), profile, Path("."))
            except UnsupportedError as exc:
                why[area] = f"{name}: {exc}"
                break
    return why
