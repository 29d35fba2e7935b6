"""``scalecheck compare DIR1 DIR2 [DIR ...]``: runs of one test file side by side, typically
one per kernel (`run --kernel 6.1`, `run --kernel 6.12`), oldest first.

Per run: its kernel, the conflict-free share at the three granularities, how many
conflicting lines carry a data name, and its heat map (OUT/<N>-<kernel>/heatmap.png). Per
consecutive pair (tests paired by content, as `report --diff` does): the tests fixed
(conflicting before, conflict-free after) with the data names the earlier run gave their
conflicts, and the tests broken with the names the later run gives.
"""

import argparse
import itertools
import json
import re
import sys
from collections import Counter
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.formats.resultsfile import Run, load_run
from scalecheck.report.diff import diff_runs
from scalecheck.report.filters import GRANULARITIES, granularity_shares, naming_coverage
from scalecheck.report.stats import count_pairs, count_totals, percent_text, summary_line
from scalecheck.report.tables import format_table

TOP_NAMES = 5


def register(subparsers):
    p = subparsers.add_parser(
        "compare",
        help="several runs of one test file side by side (e.g. one per kernel)",
        description="Compare runs of the same tests, oldest first (e.g. traced with --kernel "
        "6.1 and --kernel 6.12): the conflict-free share at every granularity and the data "
        "named per run, a heat map per run, and per consecutive pair the tests fixed and "
        "broken with the data names each side reports.",
    )
    p.add_argument("dirs", metavar="DIR", type=Path, nargs="+", help="run directories (2 or more)")
    p.add_argument(
        "--out",
        type=Path,
        help="where the heat maps and compare.json go (default: DIR1/report/compare)",
    )
    p.add_argument("--json", action="store_true", help="print compare.json instead of tables")
    p.set_defaults(func=_command)


def _names(run: Run, test_ids: list[str]) -> list[tuple[str, int]]:
    """The data names of these tests' conflicts in ``run``, most frequent first."""
    counts: Counter = Counter()
    for test_id in test_ids:
        record = run.results.get(test_id) or {}
        counts.update(
            {c.get("data") or f"unnamed {c['kind']} data" for c in record.get("conflicts", [])}
        )
    return counts.most_common(TOP_NAMES)


def _directory_name(position: int, kernel: str) -> str:
    """``2-6.12.117+deb12-amd64``: numbered, as two runs may share a kernel."""
    return f"{position}-" + re.sub(r"[^\w.+-]", "_", kernel)


def compare_runs(dirs: list[Path], out: Path) -> dict:
    if len(dirs) < 2:
        raise UserError("compare needs two run directories or more")
    runs = [load_run(d) for d in dirs]
    # Imported here: matplotlib would slow down every other subcommand.
    from scalecheck.report.heatmap import write_heatmap

    rows = []
    for position, run in enumerate(runs, start=1):
        pairs = count_pairs(run)
        heatmap_dir = out / _directory_name(position, run.kernel_name)
        heatmap_dir.mkdir(parents=True, exist_ok=True)
        line = summary_line(count_totals(run)[0])
        write_heatmap(
            run.ops, pairs, f"model {run.model} on {run.kernel_name}\n{line}", heatmap_dir
        )
        rows.append(
            {
                "dir": str(run.directory),
                "kernel": run.kernel_name,
                "summary": line,
                "shares": {g: s["share"] for g, s in granularity_shares(run).items()},
                "naming": naming_coverage(run),
                "heatmap": str(heatmap_dir / "heatmap.png"),
            }
        )
    steps = []
    for before, after in itertools.pairwise(runs):
        # diff_runs(new, baseline) lists the new run's ids: backwards, the tests fixed
        # going forwards are the earlier run's "new conflicts", under its own ids.
        forwards, backwards = diff_runs(after, before), diff_runs(before, after)
        steps.append(
            {
                "from": before.kernel_name,
                "to": after.kernel_name,
                "compared_tests": forwards["compared_tests"],
                "fixed": len(forwards["fixed"]),
                "broken": len(forwards["new_conflicts"]),
                "no_longer_run": len(forwards["no_longer_run"]),
                "fixed_names_before": _names(before, backwards["new_conflicts"]),
                "broken_names_after": _names(after, forwards["new_conflicts"]),
            }
        )
    result = {"runs": rows, "steps": steps}
    (out / "compare.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def format_compare(result: dict) -> str:
    table = format_table(
        ["kernel", *GRANULARITIES, "data named"],
        [
            [
                r["kernel"],
                *(percent_text(r["shares"][g]) for g in GRANULARITIES),
                r["naming"].removeprefix("data named: "),
            ]
            for r in result["runs"]
        ],
    )
    parts = ["conflict-free share by granularity, per run:\n" + table]
    for step in result["steps"]:
        lines = [
            f"{step['from']} -> {step['to']}: {step['compared_tests']} tests compared, "
            f"{step['fixed']} fixed, {step['broken']} broken, "
            f"{step['no_longer_run']} no longer run"
        ]
        for what, side, names in (
            ("fixed", step["from"], step["fixed_names_before"]),
            ("broken", step["to"], step["broken_names_after"]),
        ):
            if names:
                shown = ", ".join(f"{name} ({count})" for name, count in names)
                lines.append(f"  {what}: conflicts on {side} were {shown}")
        parts.append("\n".join(lines))
    parts.append("heat maps: " + ", ".join(r["heatmap"] for r in result["runs"]))
    return "\n\n".join(parts)


def _command(args: argparse.Namespace) -> int:
    out = args.out or args.dirs[0] / "report" / "compare"
    result = compare_runs(args.dirs, out)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        print(format_compare(result))
    return 0
