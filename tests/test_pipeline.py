"""The main job, end to end on a small scale: real Z3, real QEMU, Debian's stock kernel."""

import json
import shutil
from pathlib import Path

import pytest

from scalecheck import pipeline
from scalecheck.cli import main


def test_pipeline_from_model_to_report(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        ["pipeline", "--ops", "stat,close", "--limit", "24", "--repeats", "1", "--out", str(out)]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert summary["totals"]["tests"] >= 24
    assert (out / "report" / "heatmap.png").stat().st_size > 0
    assert (out / "report" / "index.html").exists()
    results = (out / "trace" / "results.jsonl").read_text().splitlines()[1:]
    statuses = [json.loads(line)["status"] for line in results]
    assert len(statuses) == 24 and statuses.count("ok") >= 20
    assert "report:" in printed.err and "tests conflict-free" in printed.err


def _fake_run_tests(statuses):
    """A fake of the tracer for exit-code tests (no VM): records the tests of DIR with
    the given statuses in order (the rest "ok" and conflict-free) through the real results
    store, and returns the real run summary of those records."""
    from scalecheck.run import loop, outcome, testcase
    from scalecheck.run.store import ResultsStore

    def fake_run_tests(out_dir, *_target, **_settings):
        _, tests = testcase.read_tests(out_dir / "tests.jsonl")
        header = {"format": "scalecheck-results", "version": 1, "target": "fake"}
        store = ResultsStore(out_dir / "trace" / "results.jsonl", header)
        records = []
        for test, status in zip(tests, statuses + ["ok"] * len(tests), strict=False):
            record = outcome.base_record(test, status, "fake")
            if status in ("ok", "mismatch"):
                record.update(conflict_free=True, agree=True)
            store.append(record)
            records.append(record)
        store.close()
        summary = loop.summarize(records, tests)
        finished = {"finished": len(tests), "skipped_already_done": 0}
        return dict(
            summary,
            results="",
            boots=0,
            seconds=1.0,
            tests_per_second=1.0,
            per_worker={},
            **finished,
        )

    return fake_run_tests


@pytest.mark.parametrize(
    ("statuses", "code", "counted"),
    [
        ([], 0, "0 did not run or conform"),
        (["mismatch"], 1, "1 did not run or conform (1 mismatch, 0 error, 0 timeout, 0 crash)"),
        (["ok", "crash"], 1, "1 did not run or conform (0 mismatch, 0 error, 0 timeout, 1 crash)"),
    ],
)
def test_pipeline_exit_code_counts_mismatches_and_crashes(
    tmp_path, capsys, monkeypatch, statuses, code, counted
):
    from scalecheck.run import loop

    monkeypatch.setattr(loop, "run_tests", _fake_run_tests(statuses))
    out = tmp_path / "run"
    assert main(["pipeline", "--model", "counter", "--out", str(out), "--jobs", "1"]) == code
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert counted in last and "0 analysis paths lost" in last
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert summary["totals"]["mismatch"] == statuses.count("mismatch")


@pytest.mark.parametrize(("statuses", "code"), [([], 0), (["mismatch"], 1), (["crash"], 1)])
def test_run_exit_code_counts_mismatches_and_crashes(tmp_path, capsys, monkeypatch, statuses, code):
    from scalecheck.run import loop

    shutil.copy(Path(__file__).parent / "data" / "trace_ops.jsonl", tmp_path / "tests.jsonl")
    monkeypatch.setattr(loop, "run_tests", _fake_run_tests(statuses))
    assert main(["run", str(tmp_path)]) == code
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"{len(statuses)} did not run or conform" in last
    for status in ("mismatch", "crash"):
        assert f"{statuses.count(status)} {status}" in last


def test_full_runs_exec_on_linux_and_leaves_it_out_on_a_library():
    assert pipeline.not_run_by("posix", library_target=False) == {}
    assert set(pipeline.not_run_by("posix", library_target=True)) == {"exec"}
    assert pipeline.not_run_by("counter", library_target=True) == {}
