"""``scalecheck pipeline``: the whole job in one command,
model -> analyze -> testgen -> run -> report.

Each stage writes its files into the output directory and the next reads them, so a
rerun after an interruption resumes where it stopped.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from scalecheck import kernels
from scalecheck.analyze import analyze_model, print_summary, select_ops
from scalecheck.modelfile import load_model
from scalecheck.testgen import DEFAULT_CAP, generate_tests
from scalecheck.trace.runner import (
    EXIT_NOT_CONFORMING,
    add_conflict_options,
    conflict_settings,
    conformance_line,
    exit_codes_help,
    not_conforming,
    run_tests,
)
from scalecheck.trace.userspace import NAMED_LIBRARIES, library_spec, load_library

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
    parser.add_argument(
        "--target",
        default="linux",
        help="'linux' (default), 'lib:PATH' (a C library's manifest) or a shipped library: "
        f"{', '.join(sorted(NAMED_LIBRARIES))} (docs/usertarget.md)",
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
    parser.add_argument("--limit", type=int, help="trace only the first N tests")
    kernels.add_kernel_option(parser, "the installed Debian kernel")
    parser.add_argument("--kernel-args", default="", help="extra kernel command-line arguments")
    parser.add_argument("--repeats", type=int, default=2, help="runs per test (default 2)")
    add_conflict_options(parser)
    parser.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="trace on a Dask cluster: a scheduler's address or local:N (docs/cluster.md)",
    )
    parser.add_argument("--jobs", type=int, help="parallel workers (default: all cores)")
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
    traced = run_tests(
        args.out,
        target=args.target,
        kernel=args.kernel,
        kernel_args=args.kernel_args,
        jobs=args.jobs,
        repeats=args.repeats,
        limit=args.limit,
        set_aside_incompatible=True,
        cluster=args.cluster,
        **conflict_settings(args),
    )
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
