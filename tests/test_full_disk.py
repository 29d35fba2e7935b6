"""A full disk is bad input: every command prints one line naming what filled up and
exits 2, keeps what it finished, and resumes once space is freed. Each test puts its
directory on a small tmpfs of its own (needs root to mount; skipped otherwise)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scalecheck.common.errors import UserError
from scalecheck.run.store import ResultsStore

DATA = Path(__file__).parent / "data"


class SmallDisk:
    def __init__(self, root: Path):
        self.root = root
        self.filler = root / "filler"

    def fill(self):
        """Takes every free byte (the remaining space is smaller than a block)."""
        with open(self.filler, "ab", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 512)
            except OSError:
                pass

    def free(self):
        self.filler.unlink()


@pytest.fixture
def disk(tmp_path):
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(root)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield SmallDisk(root)
    finally:
        # Lazily: a file a failed test left open must not keep the mount.
        subprocess.run(["umount", "--lazy", str(root)], check=True)


def scalecheck(*args):
    return subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_disk_full_line(result, where):
    assert result.returncode == 2, result.stderr[-2000:]
    # The last line; a progress bar may precede it, a traceback never.
    line = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr and result.stderr.count("scalecheck: error") == 1
    assert line.startswith(f"scalecheck: error: no space left on device writing {where}")
    assert "free on its file system" in line and "rerun the same command" in line


def test_results_store_keeps_finished_records_and_resumes(disk):
    path = disk.root / "trace" / "results.jsonl"
    header = {"format": "scalecheck-results", "version": 1, "target": "linux"}
    store = ResultsStore(path, header)
    store.append({"id": "t1", "status": "ok"})
    disk.fill()
    with pytest.raises(UserError, match=r"no space left on device writing .*results\.jsonl"):
        for number in range(2, 1000):
            store.append({"id": f"t{number}", "status": "ok", "detail": "x" * 1000})
    with pytest.raises(UserError):
        store.close()
    disk.free()
    again = ResultsStore(path, header)
    assert "t1" in again.finished
    again.append({"id": "t-after", "status": "ok"})
    again.close()
    lines = path.read_text().splitlines()
    assert all(json.loads(line) for line in lines) and json.loads(lines[-1])["id"] == "t-after"


def test_analyze_and_testgen_on_a_full_disk(disk):
    out = disk.root / "out"
    assert scalecheck("analyze", "--model", "counter", "--out", out, "--jobs", "1").returncode == 0
    pairs = sorted((out / "analysis" / "pairs").glob("*.json"))
    (out / "analysis" / "pairs" / "inc-dec.json").unlink()
    kept = {p: p.stat().st_mtime_ns for p in pairs if p.name != "inc-dec.json"}
    disk.fill()
    assert_disk_full_line(scalecheck("analyze", "--model", "counter", "--out", out), out)
    disk.free()
    assert scalecheck("analyze", "--model", "counter", "--out", out, "--jobs", "1").returncode == 0
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # finished pairs were kept
    disk.fill()
    assert_disk_full_line(scalecheck("testgen", out, "--jobs", "1"), out / "tests")
    assert not (out / "tests.jsonl").exists()
    disk.free()
    assert scalecheck("testgen", out, "--jobs", "1").returncode == 0


def test_report_on_a_full_disk(disk):
    run = disk.root / "run"
    shutil.copytree(DATA / "report_fake_run_a", run)
    disk.fill()
    assert_disk_full_line(scalecheck("report", run), run)
    disk.free()
    assert scalecheck("report", run).returncode == 0


def test_run_on_a_full_disk_stops_before_booting(disk):
    """No VM is booted: the results store's header, then the room a boot needs (its
    image and the plugin's trace) are checked first."""
    run = disk.root / "run"
    run.mkdir()
    shutil.copy(DATA / "trace_ops.jsonl", run / "tests.jsonl")
    disk.fill()
    assert_disk_full_line(scalecheck("run", run, "--jobs", "1"), run / "trace" / "results.jsonl")
    disk.free()
    # 4 MiB hold the store but not a boot of these tests: refused with the room needed.
    result = scalecheck("run", run, "--jobs", "1")
    assert_disk_full_line(result, run / "trace" / "vm0")
    assert "MiB needed" in result.stderr
    assert (run / "trace" / "results.jsonl").read_text().count("\n") == 1  # the header


def test_bench_run_on_a_full_disk(disk):
    out = disk.root / "bench"
    disk.fill()
    bench = ["bench", "run", "openbench", "--cores", "1", "--runs", "1"]
    result = scalecheck(*bench, "--warmup", "0.1", "--duration", "0.2", "--out", out)
    assert_disk_full_line(result, out)
    disk.free()
    result = scalecheck(*bench, "--warmup", "0.1", "--duration", "0.2", "--out", out)
    assert result.returncode == 0, result.stderr[-2000:]
    assert os.path.getsize(out / "runs.jsonl") > 0
