"""The stages' progress bars: the estimate line said once after the first items, on
stderr, and a --json stdout that holds only the JSON."""

import io
import json
import subprocess
import sys

from rich.console import Console

from scalecheck.common.progress import EstimatingProgress, estimate_line, stage_progress


def test_estimate_line_is_the_rest_at_the_rate_so_far():
    line = estimate_line("analyze", "pairs", total=300, done=12, seconds=1.6)
    assert line.startswith("analyze: about 38 s left (300 pairs, 12 done in 1.6 s")
    assert "estimate" in line
    assert "about 12 min left" in estimate_line("run", "tests", 5000, 100, 15.0)


class _Clock:
    """A fake clock for the bar, so that the rate is known."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _progress(clock, text: io.StringIO) -> EstimatingProgress:
    console = Console(file=text, force_terminal=False, width=200)
    return EstimatingProgress(console=console, get_time=clock, label="testgen", unit="pairs")


def test_the_estimate_is_said_once_after_the_first_twentieth():
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=100)
        for done in range(1, 11):
            clock.now = 2.0 * done
            progress.update(task, advance=1)
            if done == 4:
                assert "about" not in text.getvalue()  # 5 of 100 not yet done
    lines = [line for line in text.getvalue().splitlines() if "about" in line]
    assert lines == [
        "testgen: about 190 s left (100 pairs, 5 done in 10.0 s; an estimate at the rate so far)"
    ]


def test_a_resumed_task_counts_only_the_items_left():
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=120, completed=100)
        clock.now = 3.0
        progress.advance(task)
    assert "about 57 s left (20 pairs, 1 done in 3.0 s" in text.getvalue()


def test_items_of_unequal_size_are_estimated_by_their_work():
    """testgen's pairs come largest first: the first twentieth of the pairs is more than a
    twentieth of the work, and the rate of pairs alone would overestimate."""
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=20, work=100.0)
        clock.now = 30.0
        progress.update(task, advance=1, work=60.0)
    assert "testgen: about 20 s left (20 pairs, 1 done in 30.0 s" in text.getvalue()


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


def test_the_estimate_goes_to_stderr(capfd):
    with stage_progress("analyze") as progress:
        task = progress.add_task("", total=40)
        for _ in range(3):
            progress.update(task, advance=1)
    out, err = capfd.readouterr()
    assert out == ""
    assert "analyze: about" in err and "(40 pairs, 2 done in" in err


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


def test_a_finished_stage_says_how_far_off_its_estimate_was():
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=20)
        clock.now = 10.0
        progress.update(task, advance=1)  # 1 of 20 in 10 s: 190 s said left
        clock.now = 10.0 + 247.0
        progress.update(task, advance=19)
    assert "testgen: the estimate said 190 s left, the rest took 247 s (+30 %)" in text.getvalue()


def test_a_stage_stopped_before_its_end_checks_no_estimate():
    clock, text = _Clock(), io.StringIO()
    with _progress(clock, text) as progress:
        task = progress.add_task("", total=20)
        clock.now = 10.0
        progress.update(task, advance=1)
        clock.now = 30.0
        progress.update(task, advance=1)
    assert "about 190 s left" in text.getvalue()
    assert "the estimate said" not in text.getvalue()
