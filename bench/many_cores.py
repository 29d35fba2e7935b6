#!/usr/bin/env python3
"""Lines moved per operation at 2 to 16 emulated CPUs (`scalecheck sharing --cpus`) for the
seeds' series, the counts' sensitivity to the quantum, and two runs compared.

For each series: `scalecheck sharing B --mode M --cpus 2,4,8,16 --duration D --json
OUT/B-M.json`, then a table of the top line's transfers per operation at each N and all
lines' total; the wall time of each count, with the operations it made against those of
the same benchmark run natively at 1 worker in the same minute (the emulation's slowdown
per N: one emulated worker's time per operation, N x window / operations, over the native
1-worker time per operation). Then the LDU modes' queue lines at each N (the one line of
the global queue against the per-core queues' busiest and their sum), --quantum at half
and twice the default at N = 4, and a second run at N = 8 (top five lines within 10 %?).

Then, for bench/sv6_scaling.py's series, the 2-vs-1 ratio the counts at N = 2 predict on
this host's profile (`scalecheck predict B --mode M --machine host-2026-11-27 --cores 1,2
--counts F`), with the 1-worker time measured natively now and with 100 ns.

usage: python3 bench/many_cores.py [--out DIR] [--duration 3] [--series B:M ...]
                                   [--check B:M ...] [--only-check]
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from benchlib import REPO
from scalecheck import api

SERIES = [
    "sv6-openbench:lowest",
    "sv6-openbench:anyfd",
    "sv6-statbench:fstat-shared",
    "sv6-statbench:fstatx",
    "sv6-sockbench:ordered",
    "sv6-sockbench:unordered",
    "ldu-u90:ldu-global",
    "ldu-u90:ldu-percore",
    "ldu-u90:rwlock",
    "ldu-u90:harris",
]
# The LDU row: the lines of the update logs' queues (native/ldu's ldu_queues allocates
# them), one that every worker writes or one per worker.
QUEUES = "ldu_queues:"
SCALECHECK = [sys.executable, "-m", "scalecheck.cli"]


def count(out: Path, series: str, cpus: str, duration: float, *extra: str) -> tuple[list, float]:
    """The documents of one `scalecheck sharing` call, and its wall time."""
    benchmark, mode = series.split(":")
    started = time.monotonic()
    command = [*SCALECHECK, "sharing", benchmark, "--mode", mode, "--cpus", cpus]
    command += ["--duration", str(duration), "--json", str(out), *extra]
    subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    document = json.loads(out.read_text())
    return document.get("runs", [document]), time.monotonic() - started


def top(document: dict, rank: int = 0) -> tuple[str, float]:
    lines = document["lines"]
    if len(lines) <= rank:
        return "-", 0.0
    return lines[rank]["name"], lines[rank]["transfers_per_op"] or 0.0


def total(document: dict) -> float:
    return sum(row["transfers_per_op"] or 0.0 for row in document["lines"])


def series_table(out: Path, duration: float, series: list[str]) -> None:
    print("| series | N | ops | top line | its transfers/op | all lines' | slowdown |")
    print("|---|---|---|---|---|---|---|")
    for name in series:
        documents, wall = count(out / f"{name.replace(':', '-')}.json", name, "2,4,8,16", duration)
        benchmark, mode = name.split(":")
        native_ns = api.native_ns_per_op(benchmark, mode, documents[0]["runtime"])
        for document in documents:
            line, moved = top(document)
            emulated_ns = document["cpus"] * duration * 1e9 / max(document["operations"], 1)
            print(
                f"| {name} | {document['cpus']} | {document['operations']} | {line} | "
                f"{moved:.4f} | {total(document):.4f} | {emulated_ns / native_ns:,.0f}x |"
            )
        print(f"<!-- {name}: {wall:.0f} s wall for N = 2, 4, 8, 16 -->", flush=True)


def queue_lines(out: Path, series: list[str]) -> None:
    """From the series' counts: the LDU modes' queue lines per operation at each N."""
    print("\n| series | N | queue lines | busiest's transfers/op | all of them |")
    print("|---|---|---|---|---|")
    for name in series:
        path = out / f"{name.replace(':', '-')}.json"
        for document in json.loads(path.read_text()).get("runs", []):
            rows = [row for row in document["lines"] if row["name"].startswith(QUEUES)]
            moved = [row["transfers_per_op"] or 0.0 for row in rows]
            print(
                f"| {name} | {document['cpus']} | {len(rows)} | {max(moved, default=0):.4f} | "
                f"{sum(moved):.4f} |"
            )


# bench/sv6_scaling.py's series: their 2-vs-1 ratios measured natively are in
# bench/results/libsv6.md; here the ratio the counts at N = 2 predict on this host.
CHECKED = [
    "sv6-statbench-mixed:fstatx",
    "sv6-statbench-mixed:fstat-shared",
    "sv6-statbench-mixed:fstat-refcache",
    "sv6-openbench:anyfd",
    "sv6-openbench:lowest",
    "sv6-mailbench:commutative",
    "sv6-mailbench:regular",
    "sv6-sockbench:unordered",
    "sv6-sockbench:ordered",
]
HOST = "host-2026-11-27"


def check_at_two(out: Path, duration: float, series: list[str]) -> None:
    """The 2-vs-1 ratio predicted on this host's profile from the counts at N = 2 (the
    1-worker time measured natively now, and with a 100 ns one)."""
    print("\n| series | moved/op (ops) | 1 worker now | predicted 2 vs 1 | with 100 ns |")
    print("|---|---|---|---|---|")
    for name in series:
        counts = out / f"two-{name.replace(':', '-')}.json"
        (document,), _ = count(counts, name, "2", duration)
        moved = sum(
            (r["transfers_per_op"] or 0) + (r["invalidations_per_op"] or 0)
            for r in document["lines"]
        )
        ratios = []
        for base in ([], ["--base-ns", "100"]):
            benchmark, mode = name.split(":")
            path = out / f"predict-{name.replace(':', '-')}.json"
            command = [*SCALECHECK, "predict", benchmark, "--mode", mode, "--machine", HOST]
            command += ["--cores", "1,2", "--counts", str(counts), "--json", str(path), *base]
            subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
            one, two = json.loads(path.read_text())["points"]
            ratios.append((two["ops_per_sec_per_core"] * 2 / one["ops_per_sec_per_core"], one))
        base_ns = 1e9 / ratios[0][1]["ops_per_sec_per_core"]
        print(
            f"| {name} | {moved:.3f} ({document['operations']}) | {base_ns:,.0f} ns | "
            f"{ratios[0][0]:.2f}x | {ratios[1][0]:.2f}x |",
            flush=True,
        )


def sensitivity(out: Path, duration: float, series: list[str]) -> None:
    print("\n| series at N = 4 | quantum | top line's transfers/op | all lines' |")
    print("|---|---|---|---|")
    for name in series:
        for quantum in (api.SHARING_QUANTUM // 2, api.SHARING_QUANTUM, api.SHARING_QUANTUM * 2):
            path = out / f"q{quantum}-{name.replace(':', '-')}.json"
            (document,), _ = count(path, name, "4", duration, "--quantum", str(quantum))
            print(f"| {name} | {quantum} | {top(document)[1]:.4f} | {total(document):.4f} |")


def repeat(out: Path, duration: float, series: list[str]) -> None:
    print("\n| series at N = 8 | line | run 1 | run 2 | difference |")
    print("|---|---|---|---|---|")
    for name in series:
        runs = [
            count(out / f"r{k}-{name.replace(':', '-')}.json", name, "8", duration)[0][0]
            for k in (1, 2)
        ]
        second = {row["name"]: row["transfers_per_op"] or 0.0 for row in runs[1]["lines"]}
        for rank in range(5):
            line, first = top(runs[0], rank)
            if line == "-":
                break
            other = second.get(line, 0.0)
            change = abs(other - first) / first if first else 0.0
            print(f"| {name} | {line} | {first:.4f} | {other:.4f} | {change:.0%} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/many-cores"))
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--series", nargs="*", default=SERIES)
    parser.add_argument("--sensitivity", nargs="*", default=SERIES[:1] + SERIES[6:7])
    parser.add_argument("--check", nargs="*", default=CHECKED)
    parser.add_argument("--only-check", action="store_true", help="the check at N = 2 only")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only_check:
        check_at_two(args.out, args.duration, args.check)
        return 0
    series_table(args.out, args.duration, args.series)
    queue_lines(args.out, [name for name in args.series if ":ldu-" in name])
    sensitivity(args.out, args.duration, args.sensitivity)
    repeat(args.out, args.duration, args.sensitivity)
    check_at_two(args.out, args.duration, args.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
