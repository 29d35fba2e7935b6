"""The traced VM booted once and saved: each batch's VM is restored from the snapshot
instead of booting (QEMU's migration to a file; a boot costs ~9 CPU s of TCG, a restore
~0.4 s: bench/results/tracer.md, 2026-12-07 23:00).

The snapshot boot has no plugin and no batch: the driver finds no /batch.txt, says WAIT and
polls fw_cfg (driver.c), and the host migrates the running VM to a file there. A restored
VM's QEMU gets the batch as fw_cfg file SC_WIRE_BATCH_FW_CFG and the plugin; the driver
copies the batch to /batch.txt and goes on as a booted one would. The guest's clocks go
on from where the snapshot stopped them (QEMU migrates the virtual clock and the TSC).

A snapshot holds for one kernel image, command line, base initramfs (driver, programs),
QEMU binary and machine size (-smp, -m): their fingerprint names the file, beside the
kernel's probed facts, so a snapshot made otherwise is never restored; one made by another
driver or QEMU is said, and removed once unused for a day.
"""

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from qemu.qmp import QMPError
from qemu.qmp.legacy import QEMUMonitorProtocol

from scalecheck.common.errors import UserError
from scalecheck.run import wire
from scalecheck.run.linux import vm

# Bumped when what a snapshot holds changes (the driver's waiting point aside: the base
# initramfs is in the fingerprint).
SNAPSHOT_VERSION = 1
SNAPSHOT_BOOT_TIMEOUT = 300
# A snapshot of another build is removed once no run restored it for this long.
STALE_KEPT_S = 24 * 3600
STALE_FIELDS = ("version", "kernel", "base_image", "qemu", "machine")
MIGRATION_TIMEOUT = 120


def fingerprint(kernel: Path, kernel_args: str, base_image: Path) -> dict:
    """What a snapshot depends on; a restore with any of it different is refused by QEMU
    at best and runs another guest than asked at worst."""
    st, qemu = kernel.stat(), Path(vm.qemu_binary())
    qemu_st = qemu.stat()
    return {
        "version": SNAPSHOT_VERSION,
        "kernel": f"{kernel.resolve()}:{st.st_size}:{int(st.st_mtime)}",
        "command_line": vm.kernel_command_line(kernel_args),
        "base_image": hashlib.sha256(base_image.read_bytes()).hexdigest(),
        "qemu": f"{qemu.resolve()}:{qemu_st.st_size}:{int(qemu_st.st_mtime)}",
        "machine": f"-smp {vm.VCPUS} -m {vm.MEMORY}",
    }


def _key(fields: dict) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def ensure_snapshot(facts_dir: Path, kernel: Path, kernel_args: str, base_image: Path, log) -> Path:
    """The snapshot of these settings in `facts_dir` (the kernel's cache), made first if
    there is none; one run makes it while the others wait (a lock)."""
    fields = fingerprint(kernel, kernel_args, base_image)
    path = facts_dir / f"snapshot-{_key(fields)}.vm"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            _say_stale(facts_dir, fields, log)
            log(f"booting kernel {kernel} once to snapshot the guest for this run's VMs...")
            _make(path, kernel, kernel_args, base_image)
            path.with_suffix(".json").write_text(json.dumps(fields, indent=1))
        os.utime(path)  # its last use: a stale snapshot goes once unused for STALE_KEPT_S
    return path


def _say_stale(facts_dir: Path, fields: dict, log):
    """Says which snapshots another driver, QEMU or snapshot version made (never restored
    here: another fingerprint), and removes those unused for STALE_KEPT_S; a run of another
    source tree (a comparison, a second checkout) may be restoring the others. Those of
    other kernel arguments stay: a run may choose them again."""
    for described in facts_dir.glob("snapshot-*.json"):
        old = json.loads(described.read_text())
        differ = [k for k in STALE_FIELDS if old.get(k) != fields[k]]
        if not differ:
            continue
        image = described.with_suffix(".vm")
        unused = time.time() - image.stat().st_mtime if image.exists() else STALE_KEPT_S
        gone = unused >= STALE_KEPT_S
        log(
            f"snapshot {described.stem} is stale ({', '.join(differ)} changed): "
            + ("removed" if gone else f"kept until unused for {STALE_KEPT_S // 3600} h")
        )
        if gone:
            image.unlink(missing_ok=True)
            shutil.rmtree(described.with_suffix(".boot"), ignore_errors=True)
            described.unlink()


def _make(path: Path, kernel: Path, kernel_args: str, base_image: Path):
    workdir = path.with_suffix(".boot")
    workdir.mkdir(exist_ok=True)
    # A Unix socket's path has at most 107 bytes: a deep cache directory cannot hold it.
    with tempfile.TemporaryDirectory(prefix="scalecheck-qmp-") as sockets:
        _boot_and_save(path, workdir, Path(sockets) / "qmp.sock", kernel, kernel_args, base_image)


def _boot_and_save(path, workdir, qmp_path, kernel, kernel_args, base_image):
    session = vm.GuestSession(
        workdir,
        kernel,
        kernel_args,
        base_image,
        None,
        plugin=None,
        entries=None,
        start=vm.Start(qmp=qmp_path),
    )
    try:
        _wait_for(session, wire.keyword("WAITING"))
        partial = path.with_suffix(".tmp")
        _save(qmp_path, partial)
        partial.replace(path)
    finally:
        session.stop()


def _wait_for(session: vm.GuestSession, word: str):
    deadline = time.monotonic() + SNAPSHOT_BOOT_TIMEOUT
    while time.monotonic() < deadline and not session.exited():
        lines, _ = session.poll()
        if word in lines:
            return
        time.sleep(0.05)
    tail = session.panic_message() or session.console_tail(3).replace("\n", " | ")
    raise UserError(
        f"the snapshot boot of the tracer's guest did not reach its waiting point "
        f"({session.exit_description()}; console: {tail or 'empty'}; see {session.workdir})"
    )


def _save(qmp_path: Path, path: Path):
    """Saves the running VM into `path` through QEMU's control socket (QEMU 7.2 has no
    file: URI); the guest, idle, converges in one pass. QEMU, stopped once it is saved, is
    ended by the session's stop."""
    qmp = QEMUMonitorProtocol(str(qmp_path))
    try:
        qmp.connect()
        qmp.settimeout(MIGRATION_TIMEOUT)
        qmp.cmd("migrate", uri=f"exec:cat > {shlex.quote(str(path))}")
        _wait_for_migration(qmp)
    except (QMPError, OSError, TimeoutError) as error:
        raise UserError(f"saving the guest's snapshot failed: {error}") from None
    finally:
        qmp.close()


def _wait_for_migration(qmp: QEMUMonitorProtocol):
    deadline = time.monotonic() + MIGRATION_TIMEOUT
    while time.monotonic() < deadline:
        state = qmp.cmd("query-migrate")
        assert isinstance(state, dict)  # QMP's reply to query-migrate is an object
        if state.get("status") == "completed":
            return
        if state.get("status") == "failed":
            raise UserError(f"saving the guest's snapshot failed: {state.get('error-desc')}")
        time.sleep(0.05)
    raise UserError(f"saving the guest's snapshot took over {MIGRATION_TIMEOUT} s")
