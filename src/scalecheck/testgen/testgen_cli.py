"""``scalecheck testgen``: the command, its options and its table (the work:
testgen.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rich.table import Table

from scalecheck.common import argtypes
from scalecheck.common.output import stdout_console
from scalecheck.testgen import open_equalities
from scalecheck.testgen.testgen import DEFAULT_CAP, DEFAULT_VALUE_CAP, generate_tests


def register(subparsers):
    parser = subparsers.add_parser(
        "testgen",
        help="generate concrete tests from an analysis",
        description="Write DIR/tests.jsonl: for every commutative path of DIR/analysis, one test "
        "per isomorphism class of its solutions, up to --cap per path.",
    )
    parser.add_argument("dir", type=Path, help="the directory given to `scalecheck analyze --out`")
    add_testgen_options(parser)
    parser.add_argument(
        "--jobs",
        "-j",
        type=argtypes.count,
        default=os.cpu_count(),
        help="pairs processed in parallel",
    )
    parser.add_argument("--json", action="store_true", help="print the per-pair counts as JSON")
    parser.set_defaults(func=run)


def add_testgen_options(parser) -> None:
    """How many tests: options `testgen` and `pipeline` share."""
    parser.add_argument(
        "--cap",
        type=argtypes.count,
        default=DEFAULT_CAP,
        help=f"isomorphism classes (tests, without value patterns) per path at most "
        f"(default {DEFAULT_CAP})",
    )
    parser.add_argument(
        "--value-cap",
        type=argtypes.count,
        default=DEFAULT_VALUE_CAP,
        help="tests per isomorphism class at most, one per pattern of equalities between "
        "arguments and the stored values the path reads (default "
        f"{DEFAULT_VALUE_CAP}; 1 switches value patterns off: one test per class)",
    )


def run(args) -> int:
    summary = generate_tests(args.dir, cap=args.cap, value_cap=args.value_cap, jobs=args.jobs)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print_summary(summary)
    return 1 if summary["totals"]["unknown_paths"] or summary["totals"]["failed_paths"] else 0


def print_summary(summary: dict):
    console = stdout_console()
    table = Table(title="generated tests")
    for column in (
        "pair",
        "tests",
        "commutative paths",
        "capped",
        "unrealizable",
        "unknown",
        "failed",
    ):
        table.add_column(column, justify="left" if column == "pair" else "right")
    for row in summary["pairs"]:
        table.add_row(
            " || ".join(row["pair"]),
            str(row["tests"]),
            str(row["commutative_paths"]),
            str(row["capped_paths"]),
            str(row["unrealizable_paths"]),
            str(row["unknown_paths"]),
            str(row["failed_paths"]),
        )
    console.print(table)
    for row in summary["pairs"]:
        for failure in row["failures"]:
            console.print(f"[red]failed:[/red] {failure}")
    t = summary["totals"]
    console.print(
        f"{t['tests']} tests from {t['commutative_paths']} commutative paths "
        f"(cap {summary['cap']} per path; {t['capped_paths']} paths capped, "
        f"{t['unrealizable_paths']} unrealizable, {t['unknown_paths']} unknown, "
        f"{t['failed_paths']} failed; "
        + (
            f"{t['value_capped_classes']} classes with more than "
            f"{summary['value_cap']} value-equality patterns)"
            if summary["value_cap"] > 1
            else "value-equality patterns off)"
        )
    )
    console.print(open_equalities.coverage_line(t["open_equalities"]))
