"""The LDU benchmark (native/ldu/bench/lduset.c on the shared harness), its catalog
entries, and the sweep script bench/ldu_sweep.py, each run briefly."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scalecheck.bench.catalog import load_catalog

REPO = Path(__file__).resolve().parents[1]
LDUSET = REPO / "native" / "ldu" / "bin" / "lduset"
IMPLEMENTATIONS = ["ldu-percore", "ldu-global", "rwlock", "harris"]
TWO_WORKERS = min(2, len(os.sched_getaffinity(0)))


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(
        ["make", "-s", "-C", str(REPO / "native" / "ldu"), "bin/lduset"], check=True, timeout=600
    )


def lduset(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LDUSET), "--warmup", "0.1", "--duration", "0.5", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def result_of(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_benchmark_reports_throughput_and_wait_time(impl):
    result = result_of(
        lduset("--workers", str(TWO_WORKERS), "--mode", impl, "--param", "update_pct=90")
    )
    extra = result["extra"]
    assert (result["benchmark"], result["mode"], result["workers"]) == ("lduset", impl, TWO_WORKERS)
    assert result["ops_per_sec"] > 0 and result["samples"]
    assert 0 <= extra["idle_pct"] <= 100 and 0 <= extra["preempted_pct"] <= 100
    assert extra["lock_wait_pct"] >= 0
    share = extra["updates"] / (extra["updates"] + extra["walks"])
    assert 0.85 < share < 0.95, extra
    if impl.startswith("ldu"):
        # Cancelled insert/remove pairs never reach the tree.
        assert 0 < extra["logs_applied"] <= extra["updates"]
    else:
        assert extra["logs_applied"] == 0
    if impl == "harris":
        assert extra["lock_wait_ns"] == 0


@pytest.mark.parametrize("update_pct, only", [("100", "updates"), ("0", "walks")])
def test_update_ratio_extremes(update_pct, only):
    extra = result_of(lduset("--mode", "ldu-global", "--param", f"update_pct={update_pct}"))[
        "extra"
    ]
    other = "walks" if only == "updates" else "updates"
    assert extra[only] > 0 and extra[other] == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--param", "update_pct=150"], "update_pct=150"),
        (["--param", "window=0"], "window=0"),
        (["--mode", "skiplist"], "skiplist"),
    ],
)
def test_bad_input_fails_with_one_line(args, message):
    run = lduset(*args)
    assert run.returncode != 0
    assert message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_catalog_has_one_entry_per_update_ratio_with_every_implementation():
    catalog = load_catalog()
    for ratio in (50, 80, 90, 99, 100):
        entry = catalog[f"ldu-u{ratio}"]
        assert list(entry.modes) == IMPLEMENTATIONS
        assert f"update_pct={ratio}" in entry.command
        assert entry.seed == "ldu-evaluation"


def test_sweep_runs_through_the_driver_and_plots(tmp_path):
    cores = "1,2" if TWO_WORKERS == 2 else "1"
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "ldu_sweep.py"),
            "--out",
            str(tmp_path),
            "--cores",
            cores,
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
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads((tmp_path / "ldu_sweep.json").read_text())
    cells = {(r["update_pct"], r["mode"], r["threads"]) for r in document["rows"]}
    assert len(cells) == 5 * 4 * len(cores.split(","))
    for comparison in document["orderings"]:
        assert comparison["verdict"] in ("holds", "flipped") or comparison["verdict"].startswith(
            "mixed"
        )
        assert comparison["ratio_min"] <= comparison["ratio"] <= comparison["ratio_max"]
    for name in ("ldu_update_ratio", "ldu_scalability"):
        for suffix in (".png", ".svg"):
            assert (tmp_path / f"{name}{suffix}").stat().st_size > 1000
    assert f"{TWO_WORKERS} threads,  90% updates: ldu-percore / ldu-global" in run.stdout
