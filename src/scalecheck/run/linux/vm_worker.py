"""One VM's share of a Linux run: boots the guest with a batch of tests, follows the
driver's reports, turns each test's regions into a record (outcome.py), and reboots after
a guest panic, a hung test or a killed QEMU, each of which costs one test.
"""

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.storage import require_space
from scalecheck.run import outcome, wire
from scalecheck.run.linux import datanames, guest_render, type_tables, vm
from scalecheck.run.linux.btf import Types
from scalecheck.run.linux.kernel_symbols import KernelSymbols
from scalecheck.run.linux.kernelmem import KernelMemory
from scalecheck.run.target import TraceSettings, save_crash_log
from scalecheck.run.testcase import UnsupportedTest

BOOT_TIMEOUT = 300
# Boots in a row that finish no test before the run gives up: the kernel or its
# arguments cannot run the guest at all.
MAX_FAILED_BOOTS = 3
# What QEMU says when it cannot read a VM's snapshot (qemu.log).
UNLOADABLE_SNAPSHOT = "load of migration failed"
# Tests the guest runs once, unreported, after each boot: one-time kernel work (a CPU's
# first use of the random pool, slab caches filling) then stays out of real runs.
WARMUP_TESTS = 20
# A call that does not return can leave the guest wedged for every later test (seen once
# in a full run: a boot in which call A of every test hung from the first on). After a
# hang the VM is rebooted and the test tried again in a fresh guest, after that boot's
# warm-up; it is recorded as `timeout` when it hangs HANG_TRIES times.
HANG_TRIES = 2
# Disk a boot needs besides its boot image: the plugin's trace grows by about 67 KiB per
# test and repeat (26.8 MB for 200 posix tests x 2 repeats, 2026-11-23); with a margin.
# A plugin that cannot write would turn every test into an error, so a boot without
# this much room is not started.
TRACE_BYTES_PER_RUN = 96 * 1024


@dataclass(frozen=True)
class VmSettings:
    """What decides how tests are traced: the same on this machine and on every cluster
    worker (sent to them as is)."""

    trace: TraceSettings
    kernel: Path
    kernel_args: str  # security-module choice included
    vmlinux: Path | None
    fs: str
    batch: int


@dataclass
class RunConfig:
    settings: VmSettings
    built: dict
    snapshot: Path | None  # the booted guest each VM is restored from (snapshot.py)
    entries: Path
    symbols: KernelSymbols
    types: Types | None  # the kernel's struct layouts (BTF), for naming data
    type_tables: type_tables.TypeTables
    release: str
    trace_dir: Path
    on_vm_start: Callable | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    on_record: Callable[[dict], None] = lambda record: None
    # What naming cost, over the VMs of this machine (added under the lock).
    named_lines: int = 0
    lines_with_names: int = 0  # of named_lines, those that got a name
    naming_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Boot:
    """What one boot's reports have told so far."""

    done: set  # ids of the tests recorded
    runnable: dict = field(default_factory=dict)  # index -> test, those in the batch
    regions: dict = field(default_factory=dict)  # tag -> region
    current: outcome.TestProgress | None = None
    ready: bool = False
    finished: bool = False
    hung: str | None = None  # the id of a test that hung, to be tried again


class VmWorker:
    """Runs its share of the tests in one VM at a time, rebooting after a crash or hang."""

    def __init__(self, config: RunConfig, pending: list, number: int, batch: int):
        self.config = config
        self.pending = pending
        self.batch = batch  # tests per boot
        self.workdir = config.trace_dir / f"vm{number}"
        self.boots = 0
        self.error: BaseException | None = None
        # test id -> boots in which it hung
        self.hangs: collections.Counter[str] = collections.Counter()
        self.session: vm.GuestSession | None = None
        self.namer: datanames.DataNamer | None = None  # names conflicting data in this boot

    def run(self):
        try:
            failed_boots = 0
            while self.pending and not self.config.stop.is_set():
                batch = self.pending[: self.batch]
                done, hung = self._boot_and_run(batch)
                self.boots += 1
                failed_boots = 0 if done or hung else failed_boots + 1
                if failed_boots >= MAX_FAILED_BOOTS:
                    self._give_up()
                self.pending = [p for p in self.pending if p[1].id not in done]
                if hung:
                    retried = next(p for p in self.pending if p[1].id == hung)
                    self.pending.remove(retried)
                    self.pending.insert(min(WARMUP_TESTS, len(self.pending)), retried)
        except BaseException as err:  # reported by the main thread
            self.error = err

    def _give_up(self):
        """Boots in a row finished no test: says QEMU's last words. A snapshot QEMU could not
        load (truncated, or another QEMU's) is removed, so that the next run makes it anew."""
        qemu_said = vm.qemu_stderr(self.workdir)
        last = qemu_said[-1] if qemu_said else "no message"
        restore = ""
        if self.config.snapshot and any(UNLOADABLE_SNAPSHOT in line for line in qemu_said):
            self.config.snapshot.unlink(missing_ok=True)
            restore = f"; the snapshot {self.config.snapshot} could not be restored: removed, rerun"
        raise UserError(
            f"{MAX_FAILED_BOOTS} boots in a row finished no test (QEMU: {last}){restore}; "
            f"see {self.workdir / 'console.log'}"
        )

    def _record(self, done: set, record: dict):
        done.add(record["id"])
        self.config.on_record(record)

    def _batch_text(self, batch, done):
        c = self.config
        trace = c.settings.trace
        parts = [
            wire.settings_line(
                repeats=trace.repeats,
                timeout_ms=int(trace.timeout * 1000),
                fs=c.settings.fs,
                warmup=min(WARMUP_TESTS, len(batch)),
            )
        ]
        runnable = {}
        for index, test in batch:
            try:
                parts.append(guest_render.render(test, index))
                runnable[index] = test
            except UnsupportedTest as why:
                self._record(done, outcome.unbuilt_record(test, why))
        return "".join(parts), runnable

    def _boot_and_run(self, batch):
        """One boot; returns the ids it finished, and the id of a test that hung and is
        to be tried again in a fresh boot (None if none)."""
        c = self.config
        boot = _Boot(done=set())
        text, boot.runnable = self._batch_text(batch, boot.done)
        if not boot.runnable:
            return boot.done, None
        self._require_space(len(text), len(boot.runnable) + WARMUP_TESTS)
        session = vm.GuestSession(
            self.workdir,
            c.settings.kernel,
            c.settings.kernel_args,
            c.built["base_image"],
            text,
            c.built["plugin"],
            c.entries,
            start=vm.Start(restore=c.snapshot),
        )
        if c.on_vm_start:
            c.on_vm_start(session)
        # Made when the first record is written: QEMU has mapped the guest's RAM by then.
        self.session, self.namer = session, None
        try:
            self._follow(session, boot)
        finally:
            if self.namer:
                with self.config.lock:
                    self.config.named_lines += self.namer.lines
                    self.config.lines_with_names += self.namer.named
                    self.config.naming_seconds += self.namer.seconds
                self.namer.close()
            session.stop()
        return boot.done, boot.hung

    def _follow(self, session: vm.GuestSession, boot: _Boot) -> None:
        """Takes the guest's reports until its batch is done, a test hung, or the guest
        crashed or stalled."""
        c = self.config
        last_progress = time.monotonic()
        # A call may take `timeout` in the guest, its setup as long again; beyond that
        # without a word the whole guest is stuck.
        stall_limit = 3 * c.settings.trace.timeout + 30
        while not c.stop.is_set():
            exited = session.exited()
            lines, new_regions = session.poll()
            for region in new_regions:
                if not outcome.is_warmup(region.tag):
                    boot.regions[region.tag] = region
            if lines:
                last_progress = time.monotonic()
            for line in lines:
                report = wire.parse_report(line)
                if report is not None and self._take(report, boot):
                    break
            if boot.finished or boot.hung:
                return
            if exited:
                detail = session.panic_message() or session.exit_description()
                self._fail(boot.current, boot.done, "crash", detail)
                return
            stalled = time.monotonic() - last_progress
            if (not boot.ready and time.monotonic() - session.started > BOOT_TIMEOUT) or (
                boot.ready and stalled > stall_limit
            ):
                detail = f"no progress from the guest for {stalled:.0f} s; VM killed and rebooted"
                self._fail(boot.current, boot.done, "timeout", detail)
                return
            time.sleep(0.05)

    def _take(self, report: wire.Report, boot: _Boot) -> bool:
        """Takes one report; True when a test hung and is to be tried in a fresh boot."""
        kind = report.kind
        if kind == "READY":
            boot.ready = True
        elif kind in ("BEGIN", "WARMUP"):
            # A warm-up run's results are not reported; should it crash or hang the
            # guest, the test it ran gets the blame.
            boot.current = self._close(boot.current, boot.regions, boot.done)
            test = boot.runnable.get(report.index)
            boot.current = outcome.TestProgress(test, report.index) if test else None
        elif kind in ("RESULTS", "SETUP_FAILED", "HUNG") and boot.current is not None:
            if kind == "HUNG":
                self.hangs[boot.current.test.id] += 1
                if self.hangs[boot.current.test.id] < HANG_TRIES:
                    boot.hung = boot.current.test.id
                    return True
            boot.current.add(report)
            if boot.current.complete(self.config.settings.trace.repeats):
                boot.current = self._close(boot.current, boot.regions, boot.done)
        elif kind == "DONE":
            boot.current = self._close(boot.current, boot.regions, boot.done)
            boot.finished = True
        elif kind == "FAIL":
            raise UserError(f"guest driver failed: {report.rest}")
        return False

    def _require_space(self, batch_bytes: int, tests: int):
        c = self.config
        # The last boot's batch and trace are replaced by this boot's.
        replaced = sum(
            path.stat().st_size
            for path in (self.workdir / "batch.txt", self.workdir / "trace.bin")
            if path.exists()
        )
        require_space(
            self.workdir,
            batch_bytes + tests * c.settings.trace.repeats * TRACE_BYTES_PER_RUN - replaced,
        )

    def _close(self, current, regions, done):
        if current is None or current.test.id in done:
            return None
        if not current.complete(self.config.settings.trace.repeats):
            return current
        settings = self.config.settings
        if self.namer is None:
            self.namer = self._data_namer()
        record = outcome.finish(
            current,
            regions,
            self.config.symbols,
            settings.trace.repeats,
            settings.trace.granularity,
            settings.trace.filters,
            self.namer,
        )
        self._record(done, record)
        for rep in range(self.config.settings.trace.repeats):
            for side in (0, 1):
                regions.pop(outcome.tag(current.index, rep, side), None)
        return None

    def _data_namer(self) -> datanames.DataNamer:
        """Names conflicting data from this boot's guest memory (none found: heap unnamed)."""
        c = self.config
        memory = self.session.guest_memory() if self.session else None
        kernel = (
            KernelMemory(memory, c.symbols.address_of.get("init_top_pgt", 0)) if memory else None
        )
        return datanames.DataNamer(c.symbols, c.types, c.type_tables, kernel)

    def _fail(self, current, done, status, detail):
        if current is None or current.test.id in done:
            return
        console = self.workdir / "console.log"
        if console.exists():
            # Written before the record: whoever takes the record finds its log.
            save_crash_log(self.config.trace_dir, current.test.id, console.read_bytes())
        self._record(done, outcome.base_record(current.test, status, detail))
