"""The traced VMs start from a snapshot of a booted guest (run/linux/snapshot.py): a
restored VM runs its batch and records what a booted one would, and a snapshot made with
another driver, QEMU or kernel command line is never restored."""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from scalecheck.common.errors import UserError
from scalecheck.run import testcase
from scalecheck.run.linux import snapshot, vm
from scalecheck.run.linux.kernel_target import LinuxRun, prepare_vms, trace_here
from scalecheck.run.options import RunOptions
from scalecheck.run.run_cli import run_tests

REPO = Path(__file__).resolve().parents[1]
CALIBRATION = REPO / "tests" / "data" / "calibration.jsonl"

needs_vm = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)


@needs_vm
def test_restored_vms_run_their_batches(tmp_path):
    lines = CALIBRATION.read_text().splitlines()
    header, tests = json.loads(lines[0]), [json.loads(line) for line in lines[1:7]]
    with open(tmp_path / "tests.jsonl", "w") as f:
        f.writelines(json.dumps(obj) + "\n" for obj in [header, *tests])
    commands = []
    # --batch 3: two VMs in a row, each restored from the one snapshot.
    summary = run_tests(
        tmp_path, repeats=2, jobs=1, batch=3, on_vm_start=lambda s: commands.append(s.command)
    )
    assert summary["boots"] == 2 and len(commands) == 2
    restored = [c[c.index("-incoming") + 1] for c in commands if "-incoming" in c]
    assert len(restored) == 2 and restored[0] == restored[1]
    snapshot_file = Path(restored[0].split(" ", 1)[1])
    assert snapshot_file.is_file() and snapshot_file.suffix == ".vm"
    records = [
        json.loads(line) for line in (tmp_path / "trace/results.jsonl").read_text().splitlines()[1:]
    ]
    assert len(records) == 6 and all(r["status"] == "ok" for r in records)
    # The calibration's known answers hold in restored guests (tests/test_trace_vm.py has
    # them all): two threads' open of one process conflict, stat of two files does not.
    by_id = {r["id"]: r for r in records}
    assert not by_id[tests[0]["id"]]["conflict_free"]
    # The host named data from the restored QEMU's RAM.
    assert summary["naming"]["lines"] > 0 and summary["naming"]["named"] > 0


def _fake_snapshot_boot(made):
    """Stands in for the snapshot boot (snapshot._make) in the unit test of the cache
    around it: writes a file and counts the boots."""

    def make(path, kernel, kernel_args, base_image):
        made.append(kernel_args)
        path.write_bytes(b"snapshot of " + base_image.read_bytes())

    return make


def test_a_stale_snapshot_is_said_and_never_restored(tmp_path, monkeypatch):
    made, said = [], []
    monkeypatch.setattr(snapshot, "_make", _fake_snapshot_boot(made))
    kernel, base = tmp_path / "vmlinuz", tmp_path / "base.cpio"
    kernel.write_bytes(b"kernel")
    base.write_bytes(b"driver 1")
    first = snapshot.ensure_snapshot(tmp_path, kernel, "", base, said.append)
    assert snapshot.ensure_snapshot(tmp_path, kernel, "", base, said.append) == first
    assert made == [""] and first.read_bytes() == b"snapshot of driver 1"
    # Other kernel arguments: another snapshot; the first stays for runs that use it.
    other_args = snapshot.ensure_snapshot(tmp_path, kernel, "panic=0", base, said.append)
    assert other_args != first and first.exists() and made == ["", "panic=0"]
    # Another driver build: both old ones are stale, said, never restored; kept while
    # another tree may use them, removed once unused for a day.
    base.write_bytes(b"driver 2")
    new = snapshot.ensure_snapshot(tmp_path, kernel, "", base, said.append)
    assert new not in (first, other_args) and new.read_bytes() == b"snapshot of driver 2"
    assert first.exists() and other_args.exists() and len(made) == 3
    stale = [line for line in said if " is stale " in line]
    assert len(stale) == 2 and all("base_image changed): kept" in line for line in stale)
    day_ago = time.time() - snapshot.STALE_KEPT_S
    os.utime(first, (day_ago, day_ago))
    said.clear()
    snapshot.ensure_snapshot(tmp_path, kernel, "panic=0", base, said.append)
    assert not first.exists() and other_args.exists() and len(made) == 4
    stale = sorted(line.rsplit(": ", 1)[1] for line in said if " is stale " in line)
    assert stale == ["kept until unused for 24 h", "removed"]


@needs_vm
def test_a_snapshot_qemu_cannot_load_is_said_and_removed(tmp_path):
    lines = CALIBRATION.read_text().splitlines()
    header, test = json.loads(lines[0]), json.loads(lines[1])
    config = prepare_vms(LinuxRun.open(header, RunOptions()).settings, tmp_path, log=print)
    truncated = tmp_path / "truncated.vm"
    truncated.write_bytes(config.snapshot.read_bytes()[: 1 << 20])
    config.snapshot = truncated
    with pytest.raises(UserError, match="could not be restored: removed"):
        trace_here(config, [(0, testcase.from_dict(test))], jobs=1)
    assert not truncated.exists()


@needs_vm
def test_a_snapshot_is_made_in_a_directory_deeper_than_a_socket_path_holds(tmp_path):
    header = json.loads(CALIBRATION.read_text().splitlines()[0])
    config = prepare_vms(LinuxRun.open(header, RunOptions()).settings, tmp_path, log=print)
    deep = tmp_path / ("d" * 60) / ("e" * 60)  # with the file's name, past 108 bytes
    deep.mkdir(parents=True)
    made = deep / "snapshot-deep.vm"
    settings = config.settings
    snapshot._make(made, settings.kernel, settings.kernel_args, config.built["base_image"])
    assert made.stat().st_size > 1 << 20
