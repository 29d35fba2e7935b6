"""Writes DIR/report/ from DIR/tests.jsonl and DIR/trace/results.jsonl."""

import json
from pathlib import Path

from scalecheck import __version__
from scalecheck.common import rundir_lock
from scalecheck.formats.resultsfile import load_run
from scalecheck.report.diff import diff_runs, format_diff_text
from scalecheck.report.filters import (
    filter_effects,
    granularity_shares,
    naming_coverage,
    security_modules,
    views_line,
)
from scalecheck.report.heatmap import write_heatmap
from scalecheck.report.html_page import changes_by_test, tests_by_pair, write_index
from scalecheck.report.pair_files import write_pair_files
from scalecheck.report.stats import (
    LEFT_PATH,
    bottleneck_sites,
    count_pairs,
    count_totals,
    mismatches,
    summary_line,
)
from scalecheck.report.tables import format_bottlenecks, format_left_path, format_mismatches
from scalecheck.testgen import open_equalities

SUMMARY_FORMAT = "scalecheck-report"
SUMMARY_VERSION = 1
TOP_SITES = 50


@rundir_lock.holding("out_dir")
def make_report(out_dir, other_dir=None) -> dict:
    """Writes the report of run directory ``out_dir`` into ``out_dir/report/`` and returns
    the summary (the content of summary.json). With ``other_dir``, the summary gets a
    ``diff`` against that run (tests paired by content), and diff.txt is written."""
    run = load_run(out_dir)
    other = load_run(other_dir) if other_dir is not None else None
    report_dir = Path(out_dir) / "report"
    report_dir.mkdir(exist_ok=True)

    pairs = count_pairs(run)
    totals, not_run_by_status = count_totals(run)
    sites = bottleneck_sites(run)
    line = summary_line(totals)
    shares = granularity_shares(run)
    filters = filter_effects(run)
    lsm = security_modules(run)
    naming = naming_coverage(run)
    top_sites = [site.as_json(rank) for rank, site in enumerate(sites[:TOP_SITES], start=1)]
    diff = diff_runs(run, other) if other is not None else None
    mismatched = mismatches(run)
    left_path = mismatches(run, LEFT_PATH)

    summary = {
        **_summary_header(run),
        "summary": line,
        "granularity_shares": shares,
        "filters": filters,
        "naming": naming,
        "totals": {
            **totals.as_json(),
            "not_run_by_status": dict(sorted(not_run_by_status.items())),
        },
        "ops": run.ops,
        "pairs": [{"pair": list(pair), **counts.as_json()} for pair, counts in pairs.items()],
        "bottleneck_sites": len(sites),
        "top_sites": top_sites,
        "mismatches": mismatched,
        "damaged_result_lines": run.damaged_lines,
        "left_path": left_path,
        **({"security_modules": lsm} if lsm else {}),
        **({"diff": diff} if diff is not None else {}),
    }

    guest = f", security modules: {lsm}" if lsm else ""
    conflicts = f"{summary['granularity']} conflicts{guest}; {naming}"
    what = f"model {run.model} on {run.kernel_name} ({conflicts})"
    title = f"{what}: {line}\n{views_line(shares)}"
    title += _coverage(summary, Path(out_dir))
    write_heatmap(run.ops, pairs, f"{what}\n{line}", report_dir)
    _write_texts(report_dir, run, format_bottlenecks(sites, title), mismatched, left_path, diff)
    _write_pages(
        report_dir,
        run,
        (pairs, totals, not_run_by_status, line, top_sites, diff),
        (shares, filters, lsm),
        (mismatched, left_path),
    )
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def _coverage(summary: dict, out_dir: Path) -> str:
    """testgen's coverage of open equalities, into ``summary``; a line for the title."""
    coverage = open_equalities.read_coverage(out_dir)
    if coverage is None:
        return ""
    summary["open_equalities"] = coverage
    return f"\ntests: {open_equalities.coverage_line(coverage)}"


def _summary_header(run) -> dict:
    return {
        "format": SUMMARY_FORMAT,
        "version": SUMMARY_VERSION,
        "generator": f"scalecheck {__version__}",
        "model": run.model,
        run.implementation: run.kernel_name,
        # What counted as a conflict (docs/tracer.md); "line" for runs that predate the choice.
        "granularity": run.results_header.get("granularity", "line"),
    }


def _write_texts(report_dir: Path, run, bottlenecks: str, mismatched, left_path, diff) -> None:
    """The report's text files: bottlenecks, mismatches, left-path tests, the diff."""
    (report_dir / "bottlenecks.txt").write_text(bottlenecks, encoding="utf-8")
    (report_dir / "mismatches.txt").write_text(
        format_mismatches(mismatched, run.implementation), encoding="utf-8"
    )
    (report_dir / "left-path.txt").write_text(
        format_left_path(left_path, run.implementation), encoding="utf-8"
    )
    if diff is not None:
        (report_dir / "diff.txt").write_text(format_diff_text(diff), encoding="utf-8")
    else:
        # A diff.txt left by an earlier --diff run would describe another comparison.
        (report_dir / "diff.txt").unlink(missing_ok=True)


def _write_pages(report_dir: Path, run, figures: tuple, views: tuple, found: tuple) -> None:
    """index.html and one file per pair (html_page.py, pair_files.py)."""
    pairs, totals, not_run_by_status, line, top_sites, diff = figures
    grouped = tests_by_pair(run)
    write_index(
        report_dir / "index.html",
        run,
        pairs,
        totals,
        not_run_by_status,
        line,
        top_sites,
        diff,
        views,
        found,
        grouped,
    )
    write_pair_files(report_dir, run, grouped, changes_by_test(diff))
