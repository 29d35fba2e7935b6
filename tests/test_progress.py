"""The stages' progress bars: the estimate line said once after the first items, on
stderr, and a --json stdout that holds only the JSON."""

import io
import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from scalecheck.common.progress import (
    SINCE_FIRST,
    EstimatingProgress,
    estimate_line,
    queue_seconds_left,
    stage_progress,
)


def test_estimate_line_says_the_rest_and_what_it_is_from():
    line = estimate_line("analyze", "pairs", 300, 12, seconds=1.6, left=38.2, basis=SINCE_FIRST)
    assert line.startswith("analyze: about 38 s left (300 pairs, 12 done in 1.6 s")
    assert line.endswith("an estimate at the rate since the first was done)")
    assert "about 12 min left" in estimate_line("run", "tests", 5000, 100, 15.0, 720.0, "x")


class _Clock:
    """A fake clock for the bar, so that the rate is known."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _progress(clock, text: io.StringIO) -> EstimatingProgress:
    console = Console(file=text, force_terminal=False, width=200)
    return EstimatingProgress(console=console, get_time=clock, label="testgen", unit="pairs")


def _estimates(text: io.StringIO) -> list[str]:
    return [line for line in text.getvalue().splitlines() if "about" in line]


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)


def test_the_estimate_is_said_once_after_the_first_twentieth(two_cores):
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=100)
        for done in range(1, 11):
            clock.now = 2.0 * done
            progress.update(task, advance=1)
            if done == 4:
                assert not _estimates(text)  # 5 of 100 not yet done
    assert _estimates(text) == [
        "testgen: about 190 s left (100 pairs, 5 done in 10.0 s; an estimate at the rate since "
        "the first was done)"
    ]


def test_the_start_up_before_the_first_item_is_not_in_the_rate(two_cores):
    """A run's first record waits for its VM's boot, which the rest does not pay again:
    estimated from the start, the main job's run was said 75 % too long."""
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=40)
        clock.now = 30.0  # the boot, then the first item
        progress.advance(task)
        for done in range(2, 4):
            clock.now = 30.0 + (done - 1) * 1.0
            progress.advance(task)
    assert "about 37 s left (40 pairs, 3 done in 32.0 s" in text.getvalue()


def test_items_ending_together_on_the_cores_wait_for_more(two_cores):
    """Two items started together on two cores end together: the second's rate is not
    the stage's, so the estimate waits for one item more than the host has cores."""
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=10)
        for clock.now in (10.0, 10.01):
            progress.advance(task)
        assert not _estimates(text)
        clock.now = 20.0
        progress.advance(task)
    assert "about 35 s left (10 pairs, 3 done in 20.0 s" in text.getvalue()


def test_a_resumed_task_counts_only_the_items_left(two_cores):
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=120, completed=100)
        for done in range(1, 4):
            clock.now = 3.0 * done
            progress.advance(task)
    assert "about 51 s left (20 pairs, 3 done in 9.0 s" in text.getvalue()


def test_items_of_unequal_size_are_estimated_by_their_sizes_and_workers():
    """testgen's pairs come largest first, and the largest is still running on one worker
    while the other ends the small ones: counted by the work done since the first ended,
    the rest was said 62 % too long. Here one item of 50 and five of 10, at 1 a second,
    on 2 workers: at 30 s the first is 30 done and the rest ends at 50 s."""
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=6, sizes=[50, 10, 10, 10, 10, 10], workers=2)
        for item, ended in ((1, 10.0), (2, 20.0), (3, 30.0)):
            clock.now = ended
            progress.update(task, advance=1, item=item)
    assert (
        "testgen: about 20 s left (6 pairs, 3 done in 30.0 s; an estimate at the rate of "
        "those done, by their sizes)" in text.getvalue()
    )


def test_the_largest_item_running_bounds_the_time_left():
    """However fast the rest goes, the stage ends after its largest item still running."""
    left = queue_seconds_left([100, 1, 1, 1], 2, started=0.0, ends={1: 1.0, 2: 2.0}, now=2.0)
    assert left == pytest.approx(98.0)


def test_no_estimate_when_nothing_is_left_or_quiet(capfd):
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=1)
        clock.now = 5.0
        progress.update(task, advance=1)
    assert "about" not in text.getvalue()
    with stage_progress("analyze", quiet=True) as progress:
        task = progress.add_task("", total=40)
        for _ in range(10):
            progress.update(task, advance=1)
    assert capfd.readouterr() == ("", "")


def test_the_estimate_goes_to_stderr(capfd, two_cores):
    with stage_progress("analyze") as progress:
        task = progress.add_task("", total=40)
        for _ in range(3):
            progress.update(task, advance=1)
    out, err = capfd.readouterr()
    assert out == ""
    assert "analyze: about" in err and "(40 pairs, 3 done in" in err


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_json_stdout_holds_only_the_json(tmp_path):
    """analyze --json and testgen --json as a pipe sees them (the bars, the estimate and
    the notes on stderr); run's, report's and kernel list's: tests/test_trace_units.py,
    test_report_load.py, test_kernels.py."""
    analyzed = _cli("analyze", "--model", "counter", "--out", tmp_path, "--jobs", "1", "--json")
    assert analyzed.returncode == 0, analyzed.stderr
    assert json.loads(analyzed.stdout)["totals"]["pairs"] == 6
    assert "analyze" in analyzed.stderr
    generated = _cli("testgen", tmp_path, "--jobs", "1", "--json")
    assert generated.returncode == 0, generated.stderr
    assert json.loads(generated.stdout)["totals"]["tests"] > 0


def test_a_finished_stage_says_how_far_off_its_estimate_was(two_cores):
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=20)
        for done in range(1, 4):
            clock.now = 10.0 * done
            progress.advance(task)  # 3 of 20, 10 s each since the first: 170 s said left
        clock.now = 30.0 + 221.0
        progress.update(task, advance=17)
    assert "testgen: the estimate said 170 s left, the rest took 221 s (+30 %)" in text.getvalue()


def test_a_stage_stopped_before_its_end_checks_no_estimate(two_cores):
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=20)
        for done in range(1, 4):
            clock.now = 10.0 * done
            progress.advance(task)
    assert "about 170 s left" in text.getvalue()
    assert "the estimate said" not in text.getvalue()
