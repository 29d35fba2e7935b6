"""scalecheck as a user installs it: the README's set-up with only the distribution's own
Python on the PATH, and a wheel built from the checkout, installed into a fresh virtual
environment, tracing a small batch from another directory (it builds the plugin and the
guest driver from the sources the wheel carries, into its own cache)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
CALIBRATION = REPO / "tests" / "data" / "calibration.jsonl"


def _run(command, **kwargs) -> subprocess.CompletedProcess:
    completed = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert completed.returncode == 0, completed.stderr[-3000:] + completed.stdout[-2000:]
    return completed


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs Debian's python3")
def test_setup_works_with_only_the_system_directories_on_the_path(tmp_path):
    venv = tmp_path / "venv"
    env = {"PATH": SYSTEM_PATH, "HOME": os.environ["HOME"], "SCALECHECK_VENV": str(venv)}
    _run(["bash", "scripts/setup.d/10-python.sh"], cwd=REPO, env=env, timeout=900)
    base = _run([str(venv / "bin" / "python3"), "-c", "import sys; print(sys.base_prefix)"])
    assert base.stdout.strip() == "/usr"  # made by Debian's python3, not another one
    version = _run([str(venv / "bin" / "scalecheck"), "--version"], env=env)
    assert "scalecheck" in version.stdout


@pytest.mark.skipif(
    not shutil.which("qemu-system-x86_64") or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)
def test_a_wheel_traces_a_batch_from_another_directory(tmp_path):
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(REPO)])
    (wheel,) = wheels.glob("scalecheck-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python3"), "-m", "pip", "install", "-q", str(wheel)], timeout=900)
    work = tmp_path / "elsewhere"
    work.mkdir()
    lines = CALIBRATION.read_text().splitlines()
    (work / "tests.jsonl").write_text("\n".join(lines[:3]) + "\n")  # header + 2 tests
    env = dict(
        os.environ,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PATH=f"{venv / 'bin'}:{os.environ['PATH']}",
    )
    env.pop("SCALECHECK_REPO", None)
    _run(
        ["scalecheck", "run", str(work), "-j", "1", "--repeats", "1", "--json"],
        cwd=work,
        env=env,
        timeout=1500,
    )
    # Built from the wheel's copy of the sources, in the user's cache, not the checkout.
    (sources,) = (tmp_path / "cache" / "scalecheck").glob("sources-*")
    assert (sources / "tracer" / "guest" / "build" / "driver").is_file()
    records = [json.loads(line) for line in (work / "trace" / "results.jsonl").open()][1:]
    assert [r["status"] for r in records] == ["ok", "ok"]
    assert [r["conflict_free"] for r in records] == [False, True]
