"""``scalecheck run DIR --target lib:PATH``: runs DIR/tests.jsonl on a C library in user
space, under ``qemu-x86_64`` with the tracing plugin (docs/usertarget.md).

PATH is a library's manifest (``scalecheck.toml`` in a directory, or a ``.toml`` file):
its model, adapter, sources and compiler flags. The adapter (tracer/user/
scalecheck_adapter.h), the library and the harness (tracer/user/harness.c) are linked into
one static program; each harness process runs a share of the tests, call A on one thread
and then call B on another, between markers. A crash or hang costs one test (recorded as
crash/timeout) and a restart with the rest; results go to the same results store, with
the same records, as the kernel target's.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck import binding, sources
from scalecheck.errors import UserError
from scalecheck.trace import build, dwarfnames, outcome, testfile, vm
from scalecheck.trace.regions import RegionReader
from scalecheck.trace.store import RESULTS_FORMAT, RESULTS_VERSION, ResultsStore
from scalecheck.trace.symbols import function_of
from scalecheck.trace.target import TargetMismatch, save_crash_log

QEMU_USER = "qemu-x86_64"
MANIFEST_NAME = "scalecheck.toml"
MANIFEST_KEYS = {"model", "adapter", "sources", "cflags"}
WRAPPED = ("malloc", "calloc", "realloc", "aligned_alloc", "free")
# The harness's room for one value's text (SC_TEXT_LEN, tracer/user/scalecheck_adapter.h).
TEXT_LEN = 40
LINE = 64
# Libraries shipped with scalecheck, by the name `--target NAME` takes (beside lib:PATH).
NAMED_LIBRARIES = {"libsv6": "native/libsv6/scalecheck/libsv6.toml"}
# Runs of the test program in a row that finish no test before the run gives up.
MAX_FRUITLESS_RUNS = 3
# Tests a cluster worker is sent in one task, at most (one program run traces them all).
CLUSTER_BATCH = 2000


@dataclass(frozen=True)
class Library:
    """A library's manifest, its paths resolved."""

    manifest: Path
    model: str
    adapter: Path
    sources: tuple[Path, ...]
    cflags: tuple[str, ...]

    @property
    def name(self) -> str:
        return (
            self.manifest.stem if self.manifest.name != MANIFEST_NAME else self.manifest.parent.name
        )

    def fingerprint(self) -> str:
        """Of the manifest, the sources and the headers they can include (those beside
        them and under the -I directories): the program is rebuilt when one changes."""
        digest = hashlib.sha256(self.manifest.read_bytes())
        for path in (self.adapter, *self.sources, *self._headers()):
            digest.update(path.read_bytes())
        return digest.hexdigest()[:12]

    def _headers(self) -> list[Path]:
        includes = [Path(flag[2:]) for flag in self.cflags if flag.startswith("-I")]
        folders = {self.adapter.parent, *(source.parent for source in self.sources), *includes}
        return sorted({header for folder in folders for header in folder.rglob("*.h")})


def library_spec(target: str) -> str | None:
    """The manifest path of a library target (``lib:PATH`` or a shipped library's name);
    None for any other target."""
    if target.startswith("lib:"):
        return target.removeprefix("lib:")
    named = NAMED_LIBRARIES.get(target)
    return str(sources.root() / named) if named else None


def load_library(spec: str) -> Library:
    """The library named by ``--target lib:PATH``; one-line UserError when it is not usable."""
    path = Path(spec)
    manifest = path / MANIFEST_NAME if path.is_dir() else path
    if not manifest.is_file():
        raise UserError(f"--target lib:{spec}: no {MANIFEST_NAME} there (docs/usertarget.md)")
    try:
        data = tomllib.loads(manifest.read_text())
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{manifest}: not TOML: {err}") from None
    unknown = set(data) - MANIFEST_KEYS
    missing = {"model", "adapter", "sources"} - set(data)
    if unknown or missing:
        raise UserError(
            f"{manifest}: "
            + (f"unknown key(s) {', '.join(sorted(unknown))}" if unknown else "")
            + ("; " if unknown and missing else "")
            + (f"missing key(s) {', '.join(sorted(missing))}" if missing else "")
        )
    base = manifest.resolve().parent
    files = [base / data["adapter"], *(base / s for s in data["sources"])]
    for file in files:
        if not file.is_file():
            raise UserError(f"{manifest}: {file} does not exist")
    model = data["model"]
    if model.endswith(".py") or ".py:" in model:
        model = str(base / model)
    return Library(
        manifest.resolve(),
        model,
        files[0].resolve(),
        tuple(f.resolve() for f in files[1:]),
        tuple(_resolved_flag(str(flag), base) for flag in data.get("cflags", ["-O2", "-g"])),
    )


def _resolved_flag(flag: str, base: Path) -> str:
    """An include directory of the manifest's (``-Ipath``) is relative to the manifest."""
    if flag.startswith("-I") and len(flag) > 2 and not Path(flag[2:]).is_absolute():
        return f"-I{base / flag[2:]}"
    return flag


def user_dir() -> Path:
    return sources.root() / "tracer" / "user"


def build_program(library: Library, out: Path) -> Path:
    """Compiles the library and its adapter with the library's flags and links them with
    the harness into one static program (rebuilt when any input changed)."""
    build.run_step(["make", "-s", "-C", str(user_dir())], "user-space harness")
    harness = user_dir() / "build" / "harness.o"
    program = out / f"{library.name}-{library.fingerprint()}"
    if program.exists() and program.stat().st_mtime >= harness.stat().st_mtime:
        return program
    out.mkdir(parents=True, exist_ok=True)
    include = ["-I", str(user_dir()), "-I", str(library.adapter.parent)]
    cc = os.environ.get("CC", "cc")
    objects = []
    for source in (library.adapter, *library.sources):
        obj = _object_path(library, source, out)
        build.run_step(
            [cc, *library.cflags, "-pthread", *include, "-c", "-o", str(obj), str(source)],
            f"library source {source.name}",
        )
        objects.append(str(obj))
    wrap = ",".join(f"--wrap={name}" for name in WRAPPED)
    build.run_step(
        [cc, "-static", "-pthread", f"-Wl,{wrap}", "-o", str(program), str(harness), *objects],
        f"test program of {library.name}",
    )
    return program


def _overlapping(starts: list, entries: list, line: int) -> list:
    """The (start, size, ...) entries, sorted by start, that share bytes with a line."""
    first = max(bisect.bisect_right(starts, line) - 1, 0)
    end = bisect.bisect_left(starts, line + LINE)
    return [e for e in entries[first:end] if e[0] < line + LINE and line < e[0] + max(e[1], 1)]


def _object_path(library: Library, source: Path, out: Path) -> Path:
    return out / f"{library.name}-{source.stem}.o"


def library_objects(library: Library, out: Path) -> list[Path]:
    """The compiled library sources (the adapter is the harness's side of the line)."""
    return [_object_path(library, source, out) for source in library.sources]


class ProgramSymbols:
    """Names code and data of the static test program: functions and static data by ELF
    symbol, heap lines by the allocation site and offset the harness recorded."""

    def __init__(self, program: Path, library_objects: list[Path]):
        self._program = program
        self._pc_names: dict[int, str] = {}
        functions, objects = _symbols(program, "STT_FUNC"), _symbols(program, "STT_OBJECT")
        self.library_data = {
            name for path in library_objects for _, _, name in _symbols(path, "STT_OBJECT")
        }
        # with -g: the field of a static variable at the line (buckets[1].head)
        self.fields = dwarfnames.FieldNames(library_objects)
        self.library_code = {
            name for path in library_objects for _, _, name in _symbols(path, "STT_FUNC")
        }
        self._functions, self._objects = functions, objects
        self._function_starts = [f[0] for f in functions]
        self._object_starts = [o[0] for o in objects]
        self.allocations: list = []  # (addr, size, site) of one test
        self.library_statics = [o for o in objects if o[2] in self.library_data]
        # The statics the harness snapshots after a test: the roots of heap typing.
        self.snapshot_ranges = [
            (start, size)
            for start, size, name in self.library_statics
            if self.fields.holds_pointers(name)
        ]
        self._alloc_starts: list = []

    def with_allocations(self, allocations: list) -> ProgramSymbols:
        """The same names, with one test's heap allocations."""
        named = object.__new__(ProgramSymbols)
        named.__dict__.update(self.__dict__)
        named.allocations = sorted(allocations)
        named._alloc_starts = [a[0] for a in named.allocations]
        return named

    def data_namer(self, allocations: list, memory: dict[int, bytes]) -> dwarfnames.DataNamer:
        """Names one test's conflicting lines of the library down to the field, heap objects
        by the type a pointer in the snapshot ``memory`` gives them (docs/usertarget.md)."""
        return dwarfnames.DataNamer(self.fields, self.library_statics, allocations, memory)

    def pc_name(self, pc: int) -> str:
        """function+offset of a code address (the function that holds it)."""
        name = self._pc_names.get(pc)
        if name is None:
            i = bisect.bisect_right(self._function_starts, pc) - 1
            start, size, function = self._functions[i] if i >= 0 else (0, 0, "")
            if i < 0 or pc >= start + max(size, 1):
                name = hex(pc)
            else:
                name = f"{function}+{pc - start:#x}" if pc > start else function
            self._pc_names[pc] = name
        return name

    def function(self, pc: int) -> str:
        return function_of(self.pc_name(pc))

    def classify(self, vaddr: int):
        """(kind, name) of a cache line: static data by the symbols the line holds (and the
        field at the line, with DWARF), heap by the allocation that holds it (site and
        offset). A line can hold several: the library's own data is named first, its
        neighbours (libc's) only when alone."""
        statics = _overlapping(self._object_starts, self._objects, vaddr)
        if statics:
            own = [
                self.fields.field(name, max(vaddr - start, 0)) or name
                for start, _, name in statics
                if name in self.library_data
            ]
            return "static", " | ".join(own or [name for _, _, name in statics])
        allocations = _overlapping(self._alloc_starts, self.allocations, vaddr)
        if allocations:
            by_library = [a for a in allocations if self.function(a[2]) in self.library_code]
            start, size, site = (by_library or allocations)[0]
            return "heap", f"{self.function(site)}:alloc({size}){vaddr - start:+#x}"
        return "unknown", ""

    # One test's view (with_allocations) names code exactly as the program's symbols do:
    # views compare equal, so what outcome caches per symbols (sets of PCs by function)
    # is computed once per program, not once per test.
    def __hash__(self):
        return hash(self._program)

    def __eq__(self, other):
        return isinstance(other, ProgramSymbols) and other._program == self._program


def _symbols(path: Path, kind: str) -> list:
    """Sorted (address, size, name) of an ELF file's symbols of one kind, read once per
    file content (the programs are named by the hash of their sources)."""
    cached = path.with_name(f"{path.name}.{kind}.json")
    if cached.exists() and cached.stat().st_mtime >= path.stat().st_mtime:
        return [tuple(entry) for entry in json.loads(cached.read_text())]
    found = _read_symbols(path, kind)
    cached.write_text(json.dumps(found))
    return found


def _read_symbols(path: Path, kind: str) -> list:
    try:
        with open(path, "rb") as f:
            symtab = ELFFile(f).get_section_by_name(".symtab")
            if symtab is None:
                raise UserError(f"{path} has no symbol table (built with -s?)")
            found = [
                (sym["st_value"], sym["st_size"], sym.name)
                for sym in symtab.iter_symbols()
                if sym["st_info"]["type"] == kind and sym["st_shndx"] != "SHN_UNDEF"
            ]
    except (OSError, ELFError) as err:
        raise UserError(f"cannot read {path}: {err}") from None
    return sorted(found)


@dataclass
class _Worker:
    """Runs its share of the tests in harness processes, restarting after a crash or hang."""

    library: Library
    program: Path
    plugin: Path
    symbols: ProgramSymbols
    settings: dict
    trace_dir: Path
    pending: list
    workdir: Path
    on_record: Callable[[dict], None]
    stop: threading.Event
    restarts: int = 0
    error: BaseException | None = None
    done: set = field(default_factory=set)

    def run(self):
        try:
            fruitless = 0
            while self.pending and not self.stop.is_set():
                before = len(self.done)
                stderr = self._one_process()
                self.pending = [p for p in self.pending if p[1].id not in self.done]
                self.restarts += 1
                fruitless = 0 if len(self.done) > before else fruitless + 1
                if fruitless >= MAX_FRUITLESS_RUNS:
                    raise UserError(
                        f"the test program finished no test in {fruitless} runs in a row"
                        f" ({stderr or 'no message'}); see {self.workdir}"
                    )
        except BaseException as err:  # reported by the main thread
            self.error = err

    def _record(self, record: dict):
        self.done.add(record["id"])
        self.on_record(record)

    def _batch(self) -> tuple[str, dict]:
        parts = [f"S repeats={self.settings['repeats']}\n"]
        parts += [f"P {start:#x} {size}\n" for start, size in self.symbols.snapshot_ranges]
        runnable = {}
        for index, test in self.pending:
            try:
                parts.append(
                    render(test, index, self.settings["arguments"], self.settings["constants"])
                )
                runnable[index] = test
            except testfile.UnsupportedTest as why:
                self._record(outcome.base_record(test, "error", str(why)))
        return "".join(parts), runnable

    def _one_process(self) -> str:
        """One run of the test program over the pending tests; returns the last line it
        wrote to stderr."""
        text, runnable = self._batch()
        if not runnable:
            return ""
        self.workdir.mkdir(parents=True, exist_ok=True)
        batch_path, trace_path = self.workdir / "batch.txt", self.workdir / "trace.bin"
        batch_path.write_text(text)
        trace_path.unlink(missing_ok=True)
        command = [
            QEMU_USER,
            "-plugin",
            f"{self.plugin},out={trace_path},mode=user",
            str(self.program),
            str(batch_path),
        ]
        # Killed with its runner, as a VM is (a lost cluster worker leaves no program behind).
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            preexec_fn=vm.die_with_parent,
        )
        lines: queue.Queue = queue.Queue()
        reader = threading.Thread(target=_forward_lines, args=(process.stdout, lines), daemon=True)
        reader.start()
        regions_reader = RegionReader(trace_path)
        regions: dict = {}
        current = None
        # Per repeat: the blocks it allocated, and its snapshot after the calls.
        allocations: dict[int, list[tuple[int, int, int]]] = {}
        memory: dict[int, dict[int, bytes]] = {}
        last_progress, finished, failure = time.monotonic(), False, None
        timeout = self.settings["timeout"]
        try:
            while not self.stop.is_set():
                try:
                    line = lines.get(timeout=0.05)
                except queue.Empty:
                    line = None
                for region in regions_reader.read_new():
                    regions[region.tag] = region
                if line is None:
                    if process.poll() is not None and not reader.is_alive() and lines.empty():
                        break
                    if current is not None and time.monotonic() - last_progress > timeout:
                        failure = (current, "timeout", f"no result within {timeout:g} s; killed")
                        break
                    continue
                last_progress = time.monotonic()
                kind, _, rest = line.rstrip("\n").partition(" ")
                if kind == "B":
                    current = self._close(current, regions, allocations, memory)
                    index = int(rest)
                    current = (
                        outcome.TestProgress(runnable[index], index) if index in runnable else None
                    )
                    allocations, memory = {}, {}
                elif kind == "A" and current is not None:
                    _, rep, addr, size, site = rest.split()
                    block = (int(addr, 16), int(size), int(site, 16))
                    allocations.setdefault(int(rep), []).append(block)
                elif kind == "M" and current is not None:
                    _, rep, addr, data = rest.split()
                    memory.setdefault(int(rep), {})[int(addr, 16)] = bytes.fromhex(data)
                elif kind in ("R", "X") and current is not None:
                    index, rep, payload = ([*rest.split(" ", 2), "", ""])[:3]
                    if kind == "R":
                        res_a, _, res_b = payload.partition(" ")
                        current.repeats[int(rep)] = ("R", res_a, res_b)
                    else:
                        current.repeats[int(rep)] = ("X", payload)
                    if current.complete(self.settings["repeats"]):
                        # The plugin wrote the regions at the end markers, before the
                        # harness printed the result.
                        for region in regions_reader.read_new():
                            regions[region.tag] = region
                        current = self._close(current, regions, allocations, memory)
                elif kind == "DONE":
                    current = self._close(current, regions, allocations, memory)
                    finished = True
                    break
            if (
                failure is None
                and not finished
                and current is not None
                and process.poll() is not None
            ):
                failure = (current, "crash", "")
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        stderr = _read_and_close(process.stderr)
        last_line = (stderr.strip().splitlines() or [""])[-1]
        if failure:
            current, status, detail = failure
            self._fail(
                current, status, detail or _exit_description(process.returncode, last_line), stderr
            )
        return last_line

    def _close(self, current, regions, allocations, memory):
        if current is None or current.test.id in self.done:
            return None
        if not current.complete(self.settings["repeats"]):
            return current
        repeats = self.settings["repeats"]
        # Each repeat's lines are named from the blocks live in it (those of earlier
        # repeats a library kept included, a block's latest allocation winning) and its
        # own snapshot.
        live: dict[int, tuple] = {}
        namers = []
        for rep in range(repeats):
            live.update((block[0], block) for block in allocations.get(rep, []))
            namers.append(self.symbols.data_namer(list(live.values()), memory.get(rep, {})))
        record = outcome.finish(
            current,
            regions,
            self.symbols.with_allocations(list(live.values())),
            repeats,
            self.settings["granularity"],
            self.settings["filters"],
            repeat_namers=namers,
        )
        self._record(record)
        for rep in range(self.settings["repeats"]):
            for side in (0, 1):
                regions.pop(outcome.tag(current.index, rep, side), None)
        return None

    def _fail(self, current, status, detail, stderr: str):
        if current.test.id not in self.done:
            # Written before the record: whoever takes the record finds its log.
            save_crash_log(self.trace_dir, current.test.id, stderr.encode())
            self._record(outcome.base_record(current.test, status, detail))


def _forward_lines(stream, lines: queue.Queue):
    """Hands the program's output to the run loop line by line (a reader thread)."""
    for line in stream:
        lines.put(line)


def _read_and_close(pipe) -> str:
    if pipe is None:
        return ""
    with pipe:
        return pipe.read()


def _exit_description(code: int, stderr: str) -> str:
    # qemu-user dies of the fatal signal the program received (SIGSEGV in a call)
    how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
    return f"test program {how}" + (f": {stderr}" if stderr else "")


def render(test, index: int, arguments: dict, constants: dict) -> str:
    """The harness's line-based form of one test (tracer/user/harness.c), with the tests
    file's header constants under ``constants``; raises testfile.UnsupportedTest."""
    raw = test.raw
    lines = [f"T {index}"]
    setup = {"constants": constants, **(raw.get("setup") or {})}
    for path, value in _flatten(setup):
        lines.append(f"V {path} {value}")
    calls = raw.get("calls") or []
    if len(calls) != 2:
        raise testfile.UnsupportedTest(f"a test needs exactly two calls, this one has {len(calls)}")
    for side, call in enumerate(calls):
        op = call.get("op")
        if op not in arguments:
            raise testfile.UnsupportedTest(f"call {'AB'[side]}: unknown op {op!r}")
        args = call.get("args") or {}
        missing = [a for a in arguments[op] if a not in args]
        if missing:
            raise testfile.UnsupportedTest(f"call {'AB'[side]} ({op}): missing {missing[0]!r}")
        proc = _token(call.get("proc", 0), "proc")
        values = [f"{a}={_token(args[a], a)}" for a in arguments[op]]
        lines.append(" ".join(["C", str(side), proc, op, *values]))
    lines.append("E")
    return "\n".join(lines) + "\n"


def _flatten(value, prefix=""):
    """(path, token) pairs of a setup: nested keys and list indices joined by '.', the ""
    field of an entry being the entry itself; an empty object or list is its path with the
    text {} or [], so that it still counts as an entry of its parent."""
    if isinstance(value, dict | list) and not value and prefix:
        yield prefix, "{}" if isinstance(value, dict) else "[]"
    elif isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, inner in items:
            path = f"{prefix}.{key}" if prefix and key != "" else (prefix or str(key))
            yield from _flatten(inner, path)
    else:
        yield prefix, _token(value, prefix)


def _token(value, what) -> str:
    """An integer, boolean (0/1) or word, as the harness reads it."""
    if isinstance(value, bool | int):
        return str(int(value))
    is_word = isinstance(value, str) and value.isprintable() and 0 < len(value) < TEXT_LEN
    if is_word and not any(c.isspace() or c == "=" for c in value):
        return value
    raise testfile.UnsupportedTest(
        f"{what} must be an integer, boolean or word of < {TEXT_LEN} characters, got {value!r}"
    )


def run_library_tests(
    out_dir,
    spec: str,
    jobs=None,
    repeats=2,
    limit=None,
    ops=None,
    granularity="stable",
    filters=outcome.ALL_FILTERS_ON,
    timeout=5.0,
    quiet=False,
    set_aside_incompatible=False,
    cluster=None,
) -> dict:
    """Runs DIR/tests.jsonl (or the selected part) on the library of ``spec`` (a manifest
    path), here or on the workers of ``cluster``, and returns the run summary, as the
    kernel target's run_tests does."""
    from scalecheck.modelfile import load_model, model_fingerprint
    from scalecheck.trace import runner

    out_dir = Path(out_dir)
    library = load_library(spec)
    tests_header, tests = testfile.read_tests(out_dir / "tests.jsonl")
    model_cls = load_model(library.model)
    wanted_model = load_model(tests_header.get("model", ""))
    if (wanted_model.__name__, model_fingerprint(wanted_model)) != (
        model_cls.__name__,
        model_fingerprint(model_cls),
    ):
        raise UserError(
            f"tests of model {tests_header.get('model')!r}, but {library.manifest} "
            f"implements model {library.model!r}"
        )
    arguments = binding.for_model(model_cls).call_arguments()
    selected = runner.select_tests(tests, limit, ops, set(arguments))
    log = (lambda *a: None) if quiet else print
    trace_dir = out_dir / "trace"
    target = LibraryTarget(
        library,
        library.fingerprint(),
        {
            "repeats": repeats,
            "timeout": timeout,
            "granularity": granularity,
            "filters": filters,
            "arguments": arguments,
            "constants": tests_header.get("constants") or {},
        },
    )
    prepared = target.prepare(trace_dir, log)
    header = {
        "format": RESULTS_FORMAT,
        "version": RESULTS_VERSION,
        "target": f"lib:{library.name}",
        "library": {"manifest": str(library.manifest), "sources": target.sources},
        "tests": "tests.jsonl",
        "repeats": repeats,
        "granularity": granularity,
        "filters": filters.as_json(),
        "tracer": build.tracer_fingerprint(),
        "started": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    store = ResultsStore(trace_dir / "results.jsonl", header, set_aside_incompatible, log)
    pending = [(i, t) for i, t in enumerate(selected) if t.id not in store.finished]
    jobs = max(1, min(jobs or os.cpu_count() or 1, max(1, len(pending))))
    started = time.monotonic()
    restarts, per_worker = runner.trace_pending(
        target, prepared, pending, jobs, cluster, header, store, quiet
    )
    elapsed = time.monotonic() - started
    records = [store.finished[t.id] for t in selected if t.id in store.finished]
    finished_now = len(pending) - sum(1 for _, t in pending if t.id not in store.finished)
    summary = runner.summarize(records, selected)
    summary.update(
        {
            "results": str(trace_dir / "results.jsonl"),
            "program_runs": restarts,
            "seconds": round(elapsed, 1),
            "finished": finished_now,
            "skipped_already_done": len(selected) - len(pending),
            "tests_per_second": round(finished_now / elapsed, 3) if elapsed else 0.0,
            "library": header["library"],
            "per_worker": per_worker,
        }
    )
    (trace_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


@dataclass(frozen=True)
class _Program:
    """A library's test program built on this machine, and what its workers need."""

    path: Path
    plugin: Path
    symbols: ProgramSymbols
    trace_dir: Path


@dataclass(frozen=True)
class LibraryTarget:
    """A C library in user space (target.py), of the sources the submitting machine has:
    on a cluster worker, the manifest and sources at the same paths, compiled there."""

    library: Library
    sources: str  # the fingerprint of the manifest, adapter and sources
    settings: dict
    batch: int = CLUSTER_BATCH

    def prepare(self, trace_dir: Path, log) -> _Program:
        if shutil.which(QEMU_USER) is None:
            raise UserError(f"{QEMU_USER} not found: run scripts/setup.sh (installs qemu-user)")
        try:
            found = self.library.fingerprint()
        except OSError as err:
            raise TargetMismatch(f"library {self.library.name}: {err}") from None
        if found != self.sources:
            raise TargetMismatch(
                f"library {self.library.name} at {self.library.manifest}: sources {found}, "
                f"the submitting machine's are {self.sources}"
            )
        out = trace_dir / "program"
        program = build_program(self.library, out)
        symbols = ProgramSymbols(program, library_objects(self.library, out))
        return _Program(program, build.ensure_plugin(), symbols, trace_dir)

    def trace(self, prepared: _Program, tests: list, jobs: int, on_record) -> int:
        from scalecheck.trace import runner

        stop = threading.Event()
        workers = [
            _Worker(
                self.library,
                prepared.path,
                prepared.plugin,
                prepared.symbols,
                self.settings,
                prepared.trace_dir,
                tests[k::jobs],
                prepared.trace_dir / f"proc{k}",
                on_record,
                stop,
            )
            for k in range(jobs)
        ]
        runner.run_workers(workers, stop)
        return sum(w.restarts for w in workers)
