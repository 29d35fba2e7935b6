"""The analysis's cost under two code trees, side by side: `scalecheck analyze` with the
same arguments under this checkout and under another one (``--before DIR``, e.g. an
earlier commit checked out with `git worktree add`), both at once so that the machine's
load falls on both alike. Reports per tree the wall time and the CPU seconds of the whole
process tree: each run's measuring process is a child subreaper, so the per-pair
processes a forkserver starts (which outlive no one's wait otherwise) count too. Then
whether the two analyses' pair files are identical (but for the model's fingerprint),
pair by pair.

Usage: python3 bench/analyze_cpu.py OUT --before DIR [--json] -- ANALYZE_ARGUMENTS...
Example: python3 bench/analyze_cpu.py /tmp/cpu --before /tmp/old -- --model posix
           --ops open,write,lseek --jobs 1
(OUT/before and OUT/after are removed first; `--out` is added per tree.)
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchlib import REPO, print_result

# Run in the measuring child: become a child subreaper (prctl 36,
# PR_SET_CHILD_SUBREAPER), run the command, reap every descendant (orphans are handed to
# it), then print the tree's CPU seconds.
CHILD = """
import ctypes, json, os, resource, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
started = time.monotonic()
code = subprocess.call(sys.argv[1:])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
wall = time.monotonic() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"exit": code, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime}))
"""


def _start(tree: Path, out: Path, analyze_args: list[str]) -> subprocess.Popen:
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-c",
        "import sys; from scalecheck.cli import main; sys.exit(main())",
    ]
    command += ["analyze", *analyze_args, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "SCALECHECK_REPO": str(tree)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _measured(process: subprocess.Popen) -> dict:
    stdout, _ = process.communicate()
    return json.loads(stdout.strip().splitlines()[-1])


def _identical_pairs(before: Path, after: Path) -> dict:
    names = sorted(p.name for p in (after / "analysis" / "pairs").glob("*.json"))
    differing = [
        name
        for name in names
        if _without_fingerprint(before / "analysis" / "pairs" / name)
        != _without_fingerprint(after / "analysis" / "pairs" / name)
    ]
    return {"pairs": len(names), "identical": len(names) - len(differing), "differing": differing}


def _without_fingerprint(pair_file: Path) -> dict:
    """A pair file's content but its model's fingerprint, which covers the engine's
    sources and so differs between two code trees whatever their results."""
    content = json.loads(pair_file.read_text())
    content.pop("fingerprint", None)
    return content


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where the two analyses go (before/, after/)")
    parser.add_argument("--before", type=Path, required=True, help="the other code tree")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("analyze_args", nargs="+", help="arguments of `scalecheck analyze`")
    args = parser.parse_args()
    started = time.strftime("%H:%M:%S", time.gmtime())
    runs = {
        name: _start(tree, args.out / name, args.analyze_args)
        for name, tree in (("before", args.before.resolve()), ("after", REPO))
    }
    measured = {name: _measured(process) for name, process in runs.items()}
    load = os.getloadavg()[0]
    result = {
        "started_utc": started,
        "load_average_1min_at_end": round(load, 1),
        **{
            f"{name}_{key}": round(value, 1)
            for name in runs
            for key, value in measured[name].items()
        },
        "cpu_ratio_after_to_before": round(measured["after"]["cpu"] / measured["before"]["cpu"], 3),
        **_identical_pairs(args.out / "before", args.out / "after"),
    }
    print_result(result, args.json)


if __name__ == "__main__":
    main()
