"""Per-pair work spread over processes (Z3 holds the GIL, so threads would not help)."""

import multiprocessing


def map_unordered(function, work: list, jobs: int | None):
    """Yield ``function(item)`` for every item, in completion order, on up to ``jobs`` processes."""
    if not work:
        return
    if (jobs or 1) <= 1 or len(work) == 1:
        yield from map(function, work)
        return
    with multiprocessing.get_context("fork").Pool(min(jobs, len(work)), maxtasksperchild=8) as pool:
        yield from pool.imap_unordered(function, work)
