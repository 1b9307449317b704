"""The bounded CrossHair subset `make test` runs (the full run is `make verify`)."""

from __future__ import annotations

from pullspec.conformance import verify
from pullspec.spec import rules


def test_quick_subset_finds_no_counterexample() -> None:
    results = verify.verify(verify.QUICK_MODULES, per_condition_timeout=1.0)
    failed = [(r.rule_id, r.messages) for r in results if r.outcome is verify.Outcome.FAILED]
    assert [] == failed
    # Every rule of the subset was analysed (a rule the run did not reach would be UNKNOWN).
    assert {"BATCH-2", "COMMIT-4", "HOLD-4"} <= {
        r.rule_id for r in results if r.outcome is verify.Outcome.CONFIRMED
    }


def test_a_wrong_contract_is_reported_failed(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    module = tmp_path / "wrong_rule.py"
    module.write_text(
        "from pullspec.spec.rules import rule\n\n"
        "@rule('ZZTEST-1', source='Nowhere.wrong')\n"
        "def wrong(a: int) -> int:\n"
        '    """A rule whose contract is false.\n\n    post: __return__ > a\n    """\n'
        "    return a\n"
    )
    monkeypatch.setattr(rules, "_REGISTRY", dict(rules._REGISTRY))
    monkeypatch.setattr(rules, "_FUNCTIONS", dict(rules._FUNCTIONS))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    results = verify.verify(["wrong_rule"], per_condition_timeout=1.0)
    assert [("ZZTEST-1", verify.Outcome.FAILED)] == [(r.rule_id, r.outcome) for r in results]
