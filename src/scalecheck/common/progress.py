"""The progress bar every long stage shows: label, bar, done/total, current item, elapsed,
and the time left at the rate so far (rich's column); and, once the first items are done,
one line that says how long the rest will take, start-up apart (the bar's own figure is
gone when the stage ends, and absent from a log that keeps no terminal); at the stage's
end, one more that says how far off that estimate was."""

import math
import os

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

# The estimate is said once this share of the items to do is done: the first batches, few
# enough to be early, enough to average a batch's start-up in. And not before the host's
# cores have each finished one more item than the first: items started together on them
# end together, and the rate of such a burst is not the stage's.
ESTIMATE_AFTER_SHARE = 0.05


def estimate_line(label: str, unit: str, total: int, done: int, seconds: float, left: float) -> str:
    """``analyze: about 40 s left (300 pairs, 12 done in 1.6 s; ...)``: ``total``, all the
    items to do; ``done`` of them in ``seconds``; ``left``, seconds_left's figure."""
    return (
        f"{label}: about {_duration(left)} left ({total} {unit}, {done} done in "
        f"{seconds:.1f} s; an estimate at the rate since the first was done)"
    )


def seconds_left(seconds_since_first: float, share_since_first: float, share_left: float) -> float:
    """The share of the work left, at the rate of the work done since the first item was:
    the time before it is the stage's start-up (a VM's boot, the workers' start), which
    the rest does not pay again (the estimates counted it in were 25-82 % high)."""
    return seconds_since_first * share_left / share_since_first


def estimate_check_line(label: str, said_left: float, took: float) -> str:
    """``analyze: the estimate said 40 s left, the rest took 52 s (+30 %)``."""
    error = (took - said_left) / said_left * 100 if said_left > 0 else 0.0
    return (
        f"{label}: the estimate said {_duration(said_left)} left, the rest took "
        f"{_duration(took)} ({error:+.0f} %)"
    )


def _duration(seconds: float) -> str:
    if seconds < 600:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


class EstimatingProgress(Progress):
    """A rich Progress that prints estimate_line once per task, above the bar (so on the
    bar's console: stderr), when ESTIMATE_AFTER_SHARE of the task's items left at its
    start are done (and one more than the host has cores) and some are still left, at the
    rate since the first item was done; and at the end, for a task that finished, how
    far off it was (estimate_check_line). Items already done when the task was added
    (a resumed stage) count in neither the rate nor the items to do. Items of unequal
    cost (testgen's pairs, largest first) can give their sizes: ``add_task(...,
    work=TOTAL)`` then ``update(..., work=SIZE)`` per item; the rate is then of work."""

    def __init__(self, *columns, label: str, unit: str, **options):
        super().__init__(*columns, **options)
        self.label, self.unit = label, unit
        self._starts: dict[TaskID, tuple[float, float]] = {}  # task -> (completed, time)
        self._firsts: dict[TaskID, tuple[float, float, float]] = {}  # completed, work, time
        self._said: dict[TaskID, tuple[float, float]] = {}  # task -> (said at, seconds left)
        self._work: dict[TaskID, list[float]] = {}  # task -> [work to do, work done]

    def add_task(self, description: str, *args, work: float | None = None, **options) -> TaskID:
        task_id = super().add_task(description, *args, **options)
        self._starts[task_id] = (self._tasks[task_id].completed, self.get_time())
        if work:
            self._work[task_id] = [work, 0.0]
        return task_id

    def update(self, task_id: TaskID, work: float = 0.0, **options) -> None:
        super().update(task_id, **options)
        if task_id in self._work:
            self._work[task_id][1] += work
        if self.disable or task_id in self._said or task_id not in self._starts:
            return
        task = self._tasks[task_id]
        started_done, started_at = self._starts[task_id]
        to_do = (task.total or 0) - started_done
        done = task.completed - started_done
        if done > 0 and task_id not in self._firsts:
            self._firsts[task_id] = (
                task.completed,
                self._work_share(task_id) or 0.0,
                self.get_time(),
            )
            return
        wanted = max(math.ceil(to_do * ESTIMATE_AFTER_SHARE), (os.cpu_count() or 1) + 1)
        if done >= wanted and done < to_do:
            self._say_estimate(task_id, int(to_do), int(done), started_at)

    def _work_share(self, task_id: TaskID) -> float | None:
        """The share of the task's work done, for a task whose items gave their sizes."""
        if task_id not in self._work:
            return None
        work_to_do, work_done = self._work[task_id]
        return min(work_done / work_to_do, 1.0)

    def _say_estimate(self, task_id: TaskID, to_do: int, done: int, started_at: float) -> None:
        task = self._tasks[task_id]
        first_completed, first_work, first_at = self._firsts[task_id]
        now, work = self.get_time(), self._work_share(task_id)
        if work is None:  # items alike: their count is the work
            share_left = (to_do - done) / to_do
            share_since_first = (task.completed - first_completed) / to_do
        else:
            share_left, share_since_first = 1.0 - work, work - first_work
        if share_since_first <= 0 or now <= first_at:
            return  # nothing measured since the first yet: the next update says it
        left = seconds_left(now - first_at, share_since_first, share_left)
        self._said[task_id] = (now, left)
        line = estimate_line(self.label, self.unit, to_do, done, now - started_at, left)
        self.console.print(line, soft_wrap=True, highlight=False)

    def stop(self) -> None:
        super().stop()
        for task_id, (said_at, said_left) in self._said.items():
            task = self._tasks[task_id]
            if not self.disable and task.total and task.completed >= task.total:
                took = self.get_time() - said_at
                line = estimate_check_line(self.label, said_left, took)
                self.console.print(line, soft_wrap=True, highlight=False)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        self.update(task_id, advance=advance)


def stage_progress(label: str, quiet: bool = False, unit: str = "pairs") -> Progress:
    return EstimatingProgress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True, quiet=quiet),
        label=label,
        unit=unit,
    )
