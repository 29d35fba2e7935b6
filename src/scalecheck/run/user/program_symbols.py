"""Names code and data of a library's static test program: functions and static data by
ELF symbol (fields by DWARF), heap lines by the allocation the harness recorded."""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck.common.errors import UserError
from scalecheck.run.outcome import function_of
from scalecheck.run.regions import disjoint_spans
from scalecheck.run.user import dwarfnames, heapnames
from scalecheck.run.user.shared_objects import object_symbols

LINE = 64
# Allocation wrappers of common libraries (GLib, GNU's x-functions, libc's copies): a
# block one of them allocated is named by its caller. A manifest adds its own.
DEFAULT_ALLOCATORS = (
    "g_malloc",
    "g_malloc0",
    "g_realloc",
    "g_try_malloc",
    "g_try_malloc0",
    "g_try_realloc",
    "g_malloc_n",
    "g_malloc0_n",
    "g_realloc_n",
    "g_try_malloc_n",
    "g_try_malloc0_n",
    "g_try_realloc_n",
    "g_slice_alloc",
    "g_slice_alloc0",
    "g_slice_copy",
    "g_memdup",
    "g_memdup2",
    "g_strdup",
    "g_strndup",
    "g_aligned_alloc",
    "g_aligned_alloc0",
    "xmalloc",
    "xcalloc",
    "xrealloc",
    "xzalloc",
    "xstrdup",
    "xmemdup",
    "strdup",
    "strndup",
    "__strdup",
    "__strndup",
)


@dataclass(frozen=True)
class Installed:
    """What the program links of installed libraries (installed.py): the functions and data
    their archives define, debug files found for them, and the allocation wrappers the
    manifest names."""

    archives: tuple[Path, ...] = ()
    code: frozenset[str] = frozenset()
    data: frozenset[str] = frozenset()
    debug_files: tuple[Path, ...] = ()
    allocators: tuple[str, ...] = ()
    lacking_dwarf: tuple[str, ...] = ()  # archive(member) of no DWARF, here or separate
    shared: tuple[Path, ...] = ()  # the library's shared objects (link = "shared")


def _overlapping(starts: list, entries: list, line: int) -> list:
    """The (start, size, ...) entries, sorted by start, that share bytes with a line."""
    first = max(bisect.bisect_right(starts, line) - 1, 0)
    end = bisect.bisect_left(starts, line + LINE)
    return [e for e in entries[first:end] if e[0] < line + LINE and line < e[0] + max(e[1], 1)]


class ProgramSymbols:
    """Names code and data of the static test program: functions and static data by ELF
    symbol, heap lines by the allocation site and offset the harness recorded."""

    def __init__(
        self,
        program: Path,
        library_objects: list[Path],
        adapter_objects: tuple[Path, ...] = (),
        sources: tuple[Path, ...] = (),
        installed: Installed | None = None,
    ):
        """``sources``: the adapter's and the library's, whose DWARF in the program names
        data (the adapter's first: the library's own win a clash of names); ``installed``:
        the installed libraries linked in (their DWARF is in the program or in debug
        files, of units of sources not known here: every unit is read)."""
        installed = installed or Installed()
        self.lacking_dwarf = installed.lacking_dwarf
        self._program = program
        self._pc_names: dict[int, str] = {}
        self._pc_functions: dict[int, str] = {}
        functions, objects = _symbols(program, "STT_FUNC"), _symbols(program, "STT_OBJECT")
        self.library_data = installed.data | {
            name for path in library_objects for _, _, name in _symbols(path, "STT_OBJECT")
        }
        # with -g: the field of a static variable at the line (buckets[1].head), and the
        # types of the adapter's variables
        self.fields = dwarfnames.cached_field_names(
            [program, *installed.debug_files],
            None if installed.archives or installed.shared else list(sources),
            program.with_name(f"{program.name}.fields.pickle"),
        )
        self.library_code = installed.code | {
            name for path in library_objects for _, _, name in _symbols(path, "STT_FUNC")
        }
        self.shared_objects = installed.shared
        for path in installed.shared:
            self.library_code |= {name for _, _, name in object_symbols(path, "STT_FUNC")}
            self.library_data |= {name for _, _, name in object_symbols(path, "STT_OBJECT")}
        self.allocator_ranges = _allocator_ranges(
            functions, installed, set(DEFAULT_ALLOCATORS) | set(installed.allocators)
        )
        self._identity: tuple = (program,)
        self._loaded: list[tuple[int, str]] = []  # (load address, file) of shared objects
        self._functions, self._objects = functions, objects
        self._function_starts = [f[0] for f in functions]
        self._object_starts = [o[0] for o in objects]
        self.allocations: list = []  # (addr, size, site) of one test
        # The statics the harness snapshots after a test: the roots of heap typing, the
        # library's and the adapter's (the handles it keeps: `struct idtab *table`), each
        # of the size its DWARF type says (not a namesake of libc's).
        adapter_data = {
            name for path in adapter_objects for _, _, name in _symbols(path, "STT_OBJECT")
        }
        self.roots = [
            (start, size, name)
            for start, size, name in objects
            if (name in self.library_data or name in adapter_data)
            and self.fields.holds_pointers(name)
            and (layout := self.fields.layout(name)) is not None
            and layout.size == size
        ]
        self.snapshot_ranges = [(start, size) for start, size, _ in self.roots]
        self._alloc_starts: list = []

    def with_allocations(self, allocations: list) -> ProgramSymbols:
        """The same names, with one test's heap allocations."""
        named = object.__new__(ProgramSymbols)
        named.__dict__.update(self.__dict__)
        named.allocations = sorted(allocations)
        named._alloc_starts = [a[0] for a in named.allocations]
        return named

    def loaded(self, link_map: tuple[tuple[int, Path], ...]) -> ProgramSymbols:
        """The same names, with the code and data of the shared objects one run of the
        program loaded at these addresses (shared_objects.read_link_map)."""
        named = object.__new__(ProgramSymbols)
        named.__dict__.update(self.__dict__)
        for base, path in link_map:
            for kind, into in (("STT_FUNC", "_functions"), ("STT_OBJECT", "_objects")):
                shifted = [(base + at, size, name) for at, size, name in object_symbols(path, kind)]
                setattr(named, into, sorted([*getattr(named, into), *shifted]))
        named._function_starts = [f[0] for f in named._functions]
        named._object_starts = [o[0] for o in named._objects]
        named._pc_names, named._pc_functions = {}, {}
        named._loaded = sorted((base, path.name) for base, path in link_map)
        named._identity = (self._program, link_map)
        return named

    def data_namer(self, allocations: list, memory: Mapping[int, bytes]) -> heapnames.DataNamer:
        """Names one test's conflicting lines of the library down to the field, heap objects
        by the type a pointer in the snapshot ``memory`` gives them (docs/usertarget.md)."""
        return heapnames.DataNamer(
            self.fields, self._objects, allocations, memory, self.roots, self.function
        )

    def pc_name(self, pc: int) -> str:
        """function+offset of a code address (the function that holds it)."""
        name = self._pc_names.get(pc)
        if name is None:
            i = bisect.bisect_right(self._function_starts, pc) - 1
            start, size, function = self._functions[i] if i >= 0 else (0, 0, "")
            if i < 0 or pc >= start + max(size, 1):
                name = self._object_offset(pc)
            else:
                name = f"{function}+{pc - start:#x}" if pc > start else function
            self._pc_names[pc] = name
        return name

    def _object_offset(self, pc: int) -> str:
        """A code address no symbol holds (a shared object's static function, without its
        debug file): ``libck.so.0.7.1@0x3b2f``, the same in every run; else hex."""
        i = bisect.bisect_right(self._loaded, (pc, chr(0x10FFFF))) - 1
        return f"{self._loaded[i][1]}@{pc - self._loaded[i][0]:#x}" if i >= 0 else hex(pc)

    def function(self, pc: int) -> str:
        function = self._pc_functions.get(pc)
        if function is None:
            function = self._pc_functions[pc] = function_of(self.pc_name(pc))
        return function

    def code_spans(self, names) -> tuple:
        """Sorted, disjoint [start, end) pairs holding every PC that ``function`` names as
        one of ``names``."""
        return disjoint_spans(
            (start, start + max(size, 1)) for start, size, name in self._functions if name in names
        )

    def defines_any(self, names) -> bool:
        """Whether a function of the program (or of its loaded shared objects) has any of
        these names: ``function`` can name no code otherwise."""
        return any(name in names for _, _, name in self._functions)

    # A user-space program holds no kernel page metadata: no line is a page table's.
    holds_page_tables = False

    def struct_page_frame(self, vaddr: int) -> None:
        return None

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
            # The offset of the line's first byte in the block (0 for the line the block
            # starts in, wherever on it): the data's own name (DataNamer) is the exact one.
            return "heap", f"{self.function(site)}:alloc({size})+{max(vaddr - start, 0):#x}"
        return "unknown", ""

    # One test's view (with_allocations) names code exactly as the program's symbols do:
    # views compare equal, so what outcome caches per symbols (sets of PCs by function)
    # is computed once per program, not once per test.
    def __hash__(self):
        return hash(self._identity)

    def __eq__(self, other):
        return isinstance(other, ProgramSymbols) and other._identity == self._identity


def _allocator_ranges(functions: list, installed: Installed, wrappers: set[str]) -> list:
    """(start, end, file) of the allocation wrappers' code (g_malloc, the manifest's
    `allocators`): a block is named by the first caller outside them (the harness looks
    for it, tracer/user/trace_alloc.c). ``file``: "" for the program's own code, else the
    shared object the range is an offset into. GCC's clones count (x.constprop.0)."""
    shared = [(str(path), object_symbols(path, "STT_FUNC")) for path in installed.shared]
    objects = [("", functions), *shared]
    return [
        (start, start + size, file)
        for file, symbols in objects
        for start, size, name in symbols
        if name.split(".")[0] in wrappers and size
    ]


def program_functions(program: Path) -> list:
    """Sorted (address, size, name) of a program's functions."""
    return _symbols(program, "STT_FUNC")


def program_data(program: Path) -> list:
    """Sorted (address, size, name) of a program's data symbols."""
    return _symbols(program, "STT_OBJECT")


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
