"""The run loop, whichever the target: reads the tests file, selects the tests, opens the
results store, traces what is pending (here, or on the workers of a cluster) with a
progress bar, and writes the run summary. It knows no target: a wing (run/linux/,
run/user/) hands it a ``TargetRun`` (target.py).

Results are appended as each test finishes, so a rerun resumes where the last one stopped.
"""

import contextlib
import gc
import json
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from scalecheck.common import rundir_lock
from scalecheck.common.errors import UserError
from scalecheck.common.progress import EstimatingProgress
from scalecheck.formats.testfile import content_hash, file_hash
from scalecheck.run import testcase, tracer_build
from scalecheck.run.store import RESULTS_FORMAT, RESULTS_VERSION, TESTS_HASH, ResultsStore
from scalecheck.run.target import Target, TargetRun, TraceSettings

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
        + (
            f"; {summary['unsupported']} not runnable on this target (each record says why)"
            if summary["unsupported"]
            else ""
        )
    )


def starts_text(summary: dict) -> str:
    """How often the target was started: a kernel's boots, a library's program runs."""
    if "program_runs" in summary:
        return f"{summary['program_runs']} program runs"
    return f"{summary['boots']} boots"


def select_tests(tests, limit, ops, known_ops):
    """The tests to run: those whose calls all use the --ops given, the first --limit."""
    if ops:
        wanted = {o.strip() for o in ops.split(",") if o.strip()}
        unknown = wanted - set(known_ops)
        if unknown:
            raise UserError(f"--ops: unknown op(s) {', '.join(sorted(unknown))}")
        tests = [t for t in tests if set(t.pair) <= wanted]
    return tests[:limit] if limit is not None else tests


def pending_tests(selected: list, finished) -> list:
    """The ``selected`` tests not ``finished``, as [(index, Test)] in the order they are
    traced: each operation pair's tests spread evenly over the run (by their place in their
    pair), so that the first tests done are a sample of all. In the file's order the pairs
    come one after another, and their costs differ (a record of `open || open` takes the
    host 4 times the CPU of `fstat || read`'s): the time left said after the first 5 % was
    26-43 % off, and each VM's batch held other pairs. The tests keep their indices;
    records are kept by id."""
    pending = [(i, t) for i, t in enumerate(selected) if t.id not in finished]
    by_pair: dict[tuple, list] = {}
    for item in pending:
        by_pair.setdefault(tuple(item[1].pair), []).append(item)
    place = {
        item[0]: (rank + 0.5) / len(items)
        for items in by_pair.values()
        for rank, item in enumerate(items)
    }
    return sorted(pending, key=lambda item: (place[item[0]], item[0]))


@rundir_lock.holding("out_dir")
def run_tests(
    out_dir: Path,
    open_target: Callable[[dict], TargetRun],
    settings: TraceSettings,
    jobs: int | None = None,
    limit: int | None = None,
    ops: str | None = None,
    quiet: bool = False,
    set_aside_incompatible: bool = False,
    cluster: str | None = None,
    retry_unfinished: bool = False,
) -> dict:
    """Runs DIR/tests.jsonl (or the selected part) on the target ``open_target(tests
    header)`` gives, and returns the run summary.

    ``set_aside_incompatible``: see ResultsStore.
    ``cluster``: a Dask scheduler's address, or ``local:N`` (run/cluster.py).
    ``retry_unfinished``: tests recorded as timed out, crashed or in error run again.
    """
    if not 1 <= settings.repeats <= 100:
        raise UserError("--repeats must be from 1 to 100")
    tests_path = Path(out_dir) / "tests.jsonl"
    with _collector_paused():  # what a run loads makes no cycles
        tests_header, tests = testcase.read_tests(tests_path)
        run = open_target(tests_header)
        selected = select_tests(tests, limit, ops, run.known_ops())
        log = (lambda *a: None) if quiet else print
        trace_dir = Path(out_dir) / "trace"
        target, prepared, target_header = run.start(trace_dir, log)
        header = _results_header(target_header, tests_path, settings)
        store = ResultsStore(
            trace_dir / "results.jsonl",
            header,
            set_aside_incompatible,
            log,
            test_hashes={t.id: content_hash(t.raw) for t in tests},
        )
        if retry_unfinished:
            store.set_aside_unfinished(log)
        pending = pending_tests(selected, store.finished)
    jobs = _jobs(jobs, len(pending))
    started = time.monotonic()
    boots, per_worker = trace_pending(
        target, prepared, pending, jobs, cluster, header, store, quiet
    )
    elapsed = time.monotonic() - started
    records = [store.finished[t.id] for t in selected if t.id in store.finished]
    finished_now = len(pending) - sum(1 for _, t in pending if t.id not in store.finished)
    summary = summarize(records, selected)
    summary.update(
        {
            "results": str(trace_dir / "results.jsonl"),
            run.starts: boots,
            **_speed(elapsed, finished_now, len(selected) - len(pending)),
            **run.summary(prepared),
            "per_worker": per_worker,
        }
    )
    (trace_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


# The cyclic garbage collector's work in a run: the tests, the store's records, the
# program's symbols and DWARF types are many objects and almost no cycles (on libsv6's
# main job, 940 objects freed in 700 collections that took 8 % of the host's CPU, most of
# it walking what the run had loaded).


@contextlib.contextmanager
def _collector_paused():
    """No collection while a run loads its tests, results and target (bounded work)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def _frozen_heap():
    """While the tests are traced, collections leave alone what was loaded before (they
    walk only what the tracing made); unfrozen after, so that a caller's later cycles
    among those objects are collected as before. The loading's garbage (a DWARF read
    leaves cycles) is collected first, in one walk."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _speed(elapsed: float, finished_now: int, already_done: int) -> dict:
    return {
        "seconds": round(elapsed, 1),
        "finished": finished_now,
        "skipped_already_done": already_done,
        "tests_per_second": round(finished_now / elapsed, 3) if elapsed else 0.0,
    }


def _jobs(asked: int | None, pending: int) -> int:
    # A VM keeps about one host core busy: its two test CPUs take turns (A, then B) and
    # CPU 0 mostly sleeps. One VM per core traced 15.7 tests/s on 2 cores, one VM 10.8.
    return max(1, min(asked or os.cpu_count() or 1, max(1, pending)))


def _results_header(target_header: dict, tests_path: Path, settings: TraceSettings) -> dict:
    """The results file's header (docs/format-results.md): what the records were made of."""
    return {
        "format": RESULTS_FORMAT,
        "version": RESULTS_VERSION,
        **target_header,
        "tests": "tests.jsonl",
        TESTS_HASH: file_hash(tests_path),
        **settings.header(),
        "tracer": tracer_build.tracer_fingerprint(),
        "started": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


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
    with tracing_progress(quiet, len(pending)) as count, _frozen_heap():

        def record(result: dict) -> None:
            store.append(result)
            count(result)

        try:
            if not cluster:
                return target.trace(prepared, pending, jobs, record), {}
            # Imported here: Dask takes a while to import, and only --cluster needs it.
            from scalecheck.run.cluster import trace_on_cluster

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
    progress = EstimatingProgress(
        TextColumn("[bold]tracing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        # stderr, so that a command's --json output on stdout holds only the JSON.
        console=Console(stderr=True),
        disable=quiet,
        label="run",
        unit="tests",
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


def _agreement(agreed: list) -> float | None:
    """The share of tests whose repeats all showed the same conflicts."""
    return round(sum(agreed) / len(agreed), 4) if agreed else None


def summarize(records, selected) -> dict:
    status = dict.fromkeys(
        ("ok", "left_path", "mismatch", "timeout", "crash", "error", "unsupported"), 0
    )
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
        "repeat_agreement": _agreement([r["agree"] for r in traced if r["agree"] is not None]),
        # Run fewer repeats than asked: their first shared no line (run/user/program_worker).
        "fewer_repeats": sum(1 for r in traced if r["agree"] is None),
        "ctxswitch_tests": sum(1 for r in traced if r["noise"]["ctxswitch"]),
        "site_pairs": sorted(groups.values(), key=lambda g: -g["tests"])[:50],
    }
