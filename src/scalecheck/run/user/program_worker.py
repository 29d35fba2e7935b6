"""One worker's share of a library run: runs the test program under ``qemu-x86_64`` with
the tracing plugin, call A on one thread and then call B on another, between markers;
follows the harness's reports (run/wire.py), turns each test's regions into a record
(outcome.py), and restarts the program after a crash or hang, each of which costs one
test."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.parallel import die_with_parent
from scalecheck.run import outcome, wire
from scalecheck.run.regions import RegionReader
from scalecheck.run.target import TraceSettings, save_crash_log
from scalecheck.run.testcase import UnsupportedTest
from scalecheck.run.user.program_symbols import ProgramSymbols
from scalecheck.run.user.shared_objects import read_link_map

QEMU_USER = "qemu-x86_64"
# The harness's room for one value's text (SC_TEXT_LEN, tracer/user/scalecheck_adapter.h).
TEXT_LEN = 40
# Runs of the test program in a row that finish no test before the run gives up.
MAX_FRUITLESS_RUNS = 3
# The program's output pipe, in bytes (fs.pipe-max-size allows 1 MiB unprivileged).
PIPE_SIZE = 1 << 20
# glibc's memset and memcpy take `rep stosb` / `rep movsb` from 2 KiB on where the CPU has
# ERMS, as qemu-x86_64's has; TCG runs those a byte per iteration, and the plugin is called
# for each byte. Thresholds out of reach keep them on their vector loops: the same bytes,
# 32 at a time.
GLIBC_TUNABLES = (
    "glibc.cpu.x86_rep_stosb_threshold=0xffffffffffff"
    ":glibc.cpu.x86_rep_movsb_threshold=0xffffffffffff"
)


@dataclass
class _Run:
    """What one run of the test program has reported so far."""

    runnable: dict  # index -> test, those in the batch
    regions_reader: RegionReader
    snapshots: _SnapshotFiles
    regions: dict = field(default_factory=dict)  # tag -> region
    current: outcome.TestProgress | None = None
    # The current test's blocks allocated per repeat, and its snapshot after the calls.
    allocations: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    memory: dict[int, list[wire.Report]] = field(default_factory=dict)  # rep -> MEMORY reports

    def read_regions(self) -> None:
        for region in self.regions_reader.read_new():
            self.regions[region.tag] = region


def first_pass_repeats(settings: TraceSettings) -> int:
    """The repeats a test runs at first. A program builds each repeat from nothing, so a
    repeat costs as much as the first (on libsv6, 72 % of a test program's instructions
    are the world's set-up and teardown): each test runs once, and those whose repeat
    shared a line run every repeat in a second pass. Not when a conflict of any repeat
    counts (--count-unrepeated)."""
    if settings.filters.count_unrepeated:
        return settings.repeats
    return 1


@dataclass
class ProgramWorker:
    """Runs its share of the tests in harness processes, restarting after a crash or hang."""

    program: Path
    plugin: Path
    symbols: ProgramSymbols
    settings: TraceSettings
    arguments: dict  # op -> the arguments a call of it carries
    constants: dict  # the tests file's header constants
    trace_dir: Path
    pending: list
    workdir: Path
    on_record: Callable[[dict], None]
    stop: threading.Event
    restarts: int = 0
    error: BaseException | None = None
    done: set = field(default_factory=set)
    run_symbols: ProgramSymbols | None = None  # of the program's current run
    repeats: int = 0  # the repeats this pass runs of each test
    again: dict = field(default_factory=dict)  # test id -> (index, test): for the second pass

    def run(self):
        try:
            self.repeats = first_pass_repeats(self.settings)
            fruitless = 0
            while (self.pending or self.again) and not self.stop.is_set():
                if not self.pending:  # every repeat of the tests whose first shared a line
                    self.pending, self.again = list(self.again.values()), {}
                    self.repeats = self.settings.repeats
                before = len(self.done) + len(self.again)
                stderr = self._one_process()
                self.pending = [
                    p
                    for p in self.pending
                    if p[1].id not in self.done and p[1].id not in self.again
                ]
                self.restarts += 1
                fruitless = 0 if len(self.done) + len(self.again) > before else fruitless + 1
                if fruitless >= MAX_FRUITLESS_RUNS:
                    raise UserError(
                        f"the test program finished no test in {fruitless} runs in a row"
                        f" ({stderr or 'no message'}); see {self.workdir}"
                    )
        except BaseException as err:  # reported by the main thread
            self.error = err

    def _record(self, record: dict):
        self.done.add(record["id"])
        self.on_record(record)

    def _batch(self) -> tuple[str, dict]:
        parts = [wire.settings_line(repeats=self.repeats)]
        parts += [
            wire.line("SNAPSHOT", f"{start:#x}", size)
            for start, size in self.symbols.snapshot_ranges
        ]
        parts += [
            wire.line("ALLOC_WRAPPER", f"{start:#x}", f"{end:#x}", *([file] if file else []))
            for start, end, file in self.symbols.allocator_ranges
        ]
        runnable = {}
        for index, test in self.pending:
            try:
                parts.append(render(test, index, self.arguments, self.constants))
                runnable[index] = test
            except UnsupportedTest as why:
                self._record(outcome.unbuilt_record(test, why))
        return "".join(parts), runnable

    def _one_process(self) -> str:
        """One run of the test program over the pending tests; returns the last line it
        wrote to stderr."""
        text, runnable = self._batch()
        if not runnable:
            return ""
        self.workdir.mkdir(parents=True, exist_ok=True)
        batch_path, trace_path = self.workdir / "batch.txt", self.workdir / "trace.bin"
        batch_path.write_text(text)
        trace_path.unlink(missing_ok=True)
        snapshots = _SnapshotFiles(batch_path)
        snapshots.remove_all()  # a killed run's
        # The program's own (qemu-x86_64's glibc is left alone).
        tunables = ":".join(filter(None, (os.environ.get("GLIBC_TUNABLES"), GLIBC_TUNABLES)))
        command = [
            QEMU_USER,
            "-E",
            f"GLIBC_TUNABLES={tunables}",
            "-plugin",
            f"{self.plugin},out={trace_path},mode=user",
            str(self.program),
            str(batch_path),
        ]
        # Killed with its runner, as a VM is (a lost cluster worker leaves no program behind).
        process = subprocess.Popen(
            command,
            env=self._environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=die_with_parent,
        )
        _widen_pipe(process.stdout)
        try:
            failure = self._follow(process, _Run(runnable, RegionReader(trace_path), snapshots))
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            snapshots.remove_all()
        stderr = _read_and_close(process.stderr)
        last_line = (stderr.strip().splitlines() or [""])[-1]
        if failure:
            current, status, detail = failure
            self._fail(
                current, status, detail or _exit_description(process.returncode, last_line), stderr
            )
        return last_line

    def _follow(self, process: subprocess.Popen, run: _Run) -> tuple | None:
        """Takes the program's reports until it is done; returns (test progress, status,
        detail) for a test that crashed or timed out, else None."""
        pieces: queue.Queue = queue.Queue()
        reader = threading.Thread(
            target=_forward_output, args=(process.stdout, pieces), daemon=True
        )
        reader.start()
        reports = wire.ReportStream()
        last_progress = time.monotonic()
        timeout = self.settings.timeout
        while not self.stop.is_set():
            try:
                piece = pieces.get(timeout=0.05)
            except queue.Empty:
                if process.poll() is not None and not reader.is_alive() and pieces.empty():
                    break
                if run.current is not None and time.monotonic() - last_progress > timeout:
                    return run.current, "timeout", f"no result within {timeout:g} s; killed"
                continue
            last_progress = time.monotonic()
            for report in reports.feed(piece):
                if report is not None and self._take(report, run):
                    return None
        if run.current is not None and process.poll() is not None:
            return run.current, "crash", ""
        return None

    def _take(self, report: wire.Report, run: _Run) -> bool:
        """Takes one report; True when the program is done."""
        kind, rep = report.kind, report.rep
        if kind == "BEGIN":
            run.current = self._close(run)
            test = run.runnable.get(report.index)
            run.current = outcome.TestProgress(test, report.index) if test else None
            run.allocations, run.memory = {}, {}
        elif kind == "ALLOCATION" and run.current is not None:
            run.allocations.setdefault(rep, []).extend(report.allocations())
        elif kind == "MEMORY" and run.current is not None:
            run.memory.setdefault(rep, []).append(report)
            run.snapshots.named(report.snapshot()[0])
        elif kind in ("RESULTS", "SETUP_FAILED") and run.current is not None:
            run.current.add(report)
            if run.current.complete(self.repeats):
                # The plugin wrote the regions at the end markers, before the harness
                # printed the result.
                run.read_regions()
                run.current = self._close(run)
        elif kind == "DONE":
            run.current = self._close(run)
            return True
        return False

    def _environment(self) -> dict | None:
        """A program with shared libraries writes where it loaded them (read by
        _symbols_of_run) and binds every symbol at load (lazily, the first call in a
        region would write the GOT); None: the runner's own environment."""
        self.run_symbols = None
        if not self.symbols.shared_objects:
            return None
        self._link_map().unlink(missing_ok=True)
        return {**os.environ, "SCALECHECK_LINK_MAP": str(self._link_map()), "LD_BIND_NOW": "1"}

    def _link_map(self) -> Path:
        return self.workdir / "link-map.txt"

    def _symbols_of_run(self) -> ProgramSymbols:
        """The program's names, with the shared objects where this run loaded them (the
        program wrote its link map before its first line)."""
        if self.run_symbols is None:
            loaded = read_link_map(self._link_map()) if self.symbols.shared_objects else ()
            self.run_symbols = self.symbols.loaded(loaded) if loaded else self.symbols
        return self.run_symbols

    def _close(self, run: _Run):
        """Records the current test if it is complete; returns what is current then."""
        current, regions = run.current, run.regions
        if current is None or current.test.id in self.done:
            return None
        if not current.complete(self.repeats):
            return current
        repeats = self.repeats
        # Each repeat's lines are named from the blocks live in it (those of earlier
        # repeats a library kept included, a block's latest allocation winning) and its
        # own snapshot.
        live: dict[int, tuple] = {}
        namers = []
        symbols = self._symbols_of_run()
        for rep in range(repeats):
            live.update({block[0]: block for block in run.allocations.get(rep, [])})
            snapshot = _Snapshot(run.memory.get(rep, []), run.snapshots)
            namers.append(symbols.data_namer(list(live.values()), snapshot))
        record = outcome.finish(
            current,
            regions,
            symbols.with_allocations(list(live.values())),
            repeats,
            self.settings.granularity,
            self.settings.filters,
            repeat_namers=namers,
        )
        if repeats == self.settings.repeats:
            self._record(record)
        elif outcome.shares_no_line(record):
            self._record(outcome.of_fewer_repeats(record, self.settings.repeats))
        else:
            self.again[current.test.id] = (current.index, current.test)
        for rep in range(repeats):
            for side in (0, 1):
                regions.pop(outcome.tag(current.index, rep, side), None)
        return None

    def _fail(self, current, status, detail, stderr: str):
        if current.test.id not in self.done:
            # Written before the record: whoever takes the record finds its log.
            save_crash_log(self.trace_dir, current.test.id, stderr.encode())
            self._record(outcome.base_record(current.test, status, detail))


class _SnapshotFiles:
    """The snapshot files of one run of the program (wire.snapshot_path), each opened when
    first read, and removed once a later one is named: the tests are taken in order, so
    no test left open has a snapshot in an earlier file."""

    def __init__(self, batch: Path):
        self.batch = batch
        self.oldest = 0  # the first file not removed
        self.fds: dict[int, int] = {}

    def read(self, number: int, offset: int, size: int) -> bytes:
        if number not in self.fds:
            self.fds[number] = os.open(wire.snapshot_path(self.batch, number), os.O_RDONLY)
        return os.pread(self.fds[number], size, offset)

    def named(self, number: int) -> None:
        for old in range(self.oldest, number):
            self._remove(old)
        self.oldest = max(self.oldest, number)

    def remove_all(self) -> None:
        for number in list(self.fds):
            self._remove(number)
        for path in self.batch.parent.glob(wire.snapshot_path(self.batch, "*").name):
            path.unlink(missing_ok=True)
        self.oldest = 0

    def _remove(self, number: int) -> None:
        fd = self.fds.pop(number, None)
        if fd is not None:
            os.close(fd)
        wire.snapshot_path(self.batch, number).unlink(missing_ok=True)


class _Snapshot(Mapping):
    """A repeat's memory snapshot, address -> bytes, read from its snapshot file only when
    a namer looks at it: most repeats name no heap line."""

    def __init__(self, reports: list[wire.Report], files: _SnapshotFiles):
        self._reports, self._files = reports, files

    @functools.cached_property
    def _ranges(self) -> dict[int, bytes]:
        ranges: dict[int, bytes] = {}
        for report in self._reports:
            number, offset, table = report.snapshot()
            data = self._files.read(number, offset, sum(size for _, size in table))
            ranges.update(wire.snapshot_memory(data, table))
        return ranges

    def __getitem__(self, address: int) -> bytes:
        return self._ranges[address]

    def __iter__(self):
        return iter(self._ranges)

    def __len__(self) -> int:
        return len(self._ranges)


def _forward_output(stream, pieces: queue.Queue):
    """Hands the program's output to the run loop as it comes (a reader thread): all that
    is there at a time, so that the loop takes the GIL once for many reports, not once a
    line."""
    for piece in iter(lambda: stream.read1(wire.READ_SIZE), b""):
        pieces.put(piece)


def _widen_pipe(pipe) -> None:
    """Lets the program write a megabyte of reports (some hundred tests', their snapshots
    apart) before it waits for this process, which takes them between the other workers'
    records."""
    with contextlib.suppress(OSError):  # above the system's limit: the default stays
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)


def _read_and_close(pipe) -> str:
    if pipe is None:
        return ""
    with pipe:
        return pipe.read().decode(errors="replace")


def _exit_description(code: int, stderr: str) -> str:
    # qemu-user dies of the fatal signal the program received (SIGSEGV in a call)
    how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
    return f"test program {how}" + (f": {stderr}" if stderr else "")


def render(test, index: int, arguments: dict, constants: dict) -> str:
    """The harness's form of one test (run/wire.py): its setup flattened to VALUE lines,
    with the tests file's header constants under ``constants``; raises UnsupportedTest."""
    raw = test.raw
    setup = {"constants": constants, **(raw.get("setup") or {})}
    lines = wire.lines("VALUE", _flatten(setup))
    calls = raw.get("calls") or []
    if len(calls) != 2:
        raise UnsupportedTest(f"a test needs exactly two calls, this one has {len(calls)}")
    return wire.test_text(
        index, lines, [_call(side, call, arguments) for side, call in enumerate(calls)]
    )


def _call(side: int, call: dict, arguments: dict) -> wire.Call:
    op = call.get("op")
    if not isinstance(op, str) or op not in arguments:
        raise UnsupportedTest(f"call {'AB'[side]}: unknown op {op!r}")
    args = call.get("args") or {}
    missing = [a for a in arguments[op] if a not in args]
    if missing:
        raise UnsupportedTest(f"call {'AB'[side]} ({op}): missing {missing[0]!r}")
    proc = _token(call.get("proc", 0), "proc")
    return wire.Call(side, proc, op, [(a, _token(args[a], a)) for a in arguments[op]])


def _flatten(value, prefix: str = "", into: list | None = None) -> list:
    """(path, token) pairs of a setup: nested keys and list indices joined by '.', the ""
    field of an entry being the entry itself; an empty object or list is its path with the
    text {} or [], so that it still counts as an entry of its parent. (Into one list: a
    generator's pairs went up through every level of the setup.)"""
    into = [] if into is None else into
    if isinstance(value, dict | list) and not value and prefix:
        into.append((prefix, "{}" if isinstance(value, dict) else "[]"))
    elif isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, inner in items:
            path = f"{prefix}.{key}" if prefix and key != "" else (prefix or str(key))
            _flatten(inner, path, into)
    else:
        into.append((prefix, _token(value, prefix)))
    return into


def _token(value, what) -> str:
    """An integer, boolean (0/1) or word, as the harness reads it."""
    if isinstance(value, bool | int):
        return str(int(value))
    is_word = isinstance(value, str) and value.isprintable() and 0 < len(value) < TEXT_LEN
    if is_word and not any(c.isspace() or c == "=" for c in value):
        return value
    raise UnsupportedTest(
        f"{what} must be an integer, boolean or word of < {TEXT_LEN} characters, got {value!r}"
    )
