"""Names code and data of a library's static test program: functions and static data by
ELF symbol (fields by DWARF), heap lines by the allocation the harness recorded."""

from __future__ import annotations

import bisect
import json
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck.common.errors import UserError
from scalecheck.run.outcome import function_of
from scalecheck.run.user import dwarfnames, heapnames

LINE = 64


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
    ):
        """``sources``: the adapter's and the library's, whose DWARF in the program names
        data (the adapter's first: the library's own win a clash of names)."""
        self._program = program
        self._pc_names: dict[int, str] = {}
        functions, objects = _symbols(program, "STT_FUNC"), _symbols(program, "STT_OBJECT")
        self.library_data = {
            name for path in library_objects for _, _, name in _symbols(path, "STT_OBJECT")
        }
        # with -g: the field of a static variable at the line (buckets[1].head), and the
        # types of the adapter's variables
        self.fields = dwarfnames.FieldNames([program], list(sources))
        self.library_code = {
            name for path in library_objects for _, _, name in _symbols(path, "STT_FUNC")
        }
        self._functions, self._objects = functions, objects
        self._function_starts = [f[0] for f in functions]
        self._object_starts = [o[0] for o in objects]
        self.allocations: list = []  # (addr, size, site) of one test
        self.library_statics = [o for o in objects if o[2] in self.library_data]
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

    def data_namer(self, allocations: list, memory: dict[int, bytes]) -> heapnames.DataNamer:
        """Names one test's conflicting lines of the library down to the field, heap objects
        by the type a pointer in the snapshot ``memory`` gives them (docs/usertarget.md)."""
        return heapnames.DataNamer(
            self.fields, self.library_statics, allocations, memory, self.roots, self.function
        )

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

    def struct_page_frame(self, vaddr: int) -> None:
        """A user-space program holds no kernel page metadata."""
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
