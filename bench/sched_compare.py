#!/usr/bin/env python3
"""Side-by-side comparison of our user-level scheduler (native/sched) with pthreads, Go
and Tokio on the five scheduler micro-benchmarks, at 1 and 2 processors, 3 runs.

usage: python3 bench/sched_compare.py [--runs 3] [--cores 1,2] [--duration 2] [--warmup 0.5]
                                      [--bench cycle,churn,...] [--json out/sched-compare.json]

Within each run every runtime measures one series right after the others (the order
rotates from run to run), so the ratios ours/go and ours/tokio are taken between
neighbouring measurements: on a busy machine that cancels much of the load drift. A
ratio is reported as the median of the per-run ratios with their min..max. Failed runs
(e.g. a stalled transfer) are counted and shown with their reason; the rest goes on.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from benchlib import REPO
from scalecheck import api

RUNTIMES = ["ours", "pthreads", "go", "tokio"]
# (benchmark, mode, threads per processor): the same load as the catalog (sched.toml).
SERIES = [
    ("cycle", "rings100", 500),
    ("cycle", "rings1", 5),
    ("yield", "", 100),
    ("churn", "", 100),
    ("locality", "own", 32),
    ("locality", "share", 32),
    ("transfer", "yield", 1),
    ("transfer", "park", 1),
]
HEADLINE = {"cycle", "churn"}  # where ours must be >= Go and >= Tokio
RUN_SH = REPO / "native" / "schedbench" / "run.sh"


def run_one(
    runtime: str, bench: str, mode: str, per_proc: int, cores: int, warmup: float, duration: float
) -> dict:
    command = [
        str(RUN_SH),
        runtime,
        bench,
        "-p",
        str(cores),
        "--per-proc",
        str(per_proc),
        "-W",
        str(warmup),
        "-d",
        str(duration),
    ] + (["--mode", mode] if mode else [])
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=warmup + duration + 60
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "reason": "timed out"}
    if completed.returncode != 0:
        lines = completed.stderr.strip().splitlines()
        return {
            "ok": False,
            "reason": lines[-1] if lines else f"exit status {completed.returncode}",
        }
    try:
        result = api.parse_result(completed.stdout)
    except ValueError as err:
        return {"ok": False, "reason": str(err)}
    return {"ok": True, "ops_per_sec": result["ops_per_sec"], "extra": result.get("extra", {})}


def ratio_summary(pairs: list[tuple[float, float]]) -> dict | None:
    ratios = [a / b for a, b in pairs if b > 0]
    if not ratios:
        return None
    return {
        "median": statistics.median(ratios),
        "min": min(ratios),
        "max": max(ratios),
        "runs": len(ratios),
    }


def human(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cores", default="1,2", help="processor counts (default 1,2)")
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument(
        "--bench",
        default=None,
        help="comma-separated subset of cycle,yield,churn,locality,transfer",
    )
    parser.add_argument(
        "--json", default=str(REPO / "out" / "sched-compare.json"), help="where to write the JSON"
    )
    args = parser.parse_args()
    cores_list = [int(c) for c in args.cores.split(",")]
    series = [s for s in SERIES if not args.bench or s[0] in args.bench.split(",")]
    if not series or args.runs < 1 or any(c < 1 for c in cores_list):
        sys.exit("sched_compare: nothing to run (check --bench, --runs and --cores)")

    console = Console(width=150)
    subprocess.run(["bash", str(REPO / "native" / "schedbench" / "build.sh")], check=True)
    console.print(f"load average before: {os.getloadavg()}")
    results: dict[tuple, list[dict]] = {}
    total = args.runs * len(cores_list) * len(series) * len(RUNTIMES)
    with Progress(console=console) as progress:
        task = progress.add_task("measuring", total=total)
        for run in range(args.runs):
            order = RUNTIMES[run % len(RUNTIMES) :] + RUNTIMES[: run % len(RUNTIMES)]
            for cores in cores_list:
                for bench, mode, per_proc in series:
                    for runtime in order:
                        progress.update(
                            task, description=f"run {run + 1} p={cores} {bench} {mode} {runtime}"
                        )
                        outcome = run_one(
                            runtime, bench, mode, per_proc, cores, args.warmup, args.duration
                        )
                        outcome["run"] = run
                        results.setdefault((bench, mode, cores, runtime), []).append(outcome)
                        progress.advance(task)
    console.print(f"load average after:  {os.getloadavg()}")

    rows = []
    for bench, mode, _ in series:
        for cores in cores_list:
            row = {"benchmark": bench, "mode": mode, "cores": cores, "runtimes": {}, "ratios": {}}
            for runtime in RUNTIMES:
                outcomes = results[(bench, mode, cores, runtime)]
                values = [o["ops_per_sec"] for o in outcomes if o["ok"]]
                row["runtimes"][runtime] = {
                    "ops_per_sec": values,
                    "median": statistics.median(values) if values else None,
                    "spread_pct": api.spread_pct(values) if len(values) > 1 else None,
                    "failed": len(outcomes) - len(values),
                    "failures": sorted({o["reason"] for o in outcomes if not o["ok"]}),
                }
            ours = {o["run"]: o for o in results[(bench, mode, cores, "ours")] if o["ok"]}
            for other in ("go", "tokio", "pthreads"):
                theirs = {o["run"]: o for o in results[(bench, mode, cores, other)] if o["ok"]}
                pairs = [
                    (ours[r]["ops_per_sec"], theirs[r]["ops_per_sec"]) for r in ours if r in theirs
                ]
                row["ratios"][f"ours/{other}"] = ratio_summary(pairs)
            rows.append(row)

    table = Table(
        title="Scheduler micro-benchmarks: median ops/s (spread over runs) and ours/other ratios "
        "(median of paired runs, min..max)"
    )
    for column in ["benchmark", "p", *RUNTIMES, "ours/go", "ours/tokio", "ours/pthreads"]:
        table.add_column(column, justify="left" if column == "benchmark" else "right")
    verdicts = []
    for row in rows:
        cells = []
        for runtime in RUNTIMES:
            r = row["runtimes"][runtime]
            text = "-" if r["median"] is None else human(r["median"])
            if r["spread_pct"] is not None:
                text += f" ±{r['spread_pct']:.0f}%"
            if r["failed"]:
                text += f" [red]{r['failed']} failed[/]"
            cells.append(text)
        for key in ("ours/go", "ours/tokio", "ours/pthreads"):
            ratio = row["ratios"][key]
            cells.append(
                "-"
                if ratio is None
                else f"{ratio['median']:.2f} ({ratio['min']:.2f}..{ratio['max']:.2f})"
            )
        name = row["benchmark"] + (f" {row['mode']}" if row["mode"] else "")
        table.add_row(name, str(row["cores"]), *cells)
        if row["benchmark"] in HEADLINE:
            for key in ("ours/go", "ours/tokio"):
                ratio = row["ratios"][key]
                met = ratio is not None and ratio["median"] >= 1.0
                verdicts.append(
                    f"{name} p={row['cores']} {key}: "
                    f"{'-' if ratio is None else format(ratio['median'], '.2f')} "
                    f"{'>= 1 (met)' if met else '< 1 (NOT met)'}"
                )
    console.print(table)
    for row in rows:
        for runtime, r in row["runtimes"].items():
            for reason in r["failures"]:
                console.print(
                    f"[red]failure[/] {row['benchmark']} {row['mode']} p={row['cores']} "
                    f"{runtime}: {reason}"
                )
    console.print("\n".join(verdicts))

    document = {
        "machine": api.machine_description(),
        "runs": args.runs,
        "duration": args.duration,
        "warmup": args.warmup,
        "rows": rows,
        "verdicts": verdicts,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    console.print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
