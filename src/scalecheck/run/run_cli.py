"""``scalecheck run DIR``: traces DIR/tests.jsonl on a real implementation and writes
per-test conflict results to DIR/trace/results.jsonl (docs/tracer.md, docs/usertarget.md).

This module is the command: its options (declared once here; `pipeline` takes the same),
and the choice of target. The run itself is run/loop.py's, whichever the target; each
target is a wing of trace/: run/linux/ (a kernel under QEMU) and run/user/ (a C library
under qemu-x86_64).
"""

import argparse
import functools
import json
from pathlib import Path

from scalecheck.common import argtypes
from scalecheck.common.errors import UserError
from scalecheck.run import counting, loop
from scalecheck.run.linux import kernels, vm
from scalecheck.run.linux.kernel_target import LinuxRun
from scalecheck.run.linux.vm_worker import BATCH
from scalecheck.run.target import TraceSettings
from scalecheck.run.user.library import NAMED_LIBRARIES, library_spec
from scalecheck.run.user.library_target import LibraryRun


def register(subparsers):
    p = subparsers.add_parser(
        "run",
        help="run generated tests on a real kernel or library and record conflicting cache lines",
        description="Run each test's two calls on two CPUs of a real implementation, with a "
        "tracing plugin, and record the cache lines both calls touched with at least one "
        "write. '--target linux' boots a stock Linux kernel under QEMU (TCG) with the two "
        "calls on two isolated vCPUs; '--target lib:PATH' runs a C library's calls on two "
        "threads under qemu-x86_64 (the kernel options --kernel, --vmlinux, --kernel-args, "
        "--fs, --lsm and --batch apply to Linux only). Results go to "
        "DIR/trace/results.jsonl; rerunning resumes.",
        epilog=loop.exit_codes_help(),
    )
    p.add_argument(
        "dir", type=Path, help="directory holding tests.jsonl (from `scalecheck testgen`)"
    )
    p.add_argument(
        "--ops",
        type=argtypes.op_list,
        help="comma-separated ops: trace only tests whose calls all use them",
    )
    add_trace_options(p)
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.set_defaults(func=_cli)


def add_trace_options(p) -> None:
    """The options of a run, which `run` and `pipeline` share."""
    p.add_argument(
        "--target",
        default="linux",
        help="implementation to trace: 'linux' (default), 'lib:PATH' for a C library "
        "described by the manifest at PATH, or a shipped library by name: "
        f"{', '.join(sorted(NAMED_LIBRARIES))} (docs/usertarget.md)",
    )
    kernels.add_kernel_option(p, "newest /boot/vmlinuz-*")
    p.add_argument(
        "--vmlinux", type=Path, help="Linux: debug vmlinux of that kernel, for file:line names"
    )
    p.add_argument("--kernel-args", default="", help="Linux: extra kernel command-line arguments")
    p.add_argument(
        "--jobs",
        "-j",
        type=argtypes.count,
        help="VMs or test programs run in parallel (default: one per host core)",
    )
    p.add_argument(
        "--repeats",
        type=argtypes.count,
        default=2,
        help="runs per test; a conflict counts only if every run shows it (default 2)",
    )
    p.add_argument("--limit", type=argtypes.limit, help="trace only the first N matching tests")
    p.add_argument(
        "--fs",
        default="tmpfs",
        choices=["tmpfs", "ramfs"],
        help="Linux: file system the tests' files live on",
    )
    add_conflict_options(p)
    p.add_argument(
        "--timeout",
        type=argtypes.seconds,
        default=5.0,
        help="seconds one call may take (default 5)",
    )
    p.add_argument(
        "--batch",
        type=argtypes.count,
        default=BATCH,
        help=f"Linux: tests per boot, at most (default {BATCH}; the tests are cut into equal "
        "batches, a multiple of the VMs' count)",
    )
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="trace on the workers of a Dask cluster: a scheduler's address "
        "(tcp://host:8786), or local:N for N worker processes on this machine (docs/cluster.md)",
    )
    p.add_argument(
        "--retry-unfinished",
        action="store_true",
        help="trace again the tests this DIR's run recorded as timed out, crashed or in error "
        "(e.g. a timeout on a loaded host); their old records are kept beside, in "
        "trace/results.<start>.retried.jsonl",
    )


def add_conflict_options(p) -> None:
    """What counts as a conflict, and the kernel's security modules. Each filter can be
    switched off; the report counts, for every run, how many conflicts each filter
    removed."""
    p.add_argument(
        "--granularity",
        default="stable",
        choices=counting.GRANULARITIES,
        help="what counts as a conflict: 'stable' (default) overlapping bytes, or a "
        "shared line of static, per-cpu or page-table data; heap false sharing, which depends on "
        "where objects were allocated, is listed but not counted. 'line': every "
        "shared cache line. 'bytes': overlapping bytes only. Records keep every shared line, "
        "so the report gives the conflict-free share at all three side by side",
    )
    p.add_argument(
        "--count-unrepeated",
        action="store_true",
        help="switch off the repeat filter: a conflict seen in any repeat counts "
        "(default: only one every repeat shows)",
    )
    p.add_argument(
        "--keep-tick-work",
        action="store_true",
        help="switch off the tick-work filter: keep the accesses of CPU-time accounting, "
        "which the kernel does at a call's entry or exit when 4 ms have gathered",
    )
    p.add_argument(
        "--lsm",
        default="minor",
        choices=sorted(vm.LSM_ARGS),
        help="Linux: security modules in the guest: 'minor' (default) keeps only the minor "
        "ones (AppArmor and SELinux off: their shared state is not the interface's); "
        "'default' runs the kernel's own choice (AppArmor on Debian)",
    )


def trace_settings(args) -> TraceSettings:
    return TraceSettings(
        repeats=args.repeats,
        granularity=args.granularity,
        filters=counting.Filters(
            count_unrepeated=args.count_unrepeated, keep_tick_work=args.keep_tick_work
        ),
        timeout=args.timeout,
    )


def target_opener(args, on_vm_start=None):
    """The function that makes the run's target from the tests file's header.
    ``on_vm_start(session)`` is called after each boot starts (tests that kill a VM)."""
    settings = trace_settings(args)
    library = library_spec(args.target)
    if library is not None:
        return functools.partial(LibraryRun.open, trace=settings, spec=library)
    if args.target != "linux":
        raise UserError(
            f"unknown target {args.target!r} ('linux', 'lib:PATH' or one of "
            f"{', '.join(sorted(NAMED_LIBRARIES))})"
        )
    return functools.partial(
        LinuxRun.open,
        trace=settings,
        kernel=args.kernel,
        kernel_args=args.kernel_args,
        vmlinux=args.vmlinux,
        fs=args.fs,
        lsm=args.lsm,
        batch=args.batch,
        on_vm_start=on_vm_start,
    )


def run_from_args(
    args, out_dir: Path, ops=None, quiet=False, set_aside_incompatible=False, on_vm_start=None
):
    """Runs the tests in ``out_dir`` as the options add_trace_options() made say."""
    return loop.run_tests(
        out_dir,
        target_opener(args, on_vm_start),
        trace_settings(args),
        jobs=args.jobs,
        limit=args.limit,
        ops=ops,
        quiet=quiet,
        set_aside_incompatible=set_aside_incompatible,
        cluster=args.cluster,
        retry_unfinished=args.retry_unfinished,
    )


def run_tests(
    out_dir: Path,
    ops=None,
    quiet=False,
    set_aside_incompatible=False,
    on_vm_start=None,
    **options,
) -> dict:
    """The run as a function: ``options`` are those of `scalecheck run` by their Python
    names (``kernel_args``, ``count_unrepeated``...), with the command's defaults."""
    parser = argparse.ArgumentParser(add_help=False)
    add_trace_options(parser)
    args = parser.parse_args([])
    unknown = set(options) - set(vars(args))
    if unknown:
        raise TypeError(f"run_tests: unknown option(s) {', '.join(sorted(unknown))}")
    vars(args).update(options)
    return run_from_args(args, Path(out_dir), ops, quiet, set_aside_incompatible, on_vm_start)


def _cli(args) -> int:
    summary = run_from_args(args, args.dir, ops=args.ops, quiet=args.json)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(
            f"{summary['finished']} tests finished ({summary['skipped_already_done']} already "
            f"done); {loop.starts_text(summary)}, {summary['seconds']:.0f} s, "
            f"{summary['tests_per_second']:.2f} tests/s -> {summary['results']}"
        )
        if summary["per_worker"]:
            print(
                "per worker: "
                + ", ".join(f"{w} {n} tests" for w, n in sorted(summary["per_worker"].items()))
            )
        print(loop.conformance_line(summary))
    return loop.exit_code(summary)
