"""Repeat agreement: trace the same tests in two independent full runs and compare.

For every test traced in both runs, compares the conflict sets (by signature: kind, data
symbol, functions that wrote the line on each side; see docs/tracer.md) and the
conflict-free verdict. Also reports how often the repeats inside one run agreed.

Usage: python3 bench/trace_agreement.py [--tests FILE] [--copies N] [--json]
"""

import argparse
import json
import tempfile
from pathlib import Path

from scalecheck.trace import outcome, testfile
from scalecheck.trace.runner import run_tests

CALIBRATION = Path(__file__).resolve().parents[1] / "src" / "scalecheck" / "trace" / "calibration.jsonl"


def _records(run_dir: Path) -> dict:
    lines = (run_dir / "trace" / "results.jsonl").read_text().splitlines()[1:]
    return {r["id"]: r for r in map(json.loads, lines) if r["status"] in ("ok", "mismatch")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, action="append",
                        help="tests.jsonl to take tests from (repeatable; default: the calibration batch)")
    parser.add_argument("--copies", type=int, default=10, help="times each test is repeated")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tests = []
    for path in args.tests or [CALIBRATION]:
        tests += testfile.read_tests(path)[1]
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for name in ("first", "second"):
            run_dir = Path(tmp) / name
            run_dir.mkdir()
            with open(run_dir / "tests.jsonl", "w") as f:
                f.write(json.dumps({"format": "scalecheck-tests", "version": 1, "model": "posix"}) + "\n")
                for k in range(args.copies):
                    for t in tests:
                        f.write(json.dumps(dict(t.raw, id=f"{t.id}/copy{k}")) + "\n")
            summary = run_tests(run_dir, repeats=args.repeats)
            runs.append((summary, _records(run_dir)))
    (s1, first), (s2, second) = runs
    common = sorted(first.keys() & second.keys())
    same_set = sum(1 for i in common if {outcome.signature(c) for c in first[i]["conflicts"]}
                   == {outcome.signature(c) for c in second[i]["conflicts"]})
    same_verdict = sum(1 for i in common if first[i]["conflict_free"] == second[i]["conflict_free"])
    result = {
        "tests_compared": len(common),
        "identical_conflict_sets_between_runs": round(same_set / len(common), 4) if common else None,
        "identical_verdicts_between_runs": round(same_verdict / len(common), 4) if common else None,
        "repeat_agreement_within_run": [s1["repeat_agreement"], s2["repeat_agreement"]],
        "tests_per_second": [s1["tests_per_second"], s2["tests_per_second"]],
    }
    print(json.dumps(result, indent=1) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
