"""The reference-generated vectors in vectors/: they pass on the reference in both profiles,
regenerating them reproduces the committed bytes, and a wrong rule makes cases diverge."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pullspec.conformance import client_vectors, vectors
from pullspec.conformance.candidates import close
from pullspec.conformance.resolve import resolve
from pullspec.conformance.vectors import GENERATED_VECTORS, generated_folder
from pullspec.spec import allocate, pull_decision, rules
from pullspec.spec.consumer_config import ConsumerConfig
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import ALL_PROFILES, Profile
from pullspec.spec.pull_actions import Delay

#: Rule areas the recorded vectors never reach: every one of their rules needs a generated case.
CLIENT_AREAS = ("PULLQ", "FLOW", "REQ", "RESULT", "OFFSET", "CONC", "ORDER", "REBAL")
BROKER_AREAS = ("HOLD", "COMMIT", "INV")


def _results(profile: Profile, areas: tuple[str, ...] | None = None) -> list[vectors.CaseResult]:
    folder = GENERATED_VECTORS / generated_folder(profile)
    reference = resolve("reference")
    return [
        vectors.run_case(reference, case, profile, folder)
        for case in vectors.load_cases(folder, areas)
    ]


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.value)
def test_committed_vectors_pass_on_the_reference(profile: Profile) -> None:
    results = _results(profile)
    assert len(results) > 150
    assert [] == [r.to_json() for r in results if r.verdict is not vectors.Verdict.PASS]


#: The client areas answered by the real RocketMQ client (../shared/vectors/README.md): what the
#: reference is held to.
RECORDED_CLIENT = [("rocketmq-client-4.9.7", Profile.V4_9), ("rocketmq-client-4.7.1", Profile.V4_7)]
RECORDED_CLIENT_AREAS = {
    *("pull_decision", "pull_result", "pull_request", "pull_service", "offset_store"),
    *("allocate", "consume_concurrently", "consume_orderly", "process_queue_maintenance"),
    "rebalance",
}


@pytest.mark.parametrize(
    ("folder", "profile"), RECORDED_CLIENT, ids=[f for f, _ in RECORDED_CLIENT]
)
def test_recorded_client_vectors_pass_on_the_reference(
    vectors_dir: Path, folder: str, profile: Profile
) -> None:
    path = vectors_dir / folder
    cases = list(vectors.load_cases(path))
    assert RECORDED_CLIENT_AREAS == {c["area"] for c in cases}
    assert {profile.tag.removeprefix("rocketmq-all-")} == {c["version"] for c in cases}
    reference = resolve("reference")
    results = [vectors.run_case(reference, case, profile, path) for case in cases]
    assert [] == [r.to_json() for r in results if r.verdict is not vectors.Verdict.PASS]


def test_regenerating_reproduces_the_committed_files(tmp_path: Path) -> None:
    client_vectors.write(tmp_path, client_vectors.DEFAULT_SEED)
    committed = sorted(
        p.relative_to(GENERATED_VECTORS) for p in GENERATED_VECTORS.rglob("*") if p.is_file()
    )
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert fresh == committed
    changed = [
        str(rel)
        for rel in committed
        if (tmp_path / rel).read_bytes() != (GENERATED_VECTORS / rel).read_bytes()
    ]
    assert [] == changed, (
        "run `python -m pullspec.conformance.client_vectors vectors` and commit the result"
    )


def test_manifests_label_the_source_and_measure_coverage() -> None:
    catalogue = {r.id: r for r in rules.catalogue()}
    for profile in ALL_PROFILES:
        folder = GENERATED_VECTORS / generated_folder(profile)
        info = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        assert "not recorded from Apache RocketMQ" in info["source"]
        assert profile.value == info["profile"]
        ids = {c["id"] for c in info["cases"]}
        for case in vectors.load_cases(folder):
            assert case["version"] == f"reference-{profile.value}"
            assert case["id"] in ids
        wanted = {r for r, rule in catalogue.items() if rule.area in CLIENT_AREAS + BROKER_AREAS}
        assert set() == wanted - set(info["rules"])
        assert all(c["rules"] for c in info["cases"])


def test_flow_8_span_gate_off_by_one_diverges(monkeypatch: pytest.MonkeyPatch) -> None:
    original = pull_decision.check_max_span

    def at_or_above(max_span: int, config: ConsumerConfig) -> Delay | None:
        # The mutant flow-controls a span equal to consumeConcurrentlyMaxSpan.
        return original(max_span + 1, config)

    monkeypatch.setattr(pull_decision, "check_max_span", at_or_above)
    diverged = [
        r
        for r in _results(Profile.V4_9, ("pull_decision",))
        if r.verdict is vectors.Verdict.DIVERGED
    ]
    assert "pull_decision.edge-flow8-span-boundary" in {r.id for r in diverged}
    assert all(r.field is not None and r.field.startswith("action") for r in diverged)


def test_rebal_7_wrong_average_allocation_diverges(monkeypatch: pytest.MonkeyPatch) -> None:
    def without_remainder(
        group: str, cid: str, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> list[MessageQueue]:
        # The mutant gives every consumer n // c queues and leaves the remainder unassigned.
        if not allocate.check_allocate_args(cid, mq_all, cid_all):
            return []
        size = len(mq_all) // len(cid_all)
        start = cid_all.index(cid) * size
        return list(mq_all[start : start + size])

    monkeypatch.setattr(allocate, "allocate_averagely", without_remainder)
    results = _results(Profile.V4_9, ("allocate",))
    diverged = {r.id for r in results if r.verdict is vectors.Verdict.DIVERGED}
    assert {"allocate.edge-rebal7-avg", "allocate.edge-rebal5-clustering-sorts"} <= diverged
    assert "allocate.edge-rebal8-avg-by-circle" not in diverged


def test_a_candidate_without_drivers_is_unsupported() -> None:
    fast = resolve("fast")
    folder = GENERATED_VECTORS / generated_folder(Profile.V4_9)
    case = next(vectors.load_cases(folder, ["pull_decision"]))
    assert vectors.Verdict.UNSUPPORTED is vectors.run_case(fast, case, Profile.V4_9, folder).verdict


_ADAPTER = """
import json, sys
from pullspec.reference import factories
from pullspec.spec.errors import PullspecError
from pullspec.spec.profiles import Profile

drivers = {}
for line in sys.stdin:
    req = json.loads(line)
    try:
        if req["op"] == "create":
            factory = getattr(factories, req["area"])
            drivers[req["id"]] = factory(req["config"], Profile.parse(req["profile"]))
            reply = {"ok": {}}
        else:
            try:
                reply = {"ok": drivers[req["instance"]].apply(req["op"], req["args"])}
            except PullspecError as exc:
                reply = {"ok": {"error": exc.kind.value}}
    except PullspecError as exc:
        reply = {"error": {"kind": exc.kind.value, "message": str(exc)}}
    print(json.dumps({"id": req["id"], **reply}), flush=True)
"""


def test_a_subprocess_candidate_receives_the_ops_unchanged(tmp_path: Path) -> None:
    script = tmp_path / "adapter.py"
    script.write_text(_ADAPTER, encoding="utf-8")
    candidate = resolve(f"cmd:{sys.executable} {script}")
    folder = GENERATED_VECTORS / generated_folder(Profile.V4_7)
    try:
        results = [
            vectors.run_case(candidate, case, Profile.V4_7, folder)
            for case in vectors.load_cases(folder, ["allocate", "pull_decision", "pull_loop"])
        ]
    finally:
        close(candidate)
    assert len(results) > 30
    assert [] == [r.to_json() for r in results if r.verdict is not vectors.Verdict.PASS]
