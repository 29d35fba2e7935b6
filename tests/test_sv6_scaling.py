"""bench/sv6_scaling.py: libsv6's 2-vs-1 ratios beside the machine's own (the `empty`
loop), from a real sweep run briefly, and its arithmetic on a hand-written record."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import sv6_scaling  # noqa: E402


def record(bench, mode, cores, run, ops, status="ok"):
    return json.dumps(
        {
            "benchmark": bench,
            "mode": mode,
            "runtime": "",
            "cores": cores,
            "run": run,
            "status": status,
            "ops_per_sec": ops if status == "ok" else None,
        }
    )


def test_ratios_pair_each_run_with_the_machine_of_that_run(tmp_path):
    runs = tmp_path / "runs.jsonl"
    lines = [
        record("empty", "", 1, 1, 100.0),
        record("empty", "", 2, 1, 200.0),
        record("empty", "", 1, 2, 100.0),
        record("empty", "", 2, 2, 160.0),
        record("sv6-openbench", "anyfd", 1, 1, 10.0),
        record("sv6-openbench", "anyfd", 2, 1, 19.0),
        record("sv6-openbench", "anyfd", 1, 2, 10.0),
        record("sv6-openbench", "anyfd", 2, 2, 12.0),
        # the cell ran again: its last line wins
        record("sv6-openbench", "anyfd", 2, 2, 16.0),
        # run 3 has no 2-worker figure (failed): left out, not counted as 0
        record("sv6-openbench", "anyfd", 1, 3, 10.0),
        record("sv6-openbench", "anyfd", 2, 3, None, status="failed"),
        # its control: run 1 only
        record("sv6-openbench-private", "anyfd", 1, 1, 10.0),
        record("sv6-openbench-private", "anyfd", 2, 1, 20.0),
        # the line transfer has a 2-worker cell only: its ns, no ratio
        record("line-transfer", "", 2, 1, 5e6),
    ]
    runs.write_text("\n".join(lines) + "\n")
    ratios, transfer_ns, failed = sv6_scaling.run_ratios(str(tmp_path))
    assert ratios[("sv6-openbench", "anyfd")] == {1: 1.9, 2: 1.6}
    assert transfer_ns == {1: 200.0} and ("line-transfer", "") not in ratios
    assert failed == ["sv6-openbench anyfd cores=2 run=3: None"]
    rows = {(r["benchmark"], r["mode"]): r for r in sv6_scaling.series_rows(ratios)}
    anyfd = rows[("sv6-openbench", "anyfd")]
    assert anyfd["commutative"] and not rows[("empty", "")]["commutative"]
    assert abs(anyfd["median"] - 1.75) < 1e-9
    # run 1: 1.9 / 2.0, run 2: 1.6 / 1.6
    assert abs(anyfd["median_of_machine"] - (0.95 + 1.0) / 2) < 1e-9
    # only run 1 has the control's ratio (2.0) beside the series' (1.9)
    assert abs(anyfd["median_of_control"] - 0.95) < 1e-9
    assert anyfd["of_control_per_run"] == {"1": 0.95}
    control = rows[("sv6-openbench-private", "anyfd")]
    assert not control["commutative"] and control["median_of_control"] is None
    assert control["of_control_per_run"] is None


def headline_row(bench, mode, of_control):
    median = sorted(of_control)[len(of_control) // 2] if of_control else None
    per_run = {str(run): value for run, value in enumerate(of_control, 1)}
    return {
        "benchmark": bench,
        "mode": mode,
        "median_of_control": median,
        "of_control_per_run": per_run,
    }


def test_the_headline_is_each_commutative_series_over_its_control():
    rows = [
        headline_row("sv6-statbench-mixed", "fstatx", [0.98, 0.97, 0.99]),
        headline_row("sv6-openbench", "anyfd", [0.99, 0.96, 0.97]),
        headline_row("sv6-mailbench", "commutative", [0.97, 0.99, 0.98]),
        headline_row("sv6-sockbench", "unordered", [0.98, 0.99, 0.98]),
        headline_row("sv6-sockbench", "unordered-capacity", [0.99, 0.98, 0.98]),
    ]
    met, lines = sv6_scaling.headline(rows, 0.97)
    assert met and len(lines) == 5
    assert lines[1].split()[2:] == ["0.990", "0.960", "0.970", "0.970"]
    # one series' median below the bar, or a series with no run beside its control
    assert not sv6_scaling.headline(rows, 0.975)[0]
    met, lines = sv6_scaling.headline(rows[:2], 0.97)
    assert not met and "no run beside its control (sv6-mailbench-private commutative)" in lines[2]


def test_a_short_sweep_reports_every_series(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "sv6_scaling.py"),
            "--out",
            str(tmp_path),
            "--runs",
            "1",
            "--warmup",
            "0.05",
            "--duration",
            "0.2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode in (0, 1), run.stderr[-3000:]
    document = json.loads((tmp_path / "scaling.json").read_text())
    assert document["failed_cells"] == []
    series = {(r["benchmark"], r["mode"]): r for r in document["series"]}
    controls = set(sv6_scaling.COMMUTATIVE.values())
    assert set(sv6_scaling.COMMUTATIVE) | controls <= series.keys()
    assert {("empty", ""), ("sv6-openbench", "lowest")} <= series.keys()
    for key, row in series.items():
        assert len(row["ratios"]) == 1 and row["ratios"][0] > 0
        assert row["median_of_machine"] > 0
        assert (row["median_of_control"] is not None) == (key in sv6_scaling.COMMUTATIVE)
    transfers = document["line_transfer_ns"]
    assert len(transfers["runs"]) == 1 and transfers["median"] > 0
    met = all(
        series[s]["median_of_control"] >= document["control_bar"] for s in sv6_scaling.COMMUTATIVE
    )
    assert document["met"] == met and run.returncode == (0 if met else 1)
    assert "commutative series over its control" in run.stdout
    absolute = all(series[s]["median"] >= document["bar"] for s in sv6_scaling.COMMUTATIVE)
    assert document["absolute_met"] == absolute
    # the ratios' figure and each benchmark's throughput per core, as PNG and SVG
    benchmarks = {benchmark for benchmark, _ in series} | {sv6_scaling.LINE_TRANSFER}
    expected = {tmp_path / f"scaling.{s}" for s in ("png", "svg")} | {
        tmp_path / "plots" / f"{b}.{s}" for b in benchmarks for s in ("png", "svg")
    }
    assert {Path(f) for f in document["figures"]} == expected
    for figure in expected:
        assert figure.read_bytes()[:4] in (b"\x89PNG", b"<?xm"), figure


def test_a_sweep_the_driver_refuses_writes_no_figures(tmp_path):
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "sv6_scaling.py"), "--out", str(out), "--runs", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # the driver's own exit status (2: bad input), not "bar not met"
    assert run.returncode == 2 and "--runs: must be at least 1" in run.stderr
    assert not (out / "scaling.json").exists()
