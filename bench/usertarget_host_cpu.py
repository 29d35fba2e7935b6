"""Where a user-target run's host CPU goes: `scalecheck run DIR --target LIB` in this
process, with the thread CPU (`time.thread_time`) of each piece of the host's work added up
across the worker threads, and the cyclic garbage collector's (`gc.callbacks`).

Reports, per test: the whole process's CPU, the worker threads', and each piece's. Pieces
nest: `finish` (a test's record) holds `name_data` (naming the shared lines), `_shared`
(the shared lines' conflict records) and `_check_results`; `_take` (a report) holds
`read_new` (the regions' lines) and `_close`, which holds `finish`. A wrapped call costs
about a microsecond: compare builds with bench/usertarget_speed.py, this says where to look.
The pieces are the host's own functions, looked up by name (PIECES): a renamed one is a
one-line error here, not a silent zero.
DIR/trace/results.jsonl is removed first (a run resumes otherwise).

Usage: python3 bench/usertarget_host_cpu.py DIR [--target libsv6] [--jobs J] [--json]
Example: python3 bench/usertarget_host_cpu.py out/main --json
"""

import argparse
import gc
import importlib
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from benchlib import print_result
from scalecheck import api

# label -> (module, attribute path) of the functions timed.
PIECES = {
    "take_report": ("scalecheck.run.user.program_worker", "ProgramWorker._take"),
    "close_test": ("scalecheck.run.user.program_worker", "ProgramWorker._close"),
    "finish": ("scalecheck.run.outcome", "finish"),
    "name_data": ("scalecheck.run.outcome", "name_data"),
    "shared": ("scalecheck.run.outcome", "_shared"),
    "check_results": ("scalecheck.run.outcome", "_check_results"),
    "read_regions": ("scalecheck.run.regions", "RegionReader.read_new"),
    "feed_reports": ("scalecheck.run.wire", "ReportStream.feed"),
    "snapshots": ("scalecheck.run.user.program_worker", "_SnapshotFiles.read"),
    "render_batch": ("scalecheck.run.user.program_worker", "ProgramWorker._batch"),
    "store_append": ("scalecheck.run.store", "ResultsStore.append"),
}


class Meter:
    """Thread CPU seconds by label, from any thread."""

    def __init__(self):
        self.seconds: Counter = Counter()
        self._lock = threading.Lock()
        self._gc_started: dict[int, float] = {}

    def add(self, label: str, seconds: float) -> None:
        with self._lock:
            self.seconds[label] += seconds

    def wrap(self, module: str, path: str, label: str) -> None:
        *owners, name = path.split(".")
        owner = importlib.import_module(module)
        try:
            for attribute in owners:
                owner = getattr(owner, attribute)
            timed_function = getattr(owner, name)
        except AttributeError:
            sys.exit(f"no {path} in {module}: renamed? (PIECES, {__file__})")

        def timed(*args, **kwargs):
            started = time.thread_time()
            try:
                return timed_function(*args, **kwargs)
            finally:
                self.add(label, time.thread_time() - started)

        setattr(owner, name, timed)

    def on_collection(self, phase: str, info: dict) -> None:
        thread = threading.get_ident()
        if phase == "start":
            self._gc_started[thread] = time.thread_time()
        elif thread in self._gc_started:
            self.add("garbage_collector", time.thread_time() - self._gc_started.pop(thread))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="a directory holding tests.jsonl")
    parser.add_argument("--target", default="libsv6")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    meter = Meter()
    for label, (module, path) in PIECES.items():
        meter.wrap(module, path, label)
    meter.wrap("scalecheck.run.user.program_worker", "ProgramWorker.run", "worker_threads")
    gc.callbacks.append(meter.on_collection)
    (args.dir / "trace" / "results.jsonl").unlink(missing_ok=True)
    started = time.process_time()
    summary = api.run_tests(args.dir, target=args.target, jobs=args.jobs, quiet=True)
    tests = max(1, summary["finished"])
    per_test = {k: round(v * 1000 / tests, 3) for k, v in meter.seconds.most_common()}
    result = {
        "tests": summary["finished"],
        "process_cpu_ms_per_test": round((time.process_time() - started) * 1000 / tests, 3),
        "ms_per_test": per_test,
    }
    print_result(result, args.json)


if __name__ == "__main__":
    main()
