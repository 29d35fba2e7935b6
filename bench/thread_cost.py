#!/usr/bin/env python3
"""Where two worker threads spend CPU time per operation that two worker processes do not:
the benchmark's 2-worker command run twice, its workers as threads of one process and as
processes (the control's layout), each under `perf record -e cpu-clock` from the middle of
its warm-up to its end, and each function's CPU time per counted operation compared.

scalecheck sharing counts the cache lines the threads share; what it cannot see (the C
library's allocator doing more work because frees and allocations stop balancing per
thread, page faults of an address space that grows, a yield that waits for the other
thread) shows here as time: a function's ns per operation in each layout, from its share
of the samples times the workers' CPU time per operation in the harness's window (the
samples from before the window, the last half of the warm-up, are few and alike in both
layouts). Functions are ranked by what the threads spend more; the kernel's are marked [k].
Samples are the CPU clock's (no hardware counters needed: a virtual machine has none).

usage: python3 bench/thread_cost.py BENCHMARK [--mode M] [--warmup S] [--duration S]
                                    [--top N] [--json FILE] [--catalog DIR]
Exit status 0 after the table, 2 when the benchmark or perf cannot run.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import REPO
from scalecheck import api
from scalecheck.api import UserError

SAMPLES_PER_SECOND = 10_000
LAYOUTS = ("threads", "processes")


def profile(argv: list[str], warmup: float, scratch: Path) -> tuple[dict, dict[str, int]]:
    """Runs argv under perf from half-way through its warm-up: (the harness's result,
    samples per function)."""
    data = scratch / "perf.data"
    record = [
        "perf", "record", "-q", "-e", "cpu-clock", "-F", str(SAMPLES_PER_SECOND),
        "-D", str(int(warmup * 500)), "-o", str(data), "--", *argv,
    ]  # fmt: skip
    run = subprocess.run(record, cwd=REPO, capture_output=True, text=True, timeout=600)
    result = api.harness_result(run, f"perf record {' '.join(argv)}")
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "symbol", "-n",
         "-g", "none", "--stdio", "--percent-limit", "0"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if report.returncode != 0:
        raise UserError(f"perf report failed: {report.stderr.strip()[-300:]}")
    return result, samples_by_function(report.stdout)


def samples_by_function(text: str) -> dict[str, int]:
    """perf report's rows (`  12.3%  456  [.] name`) as {name: samples}; kernel
    functions' names end in " [k]"."""
    samples: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or not fields[0].endswith("%") or fields[2] not in ("[.]", "[k]"):
            continue
        name = fields[3] + (" [k]" if fields[2] == "[k]" else "")
        samples[name] = samples.get(name, 0) + int(fields[1])
    return samples


def ns_per_operation(result: dict, samples: dict[str, int]) -> tuple[float, dict[str, float]]:
    """The workers' CPU ns per counted operation, and each function's share of it."""
    ops = result.get("extra", {}).get("ops")
    cpu = result.get("harness", {}).get("worker_cpu_seconds")
    total = sum(samples.values())
    if not ops or not cpu or not total:
        raise UserError("the run counted no operations, no worker CPU time or no samples")
    per_op = cpu * 1e9 / ops
    return per_op, {name: per_op * n / total for name, n in samples.items()}


def compare(costs: dict[str, dict[str, float]]) -> list[dict]:
    """Each function's ns per operation in both layouts, the threads' extra first."""
    names = costs["threads"].keys() | costs["processes"].keys()
    rows = [
        {
            "function": name,
            "threads_ns": costs["threads"].get(name, 0.0),
            "processes_ns": costs["processes"].get(name, 0.0),
        }
        for name in names
    ]
    for row in rows:
        row["extra_ns"] = row["threads_ns"] - row["processes_ns"]
    return sorted(rows, key=lambda r: -r["extra_ns"])


def print_table(document: dict, top: int):
    t, p = document["threads"], document["processes"]
    print(
        f"{document['benchmark']} {document['mode']}: threads {t['ops_per_sec']:.4g} ops/s, "
        f"{t['ns_per_op']:.1f} CPU ns/op; processes {p['ops_per_sec']:.4g} ops/s, "
        f"{p['ns_per_op']:.1f} CPU ns/op; the threads spend "
        f"{t['ns_per_op'] - p['ns_per_op']:+.1f} ns/op"
    )
    print(f"{'threads ns/op':>14} {'processes ns/op':>16} {'extra':>8}  function")
    rows = document["functions"]
    for row in rows[:top]:
        print(
            f"{row['threads_ns']:14.2f} {row['processes_ns']:16.2f} "
            f"{row['extra_ns']:+8.2f}  {row['function']}"
        )
    print("... the processes' extra:")
    for row in [r for r in rows if r["extra_ns"] < 0][-min(top, 5) :]:
        print(
            f"{row['threads_ns']:14.2f} {row['processes_ns']:16.2f} "
            f"{row['extra_ns']:+8.2f}  {row['function']}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("benchmark", help="a catalog name (scalecheck bench list)")
    parser.add_argument("--mode", help="default: the benchmark's first mode")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds (default 1)")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds (default 2)")
    parser.add_argument("--top", type=int, default=20, help="rows printed (default 20)")
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    api.add_catalog_option(parser)
    args = parser.parse_args()
    try:
        if shutil.which("perf") is None:
            raise UserError("perf is not installed (Debian: linux-perf)")
        catalog = api.load_catalog(args.catalog)
        if args.benchmark not in catalog:
            raise UserError(f"no benchmark {args.benchmark!r} in the catalog")
        entry = catalog[args.benchmark]
        if entry.build and subprocess.run(entry.build, shell=True, cwd=REPO).returncode != 0:
            raise UserError(f"building {entry.name} failed: {entry.build}")
        costs = {}
        with tempfile.TemporaryDirectory(prefix="thread-cost-") as scratch:
            mode, commands = api.two_worker_commands(
                entry, args.mode, args.warmup, args.duration, scratch
            )
            document = {"benchmark": entry.name, "mode": mode}
            for layout in LAYOUTS:
                result, samples = profile(commands[layout], args.warmup, Path(scratch))
                per_op, costs[layout] = ns_per_operation(result, samples)
                document[layout] = {"ops_per_sec": result["ops_per_sec"], "ns_per_op": per_op}
        document["functions"] = compare(costs)
    except UserError as err:
        print(f"thread_cost: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
    return api.run_printing(lambda: print_table(document, args.top))


if __name__ == "__main__":
    sys.exit(main())
