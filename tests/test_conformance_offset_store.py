"""The offset store's lockstep machine: the reference passes against itself, a store whose
increase-only update overwrites (OFFSET-2) is caught with a minimal trace, `pullspec conform
--area offset_store` reports the interface."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

import pullspec.fast.factories as fast
import pullspec.reference.factories as reference
from pullspec.conformance import vectors
from pullspec.conformance.cli import main
from pullspec.conformance.jsontypes import to_int
from pullspec.conformance.machines.run import run_machine
from pullspec.conformance.observe import DivergenceKind
from pullspec.conformance.vectors import Verdict
from pullspec.reference.areas.offset_store import Driver as ReferenceDriver
from pullspec.reference.offset_store import ReferenceRemoteOffsetStore
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

EXAMPLES, STEPS = 15, 15


class OverwritingStore(ReferenceRemoteOffsetStore):
    """Breaks OFFSET-2: an increase-only update replaces the stored offset even when lower."""

    def update_offset(self, mq: MessageQueue | None, offset: int, increase_only: bool) -> None:
        """Ignore `increase_only`."""
        super().update_offset(mq, offset, False)


class OverwritingDriver(ReferenceDriver):
    """The reference driver over `OverwritingStore` (remote stores only)."""

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        if self.local is None:
            self.store = OverwritingStore(self.broker, str(config.get("consumerGroup", "G")))


BROKEN = SimpleNamespace(NAME="overwriting", offset_store=OverwritingDriver)


@pytest.mark.parametrize("profile", [Profile.V4_9, Profile.V4_7])
def test_reference_against_itself_passes(profile: Profile) -> None:
    report = run_machine(
        "offset_store", reference, impl="reference", profile=profile, examples=EXAMPLES, steps=STEPS
    )
    assert Verdict.PASS == report.verdict, report.describe()
    assert EXAMPLES <= report.examples
    assert 0 < report.ops
    assert {"OFFSET-2", "OFFSET-4", "OFFSET-6", "OFFSET-11"} <= set(report.covered)


def test_a_candidate_without_an_offset_store_is_unsupported() -> None:
    report = run_machine("offset_store", fast, impl="fast", examples=EXAMPLES, steps=STEPS)
    assert Verdict.UNSUPPORTED == report.verdict


def test_an_overwriting_increase_only_update_is_caught_with_a_minimal_trace(
    tmp_path: Path,
) -> None:
    report = run_machine(
        "offset_store",
        BROKEN,
        impl="overwriting",
        replay_dir=tmp_path,
        examples=EXAMPLES,
        steps=STEPS,
    )
    assert Verdict.DIVERGED == report.verdict, report.describe()
    assert "OFFSET-2" in report.rules
    # One write, then a lower increase-only write that the reference ignores.
    assert 2 == len(report.steps), report.describe()
    assert report.divergence is not None
    assert report.divergence.field.startswith("table") or report.kind is DivergenceKind.RESULT
    first, second = (s.op for s in report.steps)
    assert first.args["mq"] == second.args["mq"]
    assert to_int(second.args["offset"]) < to_int(first.args["offset"])
    assert report.replay is not None
    case = json.loads(Path(report.replay.split()[3]).read_text(encoding="utf-8"))
    for candidate, verdict in ((reference, Verdict.PASS), (BROKEN, Verdict.DIVERGED)):
        assert verdict == vectors.run_case(candidate, case, Profile.V4_9, tmp_path).verdict


@pytest.mark.parametrize(
    ("impl", "verdict", "code"), [("reference", "PASS", 0), ("fast", "UNSUPPORTED", 2)]
)
def test_conform_reports_the_offset_store_interface(impl: str, verdict: str, code: int) -> None:
    """fast has no offset store: nothing was checked, which exits 2 (not a pass)."""
    args = ["conform", "--impl", impl, "--area", "offset_store", "--json"]
    result = CliRunner().invoke(main, [*args, "--examples", "6", "--steps", "12"])
    assert code == result.exit_code, result.output
    report = json.loads(result.stdout)
    assert {"offset_store": verdict} == {a: i["verdict"] for a, i in report["interfaces"].items()}
