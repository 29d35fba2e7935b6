"""Repeat agreement: trace the same tests in two independent full runs and compare.

For every test traced in both runs, compares the conflict sets (by signature: for each
conflicting line, the kind of data, its name when it has one, and the pairs of functions
of A and B that touched the same bytes; see docs/tracer.md) and the conflict-free verdict.
Also reports how often the repeats inside one run agreed, and the signature elements
that differed most often.

Usage: python3 bench/trace_agreement.py [--tests FILE [--every K]] [--copies N]
           [--granularity G] [--json]
       python3 bench/trace_agreement.py --compare DIR_A DIR_B [--json]
Examples: every 19th test of the full 18-op file (about 1,500 tests, 2 x 80 s):
       python3 bench/trace_agreement.py --tests out/bench-analyzer/tests.jsonl --every 19 --copies 1
   two full runs made with `scalecheck run` (same tests.jsonl in both directories):
       python3 bench/trace_agreement.py --compare out/full-a out/full-b
"""

import argparse
import collections
import json
import tempfile
from pathlib import Path

from benchlib import print_result
from scalecheck import api

CALIBRATION = Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration.jsonl"


def _records(run_dir: Path) -> dict:
    lines = (run_dir / "trace" / "results.jsonl").read_text().splitlines()[1:]
    return {r["id"]: r for r in map(json.loads, lines) if r["status"] in ("ok", "mismatch")}


def _run_twice(args) -> list:
    tests = []
    for path in args.tests or [CALIBRATION]:
        tests += api.read_tests(path)[1][:: args.every]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("first", "second"):
            run_dir = Path(tmp) / name
            run_dir.mkdir()
            copies = [dict(t, id=f"{t['id']}/copy{k}") for k in range(args.copies) for t in tests]
            api.write_tests(run_dir / "tests.jsonl", {"model": "posix"}, copies)
            summary = api.run_tests(run_dir, repeats=args.repeats, granularity=args.granularity)
            runs.append((summary, _records(run_dir)))
    return runs


def _load(run_dir: Path) -> tuple:
    summary = json.loads((run_dir / "trace" / "summary.json").read_text())
    return summary, _records(run_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tests",
        type=Path,
        action="append",
        help="tests.jsonl to take tests from (repeatable; default: the calibration batch)",
    )
    parser.add_argument("--every", type=int, default=1, help="take every K-th test of the files")
    parser.add_argument("--copies", type=int, default=10, help="times each test is repeated")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--granularity", default="stable", choices=api.GRANULARITIES)
    parser.add_argument(
        "--compare",
        type=Path,
        nargs=2,
        metavar="DIR",
        help="compare two finished runs instead of making two",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    (s1, first), (s2, second) = (
        [_load(d) for d in args.compare] if args.compare else _run_twice(args)
    )
    common = sorted(first.keys() & second.keys())
    signatures = {
        i: (
            api.conflict_set(first[i]["conflicts"]),
            api.conflict_set(second[i]["conflicts"]),
        )
        for i in common
    }
    same_set = sum(1 for a, b in signatures.values() if a == b)
    same_verdict = sum(1 for i in common if first[i]["conflict_free"] == second[i]["conflict_free"])
    differing = collections.Counter(
        api.show_conflict_element(e) for a, b in signatures.values() for e in a ^ b
    )
    result = {
        "tests_compared": len(common),
        "identical_conflict_sets_between_runs": round(same_set / len(common), 4)
        if common
        else None,
        "identical_verdicts_between_runs": round(same_verdict / len(common), 4) if common else None,
        "conflict_free_share": [
            round(s["conflict_free"] / max(1, s["ok"] + s["mismatch"]), 4) for s in (s1, s2)
        ],
        "repeat_agreement_within_run": [s1["repeat_agreement"], s2["repeat_agreement"]],
        "tests_per_second": [s1["tests_per_second"], s2["tests_per_second"]],
        "most_often_differing": differing.most_common(8),
    }
    print_result(result, args.json)


if __name__ == "__main__":
    main()
