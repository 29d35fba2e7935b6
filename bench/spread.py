#!/usr/bin/env python3
"""Run-to-run spread of statbench, openbench and faultzf (the issue's bar: <= 5% over 3
runs on an idle machine; the paper's: under 4%), swept with the real driver.

usage: python3 bench/spread.py [--out out/bench-spread] [--runs 3] [--duration 5]
Prints the load average before and after, since a busy machine widens the spread.
"""

import argparse
import json
import os
import subprocess
import sys

from benchlib import REPO, add_sweep_options, bench_run_args

BAR_PCT = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(REPO / "out" / "bench-spread"))
    add_sweep_options(parser, runs=3, warmup=1.0, duration=5.0)
    parser.add_argument("--cores", default=None, help="as for `bench run` (default 1..all)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    command = [
        sys.executable,
        "-m",
        "scalecheck.cli",
        *bench_run_args(
            ["statbench", "openbench", "faultzf"],
            args.runs,
            args.warmup,
            args.duration,
            args.out,
            args.cores,
        ),
        "--json",
    ]
    completed = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    if completed.returncode != 0:
        sys.exit("bench run failed")
    print(f"load average after:  {os.getloadavg()}")
    for entry in json.loads(completed.stdout)["summary"]:
        spread = entry["spread_pct"]
        verdict = "-" if spread is None else ("within 5%" if spread <= BAR_PCT else "ABOVE 5%")
        series = entry["mode"] or "default"
        print(
            f"{entry['benchmark']:10} {series:8} cores={entry['cores']}  mean {entry['mean']:.4g}  "
            f"runs {entry['values']}  spread {spread:.1f}%  {verdict}"
        )


if __name__ == "__main__":
    main()
