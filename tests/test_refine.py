"""The refine query (refine.py): a left-path result's choice fixed on its path.

Real analyses and Z3; the run's results are written by hand here (a fake of the tracer's
file, named as such), so that no implementation is needed: tests/test_trace_user.py
refines a real run of a real library."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import z3

from scalecheck.common.storage import read_json
from scalecheck.formats.analysisfile import pair_file
from scalecheck.interfaces.loading import load_model
from scalecheck.testgen import refine
from test_trace_user import ANY_ID_MODEL  # any free id: alloc's id is the implementation's choice

CHOICE = "A.slots.free#0"


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", *args], capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def tests_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("anyid")
    (root / "any_id.py").write_text(ANY_ID_MODEL)
    out = root / "tests"
    for stage in (
        ["analyze", "--model", str(root / "any_id.py"), "--out", str(out), "--jobs", "1"],
        ["testgen", str(out)],
    ):
        done = cli(*stage)
        assert done.returncode == 0, done.stderr
    return out


def absent_lookup_path(tests_dir: Path) -> dict:
    """alloc || lookup of an absent id: the path assumes alloc takes another id."""
    paths = read_json(pair_file(tests_dir, "alloc", "lookup"))["paths"]
    return next(
        p
        for p in paths
        if p["commutes"] and p["observations"]["results"]["AB"][1] == {"errno": "ENOENT"}
    )


def test_the_query_puts_the_fixed_choice_on_the_path(tests_dir):
    path = refine.RefinablePath(absent_lookup_path(tests_dir), z3.Context())
    answer, values = path.solve_fixed({CHOICE: 0})
    assert answer == z3.sat and values is not None
    model_cls = load_model(str(tests_dir.parent / "any_id.py"))
    test = path.test(model_cls, ("alloc", "lookup"), values)
    # lookup's argument is another id than the one fixed, and alloc taking 0 is on the path.
    assert test["calls"][1]["args"]["id"] != 0
    assert [{"ret": 0}, {"errno": "ENOENT"}] in [o["ab"] for o in test["outcomes"]]
    assert [{"ret": 0}, "*"] not in [o["ab"] for o in test["left_path"]]
    # No id beyond the model's free ids (0..4) can be alloc's on this path, whatever the state.
    assert path.solve_fixed({CHOICE: 5}) == (z3.unsat, None)


def fake_results(tests_dir: Path, records: dict[str, dict]) -> None:
    """A results file as `scalecheck run` writes it, for the given (id -> results)."""
    lines = [{"format": "scalecheck-results", "version": 1, "library": "fake"}]
    lines += [
        {
            "id": test_id,
            "status": "left_path",
            "conflict_free": True,
            "conflicts": [],
            "results": {**results, "expected_order": "ab"},
        }
        for test_id, results in records.items()
    ]
    (tests_dir / "trace").mkdir(exist_ok=True)
    (tests_dir / "trace" / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_refine_appends_tests_counts_what_cannot_be_refined_and_refines_once(tests_dir, tmp_path):
    tests = [json.loads(line) for line in (tests_dir / "tests.jsonl").read_text().splitlines()]
    absent = absent_lookup_path(tests_dir)["path"]
    first, second = [
        t["id"] for t in tests[1:] if t["pair"] == ["alloc", "lookup"] and t["path"] == absent
    ][:2]
    fake_results(
        tests_dir,
        {
            first: {"a": {"ret": 0}, "b": {"ret": 1}},
            second: {"a": {"ret": 7}, "b": {"errno": "ENOENT"}},  # no such id on the path
        },
    )
    done = cli("testgen", str(tests_dir), "--refine-left-path", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["left_path"] == 2 and summary["refined"] == 1
    assert [item["test"] for item in summary["not_refinable"]] == [second]
    after = [json.loads(line) for line in (tests_dir / "tests.jsonl").read_text().splitlines()]
    assert after[: len(tests)] == tests  # the old tests stay, byte for byte
    (new,) = after[len(tests) :]
    assert new["id"] == f"alloc-lookup/p{absent}/r1"
    assert new["refines"] == {"tests": [first], "choice": {CHOICE: 0}}
    assert summary["new_tests"] == [{"id": new["id"], **new["refines"]}]
    assert read_json(tests_dir / "testgen.json")["refined_left_path"]["new_tests"] == 1
    # A result refined before is not refined again.
    again = json.loads(cli("testgen", str(tests_dir), "--refine-left-path", "--json").stdout)
    assert again["already_refined"] == 1 and again["new_tests"] == []
    # testgen again with the same analysis and caps: the refined test stays, and so do
    # its results (the file is what it was).
    done = cli("testgen", str(tests_dir))
    assert done.returncode == 0, done.stderr
    assert (tests_dir / "tests.jsonl").read_text().splitlines() == [json.dumps(t) for t in after]
    assert cli("testgen", str(tests_dir), "--cap", "2").returncode == 0
    assert "refines" not in (tests_dir / "tests.jsonl").read_text()
    # A tests file testgen would not make from this analysis (a test gone): paths are
    # found by number there, so refine refuses it in one line, exit 2.
    lines = (tests_dir / "tests.jsonl").read_text().splitlines()
    (tests_dir / "tests.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    done = cli("testgen", str(tests_dir), "--refine-left-path")
    assert done.returncode == 2 and "is not the file testgen made" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
