"""The simulator's API and `pullspec simulate`: one seed and one schedule fully determine a run,
the applied schedule replays it, the history file checks to the same verdict, and the command
prints, writes and exits as documented."""

from __future__ import annotations

import io
import json
import sys
import types
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from pullspec.conformance.cli import main
from pullspec.conformance.cli import simulate as cli_simulate
from pullspec.reference.consume_concurrently import ReferenceConsumeConcurrentlyService
from pullspec.reference.sim import history as h
from pullspec.reference.sim.checker import CheckResult, check
from pullspec.reference.sim.faults import parse_schedule
from pullspec.reference.sim.simulator import SimConfig, SimResult, Simulator, simulate

STEPS = 2500


def history_text(sim: Simulator) -> str:
    out = io.StringIO()
    h.dump_lines(sim.history.events, out)
    return out.getvalue()


def run(config: SimConfig, steps: int = STEPS) -> tuple[SimResult, Simulator]:
    return simulate(config, steps, keep_history=True)


def test_one_seed_and_schedule_determine_the_run() -> None:
    config = SimConfig(seed=11, mean_fault_gap_ms=4_000)
    (first, a), (second, b) = run(config), run(config)
    assert history_text(a) == history_text(b)
    assert (first.schedule, first.check.allowed) == (second.schedule, second.check.allowed)
    assert first.schedule  # the seed drew some faults


@pytest.mark.parametrize("orderly", [False, True])
def test_the_applied_schedule_replays_a_generated_run(orderly: bool) -> None:
    result, generated = run(SimConfig(seed=5, orderly=orderly, mean_fault_gap_ms=3_000))
    replay = SimConfig(seed=5, orderly=orderly, schedule=parse_schedule(result.schedule))
    _, replayed = run(replay)
    assert history_text(generated) == history_text(replayed)
    assert f'--schedule "{result.schedule}"' in generated.replay_command()


def test_a_run_counts_its_steps_produces_consumes_and_has_no_violation() -> None:
    result, sim = run(SimConfig(seed=2, faults=()))
    assert (STEPS, {}) == (result.steps, result.check.violations)
    stats = result.check.stats
    assert stats["produced"] > 400
    assert stats["produced"] == stats["consumed"] + stats["pending"] + stats["dlq"]
    assert result.virtual_ms == sim.clock.now_ms()
    assert "" == result.schedule
    assert {"Setup", "Produce", "Delivered", "Consumed", "Snapshot"} <= set(result.history)


def test_the_history_file_checks_to_the_same_verdict(tmp_path: Path) -> None:
    result, sim = run(SimConfig(seed=4, mean_fault_gap_ms=3_000))
    path = tmp_path / "h.jsonl"
    assert len(sim.history.events) == h.write_history(sim.history.events, path)
    again = check(h.read_history(path))
    assert (result.check.violations, result.check.allowed) == (again.violations, again.allowed)


def test_a_slave_serves_pulls_when_the_master_suggests_it() -> None:
    # After a 5 s pause the consumer lags more than 40 % of the (small) memory behind: the
    # master suggests the slave (CODE-6), which serves it until it catches up.
    paused = parse_schedule("pause@2000:c0=5000")
    config = SimConfig(seed=1, consumers=1, schedule=paused, memory_bytes=4_096)
    result, sim = run(config, 3000)
    pulls = [e for e in sim.history.events if isinstance(e, h.PullSent)]
    assert any(p.broker_id == 1 for p in pulls)
    assert all(p.commit_offset == -1 for p in pulls if p.broker_id == 1)  # REQ-8
    assert {} == result.check.violations


# --- the command -----------------------------------------------------------------------------------


def invoke(*args: str) -> tuple[int, str, str]:
    outcome = CliRunner().invoke(main, ["simulate", *args])
    return outcome.exit_code, outcome.stdout, outcome.stderr


def test_simulate_json_has_the_documented_keys() -> None:
    code, out, _ = invoke("--seed", "1", "--steps", "800", "--json")
    data = json.loads(out)
    assert 0 == code
    assert {"violations", "allowed", "steps", "produced", "consumed", "elapsed_s"} <= set(data)
    assert (800, {}, 1) == (data["steps"], data["violations"], data["seed"])
    assert data["replay"].startswith("pullspec simulate --seed 1 --steps 800")


def test_simulate_prints_a_summary_writes_the_history_and_shows_progress(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    args = ("--steps", "600", "--orderly", "--consumers", "2", "--faults", "none")
    code, out, err = invoke(*args, "--history", str(path), "--progress-every", "200")
    assert 0 == code
    assert "600 steps" in out and "violations: none" in out and "faults: none" in out
    assert 3 == err.count("simulate: ")
    events = h.read_history(path)
    assert isinstance(events[0], h.Setup) and events[0].orderly
    assert isinstance(events[-1], h.Snapshot)


def test_simulate_replays_an_explicit_schedule_and_refuses_bad_input() -> None:
    code, out, _ = invoke("--steps", "300", "--schedule", "crash@1000:c0=2000,expire@1500=1")
    assert 0 == code
    assert "faults: crash@1000:c0=2000,expire@1500=1" in out
    for bad in (("--schedule", "boom@1"), ("--faults", "nope"), ("--steps", "0")):
        assert 2 == invoke(*bad)[0]


def test_simulate_exits_1_and_prints_the_replay_on_a_violation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def violating(config: SimConfig, steps: int, **kwargs: object) -> tuple[SimResult, Simulator]:
        result, sim = simulate(config, steps)
        broken = CheckResult(violations={"lost": 2}, stats=result.check.stats)
        return attrs.evolve(result, check=broken), sim

    monkeypatch.setattr(cli_simulate, "simulate", violating)
    code, out, _ = invoke("--steps", "200")
    assert 1 == code
    assert "violations: lost 2" in out and "replay: pullspec simulate" in out


# --- reaching the rules ----------------------------------------------------------------------------


def test_a_default_run_reaches_span_flow_control_the_sweep_pull_expiry_and_offset_illegal() -> None:
    # `pullspec simulate` with its defaults: 10 000 steps of seed 1, then the quiet tail.
    result, _ = simulate(SimConfig(seed=1), 10_000)
    targets = result.check.coverage["targets"]
    assert isinstance(targets, dict)
    assert ["FLOW-8", "PQ-18", "PQ-16", "RESULT-10"] == list(targets)
    assert [] == [rule for rule, events in targets.items() if events == 0]
    assert ({}, True) == (result.check.violations, result.check.liveness["settled"])


# --- --impl ----------------------------------------------------------------------------------------


def test_simulate_impl_fast_matches_the_reference_and_reports_liveness_and_coverage() -> None:
    code, out, _ = invoke("--impl", "fast", "--steps", "1200", "--json")
    data = json.loads(out)
    assert 0 == code
    lockstep = data["lockstep"]
    assert ("PASS", ["message_store", "process_queue"]) == (lockstep["verdict"], lockstep["parts"])
    assert lockstep["events"] > 2000
    assert ({}, True, "fast") == (data["violations"], data["liveness"]["judged"], data["impl"])
    assert {"rules", "targets", "missed"} == set(data["coverage"])


class _NoResubmit(ReferenceConsumeConcurrentlyService):
    """Broken (CONC-3): a message whose send-back failed is never consumed again."""

    def _later(self, msgs: object, pq: object, mq: object) -> None:
        return None


def test_simulate_impl_shows_where_a_candidate_s_consume_service_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("broken_consume")
    module.CANDIDATE = types.SimpleNamespace(  # type: ignore[attr-defined]
        consume_concurrently_service=_NoResubmit
    )
    monkeypatch.setitem(sys.modules, "broken_consume", module)
    # c0's listener fails 3 calls and their send-backs fail: the reference retries them locally
    # 5 s later (CONC-3), the candidate never does.
    failing = "listener-fail@2000:c0=3,send-back-fail@2000:c0=6"
    args = ("--impl", "broken_consume:CANDIDATE", "--steps", "1500", "--schedule", failing)
    code, out, _ = invoke(*args, "--consumers", "1")
    assert 1 == code
    assert "(consume_concurrently) against the reference: DIVERGED" in out
    assert "replay: python -m pullspec.conformance.machines.simulation" in out


def test_simulate_impl_refuses_a_candidate_without_parts_or_with_history(tmp_path: Path) -> None:
    code, _, err = invoke("--impl", "pullspec.spec.profiles:ALL_PROFILES", "--steps", "10")
    assert 2 == code and "provides none of message_store" in err
    path = str(tmp_path / "h.jsonl")
    assert 2 == invoke("--impl", "fast", "--history", path, "--steps", "10")[0]
    assert 2 == invoke("--impl", "no.such.module:x", "--steps", "10")[0]


def test_the_quiet_tail_starts_a_consumer_when_none_is_left_and_drains_the_group() -> None:
    # The only consumer leaves at 5 s; messages keep coming until the tail stops the producer.
    config = SimConfig(seed=3, consumers=1, schedule=parse_schedule("leave@5000:c0"))
    result, sim = run(config, 1500)
    quiet = [e for e in sim.history.events if isinstance(e, h.Quiet)]
    assert [("c1#1",)] == [q.started for q in quiet]
    assert ({}, True, 0) == (
        result.check.violations,
        result.check.liveness["settled"],
        result.check.stats["pending"],
    )
    # Without a tail nothing drains the group, and liveness is not judged.
    untailed, _ = run(attrs.evolve(config, quiet_tail_ms=0), 1500)
    assert (False, True) == (
        untailed.check.liveness["judged"],
        untailed.check.stats["pending"] > 0,
    )
