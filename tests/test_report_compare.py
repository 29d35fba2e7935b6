"""`scalecheck compare`: the hand-written fake runs of tests/data/report_fake_run_{a,b}
(see tests/test_report_outputs.py) side by side, a then b: open-open/p1/t1 is fixed in b
(its conflicts in a are two unnamed heap lines), open-open/p1/t2 broken (a static line)."""

import json
import shutil
from pathlib import Path

from scalecheck.cli import main

DATA = Path(__file__).parent / "data"


def test_runs_side_by_side_with_fixed_and_broken_tests_and_their_names(tmp_path, capsys):
    for name in ("a", "b"):
        shutil.copytree(DATA / f"report_fake_run_{name}", tmp_path / name)
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "6.1.0-fake-a -> 6.1.0-fake-b:" in text and "1 fixed, 1 broken" in text
    result = json.loads((out / "compare.json").read_text())
    assert [r["kernel"] for r in result["runs"]] == ["6.1.0-fake-a", "6.1.0-fake-b"]
    (step,) = result["steps"]
    assert (step["fixed"], step["broken"], step["no_longer_run"]) == (1, 1, 1)
    # Unnamed lines are counted by kind, once per test.
    assert step["fixed_names_before"] == [["unnamed heap data", 1]]
    assert step["broken_names_after"] == [["unnamed static data", 1]]
    for position, run in enumerate(result["runs"], start=1):
        assert Path(run["heatmap"]) == out / f"{position}-{run['kernel']}" / "heatmap.png"
        assert Path(run["heatmap"]).is_file()
        assert set(run["shares"]) == {"bytes", "stable", "line"}


def test_compare_needs_two_runs(tmp_path, capsys):
    shutil.copytree(DATA / "report_fake_run_a", tmp_path / "a")
    assert main(["compare", str(tmp_path / "a")]) == 2
    assert "two run directories" in capsys.readouterr().err
