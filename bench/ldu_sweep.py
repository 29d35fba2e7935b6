#!/usr/bin/env python3
"""The LDU sweep: every update ratio x every set implementation x thread counts.

    python3 bench/ldu_sweep.py --out DIR [--cores 1,2] [--runs 3] [--warmup 0.5] [--duration 2]

Runs the catalog entries ldu-u50 ... ldu-u100 (src/scalecheck/bench/catalog/ldu.toml)
in ONE `scalecheck bench run` into DIR/results, so all implementations are measured side
by side, run-major (run 1 of every cell, then run 2, ...).  Then it writes

    DIR/ldu_sweep.json             every cell (mean, min, max, spread, idle, lock wait) and
                                   the orderings with their ratios, per thread count
    DIR/ldu_update_ratio.png/.svg  the seed's update-ratio figure: throughput and idle time
                                   against the update ratio at the largest thread count
    DIR/ldu_scalability.png/.svg   throughput against threads, one panel per update ratio

and prints the same as tables.  Orderings are judged on paired runs: run k of A against
run k of B, measured seconds apart in the same round, so load that comes and goes on a
shared machine hits both.  A >= B "holds" when A won every round, is "flipped" when it
lost every round, and "mixed" otherwise; the ratio printed is the median of the rounds'
ratios, with their min..max.
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchlib import add_sweep_options, bench_run_args, save_figure
from scalecheck import api

RATIOS = (50, 80, 90, 99, 100)
MODES = ("ldu-percore", "ldu-global", "rwlock", "harris")
# The claims of the issue (and the seed) at >= 90% updates, stronger first.
ORDERINGS = (
    ("ldu-percore", "ldu-global"),
    ("ldu-global", "rwlock"),
    ("ldu-percore", "rwlock"),
    ("ldu-percore", "harris"),
    ("ldu-global", "harris"),
)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--cores", default="1,2", help="thread counts (default 1,2)")
    add_sweep_options(parser, runs=3, warmup=0.5, duration=2.0)
    return parser.parse_args()


def run_benchmarks(args: argparse.Namespace, results_dir: Path) -> None:
    scalecheck = shutil.which("scalecheck")
    if not scalecheck:
        sys.exit("ldu_sweep: error: the scalecheck command is not installed (run scripts/setup.sh)")
    command = [
        scalecheck,
        *bench_run_args(
            [f"ldu-u{r}" for r in RATIOS],
            args.runs,
            args.warmup,
            args.duration,
            results_dir,
            args.cores,
        ),
    ]
    print("+", " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        sys.exit("ldu_sweep: error: scalecheck bench run failed (see above)")


def collect(results_dir: Path) -> list[dict]:
    """One row per (update ratio, mode, threads) from the driver's run records."""
    groups: dict[tuple[int, str, int], dict[int, dict]] = {}
    for cell, record in api.bench_records(results_dir).items():
        if record.get("status") != "ok" or not cell.benchmark.startswith("ldu-u"):
            continue
        ratio = int(cell.benchmark.removeprefix("ldu-u"))
        groups.setdefault((ratio, cell.mode, cell.cores), {})[cell.run] = record
    rows = []
    for (ratio, mode, cores), records_by_run in sorted(groups.items()):
        records = list(records_by_run.values())
        values = [r["ops_per_sec"] for r in records]
        extras = [r["result"]["extra"] for r in records]

        def mean_of(key: str, extras: list = extras) -> float:
            return statistics.fmean(e[key] for e in extras)

        rows.append(
            {
                "update_pct": ratio,
                "mode": mode,
                "threads": cores,
                "runs": len(values),
                "values_by_run": {run: r["ops_per_sec"] for run, r in records_by_run.items()},
                "mean": statistics.fmean(values),
                "min": min(values),
                "max": max(values),
                "spread_pct": api.spread_pct(values),
                "idle_pct": mean_of("idle_pct"),
                "lock_wait_pct": mean_of("lock_wait_pct"),
                "preempted_pct": mean_of("preempted_pct"),
            }
        )
    return rows


def compare(rows: list[dict], threads: int) -> list[dict]:
    """Every ordering of ORDERINGS at every update ratio, judged round by round."""
    cell = {(r["update_pct"], r["mode"]): r for r in rows if r["threads"] == threads}
    comparisons = []
    for ratio in RATIOS:
        for better, worse in ORDERINGS:
            a, b = cell.get((ratio, better)), cell.get((ratio, worse))
            if not a or not b:
                continue
            # A round where either made no progress at all (the machine stalled) says nothing.
            rounds = [
                k
                for k in sorted(set(a["values_by_run"]) & set(b["values_by_run"]))
                if a["values_by_run"][k] > 0 and b["values_by_run"][k] > 0
            ]
            ratios = [a["values_by_run"][k] / b["values_by_run"][k] for k in rounds]
            if not ratios:
                continue
            wins = sum(r >= 1 for r in ratios)
            verdict = (
                "holds"
                if wins == len(ratios)
                else "flipped"
                if wins == 0
                else f"mixed ({wins}/{len(ratios)})"
            )
            comparisons.append(
                {
                    "update_pct": ratio,
                    "threads": threads,
                    "better": better,
                    "worse": worse,
                    "ratio": statistics.median(ratios),
                    "ratio_min": min(ratios),
                    "ratio_max": max(ratios),
                    "rounds": len(ratios),
                    "rounds_won": wins,
                    "verdict": verdict,
                }
            )
    return comparisons


def flip_points(comparisons: list[dict]) -> dict[str, int | None]:
    """Per ordering and thread count: the highest update ratio at which the median round
    put `better` below `worse` (None: never)."""
    flips = {}
    for threads in sorted({c["threads"] for c in comparisons}):
        for better, worse in ORDERINGS:
            losing = [
                c["update_pct"]
                for c in comparisons
                if c["threads"] == threads
                and (c["better"], c["worse"]) == (better, worse)
                and c["ratio"] < 1
            ]
            flips[f"{better} >= {worse} @ {threads} threads"] = max(losing) if losing else None
    return flips


def plot_update_ratio(rows: list[dict], threads: int, out: Path) -> list[str]:
    figure, (throughput_axis, idle_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in MODES:
        points = sorted(
            (r for r in rows if r["mode"] == mode and r["threads"] == threads),
            key=lambda r: r["update_pct"],
        )
        if not points:
            continue
        # evenly spaced categories, as 99 and 100 would overlap on a linear axis
        ratios = [RATIOS.index(p["update_pct"]) for p in points]
        means = [p["mean"] for p in points]
        errors = [[p["mean"] - p["min"] for p in points], [p["max"] - p["mean"] for p in points]]
        throughput_axis.errorbar(ratios, means, yerr=errors, marker="o", capsize=3, label=mode)
        idle_axis.plot(ratios, [p["idle_pct"] for p in points], marker="o", label=mode)
    throughput_axis.set_ylabel("operations/s (log scale)")
    throughput_axis.set_yscale("log")
    throughput_axis.set_title(f"throughput at {threads} threads")
    idle_axis.set_ylabel("idle time (% of worker wall time)")
    idle_axis.set_title(f"idle (asleep in a lock) at {threads} threads")
    for axis in (throughput_axis, idle_axis):
        axis.set_xlabel("updates (% of operations)")
        axis.set_xticks(range(len(RATIOS)), [f"{r}%" for r in RATIOS])
        axis.grid(True, alpha=0.3)
    idle_axis.set_ylim(bottom=0)
    throughput_axis.legend(fontsize="small")
    figure.suptitle(
        "LDU vs rwlock vs Harris's list by update ratio (error bars: min..max of runs)",
        fontsize="medium",
    )
    figure.tight_layout()
    return save_figure(figure, out / "ldu_update_ratio")


def plot_scalability(rows: list[dict], out: Path) -> list[str]:
    figure, axes = plt.subplots(1, len(RATIOS), figsize=(3.2 * len(RATIOS), 3.6), sharey=True)
    all_threads = sorted({r["threads"] for r in rows})
    for axis, ratio in zip(axes, RATIOS, strict=True):
        for mode in MODES:
            points = sorted(
                (r for r in rows if r["mode"] == mode and r["update_pct"] == ratio),
                key=lambda r: r["threads"],
            )
            if points:
                axis.errorbar(
                    [p["threads"] for p in points],
                    [p["mean"] for p in points],
                    yerr=[
                        [p["mean"] - p["min"] for p in points],
                        [p["max"] - p["mean"] for p in points],
                    ],
                    marker="o",
                    capsize=3,
                    label=mode,
                )
        axis.set_title(f"{ratio}% updates")
        axis.set_xlabel("threads")
        axis.set_xticks(all_threads)
        axis.grid(True, alpha=0.3)
    axes[0].set_ylabel("operations/s (log scale)")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize="small")
    figure.tight_layout()
    return save_figure(figure, out / "ldu_scalability")


def print_report(rows: list[dict], comparisons: list[dict], flips: dict) -> None:
    print(
        f"\n{'updates':>7} {'mode':<12} {'threads':>7} {'mean ops/s':>12} {'spread':>7} "
        f"{'idle':>6} {'lockwait':>8} {'preempt':>7}"
    )
    for r in rows:
        spread = "-" if r["spread_pct"] is None else f"{r['spread_pct']:.1f}%"
        print(
            f"{r['update_pct']:>6}% {r['mode']:<12} {r['threads']:>7} {r['mean']:>12.0f} "
            f"{spread:>7} {r['idle_pct']:>5.1f}% {r['lock_wait_pct']:>7.1f}% "
            f"{r['preempted_pct']:>6.1f}%"
        )
    print("\norderings (median of per-round ratios [min .. max]):")
    for c in comparisons:
        print(
            f"  {c['threads']} threads, {c['update_pct']:>3}% updates: {c['better']:>11} / "
            f"{c['worse']:<11} = {c['ratio']:6.2f}x  [{c['ratio_min']:.2f} .. "
            f"{c['ratio_max']:.2f}]  {c['verdict']}"
        )
    print("\nhighest update ratio where the ordering is reversed (median round):")
    for ordering, ratio in flips.items():
        print(f"  {ordering:<40} {'never' if ratio is None else f'{ratio}% updates'}")


def main() -> None:
    args = parse_arguments()
    args.out.mkdir(parents=True, exist_ok=True)
    results_dir = args.out / "results"
    run_benchmarks(args, results_dir)
    rows = collect(results_dir)
    if not rows:
        sys.exit(f"ldu_sweep: error: no successful runs in {results_dir}")
    thread_counts = sorted({r["threads"] for r in rows})
    comparisons = [c for threads in thread_counts for c in compare(rows, threads)]
    flips = flip_points(comparisons)
    figures = plot_update_ratio(rows, thread_counts[-1], args.out) + plot_scalability(
        rows, args.out
    )
    document = {
        "rows": rows,
        "orderings": comparisons,
        "reversed_at_or_below": flips,
        "figures": figures,
        "settings": {
            "cores": args.cores,
            "runs": args.runs,
            "warmup_s": args.warmup,
            "duration_s": args.duration,
        },
    }
    (args.out / "ldu_sweep.json").write_text(json.dumps(document, indent=2) + "\n")
    print_report(rows, comparisons, flips)
    print(f"\nwrote {args.out / 'ldu_sweep.json'} and {', '.join(figures)}")


if __name__ == "__main__":
    main()
