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
from scalecheck.run import outcome
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
# Tests per boot, at most. A boot costs about 13 s of a VM's time (2026-11-24), while the
# disk a boot asks for grows by TRACE_BYTES_PER_RUN per test and repeat (469 MiB for 2500
# tests and 2 repeats); a crash or hang reboots anyway. With 2500 the main
# job's 4,822 tests take one boot per VM at -j 2.
BATCH = 2500
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
                    qemu_said = (self.workdir / "qemu.log").read_text(errors="replace").strip()
                    raise UserError(
                        f"{MAX_FAILED_BOOTS} boots in a row finished no test "
                        f"(QEMU: {qemu_said.splitlines()[-1] if qemu_said else 'no message'}); "
                        f"see {self.workdir / 'console.log'}"
                    )
                self.pending = [p for p in self.pending if p[1].id not in done]
                if hung:
                    retried = next(p for p in self.pending if p[1].id == hung)
                    self.pending.remove(retried)
                    self.pending.insert(min(WARMUP_TESTS, len(self.pending)), retried)
        except BaseException as err:  # reported by the main thread
            self.error = err

    def _record(self, done: set, record: dict):
        done.add(record["id"])
        self.config.on_record(record)

    def _batch_text(self, batch, done):
        c = self.config
        trace = c.settings.trace
        parts = [
            f"S repeats={trace.repeats} timeout_ms={int(trace.timeout * 1000)} "
            f"fs={c.settings.fs} "
            f"warmup={min(WARMUP_TESTS, len(batch))}\n"
        ]
        runnable = {}
        for index, test in batch:
            try:
                parts.append(guest_render.render(test, index))
                runnable[index] = test
            except UnsupportedTest as why:
                self._record(done, outcome.base_record(test, "error", str(why)))
        return "".join(parts), runnable

    def _boot_and_run(self, batch):
        """One boot; returns the ids it finished, and the id of a test that hung and is
        to be tried again in a fresh boot (None if none)."""
        c = self.config
        done, hung = set(), None
        text, runnable = self._batch_text(batch, done)
        if not runnable:
            return done, hung
        self._require_space(len(runnable) + WARMUP_TESTS)
        session = vm.GuestSession(
            self.workdir,
            c.settings.kernel,
            c.settings.kernel_args,
            c.built["base_image"],
            text,
            c.built["plugin"],
            c.entries,
        )
        if c.on_vm_start:
            c.on_vm_start(session)
        # Made when the first record is written: QEMU has mapped the guest's RAM by then.
        self.session, self.namer = session, None
        regions, current, ready, finished = {}, None, False, False
        last_progress = time.monotonic()
        # A call may take `timeout` in the guest, its setup as long again; beyond that
        # without a word the whole guest is stuck.
        stall_limit = 3 * c.settings.trace.timeout + 30
        try:
            while not c.stop.is_set():
                exited = session.exited()
                lines, new_regions = session.poll()
                for region in new_regions:
                    if not outcome.is_warmup(region.tag):
                        regions[region.tag] = region
                if lines:
                    last_progress = time.monotonic()
                for line in lines:
                    kind, _, rest = line.partition(" ")
                    if kind == "READY":
                        ready = True
                    elif kind in ("B", "W"):
                        # "W": a warm-up run, whose results are not reported; should it
                        # crash or hang the guest, the test it ran gets the blame.
                        current = self._close(current, regions, done)
                        index = int(rest)
                        current = (
                            outcome.TestProgress(runnable[index], index)
                            if index in runnable
                            else None
                        )
                    elif kind in ("R", "X", "H") and current is not None:
                        index, rep, payload = _split_report(rest)
                        if kind == "H":
                            self.hangs[current.test.id] += 1
                            if self.hangs[current.test.id] < HANG_TRIES:
                                hung = current.test.id
                                break
                        if kind == "R":
                            res_a, _, res_b = payload.partition(" ")
                            current.repeats[rep] = ("R", res_a, res_b)
                        else:
                            current.repeats[rep] = (kind, payload)
                        if current.complete(c.settings.trace.repeats):
                            current = self._close(current, regions, done)
                    elif kind == "DONE":
                        current = self._close(current, regions, done)
                        finished = True
                    elif kind == "F":
                        raise UserError(f"guest driver failed: {rest}")
                if finished or hung:
                    break
                if exited:
                    self._fail(
                        current,
                        done,
                        "crash",
                        session.panic_message() or session.exit_description(),
                    )
                    break
                stalled = time.monotonic() - last_progress
                if (not ready and time.monotonic() - session.started > BOOT_TIMEOUT) or (
                    ready and stalled > stall_limit
                ):
                    self._fail(
                        current,
                        done,
                        "timeout",
                        f"no progress from the guest for {stalled:.0f} s; VM killed and rebooted",
                    )
                    break
                time.sleep(0.05)
        finally:
            if self.namer:
                with self.config.lock:
                    self.config.named_lines += self.namer.lines
                    self.config.lines_with_names += self.namer.named
                    self.config.naming_seconds += self.namer.seconds
                self.namer.close()
            session.stop()
        return done, hung

    def _require_space(self, tests: int):
        c = self.config
        # The last boot's image and trace are replaced by this boot's.
        replaced = sum(
            path.stat().st_size
            for path in (self.workdir / "boot.cpio", self.workdir / "trace.bin")
            if path.exists()
        )
        image = Path(c.built["base_image"]).stat().st_size
        require_space(
            self.workdir, image + tests * c.settings.trace.repeats * TRACE_BYTES_PER_RUN - replaced
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


def _split_report(rest):
    index, rep, payload = ([*rest.split(" ", 2), "", ""])[:3]
    return int(index), int(rep), payload
