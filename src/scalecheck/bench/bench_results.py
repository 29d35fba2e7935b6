"""The output directory of `scalecheck bench run` (layout in docs/format-bench.md).

Finished cells are appended to runs.jsonl one line at a time, so an interrupted
sweep loses at most the cell that was running and a rerun skips the rest.
"""

import json
import os
import platform
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.storage import write_text_atomically

FORMAT_VERSION = 1
# The paper's bar: "variance from the mean is always under 4%".
SPREAD_BAR_PCT = 4.0


@dataclass(frozen=True, order=True)
class Cell:
    benchmark: str
    mode: str
    runtime: str
    cores: int
    run: int

    def series(self) -> tuple[str, str, str, int]:
        return (self.benchmark, self.mode, self.runtime, self.cores)

    def label(self) -> str:
        parts = [self.benchmark] + [p for p in (self.mode, self.runtime) if p]
        return f"{'/'.join(parts)} cores={self.cores} run={self.run}"


def machine_description() -> dict:
    """CPU model, CPU counts, kernel and its mitigations, as the harness records them."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mitigations = {}
    vulnerabilities = Path("/sys/devices/system/cpu/vulnerabilities")
    if vulnerabilities.is_dir():
        for entry in sorted(vulnerabilities.iterdir()):
            try:
                mitigations[entry.name] = entry.read_text().strip()
            except OSError:
                continue
    return {
        "cpu_model": model,
        "online_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "mitigations": mitigations,
    }


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def spread_pct(values: list[float]) -> float | None:
    """Largest deviation from the mean, in percent of the mean (the paper's "variance")."""
    mean = statistics.fmean(values)
    if mean == 0:
        return None
    return max(abs(v - mean) for v in values) / mean * 100


class ResultsDir:
    def __init__(self, path: Path):
        self.path = path
        self.sweep_file = path / "sweep.json"
        self.runs_file = path / "runs.jsonl"
        self.summary_file = path / "summary.json"
        self.logs = path / "logs"
        self.plots = path / "plots"

    # ---- writing (bench run) ----

    def open_for_sweep(self, warmup: float, duration: float, benchmarks: list) -> None:
        """Create or resume the directory; a resumed sweep must use the same timing."""
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"--out {self.path}: exists and is not a directory")
        self.path.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        sweep = self.read_sweep() if self.sweep_file.exists() else None
        if sweep is not None:
            if (sweep.get("warmup_s"), sweep.get("duration_s")) != (warmup, duration):
                raise UserError(
                    f"{self.path} holds a sweep with --warmup {sweep.get('warmup_s')} --duration "
                    f"{sweep.get('duration_s')}; use the same values to resume it or another --out"
                )
        else:
            sweep = {
                "format": FORMAT_VERSION,
                "warmup_s": warmup,
                "duration_s": duration,
                "started": now_iso(),
                "machine": machine_description(),
                "benchmarks": {},
            }
        for b in benchmarks:
            sweep["benchmarks"][b.name] = {
                "description": b.description,
                "seed": b.seed,
                "metric": b.metric,
                "modes": list(b.modes),
                "runtimes": list(b.runtimes),
                "min_cores": b.min_cores,
                "catalog": b.catalog_file,
                "command": b.command,
            }
        self._write_json(self.sweep_file, sweep)
        self._drop_torn_last_line()

    def _drop_torn_last_line(self) -> None:
        """A sweep killed mid-write leaves a line without its newline; new records must not
        be glued to it."""
        if not self.runs_file.exists():
            return
        content = self.runs_file.read_bytes()
        if content and not content.endswith(b"\n"):
            with self.runs_file.open("r+b") as f:
                f.truncate(content.rfind(b"\n") + 1)

    def append_record(self, record: dict) -> None:
        with self.runs_file.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def write_summary(self) -> list[dict]:
        summary = self.summarize()
        self._write_json(
            self.summary_file,
            {"format": FORMAT_VERSION, "spread_bar_pct": SPREAD_BAR_PCT, "series": summary},
        )
        return summary

    def log_path(self, cell: Cell, suffix: str) -> Path:
        series = "-".join(p for p in (cell.mode, cell.runtime) if p) or "default"
        directory = self.logs / cell.benchmark
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{series}.c{cell.cores}.r{cell.run}.{suffix}"

    @staticmethod
    def _write_json(path: Path, document: dict) -> None:
        write_text_atomically(path, json.dumps(document, indent=2, sort_keys=True) + "\n")

    # ---- reading (resume, plot, compare) ----

    def read_sweep(self) -> dict:
        try:
            return json.loads(self.sweep_file.read_text())
        except FileNotFoundError:
            raise UserError(
                f"{self.path} is not a bench results directory (no sweep.json)"
            ) from None
        except json.JSONDecodeError as err:
            raise UserError(f"{self.sweep_file}: not valid JSON: {err}") from None

    def latest_records(self) -> dict[Cell, dict]:
        """The newest record of each cell; a torn last line (killed mid-write) is ignored."""
        records: dict[Cell, dict] = {}
        if not self.runs_file.exists():
            return records
        for line in self.runs_file.read_text().splitlines():
            try:
                record = json.loads(line)
                cell = Cell(
                    record["benchmark"],
                    record["mode"],
                    record["runtime"],
                    int(record["cores"]),
                    int(record["run"]),
                )
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
            records[cell] = record
        return records

    def finished_cells(self) -> set[Cell]:
        return {
            cell for cell, record in self.latest_records().items() if record.get("status") == "ok"
        }

    def summarize(self) -> list[dict]:
        """One entry per (benchmark, mode, runtime, cores): mean, min, max, spread over runs."""
        groups: dict[tuple, list[tuple[Cell, dict]]] = {}
        for cell, record in sorted(self.latest_records().items()):
            groups.setdefault(cell.series(), []).append((cell, record))
        summary = []
        for (benchmark, mode, runtime, cores), members in groups.items():
            ok = [r for _, r in members if r.get("status") == "ok"]
            failed = [r for _, r in members if r.get("status") != "ok"]
            values = [r["ops_per_sec"] for r in ok]
            cycles = [r["cycles_per_op"] for r in ok if r.get("cycles_per_op") is not None]
            # Recorded by the C harness: how much of the window its workers were on a CPU.
            shares = [
                r["result"]["harness"]["worker_cpu_share"]
                for r in ok
                if isinstance((r.get("result") or {}).get("harness"), dict)
                and isinstance(r["result"]["harness"].get("worker_cpu_share"), (int, float))
            ]
            entry = {
                "benchmark": benchmark,
                "mode": mode,
                "runtime": runtime,
                "cores": cores,
                "runs_ok": len(ok),
                "runs_failed": len(failed),
                "failure_reasons": sorted({r.get("reason") or "unknown" for r in failed}),
                "values": values,
                "mean": None,
                "min": None,
                "max": None,
                "spread_pct": None,
                "per_core_mean": None,
                "cycles_per_op_mean": None,
                "worker_cpu_share_mean": None,
            }
            if values:
                mean = statistics.fmean(values)
                entry.update(
                    mean=mean,
                    min=min(values),
                    max=max(values),
                    spread_pct=spread_pct(values),
                    per_core_mean=mean / cores,
                )
            if cycles:
                entry["cycles_per_op_mean"] = statistics.fmean(cycles)
            if shares:
                entry["worker_cpu_share_mean"] = statistics.fmean(shares)
            summary.append(entry)
        return summary

    def require_results(self) -> tuple[dict, list[dict]]:
        """(sweep.json, summary) for plot and compare, or a one-line error."""
        if not self.path.is_dir():
            raise UserError(f"{self.path}: no such directory")
        sweep = self.read_sweep()
        summary = self.summarize()
        if not summary:
            raise UserError(
                f"{self.path} has no finished runs yet (runs.jsonl is empty or missing)"
            )
        return sweep, summary


def series_name(mode: str, runtime: str) -> str:
    return " / ".join(p for p in (mode, runtime) if p) or "default"
