"""The records of a finished boot, made again from its files without QEMU.

`scalecheck run` keeps each VM's last boot in DIR/trace/vmN/ (`driver.out`, the driver's
report lines; `trace.bin`, the plugin's regions). Replaying them makes every test's record
as the run did (outcome.finish), without guest memory (so heap data stays unnamed), which
lets two builds of the host side be timed and compared on the same input.
"""

from pathlib import Path

from scalecheck.run import outcome, testcase, wire
from scalecheck.run.linux import datanames, kernel_target
from scalecheck.run.options import RunOptions
from scalecheck.run.regions import RegionReader


def replay_boot(run_dir: Path, vm: int = 0):
    """A function of no arguments that returns the records of every test the last boot
    of VM ``vm`` in RUN_DIR reported in full; preparing the kernel is done here, once."""
    vm_dir = Path(run_dir) / "trace" / f"vm{vm}"
    _, tests = testcase.read_tests(Path(run_dir) / "tests.jsonl")
    run = kernel_target.LinuxRun.open({"model": "posix"}, RunOptions())
    config = kernel_target.prepare_vms(
        run.settings, Path(run_dir) / "trace", lambda *a: None, boots=False
    )
    return lambda: _records(config, tests, vm_dir)


def _records(config, tests: list, vm_dir: Path) -> list:
    trace = config.settings.trace
    regions = {
        r.tag: r
        for r in RegionReader(vm_dir / "trace.bin").read_new()
        if not outcome.is_warmup(r.tag)
    }
    progress: dict[int, outcome.TestProgress] = {}
    for line in (vm_dir / "driver.out").read_text(errors="replace").splitlines():
        report = wire.parse_report(line)
        if report and report.kind in ("RESULTS", "SETUP_FAILED", "HUNG"):
            test = tests[report.index]
            progress.setdefault(report.index, outcome.TestProgress(test, report.index))
            progress[report.index].add(report)
    done = [p for p in progress.values() if p.complete(trace.repeats)]
    namer = datanames.DataNamer(config.symbols, config.types, config.type_tables, None)
    return [
        outcome.finish(
            p, regions, config.symbols, trace.repeats, trace.granularity, trace.filters, namer
        )
        for p in done
    ]
