"""The analyze and testgen commands as a user runs them: outputs, resumption, bad input."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scalecheck.cli import main
from scalecheck.common.errors import UserError
from scalecheck.common.output import stdout_reader_gone
from scalecheck.formats.testfile import read_tests

DATA = Path(__file__).parent / "data"


def scalecheck(*args):
    return subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_every_command_has_help():
    for command in ("analyze", "testgen", "run", "report", "pipeline", "bench"):
        result = scalecheck(command, "--help")
        assert result.returncode == 0, result.stderr
        assert "usage: scalecheck" in result.stdout


def test_counter_model_end_to_end(tmp_path):
    assert main(["analyze", "--model", "counter", "--out", str(tmp_path), "--jobs", "1"]) == 0
    summary = json.loads((tmp_path / "analysis" / "summary.json").read_text())
    assert summary["totals"]["pairs"] == 6
    assert summary["totals"]["unknown_paths"] == 0
    assert main(["testgen", str(tmp_path), "--jobs", "1"]) == 0
    header, tests = read_tests(tmp_path / "tests.jsonl")
    assert header["model"] == "counter"
    assert len(tests) == summary["totals"]["commutative_paths"]
    assert {tuple(test["pair"]) for test in tests} >= {("dec", "iszero"), ("iszero", "iszero")}
    dec_iszero = [t for t in tests if t["pair"] == ["dec", "iszero"]]
    assert all(t["setup"]["count"] != 1 for t in dec_iszero)


def test_analysis_resumes_and_skips_finished_pairs(tmp_path):
    assert main(["analyze", "--model", "counter", "--out", str(tmp_path), "--jobs", "1"]) == 0
    pair = tmp_path / "analysis" / "pairs" / "inc-dec.json"
    pair.unlink()
    finished = tmp_path / "analysis" / "pairs" / "dec-dec.json"
    before = finished.stat().st_mtime_ns
    assert main(["analyze", "--model", "counter", "--out", str(tmp_path), "--jobs", "1"]) == 0
    assert pair.exists()
    assert finished.stat().st_mtime_ns == before


def test_the_analysis_takes_its_largest_pairs_first(tmp_path):
    """A pair's cost is foretold by its operations' paths alone (stat 2, close 4, fstat 6
    in the POSIX model): the largest first, so that no worker starts a long pair while
    the others end, and the estimate has sizes to go by."""
    ops = ["--ops", "stat,fstat,close", "--jobs", "1"]
    assert main(["analyze", "--model", "posix", "--out", str(tmp_path), *ops]) == 0
    timings = json.loads((tmp_path / "analysis" / "timings.json").read_text())
    assert list(timings) == [  # in the order they ended, on one worker
        "fstat-fstat",
        "fstat-close",
        "close-close",
        "stat-fstat",
        "stat-close",
        "stat-stat",
    ]


def test_a_stopped_analysis_keeps_its_finished_pairs(tmp_path):
    """SIGTERM (a CI system cancelling the job) stops like Ctrl-C: exit 130, one line,
    finished pairs kept for the rerun."""
    pairs = tmp_path / "analysis" / "pairs"
    command = [
        sys.executable,
        "-m",
        "scalecheck.cli",
        "analyze",
        "--model",
        "posix",
        "--out",
        str(tmp_path),
        "--ops",
        "open,link,unlink,rename,stat,close",
        "--jobs",
        "1",
    ]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (pairs.exists() and any(pairs.glob("*.json"))) and time.monotonic() < deadline:
        time.sleep(0.2)
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 130, err
    # The progress bar's last state, then one line.
    assert (
        err.strip().splitlines()[-1].startswith("scalecheck: interrupted; finished work is saved")
    )
    kept = sorted(pairs.glob("*.json"))
    assert 0 < len(kept) < 21
    assert all(json.loads(path.read_text()) for path in kept)


def test_a_destructors_error_after_a_stop_is_not_printed_after_the_last_line():
    """An interrupt that lands in a Z3 object's constructor leaves an object whose __del__
    fails later: after a stop request that error is dropped (the command's last line stays
    the one that says it stopped); before one, it is reported as Python does."""
    code = """
import sys
from scalecheck import cli
from scalecheck.common.errors import stop_requested
sys.unraisablehook = cli._unraisable
class HalfBuilt:
    def __del__(self):
        raise AttributeError("no ctx")
HalfBuilt()
stop_requested.set()
HalfBuilt()
print("last line", file=sys.stderr)
"""
    job = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert job.stderr.count("AttributeError: no ctx") == 1, job.stderr
    assert job.stderr.strip().splitlines()[-1] == "last line"


def test_a_reader_that_leaves_early_ends_the_command_quietly():
    """`scalecheck bench list | head`: when stdout's reader is gone the command exits 141
    (as a program that SIGPIPE ended) without a traceback."""
    command = [sys.executable, "-m", "scalecheck.cli", "bench", "list"]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job.stdout.close()  # before the interpreter has even started: every write fails
    err = job.stderr.read()
    assert job.wait(timeout=120) == 141, err
    assert err == ""


def test_whether_stdouts_reader_left_is_asked_of_the_kernel(monkeypatch):
    read_end, write_end = os.pipe()
    stdout = os.fdopen(write_end, "w")
    monkeypatch.setattr(sys, "stdout", stdout)
    assert stdout_reader_gone() is False  # its reader is there: another pipe broke
    os.close(read_end)
    assert stdout_reader_gone() is True
    stdout.write("x" * 100_000)  # now /dev/null: no BrokenPipeError
    stdout.close()


def test_user_model_file(tmp_path):
    model = tmp_path / "flag.py"
    model.write_text(
        "from scalecheck.model import Bool, Model, ok, operation\n"
        "class Flag(Model):\n"
        "    def __init__(self):\n"
        "        self.up = Bool().any()\n"
        "    @operation()\n"
        "    def set(self):\n"
        "        self.up = True\n"
        "        return ok()\n"
        "    @operation()\n"
        "    def get(self):\n"
        "        return ok(self.up)\n"
    )
    assert (
        main(["analyze", "--model", str(model), "--out", str(tmp_path / "out"), "--jobs", "1"]) == 0
    )
    summary = json.loads((tmp_path / "out" / "analysis" / "summary.json").read_text())
    by_pair = {tuple(row["pair"]): row for row in summary["pairs"]}
    assert (
        by_pair[("set", "get")]["noncommutative_paths"] == 1
    )  # get sees the flag change when it was down
    assert by_pair[("set", "set")]["noncommutative_paths"] == 0


def test_model_with_syntax_error_gives_one_line_error(tmp_path):
    model = tmp_path / "broken.py"
    model.write_text("class Broken(Model:\n    pass\n")
    result = scalecheck("analyze", "--model", model, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "syntax error at line 1" in result.stderr


def test_unknown_operation_gives_one_line_error(tmp_path):
    result = scalecheck(
        "analyze", "--model", "counter", "--ops", "inc,frobnicate", "--out", tmp_path
    )
    assert result.returncode == 2
    assert "unknown operation 'frobnicate'" in result.stderr and "inc, dec, iszero" in result.stderr
    assert result.stderr.strip().count("\n") == 0


def test_unknown_model_gives_one_line_error(tmp_path):
    result = scalecheck("analyze", "--model", "nosuchmodel", "--out", tmp_path)
    assert result.returncode == 2 and "unknown model" in result.stderr


def test_unwritable_output_directory_gives_one_line_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = scalecheck("analyze", "--model", "counter", "--out", blocker / "out")
    assert result.returncode == 2
    assert "cannot write output directory" in result.stderr
    assert result.stderr.strip().count("\n") == 0


def test_testgen_without_analysis_gives_one_line_error(tmp_path):
    result = scalecheck("testgen", tmp_path)
    assert result.returncode == 2 and "holds no analysis" in result.stderr


def test_test_file_round_trip_and_version_check(tmp_path):
    assert main(["analyze", "--model", "rename", "--out", str(tmp_path), "--jobs", "1"]) == 0
    assert main(["testgen", str(tmp_path), "--jobs", "1"]) == 0
    header, tests = read_tests(tmp_path / "tests.jsonl")
    assert header["format"] == "scalecheck-tests" and header["version"] == 1
    ids = [test["id"] for test in tests]
    assert len(ids) == len(set(ids))
    lines = (tmp_path / "tests.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines[1:]] == tests
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({**header, "version": 99}) + "\n" + "\n".join(lines[1:]) + "\n")
    with pytest.raises(Exception, match="version 99"):
        read_tests(newer)


def test_testgen_refuses_an_analysis_of_an_edited_imported_module(tmp_path):
    """The fingerprint covers the modules a user's model imports from beside it."""
    (tmp_path / "flag_state.py").write_text("from scalecheck.model import Bool\nFLAG = Bool()\n")
    model = tmp_path / "flag.py"
    model.write_text(
        "from flag_state import FLAG\n"
        "from scalecheck.model import Model, ok, operation\n"
        "class Flag(Model):\n"
        "    def __init__(self):\n"
        "        self.up = FLAG.any()\n"
        "    @operation()\n"
        "    def set(self):\n"
        "        self.up = True\n"
        "        return ok()\n"
    )
    out = tmp_path / "out"
    assert scalecheck("analyze", "--model", model, "--out", out, "--jobs", "1").returncode == 0
    (tmp_path / "flag_state.py").write_text(
        "from scalecheck.model import Bool\nFLAG = Bool()  # edited\n"
    )
    result = scalecheck("testgen", out, "--jobs", "1")
    assert result.returncode == 2
    assert "another version of model" in result.stderr
    assert result.stderr.strip().count("\n") == 0
    # A new analysis of the edited model is accepted again.
    assert scalecheck("analyze", "--model", model, "--out", out, "--jobs", "1").returncode == 0
    assert scalecheck("testgen", out, "--jobs", "1").returncode == 0


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda test: test.pop("expect"), '"expect" must give'),
        (lambda test: test["calls"][1].pop("args"), 'has no "args"'),
        (lambda test: test.update(pair=["close", "open"]), "does not match the calls"),
    ],
)
def test_a_test_file_with_a_test_that_says_too_little_is_refused(tmp_path, damage, said):
    """Such a test could only be counted as a mismatch: the report, the tracer and
    refinement refuse the file when they read it, in one line (exit 2)."""
    run = tmp_path / "run"
    shutil.copytree(DATA / "report_fake_run_a", run)
    lines = (run / "tests.jsonl").read_text().splitlines()
    test = json.loads(lines[3])
    damage(test)
    lines[3] = json.dumps(test)
    (run / "tests.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=f"tests.jsonl:4: .*{said}"):
        read_tests(run / "tests.jsonl")
    result = scalecheck("report", run)
    assert result.returncode == 2 and said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


RUNAWAY_MODEL = """
from scalecheck.model import Int, Model, ok, operation


class Runaway(Model):
    def __init__(self):
        self.level = Int().any()

    @operation(steps=Int())
    def drain(self, steps):
        while steps > 0:  # each turn both ways feasible: the path never ends
            steps = steps - 1
        return ok()

    @operation()
    def get(self):
        return ok(self.level)
"""


@pytest.mark.parametrize(
    ("bound", "said"),
    [
        (["--max-branches", "40"], "more than 40 branches"),
        (["--pair-timeout", "1"], "1 CPU seconds"),
    ],
)
def test_a_symbolic_loop_that_never_ends_is_a_model_error_of_its_pairs(tmp_path, bound, said):
    """The model-code time limit pauses for solver queries, and every turn of a loop on a
    symbolic condition is one: the exploration's own bounds end the pair instead."""
    model = tmp_path / "runaway.py"
    model.write_text(RUNAWAY_MODEL)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", "analyze", "--model", model, "--out", out, *bound],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    rows = {tuple(row["pair"]): row for row in summary["pairs"]}
    assert rows["drain", "drain"]["error_paths"] == rows["drain", "get"]["error_paths"] == 1
    assert rows["get", "get"]["error_paths"] == 0 and rows["get", "get"]["commutative_paths"] >= 1
    errors = [error["error"] for error in summary["model_errors"]]
    assert len(errors) == 2 and all(said in error for error in errors), errors
    assert "ExplorationBound: " in result.stderr
