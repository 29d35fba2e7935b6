"""Runs a sweep: every benchmark x (mode, runtime) x core count x run, one program run per cell.

A cell that fails (build error, non-zero exit, timeout, unreadable output) is recorded
with its reason and the sweep goes on.
"""

import contextlib
import json
import math
import os
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from scalecheck.bench.bench_results import Cell, ResultsDir, now_iso
from scalecheck.bench.catalog import Benchmark

BUILD_TIMEOUT_S = 900


@dataclass
class SweepSettings:
    cores: list[int]
    runs: int
    warmup: float
    duration: float
    # A run may take this long beyond warm-up + duration (startup, builds of helpers, teardown).
    slack: float
    repo: Path


@dataclass
class SweepOutcome:
    ran: int = 0
    failed: int = 0
    skipped_done: int = 0
    below_min_cores: list[str] = field(default_factory=list)


def plan(benchmarks: list[Benchmark], settings: SweepSettings) -> tuple[list[Cell], list[str]]:
    """Cells in run-major order (run 1 of everything, then run 2, ...), so a noisy
    moment hits one run of many cells rather than every run of one cell. Even runs take a
    benchmark's series in reverse order, so that the place in a round (first after
    another benchmark's process, say) favours no series over the runs."""
    cells, below_min = [], []
    for benchmark in benchmarks:
        too_few = [c for c in settings.cores if c < benchmark.min_cores]
        if too_few:
            below_min.append(
                f"{benchmark.name} needs at least {benchmark.min_cores} cores: "
                f"skipped at {', '.join(map(str, too_few))}"
            )
    for run in range(1, settings.runs + 1):
        for benchmark in benchmarks:
            series = list(benchmark.series())
            for mode, runtime in series[::-1] if run % 2 == 0 else series:
                for cores in settings.cores:
                    if cores >= benchmark.min_cores:
                        cells.append(Cell(benchmark.name, mode, runtime, cores, run))
    return cells, below_min


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _build_error_line(stderr: str) -> str:
    """The last line of a failed build that says what went wrong: make's own closing
    '*** [target] Error 1' lines only repeat that something did."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    telling = [line for line in lines if not (line.startswith("make") and "***" in line)]
    return (telling or lines or [""])[-1]


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"killed by signal {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


def _run_shell(
    command: str, cwd: Path, stdout_path: Path, stderr_path: Path, timeout: float
) -> tuple[int | None, float]:
    """Runs `command` in its own process group; returns (exit code or None on timeout, seconds)."""
    started = time.monotonic()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            returncode = None
        except KeyboardInterrupt:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        finally:
            # Also ends helpers the program left behind in its group (e.g. a daemon it started).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return returncode, time.monotonic() - started


def fill_placeholders(template: str, values: dict[str, object]) -> str:
    """Substitutes {cores}, {mode}, ... with shell-quoted values (other braces are left alone)."""
    command = template
    for key, value in values.items():
        text = f"{value:g}" if isinstance(value, float) else str(value)
        command = command.replace("{" + key + "}", shlex.quote(text))
    return command


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_result(stdout: str) -> dict:
    """The program's last stdout line as the result JSON; ValueError says what is wrong."""
    line = _last_line(stdout)
    if not line:
        raise ValueError("the program printed nothing on stdout")
    try:
        result = json.loads(line)
    except json.JSONDecodeError:
        raise ValueError(f"last stdout line is not JSON: {line[:120]}") from None
    if not isinstance(result, dict):
        raise ValueError("last stdout line is JSON but not an object")
    if not _is_number(result.get("ops_per_sec")) or result["ops_per_sec"] < 0:
        raise ValueError("result JSON lacks a finite, non-negative 'ops_per_sec'")
    samples = result.get("samples")
    if not isinstance(samples, list) or not all(_is_number(s) for s in samples):
        raise ValueError("result JSON 'samples' must be a list of numbers")
    cycles = result.get("cycles_per_op")
    if cycles is not None and not _is_number(cycles):
        raise ValueError("result JSON 'cycles_per_op' must be a number or null")
    if not isinstance(result.get("extra", {}), dict):
        raise ValueError("result JSON 'extra' must be an object")
    return result


class Sweep:
    def __init__(
        self,
        benchmarks: list[Benchmark],
        settings: SweepSettings,
        results: ResultsDir,
        console: Console,
    ):
        self.benchmarks = {b.name: b for b in benchmarks}
        self.settings = settings
        self.results = results
        self.console = console
        self.build_failures: dict[str, str] = {}
        self.built: set[str] = set()

    def run(self) -> SweepOutcome:
        cells, below_min = plan(list(self.benchmarks.values()), self.settings)
        done = self.results.finished_cells()
        todo = [cell for cell in cells if cell not in done]
        outcome = SweepOutcome(skipped_done=len(cells) - len(todo), below_min_cores=below_min)
        for note in below_min:
            self.console.print(f"[yellow]note:[/] {note}")
        if outcome.skipped_done:
            self.console.print(
                f"resuming: {outcome.skipped_done} of {len(cells)} cells already done"
            )
        columns = (
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=self.console, transient=False) as progress:
            task = progress.add_task("sweep", total=len(todo))
            for cell in todo:
                progress.update(task, description=cell.label())
                record = self._run_cell(cell, progress)
                self.results.append_record(record)
                self.results.write_summary()
                outcome.ran += 1
                if record["status"] != "ok":
                    outcome.failed += 1
                    progress.console.print(f"[red]failed[/] {cell.label()}: {record['reason']}")
                progress.advance(task)
        return outcome

    def _build(self, benchmark: Benchmark, progress: Progress) -> str | None:
        """Runs the benchmark's build once per sweep; the failure reason, or None."""
        if not benchmark.build or benchmark.build in self.built:
            return None
        if benchmark.build in self.build_failures:
            return self.build_failures[benchmark.build]
        progress.console.print(f"building {benchmark.name}: {benchmark.build}")
        log = self.results.logs / f"build-{benchmark.name}"
        stdout_path, stderr_path = log.with_suffix(".out"), log.with_suffix(".err")
        returncode, _ = _run_shell(
            benchmark.build, self.settings.repo, stdout_path, stderr_path, BUILD_TIMEOUT_S
        )
        if returncode == 0:
            self.built.add(benchmark.build)
            return None
        if returncode is None:
            why = f"timed out after {BUILD_TIMEOUT_S} s"
        else:
            why = _build_error_line(stderr_path.read_text(errors="replace")) or _describe_exit(
                returncode
            )
        reason = f"build failed: {why}"
        self.build_failures[benchmark.build] = reason
        return reason

    def _run_cell(self, cell: Cell, progress: Progress) -> dict:
        benchmark = self.benchmarks[cell.benchmark]
        record = {
            "benchmark": cell.benchmark,
            "mode": cell.mode,
            "runtime": cell.runtime,
            "cores": cell.cores,
            "run": cell.run,
            "status": "failed",
            "reason": None,
            "ops_per_sec": None,
            "cycles_per_op": None,
            "result": None,
            "command": None,
            "seconds": None,
        }
        build_failure = self._build(benchmark, progress)
        if build_failure:
            record.update(reason=build_failure, finished_at=now_iso())
            return record
        with tempfile.TemporaryDirectory(
            prefix=f"scalecheck-{cell.benchmark}-", ignore_cleanup_errors=True
        ) as workdir:
            command = fill_placeholders(
                benchmark.command,
                {
                    "cores": cell.cores,
                    "warmup": self.settings.warmup,
                    "duration": self.settings.duration,
                    "mode": cell.mode,
                    "runtime": cell.runtime,
                    "repo": self.settings.repo,
                    "workdir": workdir,
                },
            )
            record["command"] = command
            stdout_path = self.results.log_path(cell, "out")
            stderr_path = self.results.log_path(cell, "err")
            timeout = self.settings.warmup + self.settings.duration + self.settings.slack
            returncode, seconds = _run_shell(
                command, self.settings.repo, stdout_path, stderr_path, timeout
            )
        record.update(seconds=round(seconds, 3), finished_at=now_iso())
        if returncode is None:
            record["reason"] = f"timed out after {timeout:g} s"
            return record
        if returncode != 0:
            stderr = stderr_path.read_text(errors="replace")
            record["reason"] = _last_line(stderr) or _describe_exit(returncode)
            return record
        try:
            result = parse_result(stdout_path.read_text(errors="replace"))
        except ValueError as err:
            record["reason"] = str(err)
            return record
        record.update(
            status="ok",
            ops_per_sec=float(result["ops_per_sec"]),
            cycles_per_op=result.get("cycles_per_op"),
            result=result,
        )
        return record
