"""The recorded `generated-*` vectors (../shared/vectors): the suite's own generated inputs
(`pullspec vectors export --seed 1000 --random 30`) answered by the real RocketMQ classes of each
release. Every case passes on the reference; the fast store passes every case of its areas; and a
divergence where the spec differs from RocketMQ on purpose is reported as that known difference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pullspec.fast.factories
import pullspec.reference.factories
from pullspec.conformance.differences import KNOWN_DIFFERENCES
from pullspec.conformance.jsontypes import JSONObject
from pullspec.conformance.vectors import Case, Verdict, load_cases, run_case
from pullspec.spec.profiles import Profile

FOLDERS = {"generated-4.9.7": Profile.V4_9, "generated-4.7.1": Profile.V4_7}
#: Cases per area in each folder.
COUNTS = {"store": 40, "pull_code": 34, "process_queue": 35, "lock_manager": 32, "send_back": 33}
#: The areas the fast implementation has (the rest it reports as unsupported).
FAST_AREAS = ("store", "process_queue")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "using" / "differences.md"


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_every_generated_case_passes_on_the_reference(vectors_dir: Path, folder: str) -> None:
    directory = vectors_dir / folder
    cases = list(load_cases(directory))
    assert COUNTS == {a: sum(c["area"] == a for c in cases) for a in COUNTS}
    results = [run_case(pullspec.reference.factories, c, FOLDERS[folder], directory) for c in cases]
    assert [] == [r.to_json() for r in results if r.verdict is not Verdict.PASS]


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_every_generated_case_of_its_areas_passes_on_fast(vectors_dir: Path, folder: str) -> None:
    directory = vectors_dir / folder
    cases = list(load_cases(directory, FAST_AREAS))
    assert sum(COUNTS[a] for a in FAST_AREAS) == len(cases)
    results = [run_case(pullspec.fast.factories, c, FOLDERS[folder], directory) for c in cases]
    assert [] == [r.to_json() for r in results if r.verdict is not Verdict.PASS]


def _send_back_case(expect: JSONObject) -> Case:
    config: JSONObject = {
        "group": "G",
        "groupRetryMaxTimes": 16,
        "retryQueueNums": 1,
        "maxDelayLevel": 18,
    }
    put: JSONObject = {"msgs": [{"queueId": 0, "tags": "A", "bodySize": 16}]}
    sent: JSONObject = {
        "originalCommitLogOffset": 1,
        "group": "G",
        "delayLevel": 1,
        "maxReconsumeTimes": 16,
    }
    return {
        "id": "sb-inside-a-record",
        "area": "send_back",
        "config": config,
        "steps": [{"op": "put", "args": put}, {"op": "send_back", "args": sent, "expect": expect}],
    }


def test_store_22_a_divergence_on_the_known_difference_is_reported_as_such(
    tmp_path: Path,
) -> None:
    # RocketMQ may decode the bytes after offset 1 into a message and send it back: SUCCESS
    result = run_case(
        pullspec.reference.factories, _send_back_case({"code": "SUCCESS"}), Profile.V4_9, tmp_path
    )
    assert (Verdict.DIVERGED, "code", "SUCCESS", "SYSTEM_ERROR") == (
        result.verdict,
        result.field,
        result.expected,
        result.actual,
    )
    assert result.detail is not None
    assert result.detail.startswith("known difference from RocketMQ, STORE-22: ")
    # a remark RocketMQ wrote from an exception, were it recorded, is the same difference
    thrown = _send_back_case({"code": "SYSTEM_ERROR", "remark": "IllegalArgumentException"})
    assert "STORE-22" in (
        run_case(pullspec.reference.factories, thrown, Profile.V4_9, tmp_path).detail or ""
    )


def test_other_divergences_name_no_known_difference(tmp_path: Path) -> None:
    case = _send_back_case({"code": "SYSTEM_ERROR", "stored": {"topic": "X"}})
    result = run_case(pullspec.reference.factories, case, Profile.V4_9, tmp_path)
    assert (Verdict.DIVERGED, "stored", None) == (result.verdict, result.field, result.detail)


def test_the_differences_page_lists_exactly_the_known_differences() -> None:
    text = DOCS.read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[\[([A-Z]+-\d+)\]\] \|", text, re.M)
    assert [d.rule_id for d in KNOWN_DIFFERENCES] == rows
