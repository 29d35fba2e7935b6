"""The guest's own time per test, with a plugin or without: how the tracer's cost is
measured (bench/trace_speed.py, through scalecheck.api). One boot per plugin of the same
batch, in turn, timed by the driver itself (its DONE line counts the tests' time, boot
excluded) and by QEMU's CPU time, which other work on the host disturbs less."""

import os
import time
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.run import testcase, wire
from scalecheck.run.linux import facts, guest_render, vm
from scalecheck.run.linux.guest_build import ensure_built

# The timed batch's settings: each test's deadline and where its files live.
TIMEOUT_MS = 5000
FS = "tmpfs"


def this_plugin() -> Path:
    """This checkout's build of the tracing plugin (built first if stale)."""
    return ensure_built()["plugin"]


def guest_times(
    tests: list[dict], plugins: list[Path | None], repeats: int, workdir: Path
) -> list[tuple[float, float]]:
    """For each of ``plugins`` (None: no plugin), one boot running ``tests`` ``repeats``
    times each: (the guest's ms per test, QEMU's CPU seconds for the boot)."""
    kernel = vm.default_kernel()
    built = ensure_built()
    entries = facts.kernel_facts(kernel, "", built) / "entries.txt"
    settings = wire.settings_line(repeats=repeats, timeout_ms=TIMEOUT_MS, fs=FS, warmup=0)
    text = settings + "".join(
        guest_render.render(testcase.from_dict(test), index) for index, test in enumerate(tests)
    )
    return [
        _one_boot(text, len(tests), kernel, built, plugin, entries, workdir / f"boot{number}")
        for number, plugin in enumerate(plugins)
    ]


def _one_boot(
    text: str, count: int, kernel: Path, built: dict, plugin, entries: Path, workdir: Path
) -> tuple[float, float]:
    session = vm.GuestSession(
        workdir, kernel, "", built["base_image"], text, plugin, entries if plugin else None
    )
    try:
        # After DONE the guest waits for the host to stop it (docs/tracer.md).
        while not session.exited() and not _done(session.out_path):
            time.sleep(0.2)
        cpu_seconds = _cpu_seconds(session.proc.pid)
    finally:
        session.stop()
    lines = session.out_path.read_text(errors="replace").splitlines()
    done = [r for r in map(wire.parse_report, lines) if r and r.kind == "DONE"]
    if not done:
        raise UserError(f"guest did not finish: {session.exit_description()}")
    return done[0].milliseconds() / count, cpu_seconds


def _cpu_seconds(pid: int) -> float:
    """User and system time of a running process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _done(out_path: Path) -> bool:
    return out_path.exists() and wire.holds_done(out_path.read_bytes())
