"""What the run loop (loop.py) needs of a target, and the helpers every target uses.

A target is the Linux kernel in VMs (run/linux/) or a C library in user space
(run/user/). Each wing gives the loop two things:

- a ``TargetRun``, made on the submitting machine from the command's options and the
  tests file's header: the operations its tests may use, and ``start`` (build, probe,
  compile), which returns the ``Target`` that traces, its prepared state here, and the
  target's own fields of the results header; ``summary`` adds the target's own fields to
  the run summary afterwards;
- the ``Target`` itself: a small picklable value, sent as is to the workers of a cluster
  (cluster.py), so that tracing here and there is one code path:

  - ``batch``: tests in one boot or program run (and one task of a cluster's worker), at
    most; batches() cuts the tests into equal ones.
  - ``prepare(trace_dir, log)`` builds (or finds built) what it needs on this machine and
    returns the prepared state; it raises TargetMismatch when this machine's kernel or
    library differs from the one the target was made from, so results never mix.
  - ``trace(prepared, tests, jobs, on_record)`` traces [(index, Test)] with ``jobs`` VMs or
    programs at once, calls ``on_record(record)`` once per finished test (its crash log,
    if any, already written at crash_log_path), and returns the boots or program runs it
    took.
"""

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from scalecheck.run.counting import Filters


class TargetMismatch(Exception):
    """This machine's kernel or library differs from the submitting machine's."""


class Target(Protocol):
    @property
    def batch(self) -> int: ...

    def prepare(self, trace_dir: Path, log: Callable[..., None]) -> Any: ...

    def trace(
        self, prepared: Any, tests: list, jobs: int, on_record: Callable[[dict], None]
    ) -> int: ...


@dataclass(frozen=True)
class TraceSettings:
    """How every target traces a test: runs per test, what counts as a conflict, and how
    long one call may take (from the run's options, options.py)."""

    repeats: int
    granularity: str
    filters: Filters
    timeout: float

    def header(self) -> dict:
        """Their fields of the results header."""
        return {
            "repeats": self.repeats,
            "granularity": self.granularity,
            "filters": self.filters.as_json(),
        }


class TargetRun(Protocol):
    """A target for one run, on the submitting machine. ``starts``: what the summary calls
    one start of the target ("boots" of a kernel, "program_runs" of a library)."""

    starts: str

    def known_ops(self) -> Collection[str]: ...

    def start(self, trace_dir: Path, log: Callable[..., None]) -> tuple[Target, Any, dict]: ...

    def summary(self, prepared: Any) -> dict: ...


def batch_size(tests: int, workers: int, limit: int) -> int:
    """Tests per batch when ``tests`` are cut into equal batches of at most ``limit``, whose
    count is a multiple of the workers' (an odd last batch would leave one worker tracing
    alone at the end)."""
    workers = max(1, workers)
    count = -(-max(1, -(-tests // limit)) // workers) * workers
    return max(1, -(-tests // count))


def batches(pending: list, workers: int, limit: int) -> list[list]:
    """``pending`` in batches of batch_size()."""
    size = batch_size(len(pending), workers, limit)
    return [pending[k : k + size] for k in range(0, len(pending), size)]


def crash_log_path(trace_dir: Path, test_id: str) -> Path:
    """Where the log of a test that crashed or hung is kept: the guest's console, or the
    test program's stderr."""
    return trace_dir / "crashes" / (test_id.replace("/", "_") + ".log")


def save_crash_log(trace_dir: Path, test_id: str, log: bytes) -> None:
    path = crash_log_path(trace_dir, test_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(log)


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
