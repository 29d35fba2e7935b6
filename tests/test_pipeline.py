"""The main job, end to end on a small scale: real Z3, real QEMU, Debian's stock kernel."""

import json

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
