"""map_unordered's process count: without --jobs, one process per host core."""

import os
import subprocess
import sys
import time

import pytest

from scalecheck.common.parallel import map_unordered

NAP_S = 1.0


def _interval(_item) -> tuple[float, float]:
    start = time.time()
    time.sleep(NAP_S)
    return start, time.time()


def _overlap(intervals: list[tuple[float, float]]) -> bool:
    earlier, later = sorted(intervals)
    return later[0] < earlier[1]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two host cores")
@pytest.mark.parametrize("fresh_process", [False, True])
def test_without_jobs_items_run_at_once_one_process_per_core(fresh_process):
    intervals = list(map_unordered(_interval, [0, 1], None, fresh_process=fresh_process))
    assert _overlap(intervals)


@pytest.mark.parametrize("fresh_process", [False, True])
def test_one_job_runs_one_item_at_a_time(fresh_process):
    intervals = list(map_unordered(_interval, [0, 1], 1, fresh_process=fresh_process))
    assert not _overlap(intervals)


# A parent that starts one fresh worker on a long nap, says so, and waits for it.
_LONG_NAP_PARENT = """
import time
from scalecheck.common.parallel import map_unordered
if __name__ == "__main__":
    print("started", flush=True)
    list(map_unordered(time.sleep, [60, 60], 1, fresh_process=True))
"""

# A parent that gives a pool of two more items than its workers take before they are
# replaced (the replacements are forked by the pool's own thread).
_POOL_PARENT = """
from scalecheck.common.parallel import map_unordered
if __name__ == "__main__":
    print(sorted(map_unordered(abs, list(range(-30, 30)), 2)) == sorted(map(abs, range(-30, 30))))
"""


def test_a_killed_parent_leaves_no_fresh_worker_running():
    """The workers hold the parent's stderr: it closes once they have all gone. Without
    dying with the parent they nap on (and then print a BrokenPipeError there)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _LONG_NAP_PARENT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout.readline() == "started\n"
    time.sleep(3)  # the worker is napping
    parent.kill()
    started = time.monotonic()
    _, err = parent.communicate(timeout=50)
    assert time.monotonic() - started < 10, err
    assert "Error" not in err


def test_a_pool_that_replaced_its_workers_shuts_down():
    """A replaced worker killed when the pool's thread ends at the shutdown can hold the
    task queue's lock: the shutdown then waits for ever (a pipeline hung so)."""
    pooled = subprocess.run(
        [sys.executable, "-c", _POOL_PARENT], capture_output=True, text=True, timeout=60
    )
    assert pooled.stdout == "True\n", pooled.stderr
