"""``scalecheck pipeline``: the whole job in one command,
model -> analyze -> testgen -> run -> report.

Each stage writes its files into the output directory and the next reads them, so a
rerun after an interruption resumes where it stopped.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from scalecheck.analyze import analyze_model, print_summary, select_ops
from scalecheck.models.loading import load_model
from scalecheck.run import add_trace_options, run_from_args
from scalecheck.testgen import DEFAULT_CAP, generate_tests
from scalecheck.trace.loop import (
    EXIT_NOT_CONFORMING,
    conformance_line,
    exit_codes_help,
    not_conforming,
)
from scalecheck.trace.user.library import library_spec, load_library

# Operations traced by default: the name and file-descriptor operations, which finish in
# minutes on two cores; --full takes every operation of the model.
DEFAULT_OPS = "open,link,unlink,rename,stat,fstat,close,read"


def register(subparsers):
    parser = subparsers.add_parser(
        "pipeline",
        help="run every stage: analyze, testgen, run on Linux under QEMU, report",
        description="Analyze a model, generate tests, trace them on a real Linux kernel under QEMU "
        "and write the report. Defaults: the shipped posix model, a subset of its "
        f"operations ({DEFAULT_OPS}), Debian's stock kernel.",
        epilog=exit_codes_help(
            "analysis paths were lost (solver unknown, model error, failed test generation) or "
        ),
    )
    parser.add_argument(
        "--model",
        help="shipped model name or path to a .py file (default: posix, or the model of the "
        "--target library's manifest)",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--ops", help=f"comma-separated operations (default for posix: {DEFAULT_OPS})"
    )
    scope.add_argument("--full", action="store_true", help="every operation of the model")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("out/pipeline"),
        help="output directory (default: out/pipeline)",
    )
    parser.add_argument(
        "--cap", type=int, default=DEFAULT_CAP, help="tests per commutative path at most"
    )
    add_trace_options(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from scalecheck.report.build import make_report

    console = Console(stderr=True)
    if args.model is None:
        spec = library_spec(args.target)
        args.model = load_library(spec).model if spec else "posix"
    model_cls = load_model(args.model)
    ops_text = None if args.full else args.ops or (DEFAULT_OPS if args.model == "posix" else None)
    ops = select_ops(model_cls, ops_text)

    console.rule(f"1/4 analyze: {len(ops)} operations of {args.model}")
    analysis = analyze_model(args.model, ops, args.out, jobs=args.jobs)
    print_summary(analysis)
    console.rule("2/4 testgen")
    generated = generate_tests(args.out, cap=args.cap, jobs=args.jobs)
    console.print(f"{generated['totals']['tests']} tests written to {args.out / 'tests.jsonl'}")
    console.rule(
        "3/4 run on Linux under QEMU"
        if args.target == "linux"
        else f"3/4 run on {args.target} under qemu-x86_64"
    )
    traced = run_from_args(args, args.out, set_aside_incompatible=True)
    console.rule("4/4 report")
    summary = make_report(args.out)
    console.print(summary["summary"])
    console.print(f"report: {(args.out / 'report' / 'index.html').resolve()}")
    lost = (
        analysis["totals"]["unknown_paths"]
        + analysis["totals"]["error_paths"]
        + generated["totals"]["failed_paths"]
    )
    console.print(
        f"{conformance_line(traced)}; {lost} analysis paths lost "
        f"({analysis['totals']['unknown_paths']} unknown, {analysis['totals']['error_paths']} "
        f"model errors, {generated['totals']['failed_paths']} failed in testgen)",
        soft_wrap=True,
    )
    return EXIT_NOT_CONFORMING if lost or not_conforming(traced) else 0
