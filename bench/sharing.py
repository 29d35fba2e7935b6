#!/usr/bin/env python3
"""The cache lines that two workers of a benchmark both touch, one of them writing: what
keeps its 2-worker run from twice its 1-worker one, named.

The benchmark's catalog command runs with 2 workers as threads (a control's --processes
becomes --threads: one address space) under qemu-x86_64 with scalecheck's tracer plugin.
The harness marks each worker's loop as a region tagged with its index, so what its setup
and teardown touch is left out. Each shared line is named by the program's static data
that holds it, else by the object whose image holds it ("libc.so.6 data"), or "(heap or
mapping)", and by the functions of each worker that touched it (R: read, W: wrote): the
program's, or a shared object's exported ones ("libc.so.6:malloc"; the object's name
alone for code without a symbol, such as libc's internal functions or the PLT); lines
with the same names are counted together, and ranked by their transfers: the accesses
that had to bring a line from the other worker's cache (the plugin's transfers=on: a read
of a line the other wrote last, a write to a line the other holds and this one does not),
in the order the emulated threads made them. A line both workers wrote once at their
start moves once or twice; a line they write at every operation moves at every operation.
With --warmup 0 (the default) the regions are the counted window (but for the few
operations between its end and the workers' stop), and the transfers are also given per
operation.

Only user space is traced: for a library benchmark (libsv6, LDU) that is the library and
the harness; for a system call, only the call's user-space side.

usage: python3 bench/sharing.py BENCHMARK [--mode M] [--runtime R] [--duration S]
                                [--catalog DIR] [--json FILE]
Exit status 0 after the table, 2 when the benchmark cannot be built or run, 141 when
stdout's reader leaves before the table ends (--json is written first).
"""

import argparse
import bisect
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from benchlib import REPO
from scalecheck.benchsuite.catalog import load_catalog
from scalecheck.benchsuite.runner import fill_placeholders, parse_result
from scalecheck.errors import UserError
from scalecheck.output import run_printing
from scalecheck.trace.regions import FLAG_TRANSFERS, RegionReader, shared_lines
from scalecheck.trace.tracer_build import ensure_plugin
from scalecheck.trace.user.program_symbols import ProgramSymbols
from scalecheck.trace.user.program_worker import QEMU_USER

WORKERS = 2


def thread_command(template: str, series: dict, warmup: float, duration: float, workdir: str):
    """The catalog command for 2 workers as threads, as an argument list."""
    values = {"cores": WORKERS, **series, "warmup": warmup, "duration": duration}
    argv = shlex.split(fill_placeholders(template, {**values, "workdir": workdir}))
    return ["--threads" if arg == "--processes" else arg for arg in argv]


def program_path(name: str) -> Path:
    """The command's program: from the checkout, where the command runs, or on PATH."""
    return REPO / name if "/" in name else Path(shutil.which(name) or name)


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as program:
            return program.read(4) == b"\x7fELF"
    except OSError:
        return False


def pick(benchmark: str, axis: str, values: tuple, asked: str | None) -> str:
    """The asked mode (or runtime) of the benchmark, by default its first; UserError when
    it has no such one."""
    chosen = asked if asked is not None else values[0] if values else ""
    if chosen not in (values or ("",)):
        raise UserError(f"{benchmark} has {axis}s: {', '.join(values) or 'none'}")
    return chosen


def worker_regions(trace: Path) -> list:
    """Worker 0's and worker 1's regions; ValueError when the trace does not hold one each."""
    regions = RegionReader(trace).read_new()
    by_tag = {}
    for region in regions:
        by_tag.setdefault(region.tag, []).append(region)
    if sorted(by_tag) != list(range(WORKERS)) or any(len(r) != 1 for r in by_tag.values()):
        found = {tag: len(r) for tag, r in sorted(by_tag.items())}
        raise ValueError(f"expected one region per worker (tags 0 and 1), found {found}")
    workers = [by_tag[index][0] for index in range(WORKERS)]
    if not all(region.flags & FLAG_TRANSFERS for region in workers):
        raise ValueError("the plugin did not count transfers (an older build?)")
    return workers


class SharedObjects:
    """The run's objects with a file (the program, the C library, the loader), as the
    harness reports them: which one holds an address (by its file's loadable segments) and which of
    its exported functions holds a code address (by its dynamic symbols; a stripped
    library's internal functions, such as memset's variants, have none)."""

    def __init__(self, objects: list[dict]):
        self._segments: list[tuple[int, int, str]] = []
        self._functions: list[tuple[int, int, str]] = []
        for entry in objects:
            path, bias = Path(entry["path"]), entry["bias"]
            try:
                with path.open("rb") as file:
                    elf = ELFFile(file)
                    for segment in elf.iter_segments():
                        if segment["p_type"] == "PT_LOAD":
                            start = bias + segment["p_vaddr"]
                            self._segments.append((start, start + segment["p_memsz"], path.name))
                    dynsym = elf.get_section_by_name(".dynsym")
                    for symbol in dynsym.iter_symbols() if dynsym else ():
                        if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_size"]:
                            start = bias + symbol["st_value"]
                            name = f"{path.name}:{symbol.name}"
                            self._functions.append((start, start + symbol["st_size"], name))
            except (OSError, ELFError):
                continue  # its addresses stay unnamed
        self._segments.sort()
        self._functions.sort()

    @staticmethod
    def _find(ranges: list, address: int) -> str | None:
        i = bisect.bisect_right(ranges, (address, float("inf"))) - 1
        return ranges[i][2] if i >= 0 and address < ranges[i][1] else None

    def holder(self, address: int) -> str | None:
        """The file name of the object whose image holds the address."""
        return self._find(self._segments, address)

    def function(self, pc: int) -> str:
        return self._find(self._functions, pc) or self.holder(pc) or "(unknown code)"


def named_groups(
    pairs: list, symbols: ProgramSymbols, bias: int, objects: SharedObjects
) -> list[dict]:
    """The shared lines grouped by the data that holds them and the code of each worker."""

    def function(pc: int) -> str:
        if pc == 0:  # the plugin's one site for the PCs beyond its per-line limit
            return "(further PCs)"
        name = symbols.function(pc - bias)
        # not the program's code: the C library's (malloc, strcmp) or the loader's
        return objects.function(pc) if name.startswith(("0x", "-0x")) else name

    def code(line) -> tuple:
        return tuple(
            sorted({f"{function(s.pc)}:{'W' if s.write_mask else 'R'}" for s in line.sites})
        )

    groups: dict[tuple, dict] = {}
    for a, b in pairs:
        kind, name = symbols.classify(a.vaddr - bias)
        if kind == "static":
            data = name
        else:
            holder = objects.holder(a.vaddr)
            data = f"{holder} data" if holder else "(heap or mapping)"
        code_a, code_b = code(a), code(b)
        group = groups.setdefault(
            (data, code_a, code_b),
            {
                "lines": 0,
                "data": data,
                "worker0": list(code_a),
                "worker1": list(code_b),
                "transfers": [0, 0],
                "example": hex(a.vaddr),
            },
        )
        group["lines"] += 1
        for worker, line in enumerate((a, b)):
            group["transfers"][worker] += line.transfers
    return sorted(groups.values(), key=lambda group: (-sum(group["transfers"]), -group["lines"]))


def harness_names(result: dict, program: Path) -> tuple[int, SharedObjects]:
    """The program's load bias and every loaded object with a file, the program's own image
    among them (its addresses that no symbol holds, the PLT and the GOT that the loader
    fills in, are named by its file), from the harness's result; UserError without them."""
    harness = result.get("harness")
    bias = harness.get("load_bias") if isinstance(harness, dict) else None
    if not isinstance(bias, int):
        raise UserError("the result has no harness.load_bias (scalecheck's harness gives it)")
    image = {"path": str(program), "bias": bias}
    return bias, SharedObjects([image, *harness.get("shared_objects", [])])


def trace_workers(args, entry, mode: str, runtime: str, scratch: str) -> tuple:
    """Runs the benchmark's 2 worker threads under the plugin: (argv, program, result,
    regions); UserError when it cannot be built, run or read."""
    if entry.build and subprocess.run(entry.build, shell=True, cwd=REPO).returncode != 0:
        raise UserError(f"building {entry.name} failed: {entry.build}")
    series = {"mode": mode, "runtime": runtime}
    argv = thread_command(entry.command, series, args.warmup, args.duration, scratch)
    program = program_path(argv[0])
    if not is_elf(program):
        raise UserError(
            f"{argv[0]} is not an ELF program (qemu-x86_64 traces one program: the "
            "benchmark's command must start with its binary)"
        )
    trace = Path(scratch) / "trace.bin"
    plugin = f"{ensure_plugin()},out={trace},mode=user,transfers=on"
    try:
        run = subprocess.run(
            [QEMU_USER, "-plugin", plugin, str(program), *argv[1:]],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"{entry.name} ran past {args.timeout:g} s") from None
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"{shlex.join(argv)} exited {run.returncode}: {last}")
    try:
        return argv, program, parse_result(run.stdout), worker_regions(trace)
    except ValueError as err:
        raise UserError(str(err)) from None


def per_operation(transfers: int, ops, warmup: float) -> float | None:
    """Transfers per operation counted, when the regions are the counted window (no
    warm-up: the harness counts operations only after it, the regions hold it too)."""
    return transfers / ops if warmup == 0 and isinstance(ops, int) and ops > 0 else None


def print_groups(document: dict):
    """The table of the groups, most transfers first; document as written to --json."""
    rate = document["transfers_per_operation"]
    series = " ".join(filter(None, (document[key] for key in ("benchmark", "mode", "runtime"))))
    print(
        f"{series}: {document['shared_lines']} lines shared with a write, of "
        "{} and {} the two workers touched; ".format(*document["lines_touched"])
        + f"{document['transfers']} transfers"
        + (f", {rate:.3f} per operation" if rate is not None else "")
        + f" ({document['operations']} operations counted in the window)"
    )
    print(f"{'lines':>6} {'transfers (w0+w1)':>22}  data")
    for group in document["groups"]:
        moved = "{}+{}".format(*group["transfers"])
        print(f"{group['lines']:6d} {moved:>22}  {group['data']}")
        print(f"        worker 0: {' '.join(group['worker0'])}")
        print(f"        worker 1: {' '.join(group['worker1'])}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("benchmark", help="a catalog name (scalecheck bench list)")
    parser.add_argument("--mode", help="default: the benchmark's first mode")
    parser.add_argument("--runtime", help="default: the benchmark's first runtime")
    parser.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        help="seconds (default 0: the regions are the counted window, so transfers per "
        "operation can be given)",
    )
    parser.add_argument(
        "--duration", type=float, default=0.5, help="measured seconds (default 0.5)"
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds (default 900)")
    parser.add_argument(
        "--catalog",
        action="append",
        type=Path,
        metavar="DIR",
        help="read catalog *.toml files from DIR instead of the built-in catalog (repeatable)",
    )
    parser.add_argument("--json", type=Path, help="also write the groups to this file")
    args = parser.parse_args()

    try:
        catalog = load_catalog(args.catalog)
        if args.benchmark not in catalog:
            raise UserError(f"no benchmark {args.benchmark!r} in the catalog")
        entry = catalog[args.benchmark]
        mode = pick(entry.name, "mode", entry.modes, args.mode)
        runtime = pick(entry.name, "runtime", entry.runtimes, args.runtime)
        with tempfile.TemporaryDirectory(prefix="sharing-") as scratch:
            argv, program, result, regions = trace_workers(args, entry, mode, runtime, scratch)
        bias, objects = harness_names(result, program)
    except UserError as err:
        print(f"sharing: error: {err}", file=sys.stderr)
        return 2
    pairs = shared_lines(*regions)
    groups = named_groups(pairs, ProgramSymbols(program, []), bias, objects)
    ops = result.get("extra", {}).get("ops")
    transfers = sum(sum(group["transfers"]) for group in groups)
    document = {
        "benchmark": entry.name,
        "mode": mode,
        "runtime": runtime,
        "command": shlex.join(argv),
        "lines_touched": [len(r.lines) for r in regions],
        "shared_lines": len(pairs),
        "operations": ops,
        "warmup_s": args.warmup,
        "transfers": transfers,
        "transfers_per_operation": per_operation(transfers, ops, args.warmup),
        "groups": groups,
    }
    # The file first: a reader of the table that leaves early (`| head`) loses nothing.
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
    return run_printing(lambda: print_groups(document))


if __name__ == "__main__":
    sys.exit(main())
