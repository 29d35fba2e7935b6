"""Per-pair work spread over processes (Z3 holds the GIL, so threads would not help)."""

import contextlib
import multiprocessing

from scalecheck.errors import check_stop


def map_unordered(function, work: list, jobs: int | None):
    """Yield ``function(item)`` for every item, in completion order, on up to ``jobs`` processes.
    After each result (which the caller saves first) a stop request ends the loop."""
    if not work:
        return
    serial = (jobs or 1) <= 1 or len(work) == 1
    with (
        contextlib.nullcontext()
        if serial
        else multiprocessing.get_context("fork").Pool(
            min(jobs, len(work)), maxtasksperchild=8
        ) as pool
    ):
        for result in map(function, work) if serial else pool.imap_unordered(function, work):
            yield result
            check_stop()
