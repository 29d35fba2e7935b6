"""The user target's speed, side by side: `scalecheck run --target LIB` on the same tests
with this checkout and with another one (``--before DIR``, e.g. an earlier commit
unpacked with `git archive`), in alternation, each in a process of its own. Reports per
code tree the wall time, tests per second, and the CPU seconds per test of the host
process (parsing, naming, the store) and of its children (the test programs under
qemu-x86_64), the least of ``--rounds`` rounds; and whether both made the same records,
test by test: status, verdict, repeat agreement, the conflict and false-sharing sets,
the views, the transient conflicts, the results.

Usage: python3 bench/usertarget_speed.py --tests FILE [--target libsv6] [--limit N]
           [--before DIR] [--rounds R] [--jobs J] [--keep DIR] [--json]
Example: python3 bench/usertarget_speed.py --tests out/main/tests.jsonl --before /tmp/base
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import print_result
from scalecheck import api

HERE = Path(__file__).resolve().parents[1]
# Run in the child: the run as a function, then its CPU seconds (own and children's).
CHILD = """
import json, resource, sys, time
from scalecheck.run.run_cli import run_tests
started = time.monotonic()
summary = run_tests(sys.argv[1], target=sys.argv[2], jobs=int(sys.argv[3]), quiet=True)
own = resource.getrusage(resource.RUSAGE_SELF)
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": time.monotonic() - started, "tests": summary["finished"],
    "host_cpu": own.ru_utime + own.ru_stime,
    "program_cpu": children.ru_utime + children.ru_stime}))
"""
# What a record says that the two runs must agree on (ids aside); whether its repeats
# agreed only where both ran every repeat (a test whose first repeat shared no line runs
# once: docs/format-results.md, `repeats`).
COMPARED = ("status", "conflict_free", "views", "results")


def _run(tree: Path, run_dir: Path, target: str, jobs: int) -> dict:
    """One measured run of ``tree``'s code in ``run_dir`` (its results cleared first)."""
    (run_dir / "trace" / "results.jsonl").unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "SCALECHECK_REPO": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(run_dir), target, str(jobs)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        sys.exit(f"run of {tree} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _records(run_dir: Path) -> dict:
    lines = (run_dir / "trace" / "results.jsonl").read_text().splitlines()[1:]
    return {r["id"]: r for r in map(json.loads, lines)}


def _ran_every_repeat(record: dict) -> bool:
    repeats = record.get("repeats") or {}
    return repeats.get("run") == repeats.get("asked")


def _key(record: dict, with_repeats: bool) -> tuple:
    noise = record.get("noise", {})
    repeats = (record.get("agree"), tuple(noise.get("transient", []))) if with_repeats else ()
    return (
        *(json.dumps(record.get(field), sort_keys=True) for field in COMPARED),
        api.conflict_set(record.get("conflicts", [])),
        api.conflict_set(record.get("false_sharing", [])),
        tuple(c.get("data", "") for c in record.get("conflicts", [])),
        *repeats,
    )


def differing(first: dict, second: dict) -> list:
    """The ids of the tests whose records differ in what COMPARED and _key look at."""
    return sorted(
        i
        for i in first.keys() | second.keys()
        if i not in first or i not in second or _differ(first[i], second[i])
    )


def _differ(a: dict, b: dict) -> bool:
    both_every = _ran_every_repeat(a) and _ran_every_repeat(b)
    return _key(a, both_every) != _key(b, both_every)


def _prepared(trees: dict, tests: Path, limit: int | None, work: Path, args) -> dict:
    """A run directory per tree with the tests, its program built by an unmeasured run of
    the first test."""
    lines = tests.read_text().splitlines(keepends=True)
    dirs = {}
    for name, tree in trees.items():
        run_dir = work / name
        run_dir.mkdir()
        (run_dir / "tests.jsonl").write_text("".join(lines[:2]))
        _run(tree, run_dir, args.target, args.jobs)
        (run_dir / "tests.jsonl").write_text("".join(lines[: limit + 1] if limit else lines))
        dirs[name] = run_dir
    return dirs


def _row(runs: list) -> dict:
    best = min(runs, key=lambda r: r["host_cpu"] + r["program_cpu"])
    tests = max(1, best["tests"])
    return {
        "tests": best["tests"],
        "wall_s": round(best["wall"], 1),
        "tests_per_second": round(best["tests"] / best["wall"], 1),
        "host_cpu_ms_per_test": round(1000 * best["host_cpu"] / tests, 2),
        "program_cpu_ms_per_test": round(1000 * best["program_cpu"] / tests, 2),
    }


def _cpu(row: dict) -> float:
    return row["host_cpu_ms_per_test"] + row["program_cpu_ms_per_test"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, required=True, help="a tests.jsonl")
    parser.add_argument("--target", default="libsv6")
    parser.add_argument("--limit", type=int, help="the first N tests only")
    parser.add_argument("--before", type=Path, help="another checkout to run side by side")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the run directories in this new one")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trees = {"this": HERE, **({"before": args.before.resolve()} if args.before else {})}
    work = args.keep or Path(tempfile.mkdtemp(prefix="usertarget-speed-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        dirs = _prepared(trees, args.tests.resolve(), args.limit, work, args)
        runs: dict = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                runs[name].append(_run(tree, dirs[name], args.target, args.jobs))
        result = {name: _row(r) for name, r in runs.items()}
        if args.before:
            first, second = (_records(dirs[name]) for name in trees)
            different = differing(first, second)
            result["records_compared"] = len(first.keys() | second.keys())
            result["records_differing"] = len(different)
            result["first_differing"] = different[:10]
            result["cpu_ratio_before_over_this"] = round(
                _cpu(result["before"]) / max(_cpu(result["this"]), 1e-9), 2
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print_result(result, args.json)


if __name__ == "__main__":
    main()
