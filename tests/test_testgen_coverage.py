"""What the tests claim: every equality a commutative path leaves open between the two
calls is tested both ways, and one model gives the same analysis and tests on any run."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from scalecheck.analyze.analyze import analyze_model
from scalecheck.formats.testfile import read_tests
from scalecheck.testgen.testgen import generate_tests

# Bins that hold up to two items: two adds into one bin holding none both succeed and
# commute, so the path where both succeed holds whether or not A and B name one bin; the
# equality sits inside the if-then-else B's read of the bin A wrote makes.
BINS_MODEL = """
from scalecheck.model import Int, Map, Model, Struct, Uninterpreted, error, ok, operation

Bin = Uninterpreted("Bin")
Contents = Struct(items=Int(0, 2))


class Bins(Model):
    def __init__(self):
        self.bins = Map(Bin, Contents).any()

    @operation(bin=Bin)
    def add(self, bin):
        if self.bins[bin].items == 2:
            return error("EAGAIN")
        self.bins[bin].items += 1
        return ok()

    @operation(bin=Bin)
    def count(self, bin):
        return ok(self.bins[bin].items)
"""


def _bins_model(tmp_path):
    model = tmp_path / "bins.py"
    model.write_text(BINS_MODEL)
    return str(model)


def _same_bin(test) -> bool:
    return test["calls"][0]["args"]["bin"] == test["calls"][1]["args"]["bin"]


def test_an_equality_left_open_inside_an_if_then_else_is_tested_both_ways(tmp_path):
    """One class per path (--cap 1): the path's one test falls on one side of
    ``A.bin == B.bin``; the open equality gets a test on the other."""
    out = tmp_path / "out"
    analyze_model(_bins_model(tmp_path), ["add"], out, jobs=1, quiet=True)
    summary = generate_tests(out, cap=1, value_cap=1, jobs=1, quiet=True)
    _, tests = read_tests(out / "tests.jsonl")
    both_succeed = [
        t
        for t in tests
        if t["expect"]["ab"] == [{"ret": 0}, {"ret": 0}] and t["pair"] == ["add"] * 2
    ]
    paths = {t["path"] for t in both_succeed}
    for path in paths:
        on_path = [t for t in both_succeed if t["path"] == path]
        assert {_same_bin(t) for t in on_path} == {True, False}, on_path
    assert any("covers" in t and t["covers"] == "A.bin == B.bin" for t in tests)
    counts = summary["totals"]["open_equalities"]
    assert counts["found"] >= len(paths) >= 1
    assert counts["both_ways"] == counts["found"] - counts["infeasible_one_way"]
    assert counts["not_varied"] == 0
    assert summary["pairs"][0]["open_equalities"] == counts


def test_one_model_gives_the_same_analysis_and_tests_on_any_run(tmp_path):
    """--jobs 1, --jobs 2, and a run that resumed the pairs an interrupted one left, each
    a command of its own (its own string hashing): byte for byte the same pair files,
    summary and tests."""
    model = _bins_model(tmp_path)
    runs = {name: tmp_path / name for name in ("one", "two", "resumed")}
    _analyze(model, runs["one"], jobs=1, hash_seed=1)
    _analyze(model, runs["two"], jobs=2, hash_seed=2)
    # What an interruption leaves: some pairs done, the rest to do on the rerun.
    shutil.copytree(runs["one"], runs["resumed"])
    for pair in ("add-add", "count-count"):
        (runs["resumed"] / "analysis" / "pairs" / f"{pair}.json").unlink()
    _analyze(model, runs["resumed"], jobs=1, hash_seed=3)
    for out in runs.values():
        generate_tests(out, jobs=2, quiet=True)
    reference = _files(runs.pop("one"))
    assert "analysis/pairs/add-count.json" in reference and "tests.jsonl" in reference
    for name, out in runs.items():
        assert _files(out) == reference, name


def _analyze(model, out, jobs: int, hash_seed: int) -> None:
    command = [sys.executable, "-m", "scalecheck.cli", "analyze", "--model", model]
    result = subprocess.run(
        [*command, "--out", out, "--jobs", str(jobs)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": str(hash_seed)},
    )
    assert result.returncode == 0, result.stderr


def _files(out) -> dict:
    """The run's analysis and tests, byte for byte (times aside: timings.json)."""
    files = {
        str(path.relative_to(out)): path.read_bytes()
        for path in [*(out / "analysis").rglob("*.json"), out / "tests.jsonl"]
        if path.name != "timings.json"
    }
    assert json.loads(files["analysis/meta.json"])["ops"] == ["add", "count"]
    return files


def test_the_report_shows_the_open_equalities_the_tests_cover(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "data" / "report_fake_run_a", run)
    counts = {"found": 10, "both_ways": 7, "infeasible_one_way": 3, "not_varied": 0}
    (run / "testgen.json").write_text(json.dumps({"totals": {"open_equalities": counts}}))
    result = subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", "report", run],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    line = "7 tested both ways (100.0% of the 7 feasible both ways), 3 infeasible one way"
    assert line in result.stdout
    assert line in (run / "report" / "bottlenecks.txt").read_text()
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["open_equalities"] == counts
