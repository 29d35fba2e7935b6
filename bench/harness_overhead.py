#!/usr/bin/env python3
"""Harness overhead: the `empty` benchmark's ops/s per core, for threads and processes at
1..all CPUs, against the issue's bar of 100 M ops/s per core.

Besides the mean of the runs, two figures that other work loading the machine disturbs
less: the best one-second sample, and ops per CPU-second the workers actually got (the
harness reads their CPU clocks), which is the loop's own speed.  No shared cache line between
workers' counters shows as a flat per-core rate from 1 to n workers; the `shared-line` mode
(every worker also stores to one common line) is
measured beside it as the contrast a shared line would produce.

usage: python3 bench/harness_overhead.py [--runs 3] [--duration 5] [--json FILE]
"""

import argparse
import json

from benchlib import build, mean_and_spread, run_harness_program, usable_cpus
from scalecheck import api

BAR_OPS_PER_CORE = 100e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    build()
    rows = []
    for kind in ("threads", "processes"):
        for mode in ("own-line", "shared-line"):
            for workers in range(1, usable_cpus() + 1):
                results = [
                    run_harness_program(
                        "empty",
                        f"--{kind}",
                        "--mode",
                        mode,
                        "--workers",
                        str(workers),
                        "--warmup",
                        str(args.warmup),
                        "--duration",
                        str(args.duration),
                    )
                    for _ in range(args.runs)
                ]
                per_core = [r["ops_per_sec"] / workers for r in results]
                best_second = max(s for r in results for s in r["samples"]) / workers
                per_cpu_second = mean_and_spread(
                    [r["extra"]["ops"] / r["harness"]["worker_cpu_seconds"] for r in results]
                )[0]
                cpu_share = mean_and_spread([r["harness"]["worker_cpu_share"] for r in results])[0]
                mean, spread = mean_and_spread(per_core)
                rows.append(
                    {
                        "kind": kind,
                        "mode": mode,
                        "workers": workers,
                        "per_core_mean": mean,
                        "per_core_min": min(per_core),
                        "spread_pct": spread,
                        "per_core_best_second": best_second,
                        "ops_per_cpu_second": per_cpu_second,
                        "worker_cpu_share": cpu_share,
                        "cycles_per_op_mean": mean_and_spread(
                            [r["cycles_per_op"] for r in results]
                        )[0],
                    }
                )
                verdict = ""
                if mode == "own-line":
                    verdict = (
                        "meets 100 M/core"
                        if min(per_core) >= BAR_OPS_PER_CORE
                        else "BELOW 100 M/core"
                    )
                print(
                    f"{kind:9} {mode:11} workers={workers}  {mean / 1e6:7.1f} M ops/s per core "
                    f"(min {min(per_core) / 1e6:.1f}, spread {spread:.1f}%, best second "
                    f"{best_second / 1e6:.1f}; {per_cpu_second / 1e6:.1f} M per CPU-second, "
                    f"CPU share {cpu_share * 100:.0f}%)  {verdict}",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "machine": api.machine_description(),
                    "runs": args.runs,
                    "duration_s": args.duration,
                    "rows": rows,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
