#!/usr/bin/env python3
"""Fidelity check (docs/fidelity-openbench.md): openbench on the harness against an
independent loop doing the same syscalls (bench/fidelity/open_loop.c, no harness code),
alternating the two so drift on the machine hits both alike.  They agree when their
means differ by no more than the larger of their measured spreads.  The best run of
each is compared too: on a busy machine it is the least disturbed one.

usage: python3 bench/fidelity_openbench.py [--runs 5] [--duration 5]
"""

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from benchlib import REPO, build, machine_description, mean_and_spread, run_harness_program, usable_cpus


def build_open_loop(directory: Path) -> Path:
    program = directory / "open_loop"
    subprocess.run(["cc", "-O2", "-o", str(program), str(REPO / "bench" / "fidelity" / "open_loop.c"),
                    "-lpthread"], check=True)
    return program


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
            harness, independent = [], []
            for _ in range(args.runs):
                harness.append(run_harness_program("openbench", "--workers", str(cores), "--warmup",
                                                   str(args.warmup), "--duration", str(args.duration))["ops_per_sec"])
                output = subprocess.run([str(open_loop), str(cores), str(args.warmup), str(args.duration), scratch],
                                        check=True, capture_output=True, text=True).stdout
                independent.append(float(output))
            mean_h, spread_h = mean_and_spread(harness)
            mean_i, spread_i = mean_and_spread(independent)
            difference = abs(mean_h - mean_i) / ((mean_h + mean_i) / 2) * 100
            agree = difference <= max(spread_h, spread_i)
            best_difference = abs(max(harness) - max(independent)) / max(independent) * 100
            rows.append({"cores": cores, "harness": harness, "independent": independent,
                         "harness_mean": mean_h, "harness_spread_pct": spread_h,
                         "independent_mean": mean_i, "independent_spread_pct": spread_i,
                         "difference_pct": difference, "agree_within_spread": agree,
                         "best_difference_pct": best_difference})
            print(f"cores={cores}  harness {mean_h:,.0f} opens/s (spread {spread_h:.1f}%)  "
                  f"independent {mean_i:,.0f} (spread {spread_i:.1f}%)  difference {difference:.1f}%  "
                  f"{'AGREE' if agree else 'DISAGREE'} within the measured spread; best runs "
                  f"{max(harness):,.0f} vs {max(independent):,.0f} ({best_difference:.1f}% apart)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine_description(), "runs": args.runs, "duration_s": args.duration,
                       "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
