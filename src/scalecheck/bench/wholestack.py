"""A benchmark's workers traced in user space and in the kernel together (scalecheck sharing
--system): the program runs inside the Linux target's guest (the same QEMU, kernel and
kernel facts as `scalecheck trace`), under the tracer plugin with `user=on` (user code's
accesses recorded beside the kernel's) and `transfers=on`.

The guest's initramfs is the tracer's base image (busybox) plus the program, every
executable of its directory (mailbench's helpers), the shared objects they load (by
`ldd`), and a shell script run as init instead of the guest driver: it mounts a tmpfs at
/t, runs the command pinned to CPUs 1 to N (N workers: the guest has N + 1 CPUs and keeps
those quiet, CPU 0 doing the housekeeping), prints its result on the console between
marker lines and waits, so that the host can read the guest's memory to name kernel data
before it stops QEMU. With `schedule` (the plugin's quantum=Q options, as in user mode),
the workers' vCPUs take turns.
"""

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.run.linux import datanames, facts, guest_build, initramfs, vm
from scalecheck.run.linux.btf import Types
from scalecheck.run.linux.kernel_symbols import KernelSymbols
from scalecheck.run.linux.kernelmem import KernelMemory
from scalecheck.run.linux.type_tables import TypeTables
from scalecheck.run.regions import Region

GUEST_INIT = "/scalecheck-bench"
GUEST_WORKDIR = "/t/work"
STARTED, RESULT_BEGIN, RESULT_END, EXIT = (
    "SCALECHECK-STARTED",
    "SCALECHECK-RESULT-BEGIN",
    "SCALECHECK-RESULT-END",
    "SCALECHECK-EXIT",
)
KERNEL_ARGS = vm.LSM_ARGS["minor"]
BOOT_TIMEOUT = 300.0


def loaded_objects(program: Path) -> set[Path]:
    """The shared objects and loader that `ldd` says the program needs (none when static)."""
    run = subprocess.run(["ldd", str(program)], capture_output=True, text=True)
    return {Path(path) for path in re.findall(r"(?:=> )?(/\S+) \(0x", run.stdout)}


def guest_files(program: Path) -> set[Path]:
    """The program, its directory's other executables, and what all of them load."""
    programs = {program.resolve()}
    programs |= {
        path.resolve()
        for path in program.parent.iterdir()
        if path.is_file() and path.stat().st_mode & 0o111
    }
    files = set(programs)
    for path in programs:
        files |= loaded_objects(path)
    return files


def shell_words(words) -> str:
    return " ".join("'" + word.replace("'", "'\\''") + "'" for word in words)


def worker_cpus(workers: int) -> str:
    """The guest's quiet CPUs, one per worker (CPU 0 keeps the housekeeping)."""
    return f"1-{workers}"


def init_script(argv: list[str], cwd: Path, env: dict[str, str], workers: int) -> str:
    quoted = shell_words(argv)
    exports = "".join(f"export {shell_words([f'{k}={v}'])}\n" for k, v in env.items())
    return f"""#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t devtmpfs dev /dev
$B mount -t tmpfs scalecheck /t
echo {STARTED}
$B mkdir -p {GUEST_WORKDIR} {cwd}
cd {cwd}
export TMPDIR=/t
{exports}$B taskset -c {worker_cpus(workers)} {quoted} >/t/out 2>/t/err
status=$?
echo {RESULT_BEGIN}
$B cat /t/out
echo {RESULT_END}
$B tail -n 3 /t/err
echo "{EXIT} $status"
exec $B sleep 1000000
"""


def boot_image(base: Path, files: set[Path], script: str, out: Path) -> Path:
    """The tracer's base archive followed by one holding the files (at their host paths)
    and the init script."""
    extra = out.with_suffix(".files.cpio")
    cpio = initramfs.CpioWriter(extra)
    made = {"/", "/t", "/bin", "/dev", "/proc"}
    for path in sorted(files):
        for parent in reversed(path.parents):
            if str(parent) not in made:
                cpio.directory(str(parent).lstrip("/"))
                made.add(str(parent))
        cpio.file(str(path).lstrip("/"), path.read_bytes(), executable=True)
    cpio.file(GUEST_INIT.lstrip("/"), script.encode(), executable=True)
    cpio.close()
    out.write_bytes(base.read_bytes() + extra.read_bytes())
    extra.unlink()
    return out


class Kernel:
    """The Linux target's kernel and what names its lines (facts probed once per image)."""

    def __init__(self, image: Path | None = None):
        self.built = guest_build.ensure_built()
        self.image = vm.check_kernel(image) if image else vm.default_kernel()
        facts_dir = facts.kernel_facts(
            self.image, KERNEL_ARGS, self.built, log=lambda text: print(text, file=sys.stderr)
        )
        self.entries = facts_dir / "entries.txt"
        self.symbols = KernelSymbols.load(facts_dir)
        self.types: Types | None = facts.kernel_types(facts_dir)
        self.tables = TypeTables.load()


def data_namer(kernel: Kernel, session: vm.GuestSession) -> datanames.DataNamer:
    """Names kernel data from the running guest's memory (heap unnamed without it)."""
    memory = session.guest_memory()
    top = kernel.symbols.address_of.get("init_top_pgt", 0)
    kernel_memory = KernelMemory(memory, top) if memory else None
    return datanames.DataNamer(kernel.symbols, kernel.types, kernel.tables, kernel_memory)


class BootHang(UserError):
    """The guest did not reach its init within BOOT_TIMEOUT: the boot's fault, not the
    benchmark's (a TCG boot can hang before the kernel prints anything)."""


class GuestRun:
    """One boot running the command; the guest stays up until stop() (names need its RAM)."""

    def __init__(
        self,
        kernel: Kernel,
        argv: list[str],
        env: dict[str, str],
        program: Path,
        cwd: Path,
        scratch: Path,
        workers: int = 2,
        schedule: str = "",
    ):
        self.kernel = kernel
        image = boot_image(
            Path(kernel.built["base_image"]),
            guest_files(program),
            init_script(argv, cwd, env, workers),
            scratch / "bench.cpio",
        )
        quiet = vm.quiet_cpus_args(worker_cpus(workers))
        self.session = vm.GuestSession(
            scratch / "vm",
            kernel.image,
            f"{KERNEL_ARGS} {quiet} rdinit={GUEST_INIT}",
            image,
            "",
            kernel.built["plugin"],
            kernel.entries,
            plugin_options="transfers=on,user=on" + (f",{schedule}" if schedule else ""),
            machine=vm.Machine(workers + 1, []),
        )

    def wait(self, timeout: float) -> tuple[str, list[Region]]:
        """The command's stdout and the regions; BootHang when the guest never reached its
        init, UserError when the command fails or runs past timeout."""
        regions: list[Region] = []
        deadline = time.monotonic() + BOOT_TIMEOUT
        started = False
        while True:
            _, new = self.session.poll()
            regions += new
            console = self._console()
            if not started and re.search(rf"^{STARTED}$", console, re.MULTILINE):
                started = True
                deadline = time.monotonic() + timeout
            found = re.search(rf"^{EXIT} (\d+)$", console, re.MULTILINE)
            if found:
                break
            if self.session.exited():
                detail = self.session.panic_message() or self.session.exit_description()
                raise UserError(f"the guest stopped before the benchmark ended: {detail}")
            if time.monotonic() > deadline:
                if not started:
                    raise BootHang(f"the guest did not reach its init within {BOOT_TIMEOUT:g} s")
                raise UserError(f"the benchmark ran past {timeout:g} s in the guest")
            time.sleep(0.2)
        time.sleep(0.2)  # the last region's flush precedes the console line, not the poll
        regions += self.session.poll()[1]
        start = console.index(RESULT_BEGIN) + len(RESULT_BEGIN)
        stdout = console[start : console.index(RESULT_END, start)]
        if found.group(1) != "0":
            tail = console[console.index(RESULT_END) + len(RESULT_END) : found.start()].strip()
            raise UserError(
                f"the benchmark exited {found.group(1)} in the guest: "
                f"{tail.splitlines()[-1] if tail else 'no message'}"
            )
        return stdout, regions

    def _console(self) -> str:
        try:
            text = self.session.console_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""
        return text.replace("\r", "")

    def data_namer(self) -> datanames.DataNamer:
        return data_namer(self.kernel, self.session)

    def stop(self):
        self.session.stop()


def run_to_end(
    start: Callable[[Path], GuestRun], scratch: Path, timeout: float
) -> tuple[GuestRun, str, list[Region]]:
    """Starts a guest run in a directory of scratch (start(directory)) and waits for its
    command: (the run, still up for its names, the command's stdout, the regions). A guest
    that never reached its init is stopped and booted once more, which stderr says; a
    second such boot raises BootHang. Any other failure stops the guest and passes on."""
    try:
        return _waited(start, scratch / "boot1", timeout)
    except BootHang as hang:
        print(f"{hang}; booting it again", file=sys.stderr)
    try:
        return _waited(start, scratch / "boot2", timeout)
    except BootHang as hang:
        raise BootHang(f"{hang}, twice") from None


def _waited(
    start: Callable[[Path], GuestRun], directory: Path, timeout: float
) -> tuple[GuestRun, str, list[Region]]:
    directory.mkdir(parents=True, exist_ok=True)
    run = start(directory)
    try:
        stdout, regions = run.wait(timeout)
    except BaseException:
        run.stop()
        raise
    return run, stdout, regions
