"""`scalecheck bench run|plot|compare|list`: the scalability benchmark suite.

Benchmarks come only from the catalog files (docs/format-bench.md); the output
directory layout is documented there too.
"""

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scalecheck.bench.bench_results import (
    SPREAD_BAR_PCT,
    ResultsDir,
    machine_description,
    series_name,
)
from scalecheck.bench.catalog import load_catalog, select
from scalecheck.bench.compare import compare, format_change
from scalecheck.bench.runner import Sweep, SweepSettings
from scalecheck.common import argtypes, sources
from scalecheck.common.errors import UserError
from scalecheck.common.output import stdout_console


class OneLineErrorParser(argparse.ArgumentParser):
    """Bad arguments give one line (`scalecheck bench run: error: ...`), not usage + error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_cores(text: str | None, usable: int) -> list[int]:
    """'1,2,4' or '1-4' (or a mix); default every count from 1 to the usable CPUs."""
    if text is None:
        return list(range(1, usable + 1))
    cores: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if low > high:
                    raise ValueError
                cores.update(range(low, high + 1))
            else:
                cores.add(int(part))
        except ValueError:
            raise UserError(f"--cores {text}: expected core counts like 1,2,4 or 1-4") from None
    if min(cores) < 1:
        raise UserError(f"--cores {text}: core counts start at 1")
    if max(cores) > usable:
        raise UserError(f"--cores {text}: this machine lets us use {usable} CPUs")
    return sorted(cores)


def _catalog_dirs(args) -> list[Path] | None:
    return [Path(d) for d in args.catalog] if args.catalog else None


def human(value: float | None) -> str:
    if value is None:
        return "-"
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def _spread_text(spread: float | None) -> str:
    if spread is None:
        return "-"
    text = f"{spread:.1f}%"
    return f"[yellow]{text}[/]" if spread > SPREAD_BAR_PCT else text


def _share_text(share: float | None) -> str:
    """The workers' share of their CPUs; low means other work competed for them (or the
    benchmark blocks, e.g. waiting for children)."""
    return "-" if share is None else f"{share * 100:.0f}%"


def summary_table(summary: list[dict], sweep: dict, title: str) -> Table:
    table = Table(title=title)
    for column in (
        "benchmark",
        "series",
        "cores",
        "mean",
        "per core",
        "min",
        "max",
        "spread",
        "runs ok/failed",
        "cycles/op",
        "cpu share",
    ):
        table.add_column(column, justify="left" if column in ("benchmark", "series") else "right")
    for entry in summary:
        metric = sweep.get("benchmarks", {}).get(entry["benchmark"], {}).get("metric", "ops/s")
        table.add_row(
            f"{entry['benchmark']} ({metric})",
            series_name(entry["mode"], entry["runtime"]),
            str(entry["cores"]),
            human(entry["mean"]),
            human(entry["per_core_mean"]),
            human(entry["min"]),
            human(entry["max"]),
            _spread_text(entry["spread_pct"]),
            f"{entry['runs_ok']}/{entry['runs_failed']}",
            human(entry["cycles_per_op_mean"]),
            _share_text(entry["worker_cpu_share_mean"]),
        )
    return table


def run_command(args) -> int:
    console = Console(stderr=True)
    benchmarks = select(load_catalog(_catalog_dirs(args)), args.names, args.all)
    settings = SweepSettings(
        cores=parse_cores(args.cores, machine_description()["usable_cpus"]),
        runs=args.runs,
        warmup=args.warmup,
        duration=args.duration,
        slack=args.slack,
        repo=sources.root(),
    )
    results = ResultsDir(Path(args.out))
    results.open_for_sweep(settings.warmup, settings.duration, benchmarks)
    outcome = Sweep(benchmarks, settings, results, console).run()

    names = {b.name for b in benchmarks}
    summary = [e for e in results.write_summary() if e["benchmark"] in names]
    if args.json:
        print(
            json.dumps(
                {
                    "summary": summary,
                    "ran": outcome.ran,
                    "failed": outcome.failed,
                    "already_done": outcome.skipped_done,
                },
                indent=2,
            )
        )
    else:
        stdout_console().print(
            summary_table(
                summary,
                results.read_sweep(),
                f"{results.path}: mean of runs; spread = largest deviation "
                f"from the mean (bar {SPREAD_BAR_PCT:g}%)",
            )
        )
    failures = [e for e in summary if e["runs_failed"]]
    for entry in failures:
        console.print(
            f"[red]failed[/] {entry['benchmark']} {series_name(entry['mode'], entry['runtime'])} "
            f"cores={entry['cores']}: {'; '.join(entry['failure_reasons'])}"
        )
    console.print(
        f"{outcome.ran} cells ran ({outcome.failed} failed), {outcome.skipped_done} were already "
        f"done; results in {results.path} (summary.json, runs.jsonl)"
    )
    return 1 if args.strict and outcome.failed else 0


def plot_command(args) -> int:
    # Imported here, not at the top: matplotlib would slow down every other subcommand.
    from scalecheck.bench.plot import plot_results

    files, notes = plot_results(ResultsDir(Path(args.dir)))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps({"files": [str(f) for f in files], "notes": notes}, indent=2))
    else:
        for path in files:
            print(path)
    return 0


def compare_command(args) -> int:
    before, after = ResultsDir(Path(args.before)), ResultsDir(Path(args.after))
    rows, notes = compare(before, after)
    if args.json:
        print(
            json.dumps(
                {"before": args.before, "after": args.after, "rows": rows, "notes": notes}, indent=2
            )
        )
        return 0
    table = Table(title=f"{args.after} relative to {args.before}")
    for column in (
        "benchmark",
        "series",
        "cores",
        "A",
        "B",
        "change",
        "spread A",
        "spread B",
        "note",
    ):
        table.add_column(
            column, justify="left" if column in ("benchmark", "series", "note") else "right"
        )
    for row in rows:
        table.add_row(
            row["benchmark"],
            series_name(row["mode"], row["runtime"]),
            str(row["cores"]),
            human(row["mean_a"]),
            human(row["mean_b"]),
            format_change(row["change_pct"]),
            _spread_text(row["spread_a_pct"]),
            _spread_text(row["spread_b_pct"]),
            "within noise" if row["within_noise"] else "",
        )
    console = stdout_console()
    console.print(table)
    for note in notes:
        console.print(f"note: {note}")
    return 0


def list_command(args) -> int:
    catalog = load_catalog(_catalog_dirs(args))
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": b.name,
                        "catalog": b.catalog_file,
                        "description": b.description,
                        "seed": b.seed,
                        "modes": list(b.modes),
                        "runtimes": list(b.runtimes),
                        "metric": b.metric,
                        "min_cores": b.min_cores,
                    }
                    for b in catalog.values()
                ],
                indent=2,
            )
        )
        return 0
    console = stdout_console()
    for b in catalog.values():
        axes = "".join(
            f"; {axis}: {', '.join(values)}"
            for axis, values in (("modes", b.modes), ("runtimes", b.runtimes))
            if values
        )
        minimum = f"; min {b.min_cores} cores" if b.min_cores > 1 else ""
        console.print(
            f"[bold]{b.name}[/] "
            + escape(f"({b.metric}{axes}{minimum}) [{b.catalog_file}, seed: {b.seed}]"),
            highlight=False,
        )
        console.print(f"    {b.description}", highlight=False, markup=False)
    return 0


def _add_catalog_option(parser) -> None:
    parser.add_argument(
        "--catalog",
        action="append",
        metavar="DIR",
        help="read catalog *.toml files from DIR instead of the built-in catalog (repeatable)",
    )


def register(subparsers) -> None:
    bench = subparsers.add_parser(
        "bench",
        help="run the scalability benchmark suite, plot and compare results",
        description="Scalability benchmarks swept over core counts.",
    )

    def show_help(args) -> int:
        bench.print_help()
        return 2

    bench.set_defaults(func=show_help)
    commands = bench.add_subparsers(
        dest="bench_command", metavar="SUBCOMMAND", parser_class=OneLineErrorParser
    )

    run = commands.add_parser(
        "run",
        help="sweep benchmarks over core counts (resumable)",
        description="Run each benchmark x mode x runtime x core count x run; finished "
        "cells are kept in --out, so rerunning the same command resumes.",
    )
    run.add_argument(
        "names", nargs="*", metavar="NAME", help="benchmarks to run (see `bench list`)"
    )
    run.add_argument("--all", action="store_true", help="run every catalog entry")
    run.add_argument(
        "--cores", help="core counts, e.g. 1,2,4 or 1-4 (default: 1 to all usable CPUs)"
    )
    run.add_argument("--runs", type=argtypes.count, default=3, help="runs per cell (default 3)")
    run.add_argument(
        "--warmup",
        type=argtypes.non_negative_seconds,
        default=1.0,
        help="warm-up seconds per run (default 1)",
    )
    run.add_argument(
        "--duration",
        type=argtypes.seconds,
        default=5.0,
        help="measured seconds per run (default 5)",
    )
    run.add_argument(
        "--out", required=True, metavar="DIR", help="results directory (created or resumed)"
    )
    run.add_argument(
        "--slack",
        type=argtypes.seconds,
        default=120.0,
        help="seconds a run may take beyond warm-up + duration before it is killed (default 120)",
    )
    run.add_argument("--strict", action="store_true", help="exit with status 1 if any cell failed")
    run.add_argument(
        "--json", action="store_true", help="print the summary as JSON instead of a table"
    )
    _add_catalog_option(run)
    run.set_defaults(func=run_command)

    plot = commands.add_parser(
        "plot",
        help="draw throughput and throughput per core against cores",
        description="Write DIR/plots/<benchmark>.png and .svg for each benchmark.",
    )
    plot.add_argument("dir", metavar="DIR", help="a `bench run --out` directory")
    plot.add_argument("--json", action="store_true", help="list the written files as JSON")
    plot.set_defaults(func=plot_command)

    comp = commands.add_parser(
        "compare",
        help="improvement table of B over A (+23%%) with spreads",
        description="Compare two `bench run` directories cell by cell.",
    )
    comp.add_argument("before", metavar="A", help="baseline results directory")
    comp.add_argument("after", metavar="B", help="results directory to compare with A")
    comp.add_argument("--json", action="store_true", help="print rows as JSON instead of a table")
    comp.set_defaults(func=compare_command)

    listing = commands.add_parser(
        "list",
        help="show the benchmark catalog",
        description="List every benchmark of the catalog files.",
    )
    listing.add_argument("--json", action="store_true", help="print the catalog as JSON")
    _add_catalog_option(listing)
    listing.set_defaults(func=list_command)
