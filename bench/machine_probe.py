#!/usr/bin/env python3
"""A machine profile for `scalecheck predict --machine FILE`, measured on this machine with
the line-transfer probe (catalog entry line-transfer: two workers pass one cache line back
and forth, each operation one transfer; 1e9 / ops/s is what a transfer costs, in ns).

Runs the probe --runs times on CPUs 0 and 1 and writes a profile with the median as the
transfer cost within the socket (this script places no worker on another socket: the
cross-socket cost is set equal), the CPUs this process may use as one socket, and the
date and load average in its comments. On a loaded machine the probe measures the host's
time slices, not a transfer (microseconds instead of tens of ns): the profile says so,
and exit status 1 tells it apart.

usage: python3 bench/machine_probe.py OUT.toml [--runs 5] [--duration 1]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchlib import build, run_harness_program, usable_cpus

# Above this, two CPUs did not take turns on one line in hardware: the host interleaved
# the two workers in its time slices (a line transfer costs 40-400 ns on any machine).
PLAUSIBLE_NS = 1000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration", type=float, default=1.0)
    args = parser.parse_args()
    build()
    probe = ["--workers", "2", "--warmup", "0.2", "--duration", str(args.duration)]
    costs = [
        1e9 / run_harness_program("empty", *probe, "--mode", "pass-line")["ops_per_sec"]
        for _ in range(args.runs)
    ]
    median = statistics.median(costs)
    load = os.getloadavg()[0]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    verdict = "" if median < PLAUSIBLE_NS else " (NOT a transfer: the host's time slices)"
    args.out.write_text(
        f"# Measured by bench/machine_probe.py at {when}, load average {load:.1f}: line-transfer\n"
        f"# probe {', '.join(f'{c:.0f}' for c in costs)} ns{verdict}.\n"
        f'name = "this machine, {usable_cpus()} CPUs, {when}"\n'
        f'source = "line-transfer probe, median of {args.runs}, {when}, load {load:.1f}"\n'
        f"cores_per_socket = {usable_cpus()}\nsockets = 1\nlocal_ns = 1.0\n"
        f"same_socket_ns = {median:.1f}\ncross_socket_ns = {median:.1f}\n"
    )
    print(f"{args.out}: {median:.1f} ns per transfer{verdict}")
    return 0 if median < PLAUSIBLE_NS else 1


if __name__ == "__main__":
    sys.exit(main())
