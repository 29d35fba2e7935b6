#!/usr/bin/env python3
"""Fidelity check (docs/fidelity-openbench.md): openbench on the harness against an
independent loop doing the same syscalls (bench/fidelity/open_loop.c, no harness code),
alternating the two so drift on the machine hits both alike.  They agree when their
means differ by no more than the larger of their measured spreads.  Both programs also
report operations per CPU-second their workers got: on a machine other work is loading,
that figure is far less disturbed than wall-clock throughput, so it is compared too.

usage: python3 bench/fidelity_openbench.py [--runs 5] [--duration 5]
"""

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from benchlib import (
    REPO,
    build,
    mean_and_spread,
    run_harness_program,
    usable_cpus,
)
from scalecheck import api


def build_open_loop(directory: Path) -> Path:
    subprocess.run(
        ["make", "-s", "-C", str(REPO / "bench" / "fidelity"), f"BUILD={directory}"], check=True
    )
    return directory / "open_loop"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    build()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        open_loop = build_open_loop(Path(scratch))
        for cores in range(1, usable_cpus() + 1):
            figures = {
                "harness": {"per_second": [], "per_cpu_second": []},
                "independent": {"per_second": [], "per_cpu_second": []},
            }
            for _ in range(args.runs):
                result = run_harness_program(
                    "openbench",
                    "--workers",
                    str(cores),
                    "--warmup",
                    str(args.warmup),
                    "--duration",
                    str(args.duration),
                )
                figures["harness"]["per_second"].append(result["ops_per_sec"])
                figures["harness"]["per_cpu_second"].append(
                    result["extra"]["ops"] / result["harness"]["worker_cpu_seconds"]
                )
                output = subprocess.run(
                    [str(open_loop), str(cores), str(args.warmup), str(args.duration), scratch],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.split()
                figures["independent"]["per_second"].append(float(output[0]))
                figures["independent"]["per_cpu_second"].append(float(output[1]))
            row = {"cores": cores, "runs": figures}
            for measure, unit in (
                ("per_second", "opens/s"),
                ("per_cpu_second", "opens per CPU-second"),
            ):
                mean_h, spread_h = mean_and_spread(figures["harness"][measure])
                mean_i, spread_i = mean_and_spread(figures["independent"][measure])
                difference = abs(mean_h - mean_i) / ((mean_h + mean_i) / 2) * 100
                agree = difference <= max(spread_h, spread_i)
                row[measure] = {
                    "harness_mean": mean_h,
                    "harness_spread_pct": spread_h,
                    "independent_mean": mean_i,
                    "independent_spread_pct": spread_i,
                    "difference_pct": difference,
                    "agree_within_spread": agree,
                }
                print(
                    f"cores={cores}  {unit:20}  "
                    f"harness {mean_h:>11,.0f} (spread {spread_h:4.1f}%)  "
                    f"independent {mean_i:>11,.0f} (spread {spread_i:4.1f}%)  "
                    f"difference {difference:4.1f}%  "
                    f"{'AGREE' if agree else 'DISAGREE'} within the measured spread",
                    flush=True,
                )
            rows.append(row)
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
