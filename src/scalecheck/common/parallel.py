"""Per-pair work spread over processes (Z3 holds the GIL, so threads would not help)."""

import contextlib
import multiprocessing
import signal
from collections.abc import Iterator

from scalecheck.common.errors import check_stop


def map_unordered(function, work: list, jobs: int | None):
    """Yield ``function(item)`` for every item, in completion order, on up to ``jobs`` processes.
    After each result (which the caller saves first) a stop request ends the loop."""
    if not work:
        return
    workers = min(jobs or 1, len(work))
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


def _worker_signals():
    """Workers leave Ctrl-C to the parent, which stops the pool; the SIGTERM the pool
    ends them with just ends them (the CLI's handler, inherited through fork, would
    print a traceback from each idle worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
