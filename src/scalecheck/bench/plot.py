"""`scalecheck bench plot`: per benchmark, throughput and throughput per core against cores.

The seeds (sv6, DragonFly) plot per-core throughput, where flat means perfect scaling;
the total is drawn beside it. Error bars span the runs' min..max.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from scalecheck.bench.bench_results import ResultsDir, series_name


def _draw_series(axis, points: list[dict], per_core: bool, label: str) -> None:
    cores = [p["cores"] for p in points]
    divisor = [c if per_core else 1 for c in cores]
    means = [p["mean"] / d for p, d in zip(points, divisor, strict=True)]
    below = [(p["mean"] - p["min"]) / d for p, d in zip(points, divisor, strict=True)]
    above = [(p["max"] - p["mean"]) / d for p, d in zip(points, divisor, strict=True)]
    axis.errorbar(cores, means, yerr=[below, above], marker="o", capsize=3, label=label)


def plot_results(results: ResultsDir) -> tuple[list[Path], list[str]]:
    """Writes plots/<benchmark>.png and .svg; returns (files, notes about what was left out)."""
    sweep, summary = results.require_results()
    results.plots.mkdir(exist_ok=True)
    machine = sweep.get("machine", {})
    files, notes = [], []
    for benchmark in dict.fromkeys(entry["benchmark"] for entry in summary):
        info = sweep.get("benchmarks", {}).get(benchmark, {})
        metric = info.get("metric", "ops/s")
        series: dict[str, list[dict]] = {}
        for entry in summary:
            if entry["benchmark"] == benchmark and entry["mean"] is not None:
                series.setdefault(series_name(entry["mode"], entry["runtime"]), []).append(entry)
        if not series:
            notes.append(f"{benchmark}: no successful runs, nothing to plot")
            continue
        figure, (total_axis, per_core_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
        for label, points in series.items():
            points.sort(key=lambda p: p["cores"])
            _draw_series(total_axis, points, per_core=False, label=label)
            _draw_series(per_core_axis, points, per_core=True, label=label)
        all_cores = sorted({p["cores"] for points in series.values() for p in points})
        for axis, ylabel in ((total_axis, metric), (per_core_axis, f"{metric} per core")):
            axis.set_xlabel("cores")
            axis.set_ylabel(ylabel)
            axis.set_xticks(all_cores)
            axis.set_ylim(bottom=0)
            axis.grid(True, alpha=0.3)
        total_axis.set_title("throughput")
        per_core_axis.set_title("throughput per core")
        per_core_axis.legend(fontsize="small")
        seed = f" ({info['seed']})" if info.get("seed") else ""
        figure.suptitle(
            f"{benchmark}{seed} - {machine.get('cpu_model', '?')}, "
            f"Linux {machine.get('kernel', '?')}",
            fontsize="medium",
        )
        figure.tight_layout()
        for suffix in ("png", "svg"):
            path = results.plots / f"{benchmark}.{suffix}"
            figure.savefig(path, dpi=150 if suffix == "png" else None)
            files.append(path)
        plt.close(figure)
    return files, notes
