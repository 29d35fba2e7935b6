#!/usr/bin/env python3
"""A machine profile for `scalecheck predict --machine FILE`, measured on this machine with
the line-transfer probe (catalog entry line-transfer: two workers pass one cache line back
and forth, each operation one transfer; 1e9 / ops/s is what a transfer costs, in ns).

Runs the probe --runs times on CPUs 0 and 1 and writes a profile with the median as the
transfer cost within the socket (this script places no worker on another socket: the
cross-socket cost is set equal), the CPUs this process may use as one socket, and the
date and load average in its comments. Then the profile's [move_weights]: what one move
of each kind costs a core with other work beside it (empty's "*-work" modes: the time per
operation with the line shared less the same instructions on each worker's own line),
over the transfer cost (`move_weights`). On a loaded machine the probe measures the host's
time slices, not a transfer (microseconds instead of tens of ns): the profile says so,
and exit status 1 tells it apart.

usage: python3 bench/machine_probe.py OUT.toml [--runs 5] [--duration 1] [--work 100]
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

# The kinds the "*-work" modes move once per operation (each worker's access finds the
# line last written by the other; counted so by the tracer's kinds, `sharing empty`):
# (mode, whose time per operation) -> kind. In load-work worker 0 stores to the line the
# reader holds (an invalidation) and the reader loads it.
WORK_KINDS = {
    ("store-work", "all"): "store",
    ("atomic-work", "all"): "atomic",
    ("load-work", "reader"): "load",
    ("load-work", "writer"): "store_invalidation",
}


def ns_per_op(result: dict, who: str) -> float:
    """A worker's time per operation in a "*-work" run: all workers' alike ("all"), or
    load-work's one writer's or its readers' (their operations are the extra reader_ops)."""
    extra, workers = result["extra"], result["workers"]
    ops, seconds, reader_ops = extra["ops"], extra["seconds"], extra.get("reader_ops", 0)
    if who == "all":
        return seconds * workers / ops * 1e9
    if who == "reader":
        return seconds * (workers - 1) / reader_ops * 1e9
    return seconds / (ops - reader_ops) * 1e9


def move_costs(shared: dict[str, list[dict]], own: dict[str, list[dict]]) -> dict[str, float]:
    """Per kind, in ns: the median time per operation of the runs on the shared line less
    the median on each worker's own line (runs per mode)."""
    return {
        kind: statistics.median(ns_per_op(r, who) for r in shared[mode])
        - statistics.median(ns_per_op(r, who) for r in own[mode])
        for (mode, who), kind in WORK_KINDS.items()
    }


def move_weights(costs: dict[str, float], transfer_ns: float) -> dict[str, float]:
    """Each kind's cost over the serialised transfer's (pass-line), at least 0 (a cost
    below the own line's is noise); an atomic's invalidation of a line another core only
    reads is not probed: it waits for the line as an atomic's transfer does, so weighs as
    that."""
    weights = {kind: max(0.0, cost) / transfer_ns for kind, cost in costs.items()}
    return weights | {"atomic_invalidation": weights["atomic"]}


def probe_work_modes(runs: int, duration: float, work: int) -> dict[str, dict[str, list]]:
    """The "*-work" runs at 2 workers, shared and own line alternated: line -> mode -> runs."""
    measured: dict[str, dict[str, list]] = {"shared": {}, "own": {}}
    for mode in sorted({mode for mode, _ in WORK_KINDS}):
        for _ in range(runs):
            for line in measured:
                measured[line].setdefault(mode, []).append(
                    run_harness_program(
                        "empty",
                        "--workers",
                        "2",
                        "--warmup",
                        "0.2",
                        "--duration",
                        str(duration),
                        "--mode",
                        mode,
                        "--param",
                        f"line={line}",
                        "--param",
                        f"work={work}",
                    )
                )
    return measured


def weights_text(costs: dict[str, float], weights: dict[str, float], work: int) -> str:
    said = ", ".join(f"{kind} {cost:.1f}" for kind, cost in costs.items())
    return (
        f"# Per kind (empty's *-work modes, work={work}): the median time per operation on\n"
        "# the shared line less on each worker's own, over the transfer cost, at least 0;\n"
        "# atomic_invalidation not probed: weighs as atomic. The differences, ns:\n"
        f"# {said}\n"
        "[move_weights]\n" + "".join(f"{k} = {w:.2f}\n" for k, w in weights.items())
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--work", type=int, default=100, help="multiply-adds per operation")
    args = parser.parse_args()
    build()
    probe = ["--workers", "2", "--warmup", "0.2", "--duration", str(args.duration)]
    costs = [
        1e9 / run_harness_program("empty", *probe, "--mode", "pass-line")["ops_per_sec"]
        for _ in range(args.runs)
    ]
    median = statistics.median(costs)
    measured = probe_work_modes(args.runs, args.duration, args.work)
    per_kind = move_costs(measured["shared"], measured["own"])
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
        + weights_text(per_kind, move_weights(per_kind, median), args.work)
    )
    print(f"{args.out}: {median:.1f} ns per transfer{verdict}")
    return 0 if median < PLAUSIBLE_NS else 1


if __name__ == "__main__":
    sys.exit(main())
