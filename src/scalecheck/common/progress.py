"""The progress bar every long stage shows: label, bar, done/total, current item, elapsed,
and the time left at the rate so far (rich's column); and, once the first items are done,
one line that says how long the rest will take, start-up apart (the bar's own figure is
gone when the stage ends, and absent from a log that keeps no terminal); at the stage's
end, one more that says how far off that estimate was."""

import math
import os
from dataclasses import dataclass, field

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


# What an estimate is from, as estimate_line says it.
SINCE_FIRST = "the rate since the first was done"
BY_SIZE = "the rate of those done, by their sizes"


def estimate_line(
    label: str, unit: str, total: int, done: int, seconds: float, left: float, basis: str
) -> str:
    """``analyze: about 40 s left (300 pairs, 12 done in 1.6 s; ...)``: ``total``, all the
    items to do; ``done`` of them in ``seconds``; ``left``, the figure, at ``basis``."""
    return (
        f"{label}: about {_duration(left)} left ({total} {unit}, {done} done in "
        f"{seconds:.1f} s; an estimate at {basis})"
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
    start are done (and one more than there are workers) and some are still left; and at
    the end, for a task that finished, how far off it was (estimate_check_line). Items
    already done when the task was added (a resumed stage) count in neither the rate nor
    the items to do. Items alike (a run's tests) are estimated at the rate since the first
    was done; items of unequal cost (analysis and testgen pairs, largest first) give their
    sizes in the order the workers take them, ``add_task(..., sizes=[...], workers=J)``,
    and each its index when done, ``update(..., item=K)``: see queue_seconds_left."""

    def __init__(self, *columns, label: str, unit: str, **options):
        super().__init__(*columns, **options)
        self.label, self.unit = label, unit
        self._starts: dict[TaskID, tuple[float, float]] = {}  # task -> (completed, time)
        self._firsts: dict[TaskID, tuple[float, float]] = {}  # task -> (completed, time)
        self._said: dict[TaskID, tuple[float, float]] = {}  # task -> (said at, seconds left)
        self._queues: dict[TaskID, _Queue] = {}

    def add_task(
        self, description: str, *args, sizes: list | None = None, workers: int = 1, **options
    ) -> TaskID:
        task_id = super().add_task(description, *args, **options)
        self._starts[task_id] = (self._tasks[task_id].completed, self.get_time())
        if sizes:
            self._queues[task_id] = _Queue(list(sizes), workers, self.get_time())
        return task_id

    def update(self, task_id: TaskID, item: int | None = None, **options) -> None:
        super().update(task_id, **options)
        queue = self._queues.get(task_id)
        if queue is not None and item is not None:
            queue.ends[item] = self.get_time()
        if not self.disable and task_id not in self._said and task_id in self._starts:
            self._say_estimate_when_due(task_id)

    def _say_estimate_when_due(self, task_id: TaskID) -> None:
        task, queue = self._tasks[task_id], self._queues.get(task_id)
        started_done, started_at = self._starts[task_id]
        to_do = int((task.total or 0) - started_done)
        done = int(task.completed - started_done)
        if done > 0 and task_id not in self._firsts:
            self._firsts[task_id] = (task.completed, self.get_time())
            return
        workers = queue.workers if queue else os.cpu_count() or 1
        wanted = max(math.ceil(to_do * ESTIMATE_AFTER_SHARE), workers + 1)
        if done < wanted or done >= to_do:
            return
        left = self._seconds_left(task_id, to_do, done)
        if left is None:
            return
        self._said[task_id] = (self.get_time(), left)
        basis = BY_SIZE if queue else SINCE_FIRST
        seconds = self.get_time() - started_at
        line = estimate_line(self.label, self.unit, to_do, done, seconds, left, basis)
        self.console.print(line, soft_wrap=True, highlight=False)

    def _seconds_left(self, task_id: TaskID, to_do: int, done: int) -> float | None:
        now, queue = self.get_time(), self._queues.get(task_id)
        if queue is not None:
            return queue_seconds_left(queue.sizes, queue.workers, queue.started, queue.ends, now)
        first_completed, first_at = self._firsts[task_id]
        share_since_first = (self._tasks[task_id].completed - first_completed) / to_do
        if share_since_first <= 0 or now <= first_at:
            return None  # nothing measured since the first yet: the next update says it
        return seconds_left(now - first_at, share_since_first, (to_do - done) / to_do)

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


@dataclass
class _Queue:
    """Items of unequal sizes handed to workers in order: when each ended."""

    sizes: list
    workers: int
    started: float
    ends: dict = field(default_factory=dict)  # item's index -> when it ended


def queue_seconds_left(sizes: list, workers: int, started: float, ends: dict, now: float):
    """Seconds left for items of ``sizes`` that ``workers`` take in order, each the next
    one when it is free; ``ends``: the items done, by index, with when they ended. An
    item started when the item ``workers`` places before it in the order of ends ended
    (the first ``workers`` at ``started``). The rate is of size per worker-second over
    the items done; the items still running count as done as far as their time so far
    goes at that rate, and the stage cannot end before the largest of them. (Counting
    the work done since the first item ended overlooks the large items still running:
    that estimate was 62-80 % too long for analyze and testgen, largest first.)"""
    end_times = sorted(ends.values())
    # Items ending out of that order (a map that does not hand them out in turn) are
    # taken as started at the stage's start.
    handed_out = max(min(len(ends) + workers, len(sizes)), max(ends, default=-1) + 1)
    starts = [
        end_times[k - workers] if workers <= k < len(end_times) + workers else started
        for k in range(handed_out)
    ]
    busy = sum(ends[k] - min(starts[k], ends[k]) for k in ends)
    if busy <= 0:
        return None
    rate = sum(sizes[k] for k in ends) / busy
    running = [k for k in range(handed_out) if k not in ends]
    credit = sum(min((now - starts[k]) * rate, sizes[k]) for k in running)
    left = sum(size for k, size in enumerate(sizes) if k not in ends) - credit
    largest_running = max((sizes[k] / rate - (now - starts[k]) for k in running), default=0.0)
    return max(left / (rate * workers), largest_running)


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
