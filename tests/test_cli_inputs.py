"""Bad input never ends in a traceback: one line on stderr and exit 2; exit codes that mean
something (1 failed, 2 nothing checked, 130 interrupted); the console script without its extra.
"""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from pullspec.conformance.cli import campaign as cli_campaign
from pullspec.conformance.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MISSING = "/nonexistent/pullspec-test"


def _files(tmp: Path) -> dict[str, Path]:
    """Vector files that are not vectors, and a few other things a user may pass by mistake."""
    made = {
        "list": b"[1,2,3]\n",
        "latin1": b'{"area": "store", "steps": [], "id": "caf\xe9"}\n',
        "notjson": b'{"area": "store",\n',
        "steps-text": b'{"area": "store", "steps": "put"}\n',
        "step-list": b'{"area": "store", "steps": [[1]]}\n',
        "op-number": b'{"area": "store", "steps": [{"op": 3}]}\n',
        "no-area": b'{"steps": []}\n',
        "bad-area": b'{"area": "nosuch", "steps": []}\n',
        "args-list": b'{"area": "store", "steps": [{"op": "put", "args": [1]}]}\n',
    }
    out = {}
    for name, data in made.items():
        path = tmp / f"{name}.jsonl"
        path.write_bytes(data)
        out[name] = path
    (tmp / "empty").mkdir()
    (tmp / "plain.txt").write_text("not a folder\n")
    out["empty"], out["file"] = tmp / "empty", tmp / "plain.txt"
    return out


#: Every bad input: the arguments (with {name} for a file of _files) and a phrase of the line.
BAD_INPUTS: list[tuple[str, ...]] = [
    ("conform --examples 0", "0 is not in the range x>=1"),
    ("conform --steps 0", "0 is not in the range x>=1"),
    ("conform --area nosuch", "unknown area 'nosuch'"),
    ("conform --area ,", "no area given"),
    ("conform --impl nosuch.module:f", "cannot import nosuch.module"),
    ("conform --impl nosuch", "expected reference, fast"),
    ("conform --impl cmd:", "cmd: needs a command"),
    (f"conform --impl cmd:{MISSING}/adapter", "cannot find the program"),
    ("conform --timeout 0", "not in the range x>0"),
    (f"conform --vectors {MISSING}", "does not exist"),
    ("conform --replay-dir {file}", "is a file"),
    ("conform --vectors {list}", "a case must be a JSON object, not a list"),
    (f"simulate --history {MISSING}/d/h.jsonl", "does not exist"),
    ("simulate --history {empty}", "is a directory"),
    ("simulate --steps 0", "0 is not in the range x>=1"),
    ("simulate --faults nope", "nope"),
    ("simulate --schedule boom@1", "boom"),
    ("verify --module spec.nosuch", "no rule module 'spec.nosuch'"),
    ("verify --per-condition-timeout 0", "not in the range x>0"),
    ("vectors check {list}", "a case must be a JSON object, not a list"),
    ("vectors check {latin1}", "not UTF-8"),
    ("vectors check {notjson}", "not JSON"),
    ("vectors check {steps-text}", "steps must be a list, not a string"),
    ("vectors check {step-list}", "a step must be a JSON object, not a list"),
    ("vectors check {op-number}", "op must be a string, not a number"),
    ("vectors check {no-area}", "area is missing"),
    ("vectors check {bad-area}", "unknown area 'nosuch'"),
    ("vectors check {args-list}", "args must be an object, not a list"),
    ("vectors check {empty}", "holds no .jsonl vector files"),
    (f"vectors check {MISSING}", "does not exist"),
    ("vectors check {empty} --area nosuch", "unknown area 'nosuch'"),
    ("vectors check {empty} --timeout -1", "not in the range x>0"),
    ("vectors check {empty} --profile 5.0", "'5.0' is not one of"),
    ("vectors check {list} --impl nosuch", "a case must be a JSON object"),
    ("vectors export {file}", "is a file"),
    ("vectors export {empty} --random -3", "-3 is not in the range x>=0"),
    ("vectors nosuch", "No such command 'nosuch'"),
    ("rules --area FOO", "unknown area 'FOO'"),
    ("rules --area ,", "unknown area ''"),
    ("rules --profile 5", "'5' is not one of"),
    ("mutants --mutant nosuch", "no such mutant"),
    ("mutants --examples 0", "0 is not in the range x>=1"),
    ("demo --profile 4.8", "'4.8' is not one of"),
    ("campaign --master garbage://x", "is not a Spark master URL"),
    ("campaign --master spark://host", "is not a Spark master URL"),
    (f"campaign --scratch {MISSING}", "does not exist"),
    ("campaign --scratch {file}", "is a file"),
    ("campaign --seeds 0", "0 is not in the range x>=1"),
    ("campaign --area nosuch", "unknown area 'nosuch'"),
    ("campaign --conf spark.ui.enabled", "expected KEY=VALUE"),
    ("campaign --out {file}", "is a file"),
    ("campaign --report-dir {file}", "is a file"),
    ("campaign --impl nosuch.module:f", "cannot import nosuch.module"),
    ("campaign --timeout 0", "not in the range x>0"),
    (f"campaign --python {MISSING}/python3", "is not a program on this machine"),
    ("bench-campaign --cores 0", "expected core counts like 1,2"),
    ("bench-campaign --cores x", "expected core counts like 1,2"),
    ("bench-campaign --scratch {file}", "is a file"),
    ("bench-campaign --repeat 0", "0 is not in the range x>=1"),
    ("nosuch", "No such command 'nosuch'"),
]


@pytest.mark.parametrize(("command", "phrase"), BAD_INPUTS, ids=[c for c, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(command: str, phrase: str, tmp_path: Path) -> None:
    files = _files(tmp_path)
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in command.split()]
    result = CliRunner().invoke(main, argv)
    assert (2, "") == (result.exit_code, result.stdout), result.output
    lines = result.stderr.splitlines()
    assert 1 == len(lines), result.stderr
    assert lines[0].startswith("error: ") and phrase in lines[0], lines[0]
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def _pullspec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("pullspec")), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_console_script_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "v.jsonl").write_bytes(b"[1,2,3]\n")
    run = _pullspec("vectors", "check", "v.jsonl", cwd=tmp_path)
    assert (2, "") == (run.returncode, run.stdout)
    assert "error: v.jsonl:1: a case must be a JSON object, not a list\n" == run.stderr


def test_without_the_cli_extra_the_script_says_what_to_install(tmp_path: Path) -> None:
    """`import click` failing as it does where the extra is not installed."""
    code = (
        "import sys; sys.modules['click'] = None; sys.argv = ['pullspec', 'rules'];"
        "from pullspec.conformance.entry import run; run()"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert (2, "") == (run.returncode, run.stdout)
    assert (
        "error: the pullspec command needs click, from the cli extra: "
        "pip install 'rocketmq-pullspec[cli]'\n"
    ) == run.stderr


# --- nothing checked ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--area", "lock_manager"], 2),
        (["--area", "lock_manager", "--allow-unsupported"], 0),
        (["--area", "store"], 0),
    ],
)
def test_vectors_check_that_checked_nothing_exits_2(argv: list[str], code: int) -> None:
    folder = SHARED / "vectors" / "rocketmq-4.9.7"
    result = CliRunner().invoke(main, ["vectors", "check", str(folder), "--impl", "fast", *argv])
    assert code == result.exit_code, result.output
    if argv == ["--area", "lock_manager"]:
        assert "error: fast supports none of the 100 cases: nothing was checked\n" == result.stderr


def test_an_area_filter_that_matches_no_case_exits_2() -> None:
    folder = ROOT / "vectors" / "reference-4.9"
    result = CliRunner().invoke(main, ["vectors", "check", str(folder), "--area", "store"])
    assert 2 == result.exit_code
    assert result.stderr.startswith("error: no vector case of area store in ")


def test_conform_that_checked_nothing_exits_2_unless_allowed() -> None:
    argv = ["conform", "--impl", "fast", "--area", "lock_manager", "--examples", "2", "--quiet"]
    refused = CliRunner().invoke(main, argv)
    allowed = CliRunner().invoke(main, [*argv, "--allow-unsupported"])
    assert (2, 0) == (refused.exit_code, allowed.exit_code)
    assert "error: fast supports none of the areas lock_manager: nothing was checked\n" == (
        refused.stderr
    )


# --- vectors check: store directories and what implementers read ----------------------------


def test_vectors_check_accepts_a_store_directory() -> None:
    result = CliRunner().invoke(
        main, ["vectors", "check", str(SHARED / "stores" / "basic"), "--impl", "fast", "--json"]
    )
    assert 0 == result.exit_code, result.output
    summary = json.loads(result.stdout)["summary"]
    assert (59, 59) == (summary["total"], summary["passed"])  # answers.jsonl holds 59 cases


def test_a_divergence_names_the_1_based_step_its_arguments_and_rules(tmp_path: Path) -> None:
    case = {
        "id": "pq-two-puts",
        "area": "process_queue",
        "config": {"clockStart": 0, "lockMaxLiveTimeMs": 30000, "pullMaxIdleTimeMs": 120000},
        "steps": [
            {"op": "put_messages", "args": {"msgs": [[0, 10]]}, "expect": {"result": True}},
            {"op": "put_messages", "args": {"msgs": [[1, 10]]}, "expect": {"result": True}},
        ],
    }
    path = tmp_path / "case.jsonl"
    path.write_text(json.dumps(case) + "\n")
    result = CliRunner().invoke(main, ["vectors", "check", str(path), "--json"])
    assert 1 == result.exit_code, result.output
    [diverged] = json.loads(result.stdout)["cases"]
    # The reference answers false to the second put (a batch while not consuming: PQ-6's
    # dispatchToConsume is true only when the tree was empty and not consuming before).
    assert {
        "step": 2,
        "op": "put_messages",
        "args": {"msgs": [[1, 10]]},
        "field": "result",
        "expected": True,
        "actual": False,
    } == {k: diverged[k] for k in ("step", "op", "args", "field", "expected", "actual")}
    assert "PQ-6" in diverged["rules"]


def test_a_crashed_adapter_keeps_the_last_whole_lines_of_its_stderr() -> None:
    from pullspec.conformance.remote.channel import stderr_tail

    lines = [f"line {i}: " + "x" * 300 for i in range(20)]
    text = ("\n".join(lines) + "\n").encode()
    tail = stderr_tail(text, lines=12, chars=1000)
    assert lines[-3:] == tail.splitlines()  # 3 lines of 309 characters fit in 1000, 4 do not
    assert "only line" == stderr_tail(b"only line\n")
    assert "…" + "y" * 10 == stderr_tail(b"y" * 50, chars=10)


# --- interrupts -------------------------------------------------------------------------------


def _interrupted(argv: list[str], tmp_path: Path) -> tuple[int, str]:
    """Start `pullspec argv`, wait for its first line on stderr, send SIGINT; (status, stderr)."""
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("pullspec")), *argv],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        assert sel.select(deadline - time.monotonic()), "no progress line"
        first = proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    proc.wait(timeout=60)
    proc.stderr.close()
    return proc.returncode, (first + rest).decode()


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--steps", "100000000", "--progress-every", "200"],
        ["conform", "--examples", "100000"],
    ],
    ids=["simulate", "conform"],
)
def test_sigint_exits_130_with_one_line(argv: list[str], tmp_path: Path) -> None:
    code, stderr = _interrupted(argv, tmp_path)
    assert 130 == code, stderr
    assert "Traceback" not in stderr
    assert "pullspec: interrupted" == stderr.splitlines()[-1]


# --- campaign --out ---------------------------------------------------------------------------


def test_campaign_refuses_a_folder_it_did_not_write_and_keeps_its_files(tmp_path: Path) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "ideas.md").write_text("keep me\n")
    result = CliRunner().invoke(main, ["campaign", "--out", str(out), "--seeds", "1"])
    assert 2 == result.exit_code
    assert [f"error: --out {out} holds files no campaign wrote (ideas.md); choose an empty or "
            "new folder, or pass --overwrite to replace it"] == result.stderr.splitlines()  # fmt: skip
    assert ["ideas.md"] == [p.name for p in out.iterdir()]
    assert "keep me\n" == (out / "ideas.md").read_text()


@pytest.mark.parametrize(
    ("names", "foreign"),
    [
        ([], []),
        (["area=store", "_SUCCESS", "._SUCCESS.crc", "_report"], []),
        (["area=store", "notes.txt", ".hidden"], [".hidden", "notes.txt"]),
    ],
)
def test_what_a_campaign_writes_in_out(names: list[str], foreign: list[str]) -> None:
    assert foreign == cli_campaign.foreign_entries(names)


def test_a_failed_spark_job_is_told_by_its_worker_s_exception_line() -> None:
    failure = RuntimeError(
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "/x/serializers.py", line 483, in loads\n'
        "ModuleNotFoundError: No module named 'pullspec'\n\n"
        "\tat org.apache.spark.api.python.BasePythonRunner...\n"
    )
    assert "ModuleNotFoundError: No module named 'pullspec'" == cli_campaign.job_failure(failure)
    assert "Connection refused" == cli_campaign.job_failure(OSError("Connection refused\nmore"))


def test_out_refusal() -> None:
    refuse = cli_campaign.out_refusal
    assert refuse("o", False, False, [], False) is None
    assert refuse("o", True, True, ["area=store", "_SUCCESS"], False) is None
    assert refuse("o", True, True, ["a", "b", "c", "d"], True) is None  # --overwrite
    assert "holds files no campaign wrote (a, b, c …)" in str(
        refuse("o", True, True, ["d", "c", "b", "a"], False)
    )
    assert "is a file" in str(refuse("o", True, False, [], True))  # even with --overwrite


def test_the_progress_lines_off_a_terminal() -> None:
    from io import StringIO

    from pullspec.conformance.cli.common import Progress

    now = [0.0]
    stream = StringIO()
    with Progress("check", 10, "cases", stream=stream, every=5.0, clock=lambda: now[0]) as p:
        p.start()
        p.advance(3)  # within 5 s of the first line: nothing
        now[0] = 6.0
        p.update(4, "store")
        now[0] = 7.0
        p.advance()
    assert ["check: 0/10 cases (0%), 0 s", "check: 4/10 cases (40%), store, 6 s"] == (
        stream.getvalue().splitlines()
    )
    quiet = StringIO()
    with Progress("check", 10, "cases", stream=quiet, quiet=True) as p:
        p.advance(10)
    assert "" == quiet.getvalue()


def test_conform_replays_a_store_directory_given_with_vectors() -> None:
    store = SHARED / "stores" / "basic"
    argv = ["conform", "--impl", "fast", "--area", "store", "--examples", "1", "--steps", "2"]
    result = CliRunner().invoke(main, [*argv, "--vectors", str(store), "--quiet", "--json"])
    assert 0 == result.exit_code, result.output
    exported = CliRunner().invoke(main, [*argv, "--quiet", "--json"])
    passed = [
        json.loads(r.stdout)["interfaces"]["store"]["vectors"]["PASS"] for r in (result, exported)
    ]
    assert 59 == passed[0] - passed[1]  # the broker's 59 answers, on top of the exported cases


def test_vectors_check_times_out_an_adapter_that_never_answers(tmp_path: Path) -> None:
    config = {"clockStart": 0, "lockMaxLiveTimeMs": 60000, "topic": "T", "brokerName": "b"}
    lock = {"op": "try_lock_batch", "args": {"group": "G1", "clientId": "c1", "mqs": [0]}}
    case = {"id": "silent", "area": "lock_manager", "config": config, "steps": [lock]}
    path = tmp_path / "case.jsonl"
    path.write_text(json.dumps(case) + "\n")
    impl = "cmd:sh -c 'cat > /dev/null'"  # reads every request, answers none
    result = CliRunner().invoke(
        main, ["vectors", "check", str(path), "--impl", impl, "--timeout", "0.5", "--json"]
    )
    assert 1 == result.exit_code, result.output
    [silent] = json.loads(result.stdout)["cases"]
    assert "TIMEOUT" == silent["verdict"]
    assert "no reply within 0.5 s" in silent["detail"]


def test_a_case_missing_a_config_field_is_an_input_error(tmp_path: Path) -> None:
    case = {"id": "short", "area": "lock_manager", "config": {"clockStart": 0}, "steps": []}
    path = tmp_path / "case.jsonl"
    path.write_text(json.dumps(case) + "\n")
    result = CliRunner().invoke(main, ["vectors", "check", str(path)])
    assert (2, "error: case short: lockMaxLiveTimeMs is missing from its config\n") == (
        result.exit_code,
        result.stderr,
    )
