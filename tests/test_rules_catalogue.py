"""The rule catalogue covers every broker rule of rulebook sections 1–7 (STORE … COMMIT)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pullspec.conformance.cli import main
from pullspec.spec import rules
from pullspec.spec.profiles import ALL_PROFILES, Profile

#: Area → number of rules in rulebook-broker.md sections 1–7.
BROKER_AREAS = {
    "STORE": 20,
    "BATCH": 4,
    "FILTER": 9,
    "LAYOUT": 12,
    "CODE": 14,
    "HOLD": 10,
    "COMMIT": 5,
}
BROKER_RULE_IDS = [
    f"{area}-{n}" for area, count in BROKER_AREAS.items() for n in range(1, count + 1)
]
#: Broker-area rules the rulebook does not have, stated from the Java source where the recorded
#: vectors showed RocketMQ doing more than the rulebook says (issue 14).
SOURCE_ONLY_RULE_IDS = ["STORE-21", "STORE-22", "LAYOUT-13", "CODE-15"]
#: Rules whose observable behaviour differs between 4.7.1 and 4.9.7 (rulebook §11, V1 V6 V8 V16).
CHANGED = {"STORE-8", "BATCH-4", "LAYOUT-9", "LAYOUT-11"}
#: LAYOUT-7 differs only in the bytes after the 8-byte blank header (V7): when a file ends in a
#: blank is the same rule in both, what the blank holds is stated by one function per profile
#: (a STORE-21 read that runs into the blank shows those bytes).
BYTES_ONLY_CHANGE = "LAYOUT-7"
_ANOTHER_SENTENCE = re.compile(r"[.!?]\s+[A-Z]")


def rulebook_sources(rulebook: Path) -> dict[str, str]:
    """Rule ID → the "- Source:" line of that rule in the rulebook."""
    text = rulebook.read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for m in re.finditer(
        r"^\*\*([A-Z]+-\d+) — [^\n]*\n(?:[^\n]*\n)*?- Source: ([^\n]*)", text, re.M
    ):
        out.setdefault(m.group(1), m.group(2))
    return out


def is_one_sentence(text: str) -> bool:
    """True for a non-empty text ending with a full stop and holding no second sentence."""
    return bool(text) and text.endswith(".") and not _ANOTHER_SENTENCE.search(text)


def test_rulebook_lists_exactly_the_broker_rules(rulebook_path: Path) -> None:
    ids = [i for i in rulebook_sources(rulebook_path) if i.split("-")[0] in BROKER_AREAS]
    assert BROKER_RULE_IDS == ids


def test_every_broker_rule_is_registered() -> None:
    registered = {r.id for r in rules.catalogue()}
    assert [] == [i for i in BROKER_RULE_IDS if i not in registered]


def test_no_unknown_rule_in_the_broker_areas() -> None:
    extra = [r.id for r in rules.catalogue() if r.area in BROKER_AREAS]
    assert sorted(BROKER_RULE_IDS + SOURCE_ONLY_RULE_IDS) == sorted(extra)


@pytest.mark.parametrize("rule_id", SOURCE_ONLY_RULE_IDS)
def test_source_only_rules_have_statement_source_and_both_profiles(
    rule_id: str, rulebook_path: Path
) -> None:
    r = rules.get(rule_id)
    assert rule_id not in rulebook_sources(rulebook_path)
    assert is_one_sentence(r.statement), r.statement
    assert r.source.strip()
    for profile in ALL_PROFILES:
        assert is_one_sentence(r.variant(profile).statement)
        assert r.variant(profile).contracts, "a rule states contracts"


@pytest.mark.parametrize("rule_id", BROKER_RULE_IDS)
def test_rule_has_statement_source_and_both_profiles(rule_id: str, rulebook_path: Path) -> None:
    r = rules.get(rule_id)
    assert rule_id.split("-", maxsplit=1)[0] == r.area
    assert is_one_sentence(r.statement), r.statement
    for profile in ALL_PROFILES:
        variant = r.variant(profile)
        assert is_one_sentence(variant.statement), variant.statement
        assert callable(rules.function(rule_id, profile))
    # Every Java class the catalogue names appears on the rule's Source line of the rulebook.
    assert r.source.strip()
    book = rulebook_sources(rulebook_path)[rule_id]
    classes = [t.strip().split(".")[0].split()[0] for t in re.split(r"[;,]", r.source) if t.strip()]
    assert [] == [c for c in classes if c not in book]


@pytest.mark.parametrize("rule_id", sorted(CHANGED))
def test_changed_rules_have_distinct_variants(rule_id: str) -> None:
    r = rules.get(rule_id)
    v47, v49 = r.variant(Profile.V4_7), r.variant(Profile.V4_9)
    assert r.changed is True
    assert (Profile.V4_7,) == v47.profiles
    assert (Profile.V4_9,) == v49.profiles
    assert v47.function != v49.function
    assert rules.function(rule_id, Profile.V4_7) is not rules.function(rule_id, Profile.V4_9)
    assert "same" != r.versions


@pytest.mark.parametrize(
    "rule_id", [i for i in BROKER_RULE_IDS if i not in CHANGED | {BYTES_ONLY_CHANGE}]
)
def test_unchanged_rules_have_one_variant_for_both_profiles(rule_id: str) -> None:
    r = rules.get(rule_id)
    assert r.changed is False
    assert set(ALL_PROFILES) == set(r.variants[0].profiles)


def test_layout_7_records_its_byte_level_version_difference() -> None:
    r = rules.get(BYTES_ONLY_CHANGE)
    assert r.changed is True
    assert set(ALL_PROFILES) == set(r.variants[0].profiles)
    names = {p: [f.__name__ for f in rules.functions(r.id, p)] for p in ALL_PROFILES}
    assert {
        Profile.V4_7: ["needs_end_of_file_blank", "encode_blank_v47", "with_blank_leftovers_v47"],
        Profile.V4_9: ["needs_end_of_file_blank", "encode_blank_v49", "with_blank_leftovers_v49"],
    } == names
    assert "4.7.1" in r.versions and "4.9.7" in r.versions


def run_rules_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["rules", "--json", *args])
    assert 0 == result.exit_code, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_cli_rules_json_lists_every_broker_rule_in_the_documented_shape() -> None:
    data = run_rules_json()
    assert ["rules"] == list(data)
    by_id = {r["id"]: r for r in data["rules"]}
    assert [] == [i for i in BROKER_RULE_IDS if i not in by_id]
    for rule_id in BROKER_RULE_IDS:
        entry = by_id[rule_id]
        assert {"id", "statement", "source", "profiles"} <= set(entry)
        assert rules.get(rule_id).statement == entry["statement"]
        assert rules.get(rule_id).source == entry["source"]
        assert {"4.7", "4.9"} == set(entry["profiles"])
        for profile, variant in entry["profiles"].items():
            expected = rules.get(rule_id).variant(Profile.parse(profile))
            assert expected.statement == variant["statement"]
            assert expected.function == variant["function"]


def test_cli_rules_json_shows_both_variants_of_a_changed_rule() -> None:
    entry = {r["id"]: r for r in run_rules_json()["rules"]}["STORE-8"]
    assert "pullspec.spec.store.overflow_badly_target_v47" == entry["profiles"]["4.7"]["function"]
    assert "pullspec.spec.store.overflow_badly_target_v49" == entry["profiles"]["4.9"]["function"]


def test_cli_rules_json_filters_by_area_and_profile() -> None:
    data = run_rules_json("--area", "batch", "--profile", "4.9")
    assert ["BATCH-1", "BATCH-2", "BATCH-3", "BATCH-4"] == [r["id"] for r in data["rules"]]
    assert [["4.9"]] * 4 == [list(r["profiles"]) for r in data["rules"]]
