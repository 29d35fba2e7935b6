"""The ``scalecheck`` command: one subcommand per pipeline stage.

Each stage module exposes ``register(subparsers)``, which adds its subcommand and sets
``func`` on the parsed namespace; the function returns the process exit code.
"""

import argparse
import importlib
import signal
import sys
from pathlib import Path

from scalecheck import __version__
from scalecheck.common.errors import UserError, stop_requested
from scalecheck.common.output import run_printing
from scalecheck.common.storage import NO_SPACE, no_space, os_error

# Pipeline order: model -> analyze -> testgen -> run/trace -> report; then the benchmarks.
STAGE_MODULES = [
    "scalecheck.analyze.analyze",
    "scalecheck.testgen.testgen_cli",
    "scalecheck.testgen.refine",  # testgen's --refine-left-path
    "scalecheck.run.kernel_cli",
    "scalecheck.run.run_cli",
    "scalecheck.report.report_cli",
    "scalecheck.report.side_by_side",
    "scalecheck.pipeline",
    "scalecheck.bench.bench_cli",
    "scalecheck.bench.sharing",
    "scalecheck.bench.predict",
    "scalecheck.bench.profile",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalecheck",
        description="Find where interface operations commute, check whether an "
        "implementation is conflict-free there, and measure its scalability.",
    )
    parser.add_argument("--version", action="version", version=f"scalecheck {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in STAGE_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def _interrupt(signum, frame):
    stop_requested.set()
    raise KeyboardInterrupt


def _unraisable(report):
    """After a stop request, a destructor's error is the interrupt's echo (it can land in
    a Z3 object's constructor, whose __del__ then finds no context) and would be printed
    after the one line that says the command stopped: dropped. Before it, reported."""
    if not stop_requested.is_set():
        sys.__unraisablehook__(report)


def main(argv=None) -> int:
    # A CI system or `timeout` stops a job with SIGTERM: stop as on Ctrl-C, so that VMs
    # and worker processes are shut down and the results stores closed.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    sys.unraisablehook = _unraisable
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return run_printing(lambda: args.func(args))
    except UserError as err:
        print(f"scalecheck: error: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as err:
        # A file no stage caught the error of: name it, else the command's directory.
        where = err.filename or getattr(args, "out", None) or getattr(args, "dir", None) or "."
        failed = no_space(Path(where)) if err.errno in NO_SPACE else os_error(err, where)
        print(f"scalecheck: error: {failed}", file=sys.stderr)
        return failed.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except Exception:
        # The interrupt can land inside a C call (Z3 through ctypes), which reports it as
        # another exception: after a stop request, any exception is the stop.
        if not stop_requested.is_set():
            raise
        return _interrupted()


def _interrupted() -> int:
    print(
        "scalecheck: interrupted; finished work is saved, rerun the same command to resume",
        file=sys.stderr,
    )
    return 130


if __name__ == "__main__":
    sys.exit(main())
