"""``scalecheck run --target linux DIR``: runs DIR/tests.jsonl on a real Linux kernel under
QEMU and writes per-test conflict results to DIR/trace/results.jsonl.

Each VM boots with a batch of tests and runs them all; a guest panic, a hung test or a
killed QEMU costs one test (reported as crash/timeout) and a reboot with the rest.
Results are appended as each test finishes, so a rerun resumes where the last one stopped.
"""

import collections
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from scalecheck.errors import UserError
from scalecheck.storage import require_space
from scalecheck.testfile import content_hash, file_hash
from scalecheck.trace import build, datanames, facts, outcome, testfile, userspace, vm
from scalecheck.trace.btf import Types
from scalecheck.trace.kernelmem import KernelMemory
from scalecheck.trace.store import RESULTS_FORMAT, RESULTS_VERSION, TESTS_HASH, ResultsStore
from scalecheck.trace.symbols import KernelSymbols
from scalecheck.trace.target import Target, TargetMismatch, batch_size, save_crash_log

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
# Tests that did not run to the end or whose results fit neither order the model allows:
# `run` and `pipeline` exit with EXIT_NOT_CONFORMING when there is any.
NOT_CONFORMING = ("mismatch", "error", "timeout", "crash")
EXIT_NOT_CONFORMING = 1


def exit_codes_help(also_lost: str = "") -> str:
    return (
        f"exit codes: 0 every test ran and its results fit the model; {EXIT_NOT_CONFORMING} "
        f"{also_lost}some tests crashed, timed out, could not be run (error) or mismatched "
        "the model (counted in the last line); 2 bad input (one-line error; a full disk too); "
        "130 interrupted"
    )


def register(subparsers):
    p = subparsers.add_parser(
        "run",
        help="run generated tests on a real kernel or library and record conflicting cache lines",
        description="Linux (--target linux, the default): boot a stock Linux kernel under QEMU "
        "(TCG) with a tracing plugin, run each test's two calls on two isolated vCPUs, and "
        "record the cache lines both calls touched with at least one write. A C library "
        "(--target lib:PATH or a shipped library): run the library's test program under "
        "qemu-x86_64 (QEMU user mode) with the same plugin, each test's two calls on two "
        "threads, and record the library's shared lines the same way; --jobs counts programs "
        "run in parallel, and the options marked 'Linux:' do not apply. Results go to "
        "DIR/trace/results.jsonl; rerunning resumes.",
        epilog=exit_codes_help(),
    )
    p.add_argument(
        "dir", type=Path, help="directory holding tests.jsonl (from `scalecheck testgen`)"
    )
    p.add_argument(
        "--target",
        default="linux",
        help="implementation to trace: 'linux' (default), 'lib:PATH' for a C library "
        "described by the manifest at PATH, or a shipped library by name: "
        f"{', '.join(sorted(userspace.NAMED_LIBRARIES))} (docs/usertarget.md)",
    )
    p.add_argument(
        "--kernel", type=Path, help="Linux: kernel image (default: newest /boot/vmlinuz-*)"
    )
    p.add_argument(
        "--vmlinux", type=Path, help="Linux: debug vmlinux of that kernel, for file:line names"
    )
    p.add_argument("--kernel-args", default="", help="Linux: extra kernel command-line arguments")
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        help="VMs (a library: programs) run in parallel (default: one per host core)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="runs per test; a conflict counts only if every run shows it (default 2)",
    )
    p.add_argument("--limit", type=int, help="trace only the first N matching tests")
    p.add_argument("--ops", help="comma-separated ops: trace only tests whose calls all use them")
    p.add_argument(
        "--fs",
        default="tmpfs",
        choices=["tmpfs", "ramfs"],
        help="Linux: file system the tests' files live on",
    )
    add_conflict_options(p)
    p.add_argument(
        "--timeout", type=float, default=5.0, help="seconds one call may take (default 5)"
    )
    p.add_argument(
        "--batch",
        type=int,
        default=BATCH,
        help=f"Linux: tests per boot, at most (default {BATCH}; the tests are cut into equal "
        "batches, a multiple of the VMs' count)",
    )
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="trace on the workers of a Dask cluster: a scheduler's address "
        "(tcp://host:8786), or local:N for N worker processes on this machine (docs/cluster.md)",
    )
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.set_defaults(func=_cli)


def add_conflict_options(p) -> None:
    """What counts as a conflict, and the kernel's security modules: options that `run`
    and `pipeline` share. Each filter can be switched off; the report counts, for every
    run, how many conflicts each filter removed."""
    p.add_argument(
        "--granularity",
        default="stable",
        choices=outcome.GRANULARITIES,
        help="what counts as a conflict: 'stable' (default) overlapping bytes, or a "
        "shared line of static, per-cpu or page-table data; heap false sharing, which depends on "
        "where objects were allocated, is listed but not counted. 'line': every "
        "shared cache line. 'bytes': overlapping bytes only. Records keep every shared line, "
        "so the report gives the conflict-free share at all three side by side",
    )
    p.add_argument(
        "--count-unrepeated",
        action="store_true",
        help="switch off the repeat filter: a conflict seen in any repeat counts "
        "(default: only one every repeat shows)",
    )
    p.add_argument(
        "--keep-tick-work",
        action="store_true",
        help="switch off the tick-work filter: keep the accesses of CPU-time accounting, "
        "which the kernel does at a call's entry or exit when 4 ms have gathered",
    )
    p.add_argument(
        "--lsm",
        default="minor",
        choices=sorted(vm.LSM_ARGS),
        help="Linux: security modules in the guest: 'minor' (default) keeps only the minor ones "
        "(AppArmor and SELinux off: their shared state is not the interface's); 'default' "
        "runs the kernel's own choice (AppArmor on Debian)",
    )


def conflict_settings(args) -> dict:
    """run_tests() keyword arguments from the options add_conflict_options() made."""
    return {
        "granularity": args.granularity,
        "filters": outcome.Filters(
            count_unrepeated=args.count_unrepeated, keep_tick_work=args.keep_tick_work
        ),
        "lsm": args.lsm,
    }


def _cli(args) -> int:
    summary = run_tests(
        args.dir,
        target=args.target,
        kernel=args.kernel,
        kernel_args=args.kernel_args,
        jobs=args.jobs,
        repeats=args.repeats,
        limit=args.limit,
        ops=args.ops,
        vmlinux=args.vmlinux,
        fs=args.fs,
        timeout=args.timeout,
        batch=args.batch,
        quiet=args.json,
        cluster=args.cluster,
        **conflict_settings(args),
    )
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(
            f"{summary['finished']} tests finished ({summary['skipped_already_done']} already "
            f"done); {starts_text(summary)}, {summary['seconds']:.0f} s, "
            f"{summary['tests_per_second']:.2f} tests/s -> {summary['results']}"
        )
        if summary["per_worker"]:
            print(
                "per worker: "
                + ", ".join(f"{w} {n} tests" for w, n in sorted(summary["per_worker"].items()))
            )
        print(conformance_line(summary))
    return exit_code(summary)


def starts_text(summary: dict) -> str:
    """How often the target was started: a kernel's boots, a library's program runs."""
    if "program_runs" in summary:
        return f"{summary['program_runs']} program runs"
    return f"{summary['boots']} boots"


def not_conforming(summary: dict) -> int:
    return sum(summary[status] for status in NOT_CONFORMING)


def exit_code(summary: dict) -> int:
    return EXIT_NOT_CONFORMING if not_conforming(summary) else 0


def conformance_line(summary: dict) -> str:
    """The verdicts of the selected tests, those that did not conform counted by why."""
    why = ", ".join(f"{summary[status]} {status}" for status in NOT_CONFORMING)
    return (
        f"{summary['recorded']} of {summary['tests']} tests traced: "
        f"{summary['conflict_free']} conflict-free, {summary['conflicting']} conflicting; "
        f"{not_conforming(summary)} did not run or conform ({why}); "
        f"{summary['left_path']} left the path (a legal choice off the test's path)"
    )


def select_tests(tests, limit, ops, known_ops):
    """The tests to run: those whose calls all use the --ops given, the first --limit."""
    if ops:
        wanted = {o.strip() for o in ops.split(",") if o.strip()}
        unknown = wanted - set(known_ops)
        if unknown:
            raise UserError(f"--ops: unknown op(s) {', '.join(sorted(unknown))}")
        tests = [t for t in tests if set(t.pair) <= wanted]
    return tests[:limit] if limit is not None else tests


def run_tests(
    out_dir,
    target="linux",
    kernel=None,
    kernel_args="",
    jobs=None,
    repeats=2,
    limit=None,
    ops=None,
    vmlinux=None,
    fs="tmpfs",
    granularity="stable",
    filters=outcome.ALL_FILTERS_ON,
    lsm="minor",
    timeout=5.0,
    batch=BATCH,
    quiet=False,
    on_vm_start=None,
    set_aside_incompatible=False,
    cluster=None,
) -> dict:
    """Runs DIR/tests.jsonl (or the selected part) and returns the run summary.

    ``on_vm_start(session)`` is called after each boot starts (used by tests that kill a VM).
    ``set_aside_incompatible``: see ResultsStore.
    ``cluster``: a Dask scheduler's address, or ``local:N`` (trace/cluster.py).
    """
    out_dir = Path(out_dir)
    if repeats < 1:
        raise UserError("--repeats must be at least 1")
    if repeats > 100:
        raise UserError("--repeats is at most 100")
    library = userspace.library_spec(target)
    if library is not None:
        return userspace.run_library_tests(
            out_dir,
            library,
            jobs=jobs,
            repeats=repeats,
            limit=limit,
            ops=ops,
            granularity=granularity,
            filters=filters,
            timeout=timeout,
            quiet=quiet,
            set_aside_incompatible=set_aside_incompatible,
            cluster=cluster,
        )
    if target != "linux":
        raise UserError(
            f"unknown target {target!r} ('linux', 'lib:PATH' or one of "
            f"{', '.join(sorted(userspace.NAMED_LIBRARIES))})"
        )
    tests_header, tests = testfile.read_tests(out_dir / "tests.jsonl")
    if tests_header.get("model", "posix") != "posix":
        raise UserError(
            f"tests of model {tests_header.get('model')!r} have no Linux mapping; "
            "`scalecheck run --target linux` runs posix-model tests"
        )
    kernel = vm.check_kernel(Path(kernel)) if kernel else vm.default_kernel()
    if vmlinux and not Path(vmlinux).is_file():
        raise UserError(f"--vmlinux {vmlinux} does not exist")
    vm.qemu_binary()
    kernel_args = " ".join(part for part in (vm.LSM_ARGS[lsm], kernel_args) if part)
    selected = select_tests(tests, limit, ops, testfile.OP_ARGS)
    log = (lambda *a: None) if quiet else print
    settings = VmSettings(
        kernel=kernel,
        kernel_args=kernel_args,
        vmlinux=Path(vmlinux) if vmlinux else None,
        repeats=repeats,
        fs=fs,
        granularity=granularity,
        filters=filters,
        timeout=timeout,
        batch=batch,
    )
    trace_dir = out_dir / "trace"
    config = prepare_vms(settings, trace_dir, log, on_vm_start)
    header = {
        "format": RESULTS_FORMAT,
        "version": RESULTS_VERSION,
        "target": target,
        "kernel": {
            "release": config.release,
            "image": str(kernel),
            "args": vm.kernel_command_line(kernel_args),
        },
        "tests": "tests.jsonl",
        TESTS_HASH: file_hash(out_dir / "tests.jsonl"),
        "repeats": repeats,
        "granularity": granularity,
        "filters": filters.as_json(),
        "lsm": lsm,
        "fs": fs,
        "tracer": build.tracer_fingerprint(),
        "started": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    store = ResultsStore(
        trace_dir / "results.jsonl",
        header,
        set_aside_incompatible,
        log,
        test_hashes={t.id: content_hash(t.raw) for t in tests},
    )
    pending = [(i, t) for i, t in enumerate(selected) if t.id not in store.finished]
    started = time.monotonic()
    # A VM keeps about one host core busy: its two test CPUs take turns (A, then B) and
    # CPU 0 mostly sleeps. One VM per core traced 15.7 tests/s on 2 cores, one VM 10.8.
    jobs = max(1, jobs or os.cpu_count() or 1)
    jobs = min(jobs, max(1, len(pending)))
    boots, per_worker = trace_pending(
        KernelTarget(settings, config.release), config, pending, jobs, cluster, header, store, quiet
    )
    elapsed = time.monotonic() - started
    records = [store.finished[t.id] for t in selected if t.id in store.finished]
    finished_now = len(pending) - sum(1 for _, t in pending if t.id not in store.finished)
    summary = summarize(records, selected)
    summary.update(
        {
            "results": str(trace_dir / "results.jsonl"),
            "boots": boots,
            "seconds": round(elapsed, 1),
            "finished": finished_now,
            "skipped_already_done": len(selected) - len(pending),
            "tests_per_second": round(finished_now / elapsed, 3) if elapsed else 0.0,
            # Host time spent naming conflicting data (datanames.py), over this machine's VMs.
            "naming": {
                "lines": config.named_lines,
                "seconds": round(config.naming_seconds, 3),
            },
            "kernel": header["kernel"],
            "per_worker": per_worker,
        }
    )
    (trace_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def trace_pending(
    target: Target,
    prepared,
    pending: list,
    jobs: int,
    cluster: str | None,
    header: dict,
    store: ResultsStore,
    quiet: bool,
) -> tuple[int, dict]:
    """Traces ``pending`` [(index, Test)] here (``jobs`` at once, with ``prepared``) or on
    the workers of ``cluster``, each record going into ``store`` as it comes, whichever
    the target; returns the boots (or program runs) and the tests each worker recorded
    (none without a cluster)."""
    with tracing_progress(quiet, len(pending)) as count:

        def record(result: dict) -> None:
            store.append(result)
            count(result)

        try:
            if not cluster:
                return target.trace(prepared, pending, jobs, record), {}
            # Imported here: Dask takes a while to import, and only --cluster needs it.
            from scalecheck.trace.cluster import trace_on_cluster

            return trace_on_cluster(
                cluster,
                target,
                header,
                pending,
                store.finished.__contains__,
                record,
                store.path.parent,
            )
        finally:
            store.close()


@contextlib.contextmanager
def tracing_progress(quiet: bool, total: int):
    """A progress bar with a count per status; yields the function to call per record."""
    progress = Progress(
        TextColumn("[bold]tracing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        disable=quiet,
    )
    with progress:
        task = progress.add_task("trace", total=total, status="")
        by_status: dict[str, int] = {}
        lock = threading.Lock()

        def count(record):
            with lock:
                by_status[record["status"]] = by_status.get(record["status"], 0) + 1
                progress.update(
                    task,
                    advance=1,
                    status=" ".join(f"{k}={v}" for k, v in sorted(by_status.items())),
                )

        yield count


def summarize(records, selected) -> dict:
    status = dict.fromkeys(("ok", "left_path", "mismatch", "timeout", "crash", "error"), 0)
    for r in records:
        status[r["status"]] = status.get(r["status"], 0) + 1
    traced = [r for r in records if r["status"] in ("ok", "left_path", "mismatch")]
    # A mismatch is a disagreement between model and kernel: the test says nothing about
    # conflicts, so it is counted on its own and never as conflict-free or conflicting.
    conforming = [r for r in records if r["status"] == "ok"]
    groups: dict[tuple, dict] = {}
    for r in conforming:
        for g in r.get("site_pairs", []):
            key = (g["a"], g["b"])
            entry = groups.setdefault(key, {"a": g["a"], "b": g["b"], "tests": 0, "lines": 0})
            entry["tests"] += 1
            entry["lines"] += g["lines"]
    return {
        "tests": len(selected),
        "recorded": len(records),
        **status,
        "conflict_free": sum(1 for r in conforming if r["conflict_free"]),
        "conflicting": sum(1 for r in conforming if not r["conflict_free"]),
        # Conflict-free as counted, yet sharing heap lines with false sharing only.
        "conflict_free_with_false_sharing": sum(
            1 for r in conforming if r["conflict_free"] and r.get("false_sharing")
        ),
        "repeat_agreement": round(sum(1 for r in traced if r["agree"]) / len(traced), 4)
        if traced
        else None,
        "ctxswitch_tests": sum(1 for r in traced if r["noise"]["ctxswitch"]),
        "site_pairs": sorted(groups.values(), key=lambda g: -g["tests"])[:50],
    }


@dataclass(frozen=True)
class VmSettings:
    """What decides how tests are traced: the same on this machine and on every cluster
    worker (sent to them as is)."""

    kernel: Path
    kernel_args: str  # security-module choice included
    vmlinux: Path | None
    repeats: int
    fs: str
    granularity: str
    filters: outcome.Filters
    timeout: float
    batch: int


@dataclass(frozen=True)
class KernelTarget:
    """The Linux kernel of ``settings`` in VMs (target.py), of the release the submitting
    machine found."""

    settings: VmSettings
    release: str

    @property
    def batch(self) -> int:
        return self.settings.batch

    def prepare(self, trace_dir: Path, log) -> "_RunConfig":
        config = prepare_vms(self.settings, trace_dir, log)
        if config.release != self.release:
            raise TargetMismatch(
                f"kernel {config.release}, the submitting machine's is {self.release}"
            )
        return config

    def trace(self, prepared: "_RunConfig", tests: list, jobs: int, on_record) -> int:
        prepared.on_record = on_record
        return trace_here(prepared, tests, jobs)


@dataclass
class _RunConfig:
    settings: VmSettings
    built: dict
    entries: Path
    symbols: KernelSymbols
    types: Types | None  # the kernel's struct layouts (BTF), for naming data
    type_tables: datanames.TypeTables
    release: str
    trace_dir: Path
    on_vm_start: Callable | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    on_record: Callable[[dict], None] = lambda record: None
    # What naming cost, over the VMs of this machine (added under the lock).
    named_lines: int = 0
    naming_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


def prepare_vms(settings: VmSettings, trace_dir: Path, log=print, on_vm_start=None) -> _RunConfig:
    """Builds (or finds built) the plugin and the driver, and the kernel's facts (probed
    once per kernel image and cached): everything VMs of these settings need here."""
    built = build.ensure_built()
    facts_dir = facts.kernel_facts(settings.kernel, settings.kernel_args, built, log)
    return _RunConfig(
        settings=settings,
        built=built,
        entries=facts_dir / "entries.txt",
        symbols=KernelSymbols.load(facts_dir, settings.vmlinux),
        types=facts.kernel_types(facts_dir),
        type_tables=datanames.TypeTables.load(),
        release=json.loads((facts_dir / "facts.json").read_text())["release"],
        trace_dir=trace_dir,
        on_vm_start=on_vm_start,
    )


def trace_here(config: "_RunConfig", pending: list, jobs: int) -> int:
    """Runs ``pending`` [(index, Test)] in ``jobs`` VMs at once on this machine, each record
    going to ``config.on_record``; returns the number of boots."""
    size = batch_size(len(pending), jobs, config.settings.batch)
    workers = [_VmWorker(config, pending[k::jobs], k, size) for k in range(jobs)]
    run_workers(workers, config.stop)
    return sum(w.boots for w in workers)


def run_workers(workers: list, stop: threading.Event) -> None:
    """Runs each worker's ``run()`` on a thread of its own until all have ended, and raises
    the first ``error`` one kept. On Ctrl-C too, the workers are told to ``stop`` and given
    time to stop their VMs and finish writing before this returns."""
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    try:
        for th in threads:
            th.start()
        for th in threads:
            while th.is_alive():
                th.join(0.2)
    finally:
        stop.set()
        for th in threads:
            if th.ident is not None:
                th.join(30)
    errors = [w.error for w in workers if w.error]
    if errors:
        raise errors[0]


class _VmWorker:
    """Runs its share of the tests in one VM at a time, rebooting after a crash or hang."""

    def __init__(self, config: _RunConfig, pending: list, number: int, batch: int):
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
        parts = [
            f"S repeats={c.settings.repeats} timeout_ms={int(c.settings.timeout * 1000)} "
            f"fs={c.settings.fs} "
            f"warmup={min(WARMUP_TESTS, len(batch))}\n"
        ]
        runnable = {}
        for index, test in batch:
            try:
                parts.append(testfile.render(test, index))
                runnable[index] = test
            except testfile.UnsupportedTest as why:
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
        stall_limit = 3 * c.settings.timeout + 30
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
                        if current.complete(c.settings.repeats):
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
            self.workdir, image + tests * c.settings.repeats * TRACE_BYTES_PER_RUN - replaced
        )

    def _close(self, current, regions, done):
        if current is None or current.test.id in done:
            return None
        if not current.complete(self.config.settings.repeats):
            return current
        settings = self.config.settings
        if self.namer is None:
            self.namer = self._data_namer()
        record = outcome.finish(
            current,
            regions,
            self.config.symbols,
            settings.repeats,
            settings.granularity,
            settings.filters,
            self.namer,
        )
        self._record(done, record)
        for rep in range(self.config.settings.repeats):
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
