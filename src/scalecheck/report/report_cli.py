"""``scalecheck report DIR``: heat map, HTML drill-down, bottleneck sites, summary, diff."""

import argparse
import json
import sys
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.report.diff import diff_line, regressions
from scalecheck.testgen.open_equalities import coverage_line

EXIT_NEW_CONFLICTS = 1


def register(subparsers):
    parser = subparsers.add_parser(
        "report",
        help="heat map, HTML report, bottleneck sites and summary of a traced run",
        description="Reads DIR/tests.jsonl and DIR/trace/results.jsonl and writes DIR/report/: "
        "heatmap.png, heatmap.svg, index.html, bottlenecks.txt, summary.json (and diff.txt "
        "with --diff). Prints a one-line summary.",
        epilog=f"exit codes: 0 done; {EXIT_NEW_CONFLICTS} --fail-on-new and the diff found "
        "tests that got worse in DIR than in OTHER_DIR (conflicting where they were "
        "conflict-free, mismatching the model where they conformed, or no longer run where "
        "they ran); 2 bad input.",
    )
    parser.add_argument("dir", metavar="DIR", type=Path, help="run directory")
    parser.add_argument(
        "--diff",
        metavar="OTHER_DIR",
        type=Path,
        help="compare with another run of the same tests (e.g. another kernel), "
        "pairing tests by content (setup, calls, expected results), not by id; OTHER_DIR "
        "is the baseline",
    )
    parser.add_argument(
        "--fail-on-new",
        action="store_true",
        help=f"exit {EXIT_NEW_CONFLICTS} if --diff finds new conflicts, new mismatches or "
        "tests no longer run (for CI)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print summary.json to stdout instead of the human summary",
    )
    parser.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    if args.fail_on_new and args.diff is None:
        raise UserError("--fail-on-new needs --diff OTHER_DIR")
    # Imported here, not at the top: matplotlib would slow down every other subcommand.
    from scalecheck.report.build import make_report

    summary = make_report(args.dir, args.diff)
    if args.json:
        json.dump(summary, sys.stdout, indent=1)
        print()
    else:
        print(summary["summary"])
        if "open_equalities" in summary:
            print(f"tests: {coverage_line(summary['open_equalities'])}")
        if "diff" in summary:
            print(diff_line(summary["diff"]))
        print(f"report: {args.dir / 'report' / 'index.html'}")
    if args.fail_on_new and regressions(summary["diff"]):
        return EXIT_NEW_CONFLICTS
    return 0
