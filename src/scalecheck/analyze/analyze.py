"""``scalecheck analyze``: the commutativity conditions of every pair of operations.

Writes ``DIR/analysis/`` (docs/format-analysis.md): ``meta.json``, one
``pairs/<A>-<B>.json`` per pair as soon as it is done (a rerun skips finished pairs, so an
interrupted analysis resumes), and ``summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from rich.table import Table

from scalecheck import __version__
from scalecheck.analyze import variants
from scalecheck.common import argtypes, rundir_lock
from scalecheck.common.errors import UserError
from scalecheck.common.output import stdout_console
from scalecheck.common.parallel import map_unordered, worker_count
from scalecheck.common.progress import stage_progress
from scalecheck.common.storage import read_json, write_json_atomically
from scalecheck.engine import deadline
from scalecheck.engine.commute import TIMING, path_count
from scalecheck.engine.explore import Bounds
from scalecheck.formats.analysisfile import (
    ANALYSIS_FORMAT,
    ANALYSIS_VERSION,
    all_pairs,
    pair_file,
    pair_is_current,
    timings_file,
)
from scalecheck.interfaces.loading import load_model, model_fingerprint

# CPU seconds model code may use on one path (solver queries aside): the shipped models' paths
# take milliseconds.
DEFAULT_MODEL_TIMEOUT = 5.0
# Model errors whose reasons are printed; the rest are counted (all are in summary.json).
SHOWN_MODEL_ERRORS = 5


def register(subparsers):
    parser = subparsers.add_parser(
        "analyze",
        help="find when each pair of a model's operations commutes",
        description="Symbolically execute every pair of operations in both orders and record, "
        "per path, whether the pair commutes and under which condition.",
    )
    parser.add_argument(
        "--model",
        required=True,
        help="a shipped model (posix, rename, counter) or a path to a .py file "
        "(path.py:ClassName if it defines several)",
    )
    parser.add_argument(
        "--ops", type=argtypes.op_list, help="comma-separated operations to analyse (default: all)"
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--jobs",
        "-j",
        type=argtypes.count,
        default=os.cpu_count(),
        help="pairs analysed in parallel (default: all cores)",
    )
    parser.add_argument(
        "--solver-timeout",
        type=argtypes.whole_seconds,
        default=deadline.QUERY_LIMIT_MS // 1000,
        metavar="SECONDS",
        help="per solver query; a query that times out counts as unknown (default: %(default)s)",
    )
    parser.add_argument(
        "--model-timeout",
        type=argtypes.seconds,
        default=DEFAULT_MODEL_TIMEOUT,
        metavar="SECONDS",
        help="CPU seconds model code may use per path, solver queries aside; a path that "
        f"uses more is a model error (default: {DEFAULT_MODEL_TIMEOUT:g})",
    )
    add_bound_options(parser)
    parser.add_argument(
        "--conditions",
        action="store_true",
        help="print each pair's condition (when it commutes, when not) and its figures",
    )
    parser.add_argument(
        "--path-conditions", action="store_true", help="print every path's own condition"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def add_bound_options(parser) -> None:
    """How far one pair's exploration may go before the pair is one model error."""
    parser.add_argument(
        "--max-paths",
        type=argtypes.count,
        default=Bounds.paths,
        metavar="N",
        help="paths one pair may have; a pair with more is one model error (default: %(default)s)",
    )
    parser.add_argument(
        "--max-branches",
        type=argtypes.count,
        default=Bounds.branches,
        metavar="N",
        help="symbolic branches one path may take; a pair with a longer path (a loop on a "
        "symbolic condition that never ends) is one model error (default: %(default)s)",
    )
    parser.add_argument(
        "--pair-timeout",
        type=argtypes.seconds,
        default=Bounds.seconds,
        metavar="SECONDS",
        help="CPU seconds the exploration of one pair may take, solver queries included; a "
        "pair that takes longer is one model error (default: %(default)g)",
    )


def run(args) -> int:
    model_cls = load_model(args.model)
    ops = select_ops(model_cls, args.ops)
    summary = analyze_model(
        args.model,
        ops,
        args.out,
        jobs=args.jobs,
        solver_timeout_ms=args.solver_timeout * 1000,
        model_timeout=args.model_timeout,
        bounds=Bounds(args.max_paths, args.max_branches, args.pair_timeout),
    )
    if args.json:
        print(json.dumps(summary, indent=1))
        print_model_errors(summary)
    else:
        print_summary(summary, args.out)
        variants.print_variants(summary["variants"])
    if args.path_conditions:
        print_path_conditions(args.out, summary)
    if args.conditions:
        print_conditions(args.out, summary)
    return 1 if summary["totals"]["unknown_paths"] or summary["totals"]["error_paths"] else 0


def select_ops(model_cls, ops_text: str | None) -> list[str]:
    """The operations named in ``ops_text`` (comma-separated; empty or None: all of the
    model's), in the order given; UserError naming the first unknown one."""
    available = list(model_cls.operations())
    if not ops_text:
        return available
    ops = [op.strip() for op in ops_text.split(",") if op.strip()]
    unknown = [op for op in ops if op not in available]
    if unknown:
        raise UserError(
            f"unknown operation {unknown[0]!r} in model {model_cls.__name__}; "
            f"it has: {', '.join(available)}"
        )
    return ops


@rundir_lock.holding("out", create=True)
def analyze_model(
    model_spec: str,
    ops: list[str],
    out: Path,
    jobs: int | None = None,
    solver_timeout_ms: int = deadline.QUERY_LIMIT_MS,
    quiet: bool = False,
    model_timeout: float = DEFAULT_MODEL_TIMEOUT,
    bounds: Bounds | None = None,
) -> dict:
    model_cls = load_model(model_spec)
    check_results(model_cls, ops, model_timeout)
    fingerprint = model_fingerprint(model_cls)
    prepare_output(out)
    meta = {
        "format": ANALYSIS_FORMAT,
        "version": ANALYSIS_VERSION,
        "generator": f"scalecheck {__version__}",
        "model": model_spec if model_spec.count("/") == 0 else str(Path(model_spec).resolve()),
        "model_class": model_cls.__name__,
        "fingerprint": fingerprint,
        "ops": ops,
    }
    write_json_atomically(out / "analysis" / "meta.json", meta)

    limits = (solver_timeout_ms, model_timeout, bounds)
    _analyze_pairs(out, model_cls, meta, all_pairs(ops), limits, jobs, quiet)
    summary = summarize(out, ops)
    summary["variants"] = [
        variants.compare(model_cls, variant, solver_timeout_ms)
        for variant in variants.applicable(model_cls, ops)
    ]
    write_json_atomically(out / "analysis" / "summary.json", summary)
    return summary


def _analyze_pairs(
    out: Path, model_cls, meta: dict, pairs: list, limits: tuple, jobs, quiet: bool
) -> None:
    """The pairs not yet analysed, largest first, each written as it is done; ``limits``:
    (solver timeout in ms, model timeout, bounds)."""
    fingerprint, (_, model_timeout, bounds) = meta["fingerprint"], limits
    todo = [pair for pair in pairs if not pair_is_current(out, pair, fingerprint)]
    sizes = _pair_sizes(model_cls, todo, model_timeout, bounds)
    todo.sort(key=lambda pair: -sizes[pair])  # no worker starts a long pair at the end
    order = {pair: index for index, pair in enumerate(todo)}
    with stage_progress("analyze", quiet) as progress:
        task = progress.add_task(
            "",
            total=len(pairs),
            completed=len(pairs) - len(todo),
            sizes=[sizes[pair] for pair in todo],
            workers=worker_count(jobs, len(todo)),
        )
        work = [(meta["model"], a, b, *limits) for a, b in todo]
        timings = _read_timings(out)
        # Each pair in a fresh process: Z3 numbers terms in the order a process makes
        # them, and orders terms by those numbers (simplified conditions, the SMT-LIB
        # text), so a pair explored after other work would come out otherwise.
        for result in map_unordered(_analyze_one, work, jobs, fresh_process=True):
            timing = result.pop(TIMING)
            result["fingerprint"] = fingerprint
            a, b = result["pair"]
            # One line: a large pair's file holds megabytes of SMT-LIB text.
            write_json_atomically(pair_file(out, a, b), result, indent=None)
            timings[f"{a}-{b}"] = timing
            write_json_atomically(timings_file(out), timings)
            progress.update(
                task,
                advance=1,
                item=order[(a, b)],
                description=f"{a} || {b} ({timing['seconds']:.1f}s)",
            )


# An operation alone takes well under a second in the shipped models; one whose
# exploration goes on (a loop on a symbolic condition) is given up on after this.
SIZING_SECONDS = 5.0


def _pair_sizes(model_cls, pairs: list, model_timeout: float, bounds: Bounds | None) -> dict:
    """Each pair's foretold cost: the product of its operations' paths alone. On the main
    job's 36 pairs it correlates 0.97 with their analysis's CPU time, 0.76 on all 300."""
    bounds = bounds or Bounds()
    bounds = dataclasses.replace(bounds, seconds=min(bounds.seconds, SIZING_SECONDS))
    ops = {op for pair in pairs for op in pair}
    paths = {op: _paths_alone(model_cls, op, model_timeout, bounds) for op in ops}
    return {pair: paths[pair[0]] * paths[pair[1]] for pair in pairs}


def _paths_alone(model_cls, op: str, model_timeout: float, bounds: Bounds) -> int:
    try:
        return path_count(model_cls, op, model_timeout, bounds)
    except Exception:  # the pairs' analyses say what fails: this only orders them
        return 1


def _read_timings(out: Path) -> dict:
    try:
        return read_json(timings_file(out))
    except (OSError, ValueError):  # none yet, or torn: times only, the pairs are intact
        return {}


def check_results(model_cls, ops: list[str], model_timeout: float) -> None:
    """Refuses, in one line, an operation that returns something else than a result on
    the first path it takes (a non-result on a later path is a model error there)."""
    from scalecheck.engine.commute import first_path_result
    from scalecheck.model.op_results import is_result, not_a_result

    for op in ops:
        outcome = first_path_result(model_cls, op, model_timeout)
        if outcome is not None and not isinstance(outcome, Exception) and not is_result(outcome):
            raise UserError(f"model {model_cls.__name__}: {not_a_result(op, outcome)}")


def prepare_output(out: Path):
    try:
        (out / "analysis" / "pairs").mkdir(parents=True, exist_ok=True)
        probe = out / "analysis" / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise UserError(f"cannot write output directory {out}: {err.strerror}") from None


VERDICTS = ("commutes", "diverges")
FIGURES = ("raw_disjuncts", "raw_atoms", "disjuncts", "atoms")


def _condition_row(conditions: dict) -> dict:
    """A pair's condition figures for the summary: per verdict, and whether simplified."""
    return {
        **{verdict: conditions[verdict]["figures"] for verdict in VERDICTS},
        "simplified": all(conditions[verdict]["simplified"] for verdict in VERDICTS),
    }


def _analyze_one(job):
    from scalecheck.engine.commute import analyze_pair

    model_spec, a, b, solver_timeout_ms, model_timeout, bounds = job
    return analyze_pair(load_model(model_spec), a, b, solver_timeout_ms, model_timeout, bounds)


def summarize(out: Path, ops: list[str]) -> dict:
    pairs: list[dict] = []
    counted = ("paths", "commutative_paths", "noncommutative_paths", "error_paths")
    totals = dict.fromkeys(("pairs", *counted, "unknown_paths"), 0)
    conditions: dict = {
        **{verdict: dict.fromkeys(FIGURES, 0) for verdict in VERDICTS},
        "unsimplified_pairs": [],
    }
    model_errors = []
    for a, b in all_pairs(ops):
        data = read_json(pair_file(out, a, b))
        paths = data["paths"]
        row: dict = {
            "pair": [a, b],
            "paths": len(paths),
            "commutative_paths": sum(1 for p in paths if p["commutes"] and not p["unknown"]),
            "noncommutative_paths": sum(
                1 for p in paths if p["commutes"] is False and not p["unknown"]
            ),
            "error_paths": sum(1 for p in paths if p["commutes"] is None),
            "unknown_paths": sum(1 for p in paths if p["unknown"]),
            "conditions": _condition_row(data["conditions"]),
        }
        pairs.append(row)
        model_errors += [
            {"pair": [a, b], "path": p["path"], "error": p["error"]}
            for p in paths
            if p["commutes"] is None
        ]
        for key in totals:
            totals[key] += row[key] if key != "pairs" else 1
        for verdict in VERDICTS:
            for figure in FIGURES:
                conditions[verdict][figure] += row["conditions"][verdict][figure]
        if not row["conditions"]["simplified"]:
            conditions["unsimplified_pairs"].append(f"{a} || {b}")
    return {
        "ops": ops,
        "totals": totals,
        "conditions": conditions,
        "pairs": pairs,
        "model_errors": model_errors,
    }


def print_summary(summary: dict, out: Path):
    console = stdout_console()
    timings = _read_timings(out)
    table = Table(title="commutativity analysis")
    for column in ("pair", "paths", "commute", "diverge", "errors", "unknown", "seconds"):
        table.add_column(column, justify="left" if column == "pair" else "right")
    for row in summary["pairs"]:
        seconds = timings.get("-".join(row["pair"]), {}).get("seconds")
        table.add_row(
            " || ".join(row["pair"]),
            str(row["paths"]),
            str(row["commutative_paths"]),
            str(row["noncommutative_paths"]),
            str(row["error_paths"]),
            str(row["unknown_paths"]),
            "-" if seconds is None else f"{seconds:.1f}",
        )
    console.print(table)
    t = summary["totals"]
    total = sum(timing["seconds"] for timing in timings.values())
    console.print(
        f"{t['pairs']} pairs, {t['paths']} paths: {t['commutative_paths']} commutative, "
        f"{t['noncommutative_paths']} not, {t['error_paths']} model errors, "
        f"{t['unknown_paths']} unknown; {total:.0f} s of analysis"
    )
    print_model_errors(summary)


def print_model_errors(summary: dict):
    """Why paths ended in a model error, on stderr: the first few, then a count."""
    errors = summary.get("model_errors", [])
    for error in errors[:SHOWN_MODEL_ERRORS]:
        a, b = error["pair"]
        print(f"model error: {a} || {b} path {error['path']}: {error['error']}", file=sys.stderr)
    if len(errors) > SHOWN_MODEL_ERRORS:
        print(
            f"... and {len(errors) - SHOWN_MODEL_ERRORS} more model errors "
            "(every one in analysis/summary.json)",
            file=sys.stderr,
        )


def print_path_conditions(out: Path, summary: dict):
    for row in summary["pairs"]:
        a, b = row["pair"]
        print(f"\n== {a} || {b}")
        for path in read_json(pair_file(out, a, b))["paths"]:
            verdict = (
                "ERROR " + path["error"]
                if path["commutes"] is None
                else "commutes"
                if path["commutes"]
                else "diverges"
            )
            flag = " (unknown)" if path["unknown"] else ""
            print(f"  path {path['path']}: {verdict}{flag} when {path['condition']}")
    sys.stdout.flush()


def print_conditions(out: Path, summary: dict):
    """Each pair's two conditions, one case per line, with their figures; then the totals."""
    timings = _read_timings(out)
    for row in summary["pairs"]:
        a, b = row["pair"]
        conditions = read_json(pair_file(out, a, b))["conditions"]
        print(f"\n== {a} || {b}: {row['commutative_paths']} of {row['paths']} paths commute")
        for verdict in VERDICTS:
            condition = conditions[verdict]
            lines = condition["text"].splitlines()
            flag = "" if condition["simplified"] else f" [NOT simplified: {condition['why']}]"
            heading = f"  {verdict} {_figures_text(condition['figures'])}{flag}"
            if condition["text"] in ("always", "never"):
                print(f"  {verdict} {condition['text']}")
            elif len(lines) == 1:
                print(f"{heading}: {lines[0]}")
            else:
                print(f"{heading}:")
                for line in lines:
                    print(f"    {line}")
        seconds = timings.get(f"{a}-{b}", {}).get("conditions_seconds", 0.0)
        print(f"  ({seconds:.2f} s to simplify)")
    totals = summary["conditions"]
    print()
    for verdict in VERDICTS:
        print(f"all pairs, {verdict}: {_figures_text(totals[verdict])}")
    unsimplified = totals["unsimplified_pairs"]
    print(
        f"{sum(t.get('conditions_seconds', 0.0) for t in timings.values()):.1f} s to "
        "simplify; pairs left unsimplified: "
        f"{', '.join(unsimplified) if unsimplified else 'none'}"
    )
    sys.stdout.flush()


def _figures_text(figures: dict) -> str:
    return (
        f"({_count(figures['disjuncts'], 'case')}, {_count(figures['atoms'], 'atom')}; raw: "
        f"{_count(figures['raw_disjuncts'], 'path')}, {_count(figures['raw_atoms'], 'atom')})"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
