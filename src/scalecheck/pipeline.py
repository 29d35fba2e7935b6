"""``scalecheck pipeline``: the whole job in one command,
model -> analyze -> testgen -> run -> report.

Each stage writes its files into the output directory and the next reads them, so a
rerun after an interruption resumes where it stopped.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from scalecheck.analyze.analyze import (
    DEFAULT_MODEL_TIMEOUT,
    analyze_model,
    print_summary,
    select_ops,
)
from scalecheck.common import argtypes, rundir_lock
from scalecheck.interfaces.loading import load_model
from scalecheck.run.loop import (
    EXIT_NOT_CONFORMING,
    conformance_line,
    exit_codes_help,
    not_conforming,
)
from scalecheck.run.options import RunOptions
from scalecheck.run.run_cli import add_run_options, run_with
from scalecheck.run.user.library import library_spec, load_library
from scalecheck.testgen.testgen import current_tests, generate_tests
from scalecheck.testgen.testgen_cli import add_testgen_options

# Operations traced by default: the name and file-descriptor operations, which finish in
# minutes on two cores; --full takes every operation of the model.
DEFAULT_OPS = "open,link,unlink,rename,stat,fstat,close,read"
# Operations of posix a library target does not run, and why: --full leaves them out there
# (a test of one is an error, "the adapter has no such operation"). Linux runs them all.
LIBRARY_NOT_RUN = {"exec": "libsv6 has no exec (a library's calls run inside one test program)"}


def not_run_by(model: str, library_target: bool) -> dict[str, str]:
    """The model's operations the target does not run (op -> why), which --full leaves out."""
    return LIBRARY_NOT_RUN if model == "posix" and library_target else {}


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
        "--ops",
        type=argtypes.op_list,
        help=f"comma-separated operations (default for posix: {DEFAULT_OPS})",
    )
    scope.add_argument(
        "--full",
        action="store_true",
        help="every operation of the model (of posix on a library target such as libsv6: all "
        "but exec)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("out/pipeline"),
        help="output directory (default: out/pipeline)",
    )
    add_testgen_options(parser)
    parser.add_argument(
        "--model-timeout",
        type=argtypes.seconds,
        default=DEFAULT_MODEL_TIMEOUT,
        metavar="SECONDS",
        help=f"model code may run this long per path (default: {DEFAULT_MODEL_TIMEOUT:g})",
    )
    add_run_options(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    # Held from the first stage to the last: no other command slips in between.
    with rundir_lock.locked(args.out, create=True):
        return run_stages(args)


class StageClock:
    """Each stage's wall time: a stage runs from its title to the next one's."""

    def __init__(self, console: Console):
        self.console = console
        self.times: dict[str, float] = {}
        self.current: tuple[str, float] | None = None

    def start(self, stage: str, title: str) -> None:
        self.stop()
        self.console.rule(title)
        self.current = (stage, time.monotonic())

    def stop(self) -> None:
        if self.current:
            name, started = self.current
            self.times[name] = time.monotonic() - started
            self.current = None

    def line(self) -> str:
        self.stop()
        return "wall time per stage: " + ", ".join(f"{n} {s:.0f} s" for n, s in self.times.items())


def run_stages(args) -> int:
    from scalecheck.report.build import make_report

    console = Console(stderr=True)
    clock = StageClock(console)
    spec = library_spec(args.target)
    model = args.model or (load_library(spec).model if spec else "posix")
    model_cls = load_model(model)
    ops_text = None if args.full else args.ops or (DEFAULT_OPS if model == "posix" else None)
    ops = select_ops(model_cls, ops_text)
    left_out = not_run_by(model, library_target=spec is not None) if args.full else {}
    if left_out:
        ops = [op for op in ops if op not in left_out]
        console.print(f"--full: {', '.join(left_out)} left out ({', '.join(left_out.values())})")

    clock.start("analyze", f"1/4 analyze: {len(ops)} operations of {model}")
    analysis = analyze_model(model, ops, args.out, jobs=args.jobs, model_timeout=args.model_timeout)
    print_summary(analysis, args.out)
    clock.start("testgen", "2/4 testgen")
    generated = current_tests(args.out, args.cap, args.value_cap)
    if generated is None:
        generated = generate_tests(args.out, cap=args.cap, value_cap=args.value_cap, jobs=args.jobs)
        console.print(f"{generated['totals']['tests']} tests written to {args.out / 'tests.jsonl'}")
    else:
        console.print(
            f"{args.out / 'tests.jsonl'} is current (same analysis, caps and generator): "
            f"its {generated['totals']['tests']} tests kept",
            soft_wrap=True,
        )
    clock.start(
        "run",
        "3/4 run on Linux under QEMU"
        if args.target == "linux"
        else f"3/4 run on {args.target} under qemu-x86_64",
    )
    traced = run_with(RunOptions.from_args(args), args.out, set_aside_incompatible=True)
    clock.start("report", "4/4 report")
    summary = make_report(args.out)
    console.print(summary["summary"])
    console.print(f"report: {(args.out / 'report' / 'index.html').resolve()}")
    console.print(clock.line(), soft_wrap=True)
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
