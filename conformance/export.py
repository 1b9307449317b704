"""`pullspec vectors export`: vectors generated from the reference, in the shared format.

Two kinds of cases per area: hand-chosen edge cases, each aimed at the boundary of the rules it
names, and seeded random traces drawn by the same generators as the lockstep machines. Every
step's `expect` is the reference's full observation (errors as their ErrorKind), so any
candidate replays them with `pullspec vectors check DIR --impl X --profile P`. A manifest
(manifest.json) records the spec version, the profile and the rule IDs each case covers.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pullspec.conformance import vectors
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.machines import gen
from pullspec.conformance.machines.draw import Context, RandomDraw
from pullspec.conformance.machines.edges import EDGE_CASES, Wrote
from pullspec.conformance.observe import Session, case_rules
from pullspec.conformance.ops import AREAS, Op, rule_sort_key
from pullspec.conformance.vectors import Case, ManifestCase, Step
from pullspec.spec.profiles import Profile

FORMAT = "pullspec-vectors/1"
#: Random traces per area and steps per trace that `export` writes by default.
RANDOM_CASES = 12
RANDOM_STEPS = 24


class Manifest(vectors.Manifest):
    """manifest.json of an exported folder: also the spec version the vectors come from."""

    specVersion: str  # noqa: N815 - a JSON key


def _case(
    cid: str, area: str, config: JSONObject, ops: list[Op], profile: Profile, seed: int
) -> Case:
    """A vector case: `ops` run on a fresh reference instance, its observations as expects."""
    import pullspec.reference.factories as reference

    session, ctx = Session(reference, area, config, profile), Context.start(area, config)
    steps: list[Step] = []
    for op in ops:
        args: JSONObject = {
            k: ctx.wrote[v] if isinstance(v, Wrote) else v for k, v in op.args.items()
        }
        seen = session.apply(Op(op.name, args))
        ctx.note(op, seen)
        steps.append({"op": op.name, "args": args, "expect": seen.to_json()})
    tag = profile.tag.removeprefix("rocketmq-all-")
    return {"id": cid, "area": area, "version": tag, "seed": seed, "config": config, "steps": steps}


def edge_cases(profile: Profile) -> Iterator[Case]:
    """The hand-chosen edge cases, with the reference's expects for `profile`."""
    for name, area, overrides, ops in EDGE_CASES:
        config = {**gen.config(area, RandomDraw(random.Random(0))), **overrides}
        yield _case(f"edge-{name}", area, config, [Op(n, a) for n, a in ops], profile, 0)


def random_cases(
    profile: Profile, seed: int, cases: int = RANDOM_CASES, steps: int = RANDOM_STEPS
) -> Iterator[Case]:
    """Seeded random traces per area (the machines' generators, a RandomDraw per case)."""
    import pullspec.reference.factories as reference

    for area in AREAS:
        for i in range(cases):
            draw = RandomDraw(random.Random(f"{area}-{seed}-{i}"))
            config = gen.config(area, draw)
            session, ctx, ops = (
                Session(reference, area, config, profile),
                Context.start(area, config),
                [],
            )
            for _ in range(steps):
                op = gen.op(area, draw, ctx)
                ctx.note(op, session.apply(op))
                ops.append(op)
            yield _case(f"random-{area}-{seed}-{i}", area, config, ops, profile, seed)


def generate(profile: Profile, seed: int = 0, cases: int = RANDOM_CASES) -> list[Case]:
    """Every exported case: edge cases first, then the random traces."""
    return [*edge_cases(profile), *random_cases(profile, seed, cases)]


def spec_version() -> str:
    """The version of the rocketmq-pullspec distribution (the spec the vectors come from)."""
    try:
        return version("rocketmq-pullspec")
    except PackageNotFoundError:
        return "unknown"


def manifest(profile: Profile, seed: int, cases: list[Case]) -> Manifest:
    """The manifest: spec version, profile, files and the rule IDs each case covers."""
    covered: set[str] = set()
    entries: list[ManifestCase] = []
    for case in cases:
        rules = case_rules(case)
        covered.update(rules)
        cid = str(case.get("id"))
        kind = "edge" if cid.startswith("edge-") else "random"
        entries.append({"id": cid, "area": case["area"], "kind": kind, "rules": list(rules)})
    return {
        "format": FORMAT,
        "specVersion": spec_version(),
        "profile": profile.value,
        "rocketmqVersion": profile.tag.removeprefix("rocketmq-all-"),
        "seed": seed,
        "files": {area: f"{area}.jsonl" for area in AREAS if any(c["area"] == area for c in cases)},
        "rules": sorted(covered, key=rule_sort_key),
        "cases": entries,
    }


def export(directory: Path, profile: Profile, seed: int = 0, cases: int = RANDOM_CASES) -> Manifest:
    """Write `<area>.jsonl` files and manifest.json into `directory`; answer the manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    generated = generate(profile, seed, cases)
    for area in AREAS:
        lines = [json.dumps(c, separators=(",", ":")) for c in generated if c["area"] == area]
        if lines:
            (directory / f"{area}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    info = manifest(profile, seed, generated)
    (directory / "manifest.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info
