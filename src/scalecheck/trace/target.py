"""What the runner needs of a target (the Linux kernel in VMs, runner.KernelTarget; a C
library in user space, userspace.LibraryTarget), so that tracing here and on the workers of
a cluster (cluster.py) is one code path whichever target a batch is for.

A target is a small picklable value, made on the submitting machine and sent as is to the
workers:

- ``batch``: tests in one boot or program run (and one task of a cluster's worker), at most;
  batches() cuts the tests into equal ones.
- ``prepare(trace_dir, log)`` builds (or finds built) what it needs on this machine and
  returns the prepared state; it raises TargetMismatch when this machine's kernel or
  library differs from the one the target was made from, so results never mix.
- ``trace(prepared, tests, jobs, on_record)`` traces [(index, Test)] with ``jobs`` VMs or
  programs at once, calls ``on_record(record)`` once per finished test (its crash log, if
  any, already written at crash_log_path), and returns the boots or program runs it took.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol


class TargetMismatch(Exception):
    """This machine's kernel or library differs from the submitting machine's."""


class Target(Protocol):
    @property
    def batch(self) -> int: ...

    def prepare(self, trace_dir: Path, log: Callable[..., None]) -> Any: ...

    def trace(
        self, prepared: Any, tests: list, jobs: int, on_record: Callable[[dict], None]
    ) -> int: ...


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
