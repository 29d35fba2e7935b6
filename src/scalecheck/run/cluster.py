"""``scalecheck run DIR --cluster ADDRESS``: the tests traced on the workers of a Dask
distributed cluster (``--cluster local:N`` starts a LocalCluster of N worker processes on
this machine). Docs: docs/cluster.md.

The tests go out in batches, one task each, with the target they are for (target.py: the
kernel, or a library). A worker prepares that target with its own installed scalecheck
(builds or finds built the plugin and the driver and probes its kernel, or compiles the
library's test program) and refuses the batch when its tracer fingerprint, kernel release
or library sources differ from the submitting machine's, so that results never mix; the
batch then goes to another worker. The records come back through a Dask queue in groups
sent at least every half second, each with the crash log of a test that crashed or hung,
and go into the one results store here (the log where a run here keeps it), so Ctrl-C and
a rerun resume as without a cluster. A batch whose worker was lost goes out again with its
unfinished tests only (the worker skips what the store already holds), so each test is
recorded once.
"""

import contextlib
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from distributed import Client, KilledWorker, LocalCluster, Queue, Variable, get_worker, wait
from distributed.client import Future

from scalecheck.common.errors import UserError, check_stop
from scalecheck.run import tracer_build
from scalecheck.run.target import (
    Target,
    TargetMismatch,
    batches,
    crash_log_path,
    save_crash_log,
)

# How long the submitting side waits for a batch to end between takes of the records.
POLL_SECONDS = 0.5
# A worker sends its records in groups, at least this often: one queue message per record
# would cost a scheduler round trip per test, on the cores the VMs trace on. A worker lost
# mid-group loses only unrecorded tests, which its batch's rerun then traces.
SEND_SECONDS = 0.5


class WorkerRefused(Exception):
    """This worker's tracer or kernel differs from the submitting machine's."""

    def __init__(self, worker: str, why: str):
        super().__init__(worker, why)
        self.worker = worker

    def __str__(self) -> str:
        return f"worker {self.args[0]}: {self.args[1]}"


def connect(address: str) -> tuple[Client, LocalCluster | None]:
    """A client of the cluster at ``address``, or of a LocalCluster for ``local:N``."""
    if address.startswith("local:"):
        try:
            workers = int(address.removeprefix("local:"))
        except ValueError:
            raise UserError(f"--cluster {address}: give local:N with N workers") from None
        if workers < 1:
            raise UserError("--cluster local:N needs at least one worker")
        # One task at a time per worker process: a task runs one VM, which keeps about
        # one host core busy.
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        return Client(cluster), cluster
    try:
        return Client(address, timeout="30s"), None
    except OSError as err:
        raise UserError(f"--cluster {address}: cannot reach a Dask scheduler ({err})") from None


def trace_batch(target: Target, tracer: str, batch: list, queue: str, done: str) -> dict:
    """Runs on a worker: one batch of ``target``'s tests here, the records put on ``queue``
    in groups, each a list of (worker, record, crash log or None). Tests whose ids the
    submitting side lists in the variable ``done`` (recorded before a lost worker's batch
    came here again) are skipped."""
    worker = get_worker().address
    fingerprint = tracer_build.tracer_fingerprint()
    if fingerprint != tracer:
        raise WorkerRefused(
            worker,
            f"tracer fingerprint {fingerprint}, the submitting machine's is "
            f"{tracer} (another scalecheck version or changed sources)",
        )
    with tempfile.TemporaryDirectory(prefix="scalecheck-worker-") as directory:
        trace_dir = Path(directory)
        recorded = set(Variable(done).get(timeout=10) or [])
        records = Queue(queue)
        group: list = []
        sent_at = time.monotonic()

        def flush() -> None:
            nonlocal sent_at
            if group:
                records.put(list(group))
                group.clear()
            sent_at = time.monotonic()

        def send(record: dict) -> None:
            crash_log = crash_log_path(trace_dir, record["id"])
            group.append((worker, record, crash_log.read_bytes() if crash_log.exists() else None))
            if time.monotonic() - sent_at >= SEND_SECONDS:
                flush()

        todo = [(index, test) for index, test in batch if test.id not in recorded]
        try:
            prepared = target.prepare(trace_dir, lambda *args: None)
            boots = target.trace(prepared, todo, 1, send)
        except TargetMismatch as why:
            raise WorkerRefused(worker, str(why)) from None
        except UserError as err:
            # The one line the submitting side prints says which machine it is about.
            raise UserError(f"worker {worker}: {err}", err.exit_code) from None
        finally:
            flush()  # what was traced is kept, also when the batch ends in an error
    return {"worker": worker, "boots": boots}


def trace_on_cluster(
    address: str,
    target: Target,
    header: dict,
    pending: list,
    is_done: Callable[[str], bool],
    record: Callable[[dict], None],
    trace_dir: Path,
    log: Callable[[str], None] = print,
) -> tuple[int, dict]:
    """Traces ``pending`` [(index, Test)] of ``target`` on the cluster; calls ``record``
    once per test as results arrive, after storing its crash log under ``trace_dir``.
    Returns (boots, tests recorded per worker)."""
    client, cluster = connect(address)
    name = f"scalecheck-{header['started']}-{id(pending):x}"
    run = _ClusterRun(
        client, name, Queue(name, client=client), target, header, is_done, record, trace_dir, log
    )
    try:
        workers = len(client.scheduler_info()["workers"]) or 1
        for batch in batches(pending, workers, target.batch):
            run.submit(batch)
        while run.futures:
            check_stop()
            run.drain()
            with contextlib.suppress(TimeoutError):
                wait(list(run.futures), timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
            for future in [future for future in run.futures if future.done()]:
                run.collect(future)
        run.drain()
    finally:
        for future in run.futures:
            future.cancel()
        client.close()
        if cluster is not None:
            cluster.close()
    return run.boots, dict(run.per_worker)


@dataclass
class _ClusterRun:
    """The submitting side of a run on a cluster: its batches out, its records in."""

    client: Client
    name: str
    queue: Queue  # the records the workers send
    target: Target
    header: dict
    is_done: Callable[[str], bool]
    record: Callable[[dict], None]
    trace_dir: Path
    log: Callable[[str], None]
    per_worker: Counter[str] = field(default_factory=Counter)
    refused: set[str] = field(default_factory=set)
    boots: int = 0
    futures: dict[Future, list] = field(default_factory=dict)
    # Per batch, the Dask variable listing its recorded tests: kept current, so that a
    # batch Dask reruns by itself after losing its worker skips them too.
    variable_of: dict[str, Variable] = field(default_factory=dict)
    recorded_in: dict[str, list] = field(default_factory=dict)
    submitted: int = 0

    def submit(self, batch: list) -> None:
        self.submitted += 1
        done = Variable(f"{self.name}-done-{self.submitted}", client=self.client)
        self.recorded_in[done.name] = [t.id for _, t in batch if self.is_done(t.id)]
        done.set(self.recorded_in[done.name])
        for _, test in batch:
            self.variable_of[test.id] = done
        allowed = [w for w in self.client.scheduler_info()["workers"] if w not in self.refused]
        if not allowed:
            raise UserError(f"every worker of the cluster was refused: {'; '.join(self.refused)}")
        future = self.client.submit(
            trace_batch,
            self.target,
            self.header["tracer"],
            batch,
            self.name,
            done.name,
            workers=allowed,
            pure=False,
        )
        self.futures[future] = batch

    def drain(self) -> None:
        """Records every record waiting in the queue (without waiting)."""
        changed = set()
        arrived = [entry for group in self.queue.get(batch=True) for entry in group]
        for worker, result, crash_log in arrived:
            if not self.is_done(result["id"]):
                if crash_log is not None:
                    save_crash_log(self.trace_dir, result["id"], crash_log)
                self.record(result)
                self.per_worker[worker] += 1
                done = self.variable_of[result["id"]]
                self.recorded_in[done.name].append(result["id"])
                changed.add(done)
                check_stop()  # Ctrl-C: what is recorded stays, the rest is not taken
        for done in changed:
            done.set(self.recorded_in[done.name])

    def collect(self, future: Future) -> None:
        """Takes a finished batch: its boots, or its tests not recorded sent out again."""
        batch = self.futures.pop(future)
        if future.status == "finished":
            self.boots += future.result()["boots"]
            return
        error = future.exception() if future.status == "error" else None
        if isinstance(error, WorkerRefused):
            self.refused.add(error.worker)
            self.log(f"refused: {error}")
        elif error is None or isinstance(error, KilledWorker):
            # Cancelled with its worker, or Dask gave up rerunning it on others.
            self.log("a worker was lost; its batch goes out again")
        else:
            # A one-line error on a worker (naming it), or a bug: rerunning the batch
            # elsewhere would only repeat it.
            raise error
        self.drain()
        rest = [(index, test) for index, test in batch if not self.is_done(test.id)]
        if rest:
            self.submit(rest)
