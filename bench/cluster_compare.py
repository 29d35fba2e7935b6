"""The cluster path against one machine, side by side: the same tests of one target traced
with `-j N` and with `--cluster local:N` (optionally with one worker killed halfway),
their wall times, the cluster's overhead per test, and whether the verdicts are identical.

Usage: python3 bench/cluster_compare.py --tests FILE [--target T] [--every K] [--workers N]
           [--kill] [--out DIR] [--json]
Example (the main job's tests, every test, 2 workers, one killed halfway in a third run):
       python3 bench/cluster_compare.py --tests out/pipeline/tests.jsonl --kill --out out/cc
A library (tests generated from its model):
       python3 bench/cluster_compare.py --tests out/kv/tests.jsonl \\
           --target lib:examples/kvstore/striped.toml --out out/cc-kv

Each run starts from an empty results store (a store left by an earlier run is removed, so
nothing is resumed). Run it while nothing else runs on the machine: the runs share its
cores.
"""

import argparse
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

from distributed import Client, LocalCluster

from scalecheck import api


def _write(run_dir: Path, header: dict, tests: list) -> None:
    """A fresh run directory holding ``tests`` under the source file's header."""
    shutil.rmtree(run_dir / "trace", ignore_errors=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "tests.jsonl", "w") as f:
        f.write(json.dumps(header) + "\n")
        for test in tests:
            f.write(json.dumps(test) + "\n")


def _records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "trace" / "results.jsonl").read_text().splitlines()[1:]
    return [json.loads(line) for line in lines]


def _killer(run_dir: Path, client: Client, after: int, finished: threading.Event) -> list:
    """Kills one worker process outright once ``after`` records are stored, unless the run
    has ``finished`` first; returns a list that gets the records stored at the kill."""
    killed_at: list[int] = []

    def watch():
        path = run_dir / "trace" / "results.jsonl"
        # Counts the lines as they are appended: rereading a store of thousands of
        # records five times a second would take the cores the runs are measured on.
        lines, offset = 0, 0
        while lines <= after:
            if finished.wait(0.2):
                return
            if path.exists():
                with open(path, "rb") as f:
                    f.seek(offset)
                    new = f.read()
                lines += new.count(b"\n")
                offset += len(new)
        pid = next(iter(client.run(os.getpid).values()))
        os.kill(pid, signal.SIGKILL)
        killed_at.append(lines - 1)
        print(f"killed worker pid {pid} after {lines - 1} records", flush=True)

    threading.Thread(target=watch, daemon=True).start()
    return killed_at


def _timed(run_dir: Path, **kwargs) -> tuple[float, dict]:
    started = time.monotonic()
    summary = api.run_tests(run_dir, quiet=True, **kwargs)
    return time.monotonic() - started, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=Path, required=True, help="a tests.jsonl")
    parser.add_argument(
        "--target", default="linux", help="what to trace: linux (default) or lib:MANIFEST"
    )
    parser.add_argument(
        "--every", type=int, default=1, help="take every K-th test (default: every test)"
    )
    parser.add_argument("--workers", type=int, default=2, help="VMs / workers (default 2)")
    parser.add_argument("--kill", action="store_true", help="also a run with a worker killed")
    parser.add_argument("--out", type=Path, default=Path("out/cluster-compare"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    header, tests = api.read_tests(args.tests)
    tests = tests[:: args.every]
    runs = {}
    for name in ("local", "cluster", *(["cluster-killed"] if args.kill else [])):
        run_dir = args.out / name
        _write(run_dir, header, tests)
        if name == "local":
            seconds, summary = _timed(run_dir, target=args.target, jobs=args.workers)
        else:
            cluster = LocalCluster(
                n_workers=args.workers, threads_per_worker=1, dashboard_address=None
            )
            client = Client(cluster)
            finished = threading.Event()
            if name == "cluster-killed":
                killed_at = _killer(run_dir, client, len(tests) // 2, finished)
            try:
                seconds, summary = _timed(
                    run_dir, target=args.target, cluster=cluster.scheduler_address
                )
            finally:
                finished.set()
                client.close()
                cluster.close()
        records = _records(run_dir)
        runs[name] = {
            "seconds": round(seconds, 1),
            "starts": api.starts_text(summary),
            "records": len(records),
            "distinct": len({r["id"] for r in records}),
            "verdicts": {r["id"]: (r["status"], r["conflict_free"]) for r in records},
        }
        if name == "cluster-killed":
            # None: the run ended before half its tests were stored; no worker was killed.
            runs[name]["killed_after_records"] = killed_at[0] if killed_at else None
        print(f"{name}: {len(records)} records in {seconds:.1f} s", flush=True)
    local = runs["local"]
    report = {"tests": len(tests), "target": args.target, "workers": args.workers, "runs": {}}
    for name, run in runs.items():
        same = sum(1 for k, v in run["verdicts"].items() if local["verdicts"].get(k) == v)
        report["runs"][name] = {
            "seconds": run["seconds"],
            "starts": run["starts"],
            "records": run["records"],
            "recorded_once": run["records"] == run["distinct"] == len(tests),
            "identical_verdicts": same,
            "killed_after_records": run.get("killed_after_records"),
            "wall_ratio_to_local": round(run["seconds"] / local["seconds"], 3),
            "overhead_ms_per_test": round(
                (run["seconds"] - local["seconds"]) * 1000 / len(tests), 1
            ),
        }
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for name, row in report["runs"].items():
            killed = row["killed_after_records"]
            note = f", worker killed after {killed} records" if killed is not None else ""
            if name == "cluster-killed" and killed is None:
                note = ", no worker killed (the run ended first)"
            print(
                f"{name:15} {row['seconds']:8.1f} s  x{row['wall_ratio_to_local']:.3f}  "
                f"{row['identical_verdicts']}/{report['tests']} verdicts as local, "
                f"recorded once: {row['recorded_once']}, {row['starts']}, "
                f"overhead {row['overhead_ms_per_test']} ms/test{note}"
            )


if __name__ == "__main__":
    main()
