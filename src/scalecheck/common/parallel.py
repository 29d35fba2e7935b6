"""Per-pair work spread over processes (Z3 holds the GIL, so threads would not help)."""

import contextlib
import ctypes
import gc
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import signal
from collections.abc import Iterator

from scalecheck.common.errors import check_stop


def map_unordered(function, work: list, jobs: int | None, fresh_process: bool = False):
    """Yield ``function(item)`` for every item, in completion order, on up to ``jobs`` processes
    (None: one per host core, as every command's ``--jobs`` default). After each result
    (which the caller saves first) a stop request ends the loop. ``fresh_process``: every
    item in a process of its own that starts from the same state whatever this process or
    earlier items did, even with one job."""
    if not work:
        return
    workers = worker_count(jobs, len(work))
    if fresh_process:
        yield from _map_fresh(function, work, workers)
        return
    results: Iterator
    with contextlib.ExitStack() as stack:
        if workers > 1:
            context = multiprocessing.get_context("fork")
            pool = stack.enter_context(
                context.Pool(workers, initializer=_worker_signals, maxtasksperchild=8)
            )
            results = pool.imap_unordered(function, work)
        else:
            results = map(function, work)
        for result in results:
            yield result
            check_stop()


def worker_count(jobs: int | None, items: int) -> int:
    """How many processes map_unordered runs ``items`` on, at ``jobs``."""
    return min(jobs or os.cpu_count() or 1, items)


def _map_fresh(function, work: list, workers: int):
    """map_unordered's fresh processes. Each is forked by a server process (the
    forkserver) that only imported this module's users: not from this process, whose
    state depends on what it did before (Z3 numbers the terms it makes in order, and a
    term's number decides where Z3 puts it among others)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([function.__module__, "scalecheck.common.forkserver_preload"])
    _start_forkserver()
    pending = list(reversed(work))
    running: dict = {}  # the end a worker sends its result through -> the worker
    try:
        while pending or running:
            while pending and len(running) < workers:
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(
                    target=_fresh_worker, args=(function, pending.pop(), sender)
                )
                process.start()
                sender.close()
                running[receiver] = process
            for ready in multiprocessing.connection.wait(list(running)):
                yield _result_of(ready, running.pop(ready))
                check_stop()
    finally:
        for process in running.values():
            process.terminate()
            process.join()


# The forkserver's string hashing, fixed: the order of a set of names would otherwise
# change from run to run, and with it the order in which model code makes Z3 terms.
HASH_SEED = "0"


def _start_forkserver() -> None:
    """The forkserver, started (once per process) with HASH_SEED; this process's own
    environment is left as it was for the programs it starts."""
    saved = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = HASH_SEED
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONHASHSEED"]
        else:
            os.environ["PYTHONHASHSEED"] = saved


def _result_of(receiver, process):
    try:
        succeeded, value = receiver.recv()
    except EOFError:
        process.join()
        raise RuntimeError(
            f"a worker process ended (exit code {process.exitcode}) before sending its result"
        ) from None
    finally:
        receiver.close()
    process.join()
    if not succeeded:
        raise value
    return value


def _fresh_worker(function, item, sender):
    """One item's work in its own process: as a pool's worker for signals; and the cyclic
    garbage collector runs only where the work asks for it (gc.collect), not when
    allocations reach its threshold: it frees Z3 terms, whose numbers Z3 gives to the
    next terms made, and other threads (the Z3 deadline watchdog) allocate as the clock
    goes, so the threshold would fall at other points on each run. What the forkserver
    made is frozen (by the server itself: forkserver_preload; here again, with what the
    start of this process made), the same objects on every run: the work's collections
    then walk only the objects the item made."""
    _worker_signals()
    # A worker the parent never learnt of (a stop request between the fork and the
    # parent's record of it) or left behind (the parent killed) dies with its server,
    # which dies with the parent (forkserver_preload): it would otherwise go on with its
    # item and then print a BrokenPipeError on the command's stderr, after the command's
    # last line. (Not a pool's workers: the pool's own thread forks the ones it replaces,
    # and a worker killed when that thread ends can hold the task queue's lock, on which
    # the pool's shutdown then waits for ever.)
    die_with_parent()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        outcome = (True, function(item))
    except Exception as error:  # raised again in the parent, as a pool does
        outcome = (False, error)
    sender.send(outcome)
    sender.close()


def _worker_signals():
    """Workers leave Ctrl-C to the parent, which stops the pool; the SIGTERM the pool
    ends them with just ends them (the CLI's handler, inherited through fork, would
    print a traceback from each idle worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


# prctl's option that sends a signal to a child when its parent thread dies.
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Runs in a child process (a worker; a VM's or a test program's QEMU, before it
    starts): SIGKILL when the thread that started it dies, so a runner stopped or killed
    outright (Ctrl-C, kill -9, a lost cluster worker) leaves nothing running behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
