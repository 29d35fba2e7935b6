"""map_unordered's process count: without --jobs, one process per host core."""

import os
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
