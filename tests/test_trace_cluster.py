"""Tracing on a Dask cluster (run/cluster.py) with real workers booting real VMs: a
LocalCluster of two workers plus one whose tracer sources differ (refused), one good
worker killed mid-run (its batch goes out again, every test recorded once), a run
stopped as by Ctrl-C that a rerun completes, and a guest panic on a worker whose console
log comes back where a run here keeps it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from guest_diagnostics import diagnostic_test
from scalecheck.common.errors import stop_requested
from scalecheck.run.linux import vm
from scalecheck.run.linux.vm_worker import BATCH
from scalecheck.run.run_cli import run_tests
from scalecheck.run.store import ResultsStore
from scalecheck.run.target import batches

REPO = Path(__file__).resolve().parents[1]
CALIBRATION = REPO / "tests" / "data" / "calibration.jsonl"

pytestmark = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)


def test_batches_give_every_worker_an_equal_share():
    """No worker traces alone at the end: batches come in multiples of the workers' count,
    of one size, each within a boot's limit."""
    assert [len(b) for b in batches(list(range(4822)), 2, 2000)] == [1206] * 3 + [1204]
    assert [len(b) for b in batches(list(range(5)), 2, 2000)] == [3, 2]
    assert [len(b) for b in batches(list(range(4000)), 2, 2000)] == [2000, 2000]
    assert sum(map(len, batches(list(range(29670)), 3, 2000))) == 29670
    # The default: the main job's tests in one boot per VM at -j 2.
    assert [len(b) for b in batches(list(range(4822)), 2, BATCH)] == [2411, 2411]


def _write_calibration(directory: Path, copies: int) -> list[dict]:
    lines = CALIBRATION.read_text().splitlines()
    header, tests = lines[0], [json.loads(line) for line in lines[1:] if line.strip()]
    copied = [dict(t, id=f"{t['id']}/copy{k}") for k in range(copies) for t in tests]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tests.jsonl").write_text("\n".join([header, *map(json.dumps, copied)]) + "\n")
    return copied


def _lines(directory: Path) -> list[dict]:
    path = directory / "trace" / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def _after_records(directory: Path, count: int, action) -> threading.Thread:
    """Calls ``action()`` once ``count`` records are stored (in a thread)."""

    def watch():
        path = directory / "trace" / "results.jsonl"
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if path.exists() and len(path.read_text().splitlines()) > count:
                action()
                return
            time.sleep(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _stranger_sources(tmp_path: Path) -> Path:
    """Tracer sources that differ from ours by a comment: another fingerprint."""
    root = tmp_path / "stranger"
    shutil.copytree(
        REPO / "tracer", root / "tracer", ignore=shutil.ignore_patterns("target", "build")
    )
    (root / "native").mkdir()
    driver = root / "tracer" / "guest" / "driver.c"
    driver.write_text(driver.read_text() + "\n/* another version */\n")
    return root


def test_cluster_run_refuses_a_stranger_and_survives_a_lost_worker(tmp_path, capfd):
    tests = _write_calibration(tmp_path / "run", copies=2)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
    client = Client(cluster)
    dask = Path(sys.executable).parent / "dask"
    stranger = subprocess.Popen(
        [str(dask), "worker", cluster.scheduler_address, "--nthreads", "1", "--no-dashboard"],
        env=dict(os.environ, SCALECHECK_REPO=str(_stranger_sources(tmp_path))),
    )
    try:
        client.wait_for_workers(3, timeout=120)
        good = [pid for pid in client.run(os.getpid).values() if pid != stranger.pid]
        _after_records(tmp_path / "run", 3, lambda: os.kill(good[0], signal.SIGKILL))
        summary = run_tests(tmp_path / "run", jobs=1, cluster=cluster.scheduler_address, quiet=True)
    finally:
        stranger.terminate()
        stranger.wait(60)
        client.close()
        cluster.close()
    assert "refused" in capfd.readouterr().out
    lines = _lines(tmp_path / "run")
    # Every test recorded exactly once, with the calibration's known answer.
    assert sorted(r["id"] for r in lines) == sorted(t["id"] for t in tests)
    by_id = {r["id"]: r for r in lines}
    for test in tests:
        assert by_id[test["id"]]["status"] == "ok", by_id[test["id"]]
        assert by_id[test["id"]]["conflict_free"] == test["calibration"]["conflict_free"]
    assert sum(summary["per_worker"].values()) == len(tests)


def test_cluster_run_stopped_midway_resumes(tmp_path, monkeypatch):
    tests = _write_calibration(tmp_path / "run", copies=1)
    append = ResultsStore.append

    def append_then_stop_after_two(store, record):
        """The real append; Ctrl-C arrives right after the second record."""
        append(store, record)
        if len(store.finished) == 2:
            stop_requested.set()

    monkeypatch.setattr(ResultsStore, "append", append_then_stop_after_two)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_tests(tmp_path / "run", cluster="local:1", quiet=True)
    finally:
        stop_requested.clear()
    first = _lines(tmp_path / "run")
    assert len(first) == 2
    monkeypatch.setattr(ResultsStore, "append", append)
    again = run_tests(tmp_path / "run", cluster="local:1", quiet=True)
    assert again["skipped_already_done"] == len(first)
    assert sorted(r["id"] for r in _lines(tmp_path / "run")) == sorted(t["id"] for t in tests)


def test_console_log_of_a_guest_panic_on_a_worker_comes_back(tmp_path):
    lines = CALIBRATION.read_text().splitlines()
    panic = diagnostic_test("panic", "_panic")
    (tmp_path / "tests.jsonl").write_text("\n".join([*lines[:3], json.dumps(panic)]) + "\n")
    summary = run_tests(tmp_path, cluster="local:1", quiet=True)
    records = {r["id"]: r for r in _lines(tmp_path)}
    assert records["_panic-stat/panic"]["status"] == "crash" and summary["crash"] == 1
    assert summary["ok"] == 2
    console = tmp_path / "trace" / "crashes" / "_panic-stat_panic.log"
    text = console.read_text(errors="replace").lower()
    assert "panic" in text or "sysrq" in text, text[-2000:]
