"""The user-space target on a Dask cluster (run/cluster.py with library.LibraryTarget),
with real worker processes compiling and tracing under qemu-x86_64: the same verdicts as a
run here with one worker killed mid-batch, the logs of crashed and hung tests brought back
where a run here keeps them, and workers whose library sources differ refused."""

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

from scalecheck.common.errors import UserError
from scalecheck.run.run_cli import run_tests
from scalecheck.run.user import library

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None, reason="qemu-user not installed (scripts/setup.sh)"
)


def _generate(model: str, out: Path) -> Path:
    for stage in (
        ["analyze", "--model", model, "--out", str(out), "--jobs", "1"],
        ["testgen", str(out)],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "scalecheck.cli", *stage], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    return out


def _copy_tests(tests_dir: Path, run_dir: Path) -> Path:
    run_dir.mkdir(parents=True)
    shutil.copy(tests_dir / "tests.jsonl", run_dir / "tests.jsonl")
    return run_dir


def _lines(run_dir: Path) -> list[dict]:
    lines = (run_dir / "trace" / "results.jsonl").read_text().splitlines()[1:]
    return [json.loads(line) for line in lines]


def _verdicts(run_dir: Path) -> dict:
    return {r["id"]: (r["status"], r.get("conflict_free")) for r in _lines(run_dir)}


def _slow_kvstore(directory: Path) -> Path:
    """The one-mutex key-value store (every test conflicts) with a teardown that sleeps
    0.15 s after each test's run, outside the traced calls: slow enough for a worker to be
    killed mid-batch."""
    shutil.copytree(EXAMPLES / "kvstore", directory)
    adapter = directory / "adapter.c"
    text = adapter.read_text()
    assert "void sc_teardown(void)\n{\n" in text
    adapter.write_text(
        "#include <unistd.h>\n"
        + text.replace(
            "void sc_teardown(void)\n{\n", "void sc_teardown(void)\n{\n\tusleep(150000);\n"
        )
    )
    return directory / "locked.toml"


@pytest.fixture(scope="module")
def kvstore_tests(tmp_path_factory):
    return _generate(str(EXAMPLES / "kvstore" / "model.py"), tmp_path_factory.mktemp("kvstore"))


def test_library_on_the_cluster_gives_the_local_verdicts_with_a_worker_killed(
    kvstore_tests, tmp_path
):
    manifest = _slow_kvstore(tmp_path / "kvstore")
    local = _copy_tests(kvstore_tests, tmp_path / "local")
    run_tests(local, target=f"lib:{manifest}", jobs=1, quiet=True)
    on_cluster = _copy_tests(kvstore_tests, tmp_path / "cluster")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
    client = Client(cluster)
    killed = []

    def kill_a_worker_after_three_records():
        results = on_cluster / "trace" / "results.jsonl"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if results.exists() and len(results.read_text().splitlines()) > 3:
                pid = next(iter(client.run(os.getpid).values()))
                os.kill(pid, signal.SIGKILL)
                killed.append(len(results.read_text().splitlines()) - 1)
                return
            time.sleep(0.05)

    threading.Thread(target=kill_a_worker_after_three_records, daemon=True).start()
    try:
        summary = run_tests(
            on_cluster, target=f"lib:{manifest}", cluster=cluster.scheduler_address, quiet=True
        )
    finally:
        client.close()
        cluster.close()
    tests = len((kvstore_tests / "tests.jsonl").read_text().splitlines()) - 1
    assert killed and killed[0] < tests, "the run ended before a worker could be killed"
    ids = [r["id"] for r in _lines(on_cluster)]
    assert len(ids) == len(set(ids)) == tests  # every test recorded exactly once
    assert _verdicts(on_cluster) == _verdicts(local)
    assert summary["conflicting"] >= 1 and summary["crash"] == summary["error"] == 0
    assert sum(summary["per_worker"].values()) == tests


# A library whose inc crashes (SIGSEGV) and whose dec never returns.
FAULTY = """
#include <unistd.h>
#include "scalecheck_adapter.h"
static void call_inc(const long *args, struct sc_result *result)
{
	(void)args, (void)result;
	*(volatile int *)0 = 1;
}
static void call_dec(const long *args, struct sc_result *result)
{
	(void)args, (void)result;
	for (;;)
		pause();
}
static void call_iszero(const long *args, struct sc_result *result)
{
	(void)args;
	sc_ok_bool(result, 1);
}
const struct sc_op SC_OPS[] = {
	{"inc", 0, call_inc}, {"dec", 0, call_dec}, {"iszero", 0, call_iszero}, {0, 0, 0}};
int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	(void)state, (void)why, (void)whylen;
	return 0;
}
void sc_teardown(void) {}
"""


def test_crash_logs_of_cluster_workers_come_back_where_a_local_run_keeps_them(tmp_path):
    library = tmp_path / "faulty"
    library.mkdir()
    (library / "adapter.c").write_text(FAULTY)
    (library / "nothing.c").write_text("int library_placeholder;\n")
    (library / "scalecheck.toml").write_text(
        'model = "counter"\nadapter = "adapter.c"\nsources = ["nothing.c"]\n'
    )
    tests_dir = _generate("counter", tmp_path / "tests")
    logs = {}
    for name, cluster in (("local", None), ("cluster", "local:2")):
        run_dir = _copy_tests(tests_dir, tmp_path / name)
        run_tests(
            run_dir, target=f"lib:{library}", jobs=1, timeout=1.0, cluster=cluster, quiet=True
        )
        failed = {r["id"] for r in _lines(run_dir) if r["status"] in ("crash", "timeout")}
        assert len(failed) == 7, _verdicts(run_dir)
        logs[name] = {
            path.name: path.read_text() for path in (run_dir / "trace" / "crashes").iterdir()
        }
        assert set(logs[name]) == {test_id.replace("/", "_") + ".log" for test_id in failed}
    assert set(logs["cluster"]) == set(logs["local"])
    # A crashed test's log is what qemu-user wrote of the signal that killed the program.
    for crashed in (name for name in logs["cluster"] if name.startswith("inc-")):
        assert "signal 11" in logs["cluster"][crashed], logs["cluster"][crashed]


def test_workers_with_other_library_sources_are_refused(
    kvstore_tests, tmp_path, monkeypatch, capfd
):
    run_dir = _copy_tests(kvstore_tests, tmp_path / "run")
    # The submitting side sees other sources than the workers (separate processes) find.
    monkeypatch.setattr(library.Library, "fingerprint", lambda library: "0123456789ab")
    with pytest.raises(UserError, match="every worker of the cluster was refused"):
        run_tests(
            run_dir,
            target=f"lib:{EXAMPLES / 'kvstore' / 'striped.toml'}",
            cluster="local:2",
            quiet=True,
        )
    refusals = [line for line in capfd.readouterr().out.splitlines() if line.startswith("refused")]
    assert refusals and all("the submitting machine's are 0123456789ab" in r for r in refusals)
    assert _lines(run_dir) == []
