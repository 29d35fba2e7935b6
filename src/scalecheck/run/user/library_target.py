"""``--target lib:PATH`` (or a shipped library's name): the tests of a library's model on
the library itself, in user space under ``qemu-x86_64`` with the tracing plugin
(docs/usertarget.md). The library, its adapter and the harness are linked into one
static program (program_build.py); each worker runs a share of the tests in it
(program_worker.py); results go to the same store, with the same records, as the kernel
target's.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from scalecheck import binding
from scalecheck.common.errors import UserError
from scalecheck.interfaces.loading import load_model, model_fingerprint
from scalecheck.run.target import TargetMismatch, TraceSettings, run_workers
from scalecheck.run.tracer_build import ensure_plugin
from scalecheck.run.user import installed
from scalecheck.run.user.adapter_check import check_adapter
from scalecheck.run.user.library import Library, load_library
from scalecheck.run.user.program_build import adapter_object, build_program, library_objects
from scalecheck.run.user.program_symbols import Installed, ProgramSymbols, program_functions
from scalecheck.run.user.program_worker import QEMU_USER, ProgramWorker

# Tests a cluster worker is sent in one task, at most (one program run traces them all).
CLUSTER_BATCH = 2000


@dataclass
class LibraryRun:
    """``--target lib:PATH``: the tests of a library's model on the library."""

    starts = "program_runs"

    library: Library
    trace: TraceSettings
    arguments: dict  # op -> the arguments a call of it carries
    constants: dict  # the tests file's header constants
    optional: set  # the operations the adapter may leave out

    @classmethod
    def open(cls, tests_header: dict, trace: TraceSettings, spec: str) -> LibraryRun:
        library = load_library(spec)
        model_cls = load_model(library.model)
        wanted_model = load_model(tests_header.get("model", ""))
        # (One class is its own version: its sources are not read twice.)
        if wanted_model is not model_cls and (
            wanted_model.__name__,
            model_fingerprint(wanted_model),
        ) != (model_cls.__name__, model_fingerprint(model_cls)):
            raise UserError(
                f"tests of model {tests_header.get('model')!r}, but {library.manifest} "
                f"implements model {library.model!r}"
            )
        model_binding = binding.for_model(model_cls)
        arguments = model_binding.call_arguments()
        # What an adapter may leave out: the target's own operations, the manifest's unbound.
        optional = {*model_binding.extra_ops, *library.unbound}
        return cls(library, trace, arguments, tests_header.get("constants") or {}, optional)

    def known_ops(self):
        return self.arguments

    def start(self, trace_dir: Path, log) -> tuple[LibraryTarget, Program, dict]:
        target = LibraryTarget(
            self.library, self.library.fingerprint(), self.trace, self.arguments, self.constants
        )
        prepared = target.prepare(trace_dir, log)
        check_adapter(prepared.path, self.arguments, self.optional)
        library: dict = {"manifest": str(self.library.manifest), "sources": target.sources}
        header = {"target": f"lib:{self.library.name}", "library": library}
        lacking = prepared.symbols.lacking_dwarf
        if lacking:
            library["without_dwarf"] = list(lacking)
            # what the report's naming line says was not named by field
            header["naming"] = {"missing": f"no DWARF in {_listed(lacking)}: named by symbol"}
        return target, prepared, header

    def summary(self, prepared: Program) -> dict:
        return {"library": {"manifest": str(self.library.manifest), "sources": prepared.sources}}


def installed_parts(library: Library, program: Path, log) -> Installed:
    """The installed libraries' archives linked into the program, their symbols and debug
    files; the objects without DWARF are said on ``log`` (their data named by symbol)."""
    archives = installed.linked_archives(library)
    code: set[str] = set()
    data: set[str] = set()
    debug_files: list[Path] = []
    lacking: list[str] = []
    linked = {name for _, _, name in program_functions(program)}
    for archive in archives:
        defined_code, defined_data = installed.archive_symbols(archive)
        code |= defined_code
        data |= defined_data
        found = installed.debug_info(archive, linked)
        debug_files += found.files
        lacking += found.lacking
    shared = installed.linked_shared_objects(library)
    for shared_object in shared:
        found = installed.shared_debug_info(shared_object)
        debug_files += found.files
        lacking += found.lacking
    if lacking:
        log(f"no DWARF (data named by symbol): {_listed(lacking)}")
    return Installed(
        tuple(archives),
        frozenset(code),
        frozenset(data),
        tuple(debug_files),
        library.allocators,
        tuple(lacking),
        tuple(shared),
    )


def _listed(objects, shown: int = 8) -> str:
    more = f" and {len(objects) - shown} more" if len(objects) > shown else ""
    return ", ".join(objects[:shown]) + more


@dataclass(frozen=True)
class Program:
    """A library's test program built on this machine, and what its workers need."""

    path: Path
    plugin: Path
    symbols: ProgramSymbols
    trace_dir: Path
    sources: str


@dataclass(frozen=True)
class LibraryTarget:
    """A C library in user space (target.py), of the sources the submitting machine has:
    on a cluster worker, the manifest and sources at the same paths, compiled there."""

    library: Library
    sources: str  # the fingerprint of the manifest, adapter and sources
    settings: TraceSettings
    arguments: dict
    constants: dict
    batch: int = CLUSTER_BATCH

    def prepare(self, trace_dir: Path, log) -> Program:
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
        symbols = ProgramSymbols(
            program,
            library_objects(self.library, out),
            (adapter_object(self.library, out),),
            (self.library.adapter, *self.library.sources),
            installed_parts(self.library, program, log),
        )
        return Program(program, ensure_plugin(), symbols, trace_dir, found)

    def trace(self, prepared: Program, tests: list, jobs: int, on_record) -> int:
        stop = threading.Event()
        workers = [
            ProgramWorker(
                prepared.path,
                prepared.plugin,
                prepared.symbols,
                self.settings,
                self.arguments,
                self.constants,
                prepared.trace_dir,
                tests[k::jobs],
                prepared.trace_dir / f"proc{k}",
                on_record,
                stop,
            )
            for k in range(jobs)
        ]
        run_workers(workers, stop)
        return sum(w.restarts for w in workers)
