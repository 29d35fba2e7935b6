"""`scalecheck bench compare A B`: B's throughput relative to A's, per cell, with spreads.

Like the DragonFly 5.6 report's "+23%" table. A change smaller than either side's
spread is flagged as within noise.
"""

from scalecheck.bench.bench_results import ResultsDir
from scalecheck.common.errors import UserError


def compare(before: ResultsDir, after: ResultsDir) -> tuple[list[dict], list[str]]:
    """Rows for every (benchmark, mode, runtime, cores) both sides measured; plus notes."""
    _, summary_a = before.require_results()
    _, summary_b = after.require_results()
    key = lambda e: (e["benchmark"], e["mode"], e["runtime"], e["cores"])  # noqa: E731
    measured_a = {key(e): e for e in summary_a if e["mean"] is not None}
    measured_b = {key(e): e for e in summary_b if e["mean"] is not None}
    rows = []
    for k in sorted(measured_a.keys() & measured_b.keys()):
        a, b = measured_a[k], measured_b[k]
        change = (b["mean"] / a["mean"] - 1) * 100 if a["mean"] else None
        noise = max(a["spread_pct"] or 0.0, b["spread_pct"] or 0.0)
        rows.append(
            {
                "benchmark": k[0],
                "mode": k[1],
                "runtime": k[2],
                "cores": k[3],
                "mean_a": a["mean"],
                "mean_b": b["mean"],
                "change_pct": change,
                "spread_a_pct": a["spread_pct"],
                "spread_b_pct": b["spread_pct"],
                "runs_a": a["runs_ok"],
                "runs_b": b["runs_ok"],
                "within_noise": change is not None and abs(change) <= noise,
            }
        )
    if not rows:
        raise UserError(f"{before.path} and {after.path} have no measured cell in common")
    notes = []
    only_a, only_b = measured_a.keys() - measured_b.keys(), measured_b.keys() - measured_a.keys()
    if only_a:
        notes.append(f"{len(only_a)} cells measured only in {before.path}")
    if only_b:
        notes.append(f"{len(only_b)} cells measured only in {after.path}")
    return rows, notes


def format_change(change_pct: float | None) -> str:
    return "n/a" if change_pct is None else f"{change_pct:+.1f}%"
