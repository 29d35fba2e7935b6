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
    run_name = f"scalecheck-{header['started']}-{id(pending):x}"
    queue = Queue(run_name, client=client)
    per_worker: Counter[str] = Counter()
    refused: set[str] = set()
    boots = 0
    futures: dict[Future, list] = {}
    # Per batch, the Dask variable listing its recorded tests: kept current, so that a
    # batch Dask reruns by itself after losing its worker skips them too.
    variable_of: dict[str, Variable] = {}
    recorded_in: dict[str, list] = {}
    submitted = Counter[str]()

    def submit(batch: list) -> None:
        submitted["batches"] += 1
        done = Variable(f"{run_name}-done-{submitted['batches']}", client=client)
        recorded_in[done.name] = [t.id for _, t in batch if is_done(t.id)]
        done.set(recorded_in[done.name])
        for _, test in batch:
            variable_of[test.id] = done
        allowed = [w for w in client.scheduler_info()["workers"] if w not in refused]
        if not allowed:
            raise UserError(f"every worker of the cluster was refused: {'; '.join(refused)}")
        future = client.submit(
            trace_batch,
            target,
            header["tracer"],
            batch,
            run_name,
            done.name,
            workers=allowed,
            pure=False,
        )
        futures[future] = batch

    def drain() -> None:
        """Records every record waiting in the queue (without waiting)."""
        changed = set()
        arrived = [entry for group in queue.get(batch=True) for entry in group]
        for worker, result, crash_log in arrived:
            if not is_done(result["id"]):
                if crash_log is not None:
                    save_crash_log(trace_dir, result["id"], crash_log)
                record(result)
                per_worker[worker] += 1
                done = variable_of[result["id"]]
                recorded_in[done.name].append(result["id"])
                changed.add(done)
                check_stop()  # Ctrl-C: what is recorded stays, the rest is not taken
        for done in changed:
            done.set(recorded_in[done.name])

    try:
        workers = len(client.scheduler_info()["workers"]) or 1
        for batch in batches(pending, workers, target.batch):
            submit(batch)
        while futures:
            check_stop()
            drain()
            with contextlib.suppress(TimeoutError):
                wait(list(futures), timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
            finished = [future for future in futures if future.done()]
            for future in finished:
                batch = futures.pop(future)
                if future.status == "finished":
                    boots += future.result()["boots"]
                    continue
                error = future.exception() if future.status == "error" else None
                if isinstance(error, WorkerRefused):
                    refused.add(error.worker)
                    log(f"refused: {error}")
                elif error is None or isinstance(error, KilledWorker):
                    # Cancelled with its worker, or Dask gave up rerunning it on others.
                    log("a worker was lost; its batch goes out again")
                else:
                    # A one-line error on a worker (naming it), or a bug: rerunning the
                    # batch elsewhere would only repeat it.
                    raise error
                drain()
                rest = [(index, test) for index, test in batch if not is_done(test.id)]
                if rest:
                    submit(rest)
        drain()
    finally:
        for future in futures:
            future.cancel()
        client.close()
        if cluster is not None:
            cluster.close()
    return boots, dict(per_worker)
