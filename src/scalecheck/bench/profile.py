"""`scalecheck profile`: where an unmodified program contends in the kernel, and whether the
scalable commutativity rule says it need not.

The program (and whatever it starts: children, daemons, a client driving it) runs inside
the Linux target's guest (the kernel, plugin and kernel facts of `scalecheck trace`) on N
emulated CPUs, all of them used. The guest sees the host's file system read-only (9p,
mounted as its root), a tmpfs at /tmp (the writable scratch directory, the program's
working directory, bounded by --scratch-mb) and at /run, and a loopback network only. The
program runs at most --duration seconds of guest time, then it is killed with everything
else the guest runs; its exit status, stdout and stderr are kept (in --keep DIR).

While it runs the plugin records every access of every CPU (profile=on), by context: the
system call in progress (from the kernel's __x64_sys_ entry points), a page fault, other
kernel code, or user code. Each line two CPUs moved between them (a transfer or an
invalidation) is named as `scalecheck trace` names kernel data (`kernel: files_struct.
fd_array[]`), counted, and given the pairs of calls that met on it, ranked per second
and per call; for each kernel line the rule's verdict on its busiest pair of two calls the
model has (else its busiest pair), from a POSIX
analysis (--analysis DIR, a `scalecheck analyze --model posix` directory): commutative,
so the kernel could avoid it, or not as called, with the seeds' alternative.

usage: scalecheck profile [--cpus N] [--duration S] [--kernel K] [--analysis DIR]
                          [--json FILE] [--heatmap FILE] [--keep DIR] [--top N] -- PROGRAM ARGS...
Exit status 0 when the program exited 0 within the bound, 1 when it exited otherwise or
was killed at the bound (the profile is still printed), 2 when it cannot be run (no such
program, no guest).
"""

import argparse
import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from scalecheck.bench import profile_guest, profile_lines, rule_verdicts
from scalecheck.bench.rule_verdicts import Rule
from scalecheck.common import argtypes
from scalecheck.common.errors import UserError
from scalecheck.common.output import run_printing

# Where the guest mounts its own file systems over the host's (profile_guest.init_script).
GUEST_MOUNTS = ("/tmp", "/run", "/proc", "/sys", "/dev")
MAX_CPUS = 64  # the plugin's MAX_VCPUS


def add_options(parser) -> None:
    parser.add_argument("--cpus", type=argtypes.count, default=2, help="emulated CPUs (default 2)")
    parser.add_argument(
        "--duration",
        type=argtypes.seconds,
        default=10.0,
        help="seconds of guest time the program may run (default 10)",
    )
    parser.add_argument(
        "--kernel",
        help="kernel image, or a fetched kernel (`scalecheck kernel fetch 6.12`; default: "
        "/boot/vmlinuz-*)",
    )
    parser.add_argument(
        "--analysis",
        type=Path,
        help="the verdicts' source: a `scalecheck analyze --model posix` directory or a rule "
        "file saved from one (default: the shipped POSIX rule)",
    )
    parser.add_argument("--scratch-mb", type=argtypes.limit, default=64, help="/tmp's size")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--heatmap", type=Path, help="draw the call pairs' heat map here (PNG)")
    parser.add_argument("--keep", type=Path, help="keep the program's output and the trace here")
    parser.add_argument("--top", type=int, default=20, help="lines printed (default 20)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="where a program's CPUs contend in the kernel, and whether the rule says so",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(parser)
    parser.set_defaults(func=run)


def program_argv(command: list[str]) -> list[str]:
    """The command with its program as the host's absolute path; UserError without one."""
    argv = command[1:] if command[:1] == ["--"] else command
    if not argv:
        raise UserError("no program given: scalecheck profile [options] -- PROGRAM ARGS...")
    found = shutil.which(argv[0])
    if not found:
        raise UserError(f"{argv[0]}: no such program on this host (profile runs the host's)")
    program = Path(found).resolve()
    hidden = [top for top in GUEST_MOUNTS if program.is_relative_to(top)]
    if hidden:
        raise UserError(
            f"{program} is under {hidden[0]}, which the guest mounts its own file system on: "
            "install it elsewhere"
        )
    return [str(program), *argv[1:]]


def run(args) -> int:
    argv = program_argv(args.command)
    if args.cpus > MAX_CPUS:
        raise UserError(f"--cpus {args.cpus}: the plugin follows at most {MAX_CPUS} CPUs")
    rule = Rule.load(args.analysis or rule_verdicts.SHIPPED)
    with tempfile.TemporaryDirectory(prefix="profile-") as scratch:
        # The run's directory: the program's output, the guest's console and trace.
        rundir = args.keep.resolve() if args.keep else Path(scratch)
        profiled = profile_guest.profile(args, argv, rundir)
    document = build_document(args, argv, profiled, rule)
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
    if args.heatmap:
        profile_lines.write_heatmap(
            profiled.pairs, args.heatmap, f"{Path(argv[0]).name}: calls that met on lines"
        )
    code = run_printing(lambda: print_report(document, args.top))
    if code:
        return code
    outcome = document["program"]
    if outcome["timed_out"]:
        print(f"profile: {argv[0]} ran past {args.duration:g} s and was killed", file=sys.stderr)
    elif outcome["status"] != 0:
        print(
            f"profile: {argv[0]} exited {outcome['status']}: {outcome['last_error']}",
            file=sys.stderr,
        )
    return 0 if outcome["status"] == 0 and not outcome["timed_out"] else 1


def build_document(args, argv: list[str], profiled, rule: Rule) -> dict:
    rows = profile_lines.line_rows(profiled.contended, profiled.names, profiled.syscalls, rule)
    seconds = profiled.seconds
    completed = (profiled.outcome["completed"] or {}).get("count")
    calls = profile_lines.call_rows(profiled.contended, profiled.syscalls)
    for row in rows + calls:
        row["transfers_per_s"] = row["transfers"] / seconds if seconds else None
        row["transfers_per_completed"] = row["transfers"] / completed if completed else None
    transfers = sum(row["transfers"] for row in rows)
    return {
        "command": shlex.join(argv),
        "cpus": args.cpus,
        "duration_bound_s": args.duration,
        "guest_seconds": seconds,
        "analysis": rule.source,
        "program": profiled.outcome,
        "accesses": profiled.accesses,
        "contended_lines": len(profiled.contended),
        "transfers": transfers,
        "transfers_per_completed": transfers / completed if completed else None,
        "named": profile_lines.named_share(rows),
        "removable": profile_lines.removable_share(rows),
        "lines": rows,
        "calls": calls,
        "pairs": [
            {"calls": list(pair), "lines": count} for pair, count in profiled.pairs.most_common()
        ],
    }


def rate_text(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0f}"


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def per_text(value: float | None) -> str:
    return "" if value is None else f"{value:10.1f}"


def print_report(document: dict, top: int) -> None:
    """One page: the program, the share of transfers named and the share the kernel could
    remove, the top lines with their call pairs and verdicts, the calls."""
    outcome, removable, named = document["program"], document["removable"], document["named"]
    completed = outcome["completed"]
    print(
        f"{document['command']} on {document['cpus']} CPUs: {document['guest_seconds']:.2f} s "
        f"of guest time, exit {outcome['status']}"
        + (" (killed at the bound)" if outcome["timed_out"] else "")
    )
    print(
        f"{document['contended_lines']} lines moved between CPUs, {document['transfers']} "
        f"transfers; of {removable['kernel_lines']} kernel lines, {removable['avoidable_lines']} "
        f"({share(removable['avoidable_lines'], removable['kernel_lines'])}, "
        f"{share(removable['avoidable_transfers'], removable['kernel_transfers'])} of their "
        "transfers) the rule says the kernel could avoid"
    )
    print(
        f"named beyond the kind of memory: {share(named['named_transfers'], named['transfers'])}"
        f" of the program's transfers ({named['named_lines']} of {named['lines']} lines; "
        f"left out, the recorder's own buffers: {named['recorder_transfers']}, the guest "
        f"harness's memory: {named['harness_transfers']})"
        + (
            f"; {completed['count']} {completed['unit']} completed, "
            f"{document['transfers_per_completed']:.1f} transfers each"
            if completed
            else ""
        )
    )
    unit = f"/{completed['unit'].removesuffix('s')}" if completed else ""
    print(f"{'lines':>6} {'transfers':>10} {'/s':>9}{unit:>11}  name / busiest calls: verdict")
    for row in document["lines"][:top]:
        rate, per = rate_text(row["transfers_per_s"]), per_text(row["transfers_per_completed"])
        print(f"{row['lines']:6d} {row['transfers']:10d} {rate:>9}{per:>11}  {row['name']}")
        if row["judged_pair"]:
            print(f"{'':39}{' || '.join(row['judged_pair'])}: {row['verdict']}")
    if len(document["lines"]) > top:
        print(f"... {len(document['lines']) - top} more (--top, or --json for all)")
    print(f"{'transfers':>10} {'/s':>9}{unit:>11} {'lines':>6}  context")
    for row in document["calls"][:top]:
        rate, per = rate_text(row["transfers_per_s"]), per_text(row["transfers_per_completed"])
        print(f"{row['transfers']:10d} {rate:>9}{per:>11} {row['lines']:6d}  {row['call']}")
