"""How fast a report opens: the first page's size and the time headless Chromium takes to
load it (request to load event, median of --runs loads), plus the pair files beside it.

Usage: python3 bench/report_render.py RUN_DIR [--runs 5] [--json]
       (RUN_DIR/report/index.html, made by `scalecheck report RUN_DIR`)
       python3 bench/report_render.py --stand-in TESTS.jsonl TRACED_RUN OUT_DIR
       writes OUT_DIR, a STAND-IN run for sizing the report of a file that was not traced:
       the tests of TESTS.jsonl, each given the result line (real conflicts, real data
       names) of a test of the same pair traced in TRACED_RUN, or of any of its tests when
       it traced none of that pair; then `scalecheck report OUT_DIR` and measure it.
"""

import argparse
import itertools
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalecheck import api


def measure(run_dir: Path, runs: int) -> dict:
    report = run_dir / "report"
    index = report / "index.html"
    pair_files = sorted((report / "pairs").glob("*.js")) if (report / "pairs").is_dir() else []
    seconds = []
    with api.Browser(timeout=300) as browser:
        for _ in range(runs):
            seconds.append(browser.open(index.resolve().as_uri()))
        cells = browser.evaluate("document.querySelectorAll('table.heat td').length")
        largest = max(pair_files, key=lambda p: p.stat().st_size, default=None)
        if largest is not None:  # the drill-down a reader waits longest for
            anchor = "pair-" + largest.name[: -len(".js")]
            started = time.monotonic()
            browser.evaluate(f"document.getElementById({json.dumps(anchor)}).open = true")
            browser.wait_for(
                f"document.getElementById({json.dumps(anchor)}).getAttribute('data-loaded')"
                " === '1' && document.body.offsetHeight",
                "the largest pair's tests",
            )
            opened = {
                "pair": largest.name,
                "bytes": largest.stat().st_size,
                "seconds": time.monotonic() - started,
            }
    return {
        "index": str(index),
        "first_page_bytes": index.stat().st_size,
        "pair_files": len(pair_files),
        "pair_files_bytes": sum(p.stat().st_size for p in pair_files),
        "heat_map_cells": cells,
        "load_seconds": seconds,
        "load_seconds_median": statistics.median(seconds),
        "largest_pair_opened": opened if pair_files else None,
    }


def stand_in(tests_path: Path, traced_run: Path, out: Path) -> int:
    _header, tests = api.read_tests(tests_path)
    results_header, records = api.read_results(traced_run)
    if not records:
        raise SystemExit(f"{traced_run}: no results to borrow")
    by_pair: dict = {}
    for record in records:
        by_pair.setdefault(tuple(sorted(record["pair"])), []).append(record)
    cycles = {pair: itertools.cycle(found) for pair, found in by_pair.items()}
    anything = itertools.cycle(records)
    out.mkdir(parents=True, exist_ok=True)
    (out / "trace").mkdir(exist_ok=True)
    shutil.copyfile(tests_path, out / "tests.jsonl")
    if (tests_path.parent / "analysis").is_dir() and not (out / "analysis").exists():
        shutil.copytree(tests_path.parent / "analysis", out / "analysis")
    borrowed = []
    for test in tests:
        record = dict(next(cycles.get(tuple(sorted(test["pair"])), anything)))
        # The borrowed line carries another test's hash; the report checks hashes when present.
        record.pop("test_hash", None)
        borrowed.append(json.dumps({**record, "id": test["id"], "pair": test["pair"]}))
    stand_in_header = {**results_header, "stand_in": f"results borrowed from {traced_run}"}
    text = "\n".join([json.dumps(stand_in_header), *borrowed]) + "\n"
    (out / "trace" / "results.jsonl").write_text(text)
    print(f"{out}: {len(tests)} tests, results borrowed from {len(records)} traced ones")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", type=Path, help="a run directory with report/")
    parser.add_argument("--runs", type=int, default=5, help="page loads measured (default 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--stand-in",
        nargs=3,
        type=Path,
        metavar=("TESTS", "TRACED_RUN", "OUT_DIR"),
        help="write a stand-in run (see above) instead of measuring",
    )
    args = parser.parse_args()
    if args.stand_in:
        return stand_in(*args.stand_in)
    if args.run_dir is None or not (args.run_dir / "report" / "index.html").is_file():
        parser.error("RUN_DIR/report/index.html not found: run `scalecheck report RUN_DIR` first")
    figures = measure(args.run_dir, args.runs)
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print(
            f"first page {figures['first_page_bytes'] / 1e6:.2f} MB, loaded in "
            f"{figures['load_seconds_median']:.2f} s (median of {len(figures['load_seconds'])}: "
            f"{', '.join(f'{s:.2f}' for s in figures['load_seconds'])}); "
            f"{figures['pair_files']} pair files, {figures['pair_files_bytes'] / 1e6:.1f} MB"
        )
        opened = figures["largest_pair_opened"]
        if opened:
            print(
                f"largest pair {opened['pair']} ({opened['bytes'] / 1e6:.2f} MB) opened and "
                f"laid out in {opened['seconds']:.2f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
