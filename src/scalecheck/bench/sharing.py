#!/usr/bin/env python3
"""`scalecheck sharing`: the cache lines that the workers of a benchmark touch, one of them
writing: what keeps its N-worker run from N times its 1-worker one, named, with their
transfers per operation at each N (--cpus 2,4,8,16).

The benchmark's catalog command runs with N workers as threads (a control's --processes
becomes --threads: one address space) under qemu-x86_64 with scalecheck's tracer plugin;
with --system, inside the Linux target's guest instead (wholestack.py: N + 1 CPUs, the
workers on N quiet ones), where the kernel's lines are traced beside the program's. The
plugin's quantum schedule (--quantum, default QUANTUM instructions; a turn also ends with
an operation) has the workers take turns: N emulated CPUs run as N cores running together
would interleave, in an order that depends on instruction counts, not on the host's
scheduler (docs/many-cores.md).
The harness marks each worker's loop as a region tagged with its index, so what its setup
and teardown touch is left out. Each shared line is named by the program's static data
that holds it, else by the object whose image holds it ("libc.so.6 data"), or "(heap or
mapping)", and by the functions of each worker that touched it (R: read, W: wrote): the
program's, or a shared object's exported ones ("libc.so.6:malloc"; the object's name
alone for code without a symbol, such as libc's internal functions or the PLT); lines
with the same names are counted together, and ranked by their transfers: the accesses
that had to bring a line from the other worker's cache (the plugin's transfers=on: a read
of a line the other wrote last, a write to a line the other holds and this one does not),
in the order the emulated threads made them; and apart from them by their invalidations:
a worker's writes to a line it holds while the other holds it too (no data moves; the
other's copy goes). A line both workers wrote once at their start moves once or twice; a
line they write at every operation moves at every operation. Then the 128-byte-aligned
pairs of lines the workers split (each touches one line of the pair, one writing), ranked
by their pair transfers: the accesses that would have been transfers had the unit been the
pair, and were not transfers of the line. x86's L2 spatial prefetcher fetches a line's pair
with it, so such neighbours slow each other though they share no line (`pair-split`: two
workers writing the two lines of one pair).
After a warm-up (--warmup: the workers run free of the turns and untraced), each
worker's region opens when its loop first looks at the stop flag in the measured window
and closes when it stops; the transfers are given per operation the workers counted in
their regions (the harness's `region_ops`), so a line moved only at a run's start weighs
nothing, whatever the window's length.

Without --system only user space is traced: for a library benchmark (libsv6, LDU) that
is the library and the harness; for a system call, only the call's user-space side. With
--system the kernel's lines are named as `scalecheck trace` names them (symbols, slab
caches and BTF: `kernel: files_struct.fdtab`), the program's as above (`user: ...`), and
the workers may be processes (--processes: a control's layout) instead of threads.

`lines`, for any N, ranks the lines by their name alone (data, summed over the workers):
transfers and invalidations per operation. There a heap line is named by the allocation
that held it in the measured window (`site:alloc(size)+offset`, from the allocation-site
recorder preloaded in the guest: tracer/sharing), the same in every run; a line of no
named data by its writers too. The two-worker `groups` and `pair_groups` above are given
at N = 2.

usage: scalecheck sharing BENCHMARK [--mode M] [--runtime R] [--cpus N[,N...]] [--duration S]
                          [--system [--processes]] [--env NAME=VALUE] [--top N]
                          [--catalog DIR] [--json FILE] [--plot FILE] [--quantum Q]
                          [--turn-ends operation|quantum]
Exit status 0 after the table, 2 when the benchmark cannot be built or run (with --system,
also when the guest twice fails to reach its init within 300 s: one such boot is tried
again, which stderr says), 141 when stdout's reader leaves before the table ends (--json is
written first).
"""

import argparse
import bisect
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck.bench import wholestack
from scalecheck.bench.catalog import load_catalog
from scalecheck.bench.runner import fill_placeholders, parse_result
from scalecheck.binding import abi
from scalecheck.common import argtypes, sources
from scalecheck.common.errors import UserError
from scalecheck.common.output import run_printing
from scalecheck.run.linux.kernel_symbols import USER_END
from scalecheck.run.naming import mask_bytes
from scalecheck.run.outcome import conflict_bytes
from scalecheck.run.regions import (
    FLAG_PAIR_TRANSFERS,
    FLAG_SCHEDULE_LAPSED,
    FLAG_TRANSFERS,
    MOVE_KINDS,
    Region,
    RegionReader,
    shared_lines,
)
from scalecheck.run.tracer_build import ensure_plugin, run_step
from scalecheck.run.user.dwarfnames import FieldNames, cached_field_names
from scalecheck.run.user.heapnames import name_bytes
from scalecheck.run.user.program_symbols import ProgramSymbols
from scalecheck.run.user.program_worker import QEMU_USER

LINE_BYTES = 64
# The plugin's vCPUs (tracer/plugin/src/lib.rs MAX_VCPUS), the harness's main thread among
# them in user mode.
MAX_CPUS = 63
# Instructions per turn of the plugin's quantum schedule: about what a core runs while a
# contended line crosses to it (a transfer costs 100-400 cycles on the machines of
# docs/many-cores.md). Counts of operations longer than it do not depend on it; a line
# written at every operation of L < QUANTUM instructions moves about L / QUANTUM times
# per operation (the sensitivity measured there).
QUANTUM = 200
# Turns of Q/2 to 3Q/2 instructions (the plugin's jitter=on), not exactly Q: in turns of
# exactly Q the workers keep the phases the turns began with, and a FIFO's consumers keep
# their places in it (dgram-shared's servers took 3 % to 79 % of their requests from
# another worker's client, one share per run; jittered, 40 % to 58 %); the two repeat alike
# elsewhere (bench/results/many-cores.md, 2026-12-07).
TURN_JITTER = True
# The harness's grace for workers to end their operation after the stop
# (native/harness: HC_STOP_GRACE_S): an emulated operation in turns can take seconds, and a
# worker past the grace leaves no region to count.
STOP_GRACE = {"HC_STOP_GRACE_S": "120"}
# Seconds the workers run before their regions open: what a run does once at its start
# (first touches, a slab's first pages, the 480-500 moves of LDU's global queue line at
# each run's start at N = 8) is left out of the counts per operation.
WARMUP = 1.0


def thread_command(
    template: str, series: dict, warmup: float, duration: float, workdir: str, workers: int
):
    """The catalog command for `workers` workers as threads, as an argument list."""
    values = {"cores": workers, **series, "warmup": warmup, "duration": duration}
    argv = shlex.split(fill_placeholders(template, {**values, "workdir": workdir}))
    return ["--threads" if arg == "--processes" else arg for arg in argv]


def layout_command(argv: list[str], layout: str) -> list[str]:
    """The command with its workers as `layout` ("threads" or "processes") whatever the
    benchmark's default (faultzf's workers are processes unless told)."""
    kept = [arg for arg in argv if arg not in ("--threads", "--processes")]
    return [*kept, f"--{layout}"]


def program_path(name: str) -> Path:
    """The command's program: from the checkout, where the command runs, or on PATH."""
    return sources.root() / name if "/" in name else Path(shutil.which(name) or name)


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


def pick_workers(regions: list[Region], count: int = 2) -> list[Region]:
    """The regions of workers 0 to count - 1 of a trace; ValueError when it does not hold
    one each, or they carry no transfer counts."""
    by_tag: dict[int, list] = {}
    for region in regions:
        by_tag.setdefault(region.tag, []).append(region)
    if sorted(by_tag) != list(range(count)) or any(len(r) != 1 for r in by_tag.values()):
        found = {tag: len(r) for tag, r in sorted(by_tag.items())}
        raise ValueError(f"expected one region per worker (tags 0 to {count - 1}), found {found}")
    workers = [by_tag[index][0] for index in range(count)]
    if not all(region.flags & FLAG_TRANSFERS for region in workers):
        raise ValueError("the plugin did not count transfers (an older build?)")
    if not all(region.flags & FLAG_PAIR_TRANSFERS for region in workers):
        raise ValueError("the plugin did not count pair transfers (an older build?)")
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


class ProgramNames:
    """Names the program's lines and code: its static data and functions (load bias
    applied), else the shared object that holds them, else the heap block that held the
    line (``heap``: line address -> block, `heap_blocks`), with the fields of the bytes
    the workers touched when the program's DWARF (``fields``) gives the block's type."""

    def __init__(
        self,
        symbols: ProgramSymbols,
        bias: int,
        objects: SharedObjects,
        fields: FieldNames | None = None,
    ):
        self.symbols, self.bias, self.objects, self.fields = symbols, bias, objects, fields
        self.heap: dict[int, tuple] = {}

    def function(self, pc: int) -> str:
        name = self.symbols.function(pc - self.bias)
        # not the program's code: the C library's (malloc, strcmp) or the loader's
        return self.objects.function(pc) if name.startswith(("0x", "-0x")) else name

    def data(self, vaddr: int) -> str:
        kind, name = self.symbols.classify(vaddr - self.bias)
        if kind == "static":
            return name
        holder = self.objects.holder(vaddr)
        if holder:
            return f"{holder} data"
        block = self.heap.get(vaddr & -LINE_BYTES)
        return UNNAMED if block is None else block_name(block)

    def fields_of(self, vaddr: int, touched: int) -> str:
        """`` (struct T.field...)``: the fields that the touched bytes (bit i = byte i) of
        the heap line at ``vaddr`` cover (which word of a lock, which object of an array:
        ``struct worker_state.ring[10].{key,tree_left}``), when its allocating function's
        DWARF says which struct the block is; "" otherwise."""
        block = self.heap.get(vaddr & -LINE_BYTES)
        if block is None or self.fields is None:
            return ""
        size, function, kind, _, start = block
        if kind != "alloc":  # a mapping the benchmark made: no allocator's type
            return ""
        layout = self.fields.allocated(function, size)
        offsets = [start + byte for byte in mask_bytes(touched) if start + byte >= 0]
        if layout is None or not offsets:
            return ""
        return f" ({name_bytes(layout, layout.label, offsets, whole_small=False)})"


def program_fields(program: Path) -> FieldNames:
    """The types the program's DWARF gives (all its units; none without -g), kept beside
    it: which struct a heap block is, by the function that allocated it."""
    return cached_field_names([program], None, program.with_name(f"{program.name}.types.pickle"))


# A line of no static data, no object's image and no recorded allocation (a thread's
# stack, the allocator's own memory): named by the code that wrote it as well.
UNNAMED = "(heap or mapping)"
# One record of the allocation-site recorder (tracer/sharing/alloc_sites.c): address,
# size, site (the return address into the function that asked for the block, marked
# SC_SITE_MAPPED for an anonymous mapping; 0: the block given back) and the TSC.
SITE_RECORD = struct.Struct("<QQQQ")


def read_allocations(path: Path) -> list[tuple[int, int, int, int]]:
    """The recorder's (address, size, site, TSC) records; none when it wrote no file."""
    data = path.read_bytes() if path.exists() else b""
    return list(SITE_RECORD.iter_unpack(data[: len(data) - len(data) % SITE_RECORD.size]))


def held_in_window(records: list, window: list[int]) -> list[tuple[int, int, int]]:
    """The blocks (address, size, site) that were handed out at some time of the window
    (its start and end TSC, the harness's): not those the setup gave back before it
    started, nor those the report made after it ended in the memory they left."""
    start, end = window
    live: dict[int, tuple[int, int, int]] = {}
    held = []
    for addr, size, site, tsc in sorted(records, key=lambda record: record[3]):
        if site and tsc <= end:
            live[addr] = (addr, size, site)
        elif not site and (block := live.pop(addr, None)) and tsc >= start:
            held.append(block)
    return held + list(live.values())


def heap_blocks(allocations: list, lines: list[int], function_of) -> dict[int, tuple]:
    """Each line address's smallest block that held part of it (the most specific object,
    not the chunk an arena was reserved in): (size, ``function_of(site)``, ``alloc`` or
    ``mmap`` for an anonymous mapping the benchmark made itself, the line's offset in the
    block, the line's start less the block's)."""
    starts = sorted(set(lines))
    held: dict[int, tuple] = {}
    mapped = abi.value("SITE_MAPPED")
    for addr, size, site in allocations:
        first = bisect.bisect_right(starts, addr - LINE_BYTES)
        for line in starts[first : bisect.bisect_left(starts, addr + max(size, 1))]:
            kind = "mmap" if site & mapped else "alloc"
            block = (size, function_of(site & ~mapped), kind, max(line - addr, 0), line - addr)
            held[line] = min(held.get(line, block), block)
    return held


def block_name(block: tuple) -> str:
    """A heap line's name as the user target names heap data: ``site:alloc(size)+offset``.
    The same in every run of one build, wherever blocks landed."""
    size, function, kind, offset, _ = block
    return f"{function}:{kind}({size})+{offset:#x}"


def line_code(line, function_of) -> tuple:
    """The functions that touched a line, each with W (wrote) or R (read only)."""
    # PC 0: the plugin's one site for the PCs beyond its per-line limit
    return tuple(
        sorted(
            {
                f"{function_of(s.pc) if s.pc else '(further PCs)'}:{'W' if s.write_mask else 'R'}"
                for s in line.sites
            }
        )
    )


def named_groups(pairs: list, data_of, function_of) -> list[dict]:
    """The shared lines grouped by where they are (user or kernel space: ``seen_at``), the
    data that holds them (``data_of(a, b)``) and the code of each worker
    (``function_of(pc)``), most transfers first."""

    def code(line) -> tuple:
        return line_code(line, function_of)

    groups: dict[tuple, dict] = {}
    for a, b in pairs:
        space = "user" if seen_at(a, b) < USER_END else "kernel"
        data = data_of(a, b)
        code_a, code_b = code(a), code(b)
        group = groups.setdefault(
            (space, data, code_a, code_b),
            {
                "space": space,
                "lines": 0,
                "data": data,
                "worker0": list(code_a),
                "worker1": list(code_b),
                "transfers": [0, 0],
                "invalidations": [0, 0],
                "example": hex(seen_at(a, b)),
            },
        )
        group["lines"] += 1
        for worker, line in enumerate((a, b)):
            group["transfers"][worker] += line.transfers
            group["invalidations"][worker] += line.invalidations
    return sorted(
        groups.values(),
        key=lambda g: (-sum(g["transfers"]), -sum(g["invalidations"]), -g["lines"]),
    )


def split_pairs(a: Region, b: Region) -> list:
    """The 128-byte-aligned pairs whose lines the two regions split, one line each (at least
    one of them writing), where either counted pair transfers: (a's line, b's line)."""
    found = []
    a_lines, b_lines = a.lines, b.lines
    for paddr in sorted(a_lines):
        mine, theirs = a_lines[paddr], b_lines.get(paddr ^ LINE_BYTES)
        if theirs is None or not (mine.written or theirs.written):
            continue
        if mine.pair_transfers or theirs.pair_transfers:
            found.append((mine, theirs))
    return found


def pair_vaddrs(a, b) -> tuple[int, int]:
    """The virtual addresses that name a split pair's two lines: a user one for both when
    either worker's first access was through one (the other line is its pair in the same
    page; the kernel may have touched that one first through its direct map)."""
    if a.vaddr < USER_END <= b.vaddr:
        return a.vaddr, a.vaddr ^ LINE_BYTES
    if b.vaddr < USER_END <= a.vaddr:
        return b.vaddr ^ LINE_BYTES, b.vaddr
    return a.vaddr, b.vaddr


def pair_groups(pairs: list, data_of_line, function_of) -> list[dict]:
    """The split pairs grouped by space, each worker's data (``data_of_line(line,
    vaddr)``, at ``pair_vaddrs``) and code, most pair transfers first."""
    groups: dict[tuple, dict] = {}
    for a, b in pairs:
        space = "user" if seen_at(a, b) < USER_END else "kernel"
        data = [
            data_of_line(line, vaddr) for line, vaddr in zip((a, b), pair_vaddrs(a, b), strict=True)
        ]
        code_a, code_b = line_code(a, function_of), line_code(b, function_of)
        group = groups.setdefault(
            (space, *data, code_a, code_b),
            {
                "space": space,
                "pairs": 0,
                "data": data,
                "worker0": list(code_a),
                "worker1": list(code_b),
                "pair_transfers": [0, 0],
                "example": hex(seen_at(a, b)),
            },
        )
        group["pairs"] += 1
        group["pair_transfers"][0] += a.pair_transfers
        group["pair_transfers"][1] += b.pair_transfers
    return sorted(groups.values(), key=lambda g: (-sum(g["pair_transfers"]), -g["pairs"]))


def seen_at(a, b) -> int:
    """The virtual address that names a shared line: a user one when either worker's
    first access was through one (the kernel may have touched the page first through its
    direct map, zeroing it in a fault)."""
    return min(a.vaddr, b.vaddr)


def user_groups(regions: list, names: ProgramNames) -> tuple[list[dict], list[dict]]:
    """The shared lines' groups and the split pairs' groups of a user-mode trace."""
    shared = named_groups(
        shared_lines(*regions), lambda a, b: names.data(seen_at(a, b)), names.function
    )
    pairs = pair_groups(
        split_pairs(*regions), lambda line, vaddr: names.data(vaddr), names.function
    )
    return shared, pairs


def kernel_names(entries: list[tuple], kernel, namer) -> dict:
    """Kernel lines' names by paddr, each entry (line, bytes mask), as `scalecheck trace`
    names them (slab objects and BTF fields from the guest's memory through ``namer``, a
    datanames.DataNamer; else the kernel symbol, else the kind of memory)."""
    classified = [kernel.classify(line.vaddr) for line, _ in entries]
    found = namer.name_lines(
        [
            (kind, line.vaddr, line.paddr, mask)
            for (line, mask), (kind, _) in zip(entries, classified, strict=True)
        ]
    )
    return {
        line.paddr: name or symbol or kind
        for (line, _), (kind, symbol), name in zip(entries, classified, found, strict=True)
    }


def stack_groups(
    regions: list, names: ProgramNames, kernel, namer
) -> tuple[list[dict], list[dict]]:
    """The shared lines' and the split pairs' groups of a system-mode trace: user lines
    named as in user mode, kernel lines as `scalecheck trace` names them."""
    shared, split = shared_lines(*regions), split_pairs(*regions)
    shared_data = kernel_names(
        [(a, conflict_bytes(a, b)) for a, b in shared if seen_at(a, b) >= USER_END],
        kernel,
        namer,
    )
    pair_data = kernel_names(
        [
            (line, line.read_mask | line.write_mask)
            for pair in split
            for line, vaddr in zip(pair, pair_vaddrs(*pair), strict=True)
            if vaddr >= USER_END
        ],
        kernel,
        namer,
    )

    def data_of(a, b) -> str:
        vaddr = seen_at(a, b)
        return names.data(vaddr) if vaddr < USER_END else shared_data[a.paddr]

    def data_of_line(line, vaddr: int) -> str:
        return names.data(vaddr) if vaddr < USER_END else pair_data[line.paddr]

    def function_of(pc: int) -> str:
        return names.function(pc) if pc < USER_END else kernel.function(pc)

    return named_groups(shared, data_of, function_of), pair_groups(split, data_of_line, function_of)


def harness_names(result: dict, program: Path) -> tuple[int, SharedObjects]:
    """The program's load bias and every loaded object with a file, the program's own image
    among them (its addresses that no symbol holds, the PLT and the GOT that the loader
    fills in, are named by its file), from the harness's result; UserError without them."""
    harness = result.get("harness")
    if not isinstance(harness, dict) or not isinstance(harness.get("load_bias"), int):
        raise UserError("the result has no harness.load_bias (scalecheck's harness gives it)")
    bias = harness["load_bias"]
    image = {"path": str(program), "bias": bias}
    return bias, SharedObjects([image, *harness.get("shared_objects", [])])


def benchmark_command(args, entry, mode: str, runtime: str, workdir: str, workers: int) -> tuple:
    """Builds the benchmark: (argv, program) of its command with `workers` workers;
    UserError when it cannot be built or does not start with an ELF program."""
    built = subprocess.run(entry.build, shell=True, cwd=sources.root()) if entry.build else None
    if built is not None and built.returncode != 0:
        raise UserError(f"building {entry.name} failed: {entry.build}")
    series = {"mode": mode, "runtime": runtime}
    argv = thread_command(entry.command, series, args.warmup, args.duration, workdir, workers)
    if args.system:
        argv = layout_command(argv, "processes" if args.processes else "threads")
    program = program_path(argv[0])
    if not is_elf(program):
        raise UserError(
            f"{argv[0]} is not an ELF program (qemu-x86_64 traces one program: the "
            "benchmark's command must start with its binary)"
        )
    return argv, program


def harness_result(run: subprocess.CompletedProcess, command: str) -> dict:
    """The harness's result line of a finished run; UserError (with the run's last line on
    stderr) when it exited non-zero or printed none."""
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"{command} exited {run.returncode}: {last}")
    try:
        return parse_result(run.stdout)
    except ValueError as err:
        raise UserError(str(err)) from None


def schedule_options(args, workers: int) -> str:
    """The plugin's options of the workers' turns (tracer/plugin/src/schedule.rs), which
    start once all `workers` have opened their loop's region."""
    if not args.quantum:
        return "quantum=0"
    ends = "" if args.turn_ends == "operation" else ",operation_ends=off"
    jitter = ",jitter=on" if args.turn_jitter else ""
    return f"quantum={args.quantum},workers={workers}{ends}{jitter}"


# The allocation-site recorder's shared object (tracer/sharing/Makefile): a line named by a
# site in it is the recorder's own buffer.
RECORDER_FILE = "alloc_sites.so"


def ensure_recorder() -> Path:
    """The allocation-site recorder preloaded into the traced benchmark (in the guest
    only: qemu-x86_64's -E), rebuilt if stale."""
    directory = sources.root() / "tracer" / "sharing"
    run_step(["make", "-s", "-C", str(directory)], "allocation-site recorder")
    return directory / "build" / RECORDER_FILE


def trace_workers(args, name: str, argv: list, program: Path, scratch: str, workers: int) -> tuple:
    """Runs the benchmark's worker threads under qemu-x86_64 and the plugin: (result,
    regions, groups, pair groups, lines); UserError when it cannot be run or read."""
    trace, sites = Path(scratch) / "trace.bin", Path(scratch) / "allocations.bin"
    plugin = (
        f"{ensure_plugin()},out={trace},mode=user,transfers=on,{schedule_options(args, workers)}"
    )
    recorder = ["-E", f"LD_PRELOAD={ensure_recorder()}", "-E", f"SCALECHECK_ALLOC_SITES={sites}"]
    grace = [arg for item in STOP_GRACE.items() for arg in ("-E", "=".join(item))]
    try:
        run = subprocess.run(
            [QEMU_USER, *recorder, *grace, "-plugin", plugin, str(program), *argv[1:]],
            cwd=sources.root(),
            env={**os.environ, **args.env},
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"{name} ran past {args.timeout:g} s") from None
    result = harness_result(run, shlex.join(argv))
    try:
        regions = pick_workers(RegionReader(trace).read_new(), workers)
    except ValueError as err:
        raise unread(err, result) from None
    names = ProgramNames(
        ProgramSymbols(program, []), *harness_names(result, program), program_fields(program)
    )
    touched = [line.vaddr for region in regions for line in region.lines.values()]
    held = held_in_window(read_allocations(sites), result["harness"]["window_tsc"])
    names.heap = heap_blocks(held, touched, names.function)
    groups, pairs = user_groups(regions, names) if workers == 2 else ([], [])
    lines = line_table(
        regions,
        lambda line: names.data(line.vaddr),
        names.function,
        lambda line, touched: names.fields_of(line.vaddr, touched),
    )
    return result, regions, groups, pairs, lines


def line_table(regions: list[Region], data_of, function_of, fields_of=None) -> list[dict]:
    """The lines two or more workers touched, one of them writing, grouped by their name:
    the data that holds them (``data_of(line)``, of the lowest address a worker touched it
    at), and for a line of no named data (UNNAMED) the code of any worker that wrote them
    (``function_of(pc)``) too; the transfers and invalidations of all workers (and by the
    kind of access that made them), most transfers first. ``fields_of(line, touched)``
    names the fields a name's lines hold after it, from the bytes any worker touched in
    any of them: the lines at one offset of each worker's block stay one row."""
    by_paddr: dict[int, list] = {}
    for region in regions:
        for paddr, line in region.lines.items():
            by_paddr.setdefault(paddr, []).append(line)

    def name(touched: list) -> str:
        data = data_of(min(touched, key=lambda line: line.vaddr))
        if not data.endswith(UNNAMED):  # with --system, after the space's "user: "
            return data
        code = {site for line in touched for site in line_code(line, function_of)}
        writers = sorted(site[:-2] for site in code if site.endswith(":W"))
        shown = ", ".join(writers[:3]) + (", ..." if len(writers) > 3 else "")
        return f"{data} (written by {shown})"

    shared = [
        (name(touched), touched)
        for touched in by_paddr.values()
        if len(touched) >= 2 and any(line.written for line in touched)
    ]
    if fields_of is not None:
        shared = with_fields(shared, fields_of)
    return ranked_lines(
        (
            data,
            1,
            sum(line.transfers for line in touched),
            sum(line.invalidations for line in touched),
            [line.kinds for line in touched],
        )
        for data, touched in shared
    )


def with_fields(shared: list[tuple[str, list]], fields_of) -> list[tuple[str, list]]:
    """(name, lines) with each name followed by ``fields_of`` the bytes touched in any of
    its lines (the union, so that a name's lines, each worker's, stay under one name)."""
    touched_bytes: dict[str, int] = {}
    for data, touched in shared:
        for line in touched:
            touched_bytes[data] = touched_bytes.get(data, 0) | line.read_mask | line.write_mask
    one_of = {data: min(touched, key=lambda line: line.vaddr) for data, touched in shared}
    suffix = {data: fields_of(one_of[data], mask) for data, mask in touched_bytes.items()}
    return [(data + suffix[data], touched) for data, touched in shared]


def ranked_lines(counts) -> list[dict]:
    """Rows of `lines` from (name, lines, transfers, invalidations, the lines' MoveKinds),
    summed by name, most transfers first; a row's `moves_by_kind` is None when a line's
    kinds were not counted."""
    table: dict[str, dict] = {}
    for name, lines, moved, invalidated, kinds in counts:
        row = table.setdefault(
            name,
            {
                "name": name,
                "lines": 0,
                "transfers": 0,
                "invalidations": 0,
                "moves_by_kind": dict.fromkeys(MOVE_KINDS, 0),
            },
        )
        row["lines"] += lines
        row["transfers"] += moved
        row["invalidations"] += invalidated
        by_kind = row["moves_by_kind"]
        if by_kind is None or None in kinds:
            row["moves_by_kind"] = None
            continue
        for kind in MOVE_KINDS:
            by_kind[kind] += sum(getattr(counted, kind) for counted in kinds)
    return sorted(table.values(), key=lambda r: (-r["transfers"], -r["invalidations"], r["name"]))


def trace_system(args, argv: list, program: Path, scratch: str, workers: int) -> tuple:
    """Runs the benchmark's workers inside the Linux target's guest (wholestack.py), one
    per quiet CPU: (result, regions, groups, pair groups, lines) with the kernel's lines
    among them (groups and pairs at 2 workers); UserError when it cannot be run or read."""
    kernel = wholestack.Kernel()
    cwd = sources.root()
    run, stdout, traced = wholestack.run_to_end(
        lambda directory: wholestack.GuestRun(
            kernel,
            argv,
            {**STOP_GRACE, **args.env},
            program,
            cwd,
            directory,
            workers,
            schedule_options(args, workers),
        ),
        Path(scratch),
        args.timeout,
    )
    try:
        try:
            result = parse_result(stdout)
        except ValueError as err:
            raise UserError(str(err)) from None
        try:
            regions = pick_workers(traced, workers)
        except ValueError as err:
            raise unread(err, result) from None
        names = ProgramNames(ProgramSymbols(program, []), *harness_names(result, program))
        namer = run.data_namer()
        try:
            if workers == 2:
                groups, pairs = stack_groups(regions, names, kernel.symbols, namer)
                return result, regions, groups, pairs, group_lines(groups)
            return result, regions, [], [], stack_lines(regions, names, kernel.symbols, namer)
        finally:
            namer.close()
    finally:
        run.stop()


def stack_lines(regions: list[Region], names: ProgramNames, kernel, namer) -> list[dict]:
    """`lines` of a system-mode trace of any number of workers: user lines named as in
    user mode, kernel lines (those two workers touched, one writing) as `scalecheck
    trace` names them, each with its space."""
    by_paddr: dict[int, list] = {}
    for region in regions:
        for paddr, line in region.lines.items():
            by_paddr.setdefault(paddr, []).append(line)
    kernel_data = kernel_names(
        [
            (line, line.read_mask | line.write_mask)
            for touched in by_paddr.values()
            if len(touched) >= 2 and any(other.written for other in touched)
            for line in [min(touched, key=lambda other: other.vaddr)]
            if line.vaddr >= USER_END
        ],
        kernel,
        namer,
    )

    def data_of(line) -> str:
        if line.vaddr < USER_END:
            return f"user: {names.data(line.vaddr)}"
        return f"kernel: {kernel_data[line.paddr]}"

    def function_of(pc: int) -> str:
        return names.function(pc) if pc < USER_END else kernel.function(pc)

    return line_table(regions, data_of, function_of)


def group_lines(groups: list[dict]) -> list[dict]:
    """The two-worker groups as `lines` (by their space and data, code aside)."""
    return ranked_lines(
        (
            f"{group['space']}: {group['data']}",
            group["lines"],
            sum(group["transfers"]),
            sum(group["invalidations"]),
            [None],  # the two-worker groups do not keep the kinds
        )
        for group in groups
    )


def unread(err: ValueError, result: dict) -> UserError:
    """The error of a run whose regions cannot be read, saying when the harness killed
    workers that did not end their operation by the stop (a loop never ended: no region)."""
    harness = result.get("harness")
    killed = harness.get("workers_killed_at_stop", 0) if isinstance(harness, dict) else 0
    if killed:
        return UserError(
            f"{err}; the harness killed {killed} worker(s) in the middle of an operation "
            "(too slow under emulation: a longer --duration, or smaller operations)"
        )
    return UserError(str(err))


def per_operation(count: int, ops) -> float | None:
    """A count per operation the workers counted inside their regions."""
    return count / ops if isinstance(ops, int) and ops > 0 else None


def region_operations(result: dict):
    """The operations the workers counted inside their traced regions (the harness's
    `region_ops`: the window's and the few after it before each worker's stop, none of
    the warm-up's)."""
    return result.get("harness", {}).get("region_ops")


def regime(entry, result: dict) -> dict | None:
    """The benchmark's regime in this run (the catalog's `regime`: an extra sum whose count
    per operation sets which lines move, and how often): dgram-shared's requests a server
    took from another worker's client, each moving that request's buffer. Which regime a
    run falls in is the benchmark's own timing, so two runs' lines are compared beside
    it. Per operation of the regions, as the lines' (the sums count to each worker's
    stop, as `region_ops`). None for a benchmark without one."""
    extra, ops = result.get("extra", {}), region_operations(result)
    if not entry.regime or entry.regime not in extra:
        return None
    return {"extra": entry.regime, "per_op": extra[entry.regime] / ops if ops else None}


def totals(lines: list[dict], pairs: list[dict], ops) -> dict:
    """Shared lines, transfers and invalidations of the lines' rows, pair transfers of the
    split pairs, each also per operation."""
    moved = sum(row["transfers"] for row in lines)
    invalidated = sum(row["invalidations"] for row in lines)
    pair_moved = sum(sum(group["pair_transfers"]) for group in pairs)
    return {
        "shared_lines": sum(row["lines"] for row in lines),
        "transfers": moved,
        "invalidations": invalidated,
        "split_pairs": sum(group["pairs"] for group in pairs),
        "pair_transfers": pair_moved,
        "transfers_per_operation": per_operation(moved, ops),
        "invalidations_per_operation": per_operation(invalidated, ops),
        "pair_transfers_per_operation": per_operation(pair_moved, ops),
    }


def counts_text(counts: dict) -> str:
    rates = (
        counts["transfers_per_operation"],
        counts["invalidations_per_operation"],
        counts["pair_transfers_per_operation"],
    )
    return (
        f"{counts['transfers']} transfers, {counts['invalidations']} invalidations, "
        f"{counts['pair_transfers']} pair transfers in {counts['split_pairs']} split pairs"
        + (
            ", {:.3f}, {:.3f} and {:.3f} per operation".format(*rates)
            if rates[0] is not None
            else ""
        )
    )


def print_group(group: dict, system: bool):
    moved = "{}+{}".format(*group["transfers"])
    invalidated = "{}+{}".format(*group["invalidations"])
    where = f"{group['space']}: " if system else ""
    print(f"{group['lines']:6d} {moved:>18} {invalidated:>18}  {where}{group['data']}")
    print(f"        worker 0: {' '.join(group['worker0'])}")
    print(f"        worker 1: {' '.join(group['worker1'])}")


def print_groups(document: dict, top: int):
    """The table of the groups, most transfers first (then, with --system, the ones with
    the most invalidations); document as written to --json."""
    series = " ".join(filter(None, (document[key] for key in ("benchmark", "mode", "runtime"))))
    system = document["system"]
    if system:
        series += f" ({document['workers_as']}, user and kernel)"
    print(
        f"{series}: {document['shared_lines']} lines shared with a write, of "
        "{} and {} the two workers touched; ".format(*document["lines_touched"])
        + counts_text(document)
        + f" ({document['operations']} operations counted in the regions)"
    )
    if system:
        for space, counts in document["spaces"].items():
            print(f"  {space}: {counts['shared_lines']} lines, {counts_text(counts)}")
    groups = document["groups"]
    print(f"{'lines':>6} {'transfers (w0+w1)':>18} {'invalidations':>18}  data")
    for group in groups[:top]:
        print_group(group, system)
    if len(groups) > top:
        print(f"... {len(groups) - top} more groups (--top, or --json for all)")
    if system:
        by_invalidations = sorted(groups, key=lambda g: -sum(g["invalidations"]))
        print("most invalidations:")
        for group in [g for g in by_invalidations if sum(g["invalidations"])][: min(top, 10)]:
            print_group(group, system)
    pairs = document["pair_groups"]
    if pairs:
        print("pairs of lines (128 bytes) split between the workers, most pair transfers first:")
        print(f"{'pairs':>6} {'pair transfers':>18}  worker 0's data | worker 1's data")
        for group in pairs[:top]:
            moved = "{}+{}".format(*group["pair_transfers"])
            where = f"{group['space']}: " if system else ""
            print(f"{group['pairs']:6d} {moved:>18}  {where}{' | '.join(group['data'])}")
            print(f"        worker 0: {' '.join(group['worker0'])}")
            print(f"        worker 1: {' '.join(group['worker1'])}")
        if len(pairs) > top:
            print(f"... {len(pairs) - top} more pair groups (--top, or --json for all)")


def add_catalog_option(parser) -> None:
    """--catalog, as `scalecheck bench --catalog` has it."""
    parser.add_argument(
        "--catalog",
        action="append",
        type=Path,
        metavar="DIR",
        help="read catalog *.toml files from DIR instead of the built-in catalog (repeatable)",
    )


def environment_setting(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def lines_per_operation(lines: list[dict], ops) -> list[dict]:
    """The rows with their transfers and invalidations per operation."""
    return [
        {
            **row,
            "transfers_per_op": per_operation(row["transfers"], ops),
            "invalidations_per_op": per_operation(row["invalidations"], ops),
            "moves_by_kind_per_op": None
            if row["moves_by_kind"] is None
            else {kind: per_operation(n, ops) for kind, n in row["moves_by_kind"].items()},
        }
        for row in lines
    ]


def print_lines(document: dict, top: int):
    """The `lines` table of one N."""
    print(
        f"{document['benchmark']} {document['mode']} at {document['cpus']} CPUs "
        f"(quantum {document['quantum'] or 'off'}): {document['operations']} operations"
        + (
            f"; {document['schedule_lapsed']} worker(s) once ran out of turn"
            if document["schedule_lapsed"]
            else ""
        )
    )
    print(f"{'lines':>6} {'transfers/op':>13} {'invalidations/op':>17}  name")
    for row in document["lines"][:top]:
        per_op = [row[key] for key in ("transfers_per_op", "invalidations_per_op")]
        shown = ["-" if value is None else f"{value:.4f}" for value in per_op]
        print(f"{row['lines']:6d} {shown[0]:>13} {shown[1]:>17}  {row['name']}")
    if len(document["lines"]) > top:
        print(f"... {len(document['lines']) - top} more (--top, or --json for all)")


def plot_lines(documents: list[dict], path: Path, top: int = 6) -> None:
    """Transfers per operation of the top lines (at the largest N) against N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # here: every other command starts faster without it

    figure, axes = plt.subplots(figsize=(7, 4.5))
    names = [row["name"] for row in documents[-1]["lines"][:top]]
    cpus = [document["cpus"] for document in documents]
    for name in names:
        rows = [{r["name"]: r for r in document["lines"]}.get(name) for document in documents]
        axes.plot(
            cpus, [(row or {}).get("transfers_per_op") or 0 for row in rows], "o-", label=name
        )
    first = documents[0]
    axes.set(
        xlabel="emulated CPUs",
        ylabel="transfers per operation",
        xticks=cpus,
        title=f"{first['benchmark']} {first['mode']}: lines moved per operation "
        f"(quantum {first['quantum'] or 'off'})",
    )
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def add_schedule_options(parser) -> None:
    """--quantum and --turn-ends: the workers' turns (tracer/plugin/src/schedule.rs)."""
    parser.add_argument(
        "--quantum",
        type=argtypes.limit,
        default=QUANTUM,
        help=f"instructions per turn of the workers (default {QUANTUM}; 0: the host's "
        "scheduler orders them)",
    )
    parser.add_argument(
        "--turn-ends",
        choices=["operation", "quantum"],
        default="operation",
        help="what ends a worker's turn: its operation's end or Q instructions, whichever "
        "first (default), or Q instructions only (operations shorter than Q overlap, as "
        "a short lock's waiters need; a line written once per operation moves about L / Q "
        "times per operation of L instructions)",
    )
    parser.add_argument(
        "--turn-jitter",
        action=argparse.BooleanOptionalAction,
        default=TURN_JITTER,
        help="turns of Q/2 to 3Q/2 instructions (a fixed pseudo-random sequence; the "
        "default), so the workers' phases drift as cores' do; --no-turn-jitter: exactly Q, "
        "keeping the interleaving the turns began with",
    )


def add_options(parser) -> None:
    parser.add_argument("benchmark", help="a catalog name (scalecheck bench list)")
    parser.add_argument("--mode", help="default: the benchmark's first mode")
    parser.add_argument("--runtime", help="default: the benchmark's first runtime")
    parser.add_argument(
        "--cpus",
        type=argtypes.count_list,
        default=[2],
        metavar="N[,N...]",
        help="emulated CPUs, one worker each (default 2; e.g. 2,4,8,16: one run per count)",
    )
    add_schedule_options(parser)
    parser.add_argument(
        "--warmup",
        type=float,
        default=WARMUP,
        help=f"seconds the workers run untraced before their regions open (default "
        f"{WARMUP}; 0: the regions hold the run's start too)",
    )
    parser.add_argument(
        "--duration", type=float, default=0.5, help="measured seconds (default 0.5)"
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds (default 900)")
    parser.add_argument(
        "--system",
        action="store_true",
        help="run it in the Linux target's guest (N + 1 CPUs, the workers on N quiet ones): "
        "the kernel's lines beside the program's",
    )
    parser.add_argument(
        "--processes",
        action="store_true",
        help="with --system: the workers as processes (a control) instead of threads",
    )
    parser.add_argument(
        "--env",
        action="append",
        type=environment_setting,
        default=[],
        metavar="NAME=VALUE",
        help="set this in the benchmark's environment (repeatable; e.g. GLIBC_TUNABLES=...)",
    )
    parser.add_argument(
        "--top", type=int, default=30, help="groups printed (default 30; --json has all)"
    )
    add_catalog_option(parser)
    parser.add_argument(
        "--json", type=Path, help="also write the results to this file (several --cpus: runs)"
    )
    parser.add_argument("--plot", type=Path, help="draw transfers per operation against N here")


def counting_args(cpus: list[int], catalog) -> argparse.Namespace:
    """The options of a count at these CPU counts, every other one at its default."""
    parser = argparse.ArgumentParser()
    add_options(parser)
    args = parser.parse_args(["-", "--cpus", ",".join(map(str, cpus))])
    args.catalog, args.env = catalog, {}
    return args


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sharing",
        help="the cache lines a benchmark's workers share, per operation at N emulated CPUs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(parser)
    parser.set_defaults(func=run)


def traced_run(args, entry, mode: str, runtime: str, workers: int) -> dict:
    """One run at `workers` CPUs: its document (as written to --json)."""
    with tempfile.TemporaryDirectory(prefix="sharing-") as scratch:
        workdir = wholestack.GUEST_WORKDIR if args.system else scratch
        argv, program = benchmark_command(args, entry, mode, runtime, workdir, workers)
        if args.system:
            traced = trace_system(args, argv, program, scratch, workers)
        else:
            traced = trace_workers(args, entry.name, argv, program, scratch, workers)
    result, regions, groups, pairs, lines = traced
    ops = region_operations(result)
    spaces = {
        space: totals(
            [row for row in lines if row["name"].startswith(f"{space}: ")],
            [g for g in pairs if g["space"] == space],
            ops,
        )
        for space in ("user", "kernel")
    }
    return {
        "benchmark": entry.name,
        "mode": mode,
        "runtime": runtime,
        "command": shlex.join(argv),
        "cpus": workers,
        "quantum": args.quantum,
        "turn_ends": args.turn_ends,
        "turn_jitter": args.turn_jitter,
        "system": args.system,
        "workers_as": "processes" if args.processes else "threads",
        "lines_touched": [len(r.lines) for r in regions],
        # workers that once ran without their turn (the host held the turn's holder past
        # the plugin's patience): their order was not the schedule's
        "schedule_lapsed": sum(1 for r in regions if r.flags & FLAG_SCHEDULE_LAPSED),
        "operations": ops,
        "warmup_s": args.warmup,
        # the harness's own figures of the measured window (a benchmark's extra sums)
        "extra": result.get("extra", {}),
        "regime": regime(entry, result),
        **totals(lines, pairs, ops),
        "spaces": spaces,
        "lines": lines_per_operation(lines, ops),
        "groups": groups,
        "pair_groups": pairs,
    }


def run(args) -> int:
    args.env = dict(args.env)
    if args.processes and not args.system:
        raise UserError("--processes needs --system (user mode traces one process's threads)")
    if args.cpus[-1] > MAX_CPUS:
        raise UserError(f"--cpus {args.cpus[-1]}: the tracer follows at most {MAX_CPUS} CPUs")
    catalog = load_catalog(args.catalog)
    if args.benchmark not in catalog:
        raise UserError(f"no benchmark {args.benchmark!r} in the catalog")
    entry = catalog[args.benchmark]
    mode = pick(entry.name, "mode", entry.modes, args.mode)
    runtime = pick(entry.name, "runtime", entry.runtimes, args.runtime)
    documents = []
    for workers in args.cpus:
        if len(args.cpus) > 1:
            print(f"sharing: {entry.name} at {workers} CPUs", file=sys.stderr)
        documents.append(traced_run(args, entry, mode, runtime, workers))
    # The files first: a reader of the table that leaves early (`| head`) loses nothing.
    if args.json:
        one = documents[0] if len(documents) == 1 else {"runs": documents}
        args.json.write_text(json.dumps(one, indent=1))
    if args.plot:
        plot_lines(documents, args.plot)
    return run_printing(lambda: print_tables(documents, args.top))


def print_tables(documents: list[dict], top: int) -> None:
    for document in documents:
        if document["cpus"] == 2:
            print_groups(document, top)
        print_lines(document, top)
