"""Boots the traced VM (QEMU TCG, three vCPUs on one host thread) and follows what it reports.

Channels: the guest driver writes text lines to QEMU's debug console (port 0xe9), which
QEMU appends to ``driver.out``; the plugin appends regions to ``trace.bin``; the kernel
console goes to ``console.log``. All three are files, so a killed QEMU loses nothing that
was already written.
"""

import glob
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.parallel import die_with_parent
from scalecheck.run import wire
from scalecheck.run.linux import initramfs
from scalecheck.run.linux.kernelmem import GuestMemory, qemu_ram
from scalecheck.run.regions import RegionReader

QEMU = "qemu-system-x86_64"


def quiet_cpus_args(cpus: str) -> str:
    """Kernel arguments that shield `cpus` (a CPU list: "1-2") from the scheduler's
    balancing, the tick and RCU callbacks. With rcu_nocb_poll the callback threads poll,
    so a call queueing a callback never decides, by timing, to wake them."""
    return f"nohz_full={cpus} isolcpus=nohz,domain,{cpus} rcu_nocbs={cpus} rcu_nocb_poll"


# CPU0 does the housekeeping; CPUs 1 and 2 run the two calls, quiet. nokaslr keeps
# kallsyms addresses valid across boots; a fixed kernel stack offset keeps repeats
# identical.
ISOLATION_ARGS = f"nokaslr randomize_kstack_offset=off {quiet_cpus_args('1-2')}"
# AppArmor (on by default in Debian) adds a label refcount every open shares; with only
# apparmor=0, SELinux (built in, no policy; Debian's kernel ignores selinux=0) takes its
# place with its own shared inode security state. Neither belongs to the interface under
# test, so by default (`--lsm minor`) the LSM list keeps only the minor modules;
# `--lsm default` leaves the kernel's own choice.
LSM_ARGS = {
    "minor": "apparmor=0 lsm=landlock,lockdown,yama,loadpin,safesetid,integrity,bpf",
    "default": "",
}
# Without merging, every slab cache keeps objects of one type only, so the cache that holds
# a conflicting object names its type (datanames.py); merged caches would mix types.
NAMING_ARGS = "slab_nomerge"
BASE_ARGS = "console=ttyS0 quiet loglevel=3 panic=-1 oops=panic rdinit=/init"
VCPUS = 3
MEMORY_BYTES = 512 << 20
MEMORY = f"{MEMORY_BYTES >> 20}M"
# The probe boot's RAM lives in a shared file, so that the host can copy the kernel's BTF
# out of it once the guest has powered off (facts.py). /dev/shm keeps it in host memory.
# Traced boots keep QEMU's own RAM (huge pages); the host reads it through /proc/<pid>/mem.
MEMORY_DIR = Path("/dev/shm")


def default_kernel() -> Path:
    images = sorted(glob.glob("/boot/vmlinuz-*"))
    if not images:
        raise UserError(
            "no kernel found at /boot/vmlinuz-*: run scripts/setup.sh "
            "(installs linux-image-amd64) or pass --kernel PATH"
        )
    return Path(images[-1])


def check_kernel(path: Path) -> Path:
    if path.is_dir():
        raise UserError(f"kernel image {path} is a directory: give the image file in it")
    if not path.is_file():
        raise UserError(f"kernel image {path} does not exist")
    if not os.access(path, os.R_OK):
        raise UserError(f"kernel image {path} is not readable (try as root)")
    return path


# Another QEMU than the one on PATH (a build of its own, another version beside the system's).
QEMU_ENV = "SCALECHECK_QEMU"


def qemu_binary() -> str:
    chosen = os.environ.get(QEMU_ENV)
    if chosen:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise UserError(f"{QEMU_ENV}={chosen} is not an executable file")
        return chosen
    found = shutil.which(QEMU)
    if not found:
        raise UserError(f"{QEMU} not found: run scripts/setup.sh (installs qemu-system-x86)")
    return found


# A whole program (scalecheck profile) runs on every CPU: only fixed addresses are kept.
FIXED_ADDRESS_ARGS = "nokaslr randomize_kstack_offset=off"


def kernel_command_line(extra: str, isolation: bool = True) -> str:
    kept = ISOLATION_ARGS if isolation else FIXED_ADDRESS_ARGS
    return " ".join(p for p in (BASE_ARGS, kept, NAMING_ARGS, extra) if p)


class Machine:
    """A guest unlike the traced tests' (scalecheck profile, sharing --system): its vCPUs,
    quiet only as the caller's kernel arguments say (quiet_cpus_args), and QEMU arguments
    of its own (the host's file system shared)."""

    def __init__(self, vcpus: int, qemu_args: list[str]):
        self.vcpus, self.qemu_args = vcpus, qemu_args


def tcg_accel(machine: "Machine | None") -> str:
    """QEMU's accelerator for a boot. The tests' VM (machine None) runs its vCPUs on one
    host thread, in turn: a test uses one vCPU at a time (its calls run one after the
    other; the driver sleeps in futexes, never spins, which would hold the thread until
    QEMU's round-robin kick, 100 ms), and a hand-off's wake-up of another vCPU then needs
    no other host thread to get a core. Same verdicts, 1.14x less CPU (bench/results/
    tracer.md, 2026-12-07 16:00). A Machine (profile, sharing --system) runs a program's
    threads at once, one host thread per vCPU: turns of up to 100 ms would serialise
    them, and the plugin's quantum schedule (sharing) blocks a vCPU's thread until its
    turn, which on one thread would come only when the wait lapsed."""
    return "tcg,thread=multi" if machine else "tcg,thread=single"


def qemu_stderr(workdir: Path) -> list[str]:
    """The lines QEMU wrote on stderr (qemu.log) in `workdir`: why it refused to start or
    to load a snapshot."""
    try:
        text = (workdir / "qemu.log").read_text(errors="replace")
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class Start:
    """How a GuestSession starts, if not by booting with its batch in the initramfs:
    `restore`, a snapshot (snapshot.py) the VM resumes from, its batch given through fw_cfg;
    `qmp`, the socket of QEMU's control protocol (the boot that makes the snapshot)."""

    restore: Path | None = None
    qmp: Path | None = None


class GuestSession:
    """One boot of the VM running one batch; poll() returns new driver lines and regions."""

    def __init__(
        self,
        workdir: Path,
        kernel: Path,
        kernel_args: str,
        base_image: Path,
        batch_text: str | None,
        plugin: Path | None,
        entries: Path | None,
        ram_file: bool = False,
        plugin_options: str = "",
        machine: "Machine | None" = None,
        start: Start = Start(),
    ):
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.out_path = workdir / "driver.out"
        self.trace_path = workdir / "trace.bin"
        self.console_path = workdir / "console.log"
        self.pid_path = workdir / "qemu.pid"
        self.batch_path = workdir / "batch.txt"
        # One file per runner process and VM directory, if the boot wants one.
        self.memory_path = MEMORY_DIR / (
            f"scalecheck-{os.getpid()}-"
            f"{hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:12]}.ram"
        )
        self._remove_last_boots_files()
        cmd = self._qemu_command(
            kernel, kernel_args, self._initrd(base_image, batch_text, start), ram_file, machine
        )
        cmd += self._start_args(start)
        if plugin:
            plugin_arg = f"{plugin},out={self.trace_path}"
            if entries:
                plugin_arg += f",entries={entries}"
            if plugin_options:  # "transfers=on,user=on" (tracer/plugin/src/lib.rs)
                plugin_arg += f",{plugin_options}"
            cmd += ["-plugin", plugin_arg]
        self.command = cmd
        self.started = time.monotonic()
        # QEMU writes to it until the VM is stopped; stop() closes it.
        self._log = open(workdir / "qemu.log", "wb")  # noqa: SIM115
        # Own process group: a Ctrl-C in the terminal reaches the runner, which then
        # stops QEMU itself, instead of QEMU dying mid-write.
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self._out_offset = 0
        self._partial = b""
        self._regions = RegionReader(self.trace_path) if plugin else None

    def _remove_last_boots_files(self):
        """The channels and files of this directory's last boot."""
        for stale in (
            self.out_path,
            self.trace_path,
            self.console_path,
            self.pid_path,
            self.memory_path,
            self.batch_path,
        ):
            stale.unlink(missing_ok=True)

    def _initrd(self, base_image: Path, batch_text: str | None, start: Start) -> Path:
        """The initramfs: the base archive, with the batch appended unless the VM is
        restored (its batch then goes through fw_cfg) or boots to make a snapshot."""
        if start.restore or start.qmp:
            if batch_text is not None:
                self.batch_path.write_text(batch_text)
            return base_image
        assert batch_text is not None, "a boot without a snapshot needs its batch"
        return initramfs.build_boot_image(base_image, batch_text, self.workdir / "boot.cpio")

    def _start_args(self, start: Start) -> list[str]:
        """QEMU's arguments that restore the snapshot and hand over the batch, or open
        the control socket. The rest of the command line must be the snapshot's own:
        QEMU matches the snapshot's RAM blocks and devices against it."""
        args = []
        if start.restore:
            args += ["-incoming", f"exec:cat {shlex.quote(str(start.restore))}"]
            args += ["-fw_cfg", f"name={wire.keyword('BATCH_FW_CFG')},file={self.batch_path}"]
        if start.qmp:
            args += ["-qmp", f"unix:{start.qmp},server=on,wait=off"]
        return args

    def _qemu_command(
        self, kernel: Path, kernel_args: str, image: Path, ram_file: bool, machine: "Machine | None"
    ) -> list:
        """QEMU's command line for this boot, without the plugin; `machine`: a profile's
        CPUs and devices instead of the tracer's isolated default."""
        cmd = [
            qemu_binary(),
            "-accel",
            tcg_accel(machine),
            "-smp",
            str(machine.vcpus if machine else VCPUS),
            "-m",
            MEMORY,
            "-nographic",
            "-no-reboot",
            "-nic",
            "none",
            "-monitor",
            "none",
            "-kernel",
            str(kernel),
            "-initrd",
            str(image),
            "-append",
            kernel_command_line(kernel_args, machine is None),
            "-serial",
            f"file:{self.console_path}",
            "-chardev",
            f"file,id=driver,path={self.out_path}",
            "-device",
            "isa-debugcon,iobase=0xe9,chardev=driver",
            "-pidfile",
            str(self.pid_path),
        ]
        if machine:
            cmd += machine.qemu_args
        if ram_file:
            cmd += [
                "-object",
                f"memory-backend-file,id=ram,size={MEMORY},mem-path={self.memory_path},share=on",
                "-machine",
                "memory-backend=ram",
            ]
        return cmd

    def poll(self):
        """New complete driver lines, then the regions written before them."""
        lines = []
        try:
            with open(self.out_path, "rb") as f:
                f.seek(self._out_offset)
                chunk = f.read()
        except FileNotFoundError:
            chunk = b""
        self._out_offset += len(chunk)
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        lines = [line.decode("utf-8", "replace") for line in complete]
        regions = self._regions.read_new() if self._regions else []
        return lines, regions

    def guest_memory(self) -> GuestMemory | None:
        """The guest's RAM while QEMU runs (kernelmem.qemu_ram)."""
        return qemu_ram(self.proc.pid, MEMORY_BYTES)

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def exit_description(self) -> str:
        code = self.proc.returncode
        if code is None:
            return "running"
        if code < 0:
            return f"QEMU killed by signal {signal.Signals(-code).name}"
        said = " ".join(qemu_stderr(self.workdir))[:400]
        return f"QEMU exited with status {code}" + (f": {said}" if said else "")

    def console_tail(self, lines=12) -> str:
        try:
            text = self.console_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def panic_message(self) -> str:
        for line in reversed(self.console_tail(60).splitlines()):
            if "Kernel panic" in line or "BUG:" in line or "Oops" in line:
                return line.strip()
        return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        self.memory_path.unlink(missing_ok=True)
