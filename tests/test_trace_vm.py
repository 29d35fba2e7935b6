"""The tracer end to end on a real Linux kernel under QEMU (TCG): calibration cases with
known answers, every posix op with its expected result, and survival of a hung test, a
guest kernel panic, a frozen guest and a killed QEMU."""

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from guest_diagnostics import diagnostic_test
from scalecheck.run.linux import vm
from scalecheck.run.run_cli import run_tests

REPO = Path(__file__).resolve().parents[1]
CALIBRATION = REPO / "tests" / "data" / "calibration.jsonl"
OPS = REPO / "tests" / "data" / "trace_ops.jsonl"

pytestmark = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)


def _tests(path):
    lines = path.read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:] if line.strip()]


def _fields(name: str) -> list[str]:
    """``files_struct.{file_lock,next_fd}`` -> each field's full name (which fields of an
    object one conflicting line covers varies with where the allocator put it)."""
    prefix, brace, rest = name.partition("{")
    if not brace:
        return [name]
    return [prefix + field for field in rest.rstrip("}").split(",")]


def _write(dir_path: Path, header, tests):
    dir_path.mkdir(parents=True, exist_ok=True)
    with open(dir_path / "tests.jsonl", "w") as f:
        for obj in [header, *tests]:
            f.write(json.dumps(obj) + "\n")


def _records(dir_path: Path):
    lines = (dir_path / "trace" / "results.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines[1:])}


@pytest.fixture(scope="module")
def main_run(tmp_path_factory):
    """Calibration + every op + a hung call + a guest panic, in one run."""
    out = tmp_path_factory.mktemp("trace-main")
    header, calibration = _tests(CALIBRATION)
    _, ops = _tests(OPS)
    tests = (
        calibration
        + ops[:8]
        + [diagnostic_test("hang", "_hang"), diagnostic_test("panic", "_panic")]
        + ops[8:]
    )
    _write(out, header, tests)
    summary = run_tests(out, repeats=2, timeout=2.0, jobs=1)
    return out, summary, calibration, ops


def test_calibration_answers(main_run):
    out, _, calibration, _ = main_run
    records = _records(out)
    for test in calibration:
        record = records[test["id"]]
        want = test["calibration"]
        assert record["status"] == "ok", record
        assert record["conflict_free"] == want["conflict_free"], (test["id"], record["conflicts"])
        touched = {
            pc.split("+")[0]
            for c in record["conflicts"]
            for side in ("a", "b")
            for pc in c[side]["pcs"]
        }
        for function in want.get("must_touch", []):
            assert function in touched, (test["id"], sorted(touched))
        # Conflicting data named by struct and field (run/linux/datanames.py): each entry
        # begins the name of some conflicting line. Only typed slab objects are asked for:
        # an untyped kmalloc object (fdtable.open_fds[]) is named through pointers that may
        # be gone when the host reads guest memory (docs/tracer.md, Known limits).
        names = [field for c in record["conflicts"] for field in _fields(c["data"])]
        for wanted in want.get("must_name", []):
            for name in _fields(wanted):
                assert any(n.startswith(name) for n in names), (test["id"], name, names)
        # Several data taken by the same code (two locks under _raw_spin_lock): each is
        # its own conflict, none hidden behind another with the same functions.
        same_code = want.get("same_code")
        if same_code:
            under = [c["data"] for c in record["conflicts"] if same_code["sites"] in c["sites"]]
            for name in same_code["data"]:
                assert any(n.startswith(name) for n in under), (test["id"], name, under)
        if not want["conflict_free"]:
            # The known conflicts are on data both calls really use, not neighbours of it,
            # so they survive every filter: conflicting at every granularity.
            assert any(c["sharing"] == "true" for c in record["conflicts"]), record["conflicts"]
            assert not any(record["views"].values()), (test["id"], record["views"])
        else:
            assert record["views"]["bytes"] and record["views"]["stable"], (test["id"], record)
        assert record["accesses"]["a"] > 100 and record["accesses"]["b"] > 100


def test_every_op_gives_its_expected_result(main_run):
    out, _, _, ops = main_run
    records = _records(out)
    for test in ops:
        record = records[test["id"]]
        assert record["status"] == "ok", (test["id"], record["detail"])
        assert record["results"]["expected_order"] in ("ab", "ba")


def test_hung_call_and_guest_panic_are_survived(main_run):
    out, summary, calibration, ops = main_run
    records = _records(out)
    assert records["_hang-stat/hang"]["status"] == "timeout"
    panic = records["_panic-stat/panic"]
    assert panic["status"] == "crash"
    assert "panic" in panic["detail"].lower() or "sysrq" in panic["detail"].lower(), panic["detail"]
    # The hung test was tried again in a fresh boot, and the tests after the panic ran in
    # another one.
    assert summary["boots"] >= 3
    assert len(records) == len(calibration) + len(ops) + 2
    assert (out / "trace" / "crashes" / "_panic-stat_panic.log").exists()


def test_resume_after_killed_qemu(tmp_path):
    header, calibration = _tests(CALIBRATION)
    tests = [dict(t, id=f"{t['id']}/copy{k}") for k in range(3) for t in calibration[:5]]
    _write(tmp_path, header, tests)
    results = tmp_path / "trace" / "results.jsonl"
    killed = []

    def kill_first_vm_midway(session):
        if killed:
            return

        def killer():
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and session.proc.poll() is None:
                if results.exists() and len(results.read_text().splitlines()) >= 4:
                    os.kill(session.proc.pid, signal.SIGKILL)
                    killed.append(session.proc.pid)
                    return
                time.sleep(0.05)

        threading.Thread(target=killer, daemon=True).start()

    summary = run_tests(tmp_path, repeats=2, jobs=1, on_vm_start=kill_first_vm_midway)
    assert killed, "the VM finished before it could be killed"
    assert summary["boots"] == 2
    records = _records(tmp_path)
    assert len(records) == len(tests)
    crashed = [r for r in records.values() if r["status"] == "crash"]
    assert len(crashed) <= 1 and all("SIGKILL" in r["detail"] for r in crashed)
    again = run_tests(tmp_path, repeats=2, jobs=1)
    assert again["finished"] == 0 and again["skipped_already_done"] == len(tests)
    assert again["boots"] == 0


def test_frozen_guest_is_killed_and_rebooted(tmp_path):
    header, calibration = _tests(CALIBRATION)
    # panic=0: after the panic the guest sits frozen instead of rebooting.
    _write(tmp_path, header, [diagnostic_test("freeze", "_panic"), calibration[2]])
    summary = run_tests(tmp_path, repeats=2, jobs=1, timeout=1.0, kernel_args="panic=0")
    records = _records(tmp_path)
    assert records["_panic-stat/freeze"]["status"] == "timeout"
    assert "no progress" in records["_panic-stat/freeze"]["detail"]
    assert records[calibration[2]["id"]]["status"] == "ok"
    # killed and booted again (a boot that itself hangs in the kernel's early start, as
    # TCG guests rarely do on a 2-core host, is killed and retried: one boot more)
    assert summary["boots"] >= 2
