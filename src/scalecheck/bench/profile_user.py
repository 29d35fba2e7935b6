"""Names a profiled program's user memory by the files and symbols mapped there: the guest's
profile_pages (tracer/guest/profile_pages.c) says, while the program runs, which process
had each guest-physical page mapped at which address (its /proc/PID/pagemap) and what its
/proc/PID/maps held then, and each process the allocation-site recorder is preloaded into
says the same of itself when it exits (tracer/common/page_owners.h); the host reads the
mapped files' ELF symbols and sections from its own file system (the guest's root is the
host's, read-only).

Names: `libc.so.6: _IO_2_1_stdout_` (a data symbol, from .symtab, else the exported
.dynsym), `lighttpd .bss` (a section when no symbol holds the address), `[heap] of
smtp-sink`, `[stack] of make`, `anonymous memory of cc1` (thread stacks, malloc's arenas,
other anonymous mappings), `FILE (mapped file)` for a writable mapping of a file that is
no ELF.
"""

import bisect
import functools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck.run.user.shared_objects import object_symbols

PAGE = 4096
# The lines of a page map's file (tracer/common/page_owners.c): "P pid comm", the process's
# maps lines, then "G frame address" for each of its pages (hexadecimal).
MAPS_LINE = re.compile(r"([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \d+(.*)$")
GRANTED = re.compile(r"G ([0-9a-f]+) ([0-9a-f]+)$")
HEAP = "[heap]"
# Names that say only what kind of memory a line is in, not what data (the share of
# transfers beyond them is the profile's named share).
UNSPECIFIC = ("[heap] of ", "anonymous memory of ", "unmapped memory of ")
# Names that say no more than the memory's kind (datanames' page kinds, and the user
# memory no page map covered).
MEMORY = "memory"  # user memory nothing names
BARE_NAMES = ("page", "vmalloc", "unknown", "anon page", "page cache", MEMORY, "")
# A name found by the address alone (no page map saw the frame there).
BY_ADDRESS = " (by address)"
# A line of the guest's own processes (the run script, the page map, the watcher): the
# tool's, counted apart from the program's share (profile_heap.mark_harness).
HARNESS = " (the guest's harness)"


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    offset: int
    path: str


@dataclass(frozen=True)
class ProcessMaps:
    comm: str
    mappings: tuple[Mapping, ...]
    pid: int = 0

    @functools.cached_property
    def starts(self) -> list[int]:
        return [m.start for m in self.mappings]

    def holding(self, vaddr: int) -> int | None:
        """The index of the mapping that holds vaddr."""
        i = bisect.bisect_right(self.starts, vaddr) - 1
        return i if i >= 0 and vaddr < self.mappings[i].end else None

    def load_bias(self, path: str) -> int | None:
        """Where the file's first loadable segment was mapped, less its address in the file."""
        first = next((m for m in self.mappings if m.path == path and m.offset == 0), None)
        sections = elf_sections(path)
        return None if first is None or sections is None else first.start - sections[0]


def parse_maps(comm: str, lines: list[str], pid: int = 0) -> ProcessMaps:
    """A process's /proc/PID/maps lines (one cut short, a writer killed mid-line, is left
    out)."""
    mappings = []
    for line in lines:
        found = MAPS_LINE.match(line)
        if found:
            start, end, offset, path = found.groups()
            mappings.append(Mapping(int(start, 16), int(end, 16), int(offset, 16), path.strip()))
    return ProcessMaps(comm, tuple(sorted(mappings, key=lambda m: m.start)), pid)


@functools.lru_cache(maxsize=256)
def elf_sections(path: str) -> tuple | None:
    """(first loadable segment's page address, sorted (address, size, name) of allocated
    sections) of an ELF file; None when the path is no readable ELF."""
    try:
        with open(path, "rb") as file:
            elf = ELFFile(file)
            loads = [s["p_vaddr"] for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
            sections = sorted(
                (s["sh_addr"], s["sh_size"], s.name)
                for s in elf.iter_sections()
                if s["sh_flags"] & 2 and s["sh_size"]  # SHF_ALLOC
            )
    except (OSError, ELFError):
        return None
    return (min(loads) & ~(PAGE - 1), tuple(sections)) if loads else None


def elf_data_name(path: str, address: int) -> str | None:
    """The data symbol, else the section, at an address of the ELF file (as it links)."""
    name = Path(path).name
    symbols = object_symbols(Path(path), "STT_OBJECT")
    i = bisect.bisect_right(symbols, (address, float("inf"))) - 1
    if i >= 0 and address < symbols[i][0] + max(symbols[i][1], 1):
        return f"{name}: {symbols[i][2]}"
    sections = elf_sections(path)
    for start, size, section in sections[1] if sections else ():
        if start <= address < start + size:
            return f"{name} {section}"
    return None


def user_data_name(maps: ProcessMaps, vaddr: int) -> str:
    """What a process had at vaddr: a file's data, its .bss beyond the file (the anonymous
    mapping right after the file's last one), a named region, or anonymous memory."""
    index = maps.holding(vaddr)
    if index is None:
        return f"unmapped memory of {maps.comm}"
    mapping = maps.mappings[index]
    path = mapping.path
    if path in ("", HEAP) and index and maps.mappings[index - 1].end == mapping.start:
        # a file's .bss beyond its last page: anonymous memory (the loader's brk), or the
        # heap's when the heap starts right after it (no address randomisation: the kernel
        # merges the two, and /proc/PID/maps calls both [heap])
        path = maps.mappings[index - 1].path
    if path.startswith("/"):
        bias = maps.load_bias(path)
        found = elf_data_name(path, vaddr - bias) if bias is not None else None
        if found:
            return found
        if mapping.path == path:
            kind = "data segment" if elf_sections(path) else "(mapped file)"
            return f"{Path(path).name} {kind}"
    if mapping.path.startswith("["):
        return f"{mapping.path} of {maps.comm}"
    return f"anonymous memory of {maps.comm}"


def read_page_map(*paths: Path) -> tuple[dict[int, Counter], list[ProcessMaps]]:
    """The guest frame -> how often each (process maps, page address) was seen holding it (a
    frame may change hands while the program runs: a process exits and another gets it),
    and every process maps seen, from the page map's file and the processes' own at exit."""
    seen: dict[int, Counter] = {}
    blocks: list[ProcessMaps] = []
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        maps: ProcessMaps | None = None
        pid, comm, lines = 0, "", list[str]()
        for line in text.splitlines():
            if line.startswith("P "):
                _, number, comm = [*line.split(maxsplit=2), ""][:3]
                maps, pid, lines = None, int(number), []
            elif line.startswith("G "):
                if maps is None:
                    maps = parse_maps(comm, lines, pid)
                    blocks.append(maps)
                granted = GRANTED.match(line)  # (none: a line cut short)
                if granted:
                    frame, vaddr = (int(x, 16) for x in granted.groups())
                    seen.setdefault(frame, Counter())[(maps, vaddr)] += 1
            elif line:
                lines.append(line)
    return seen, blocks


class UserPages:
    """Names lines of guest-physical memory that was a user page while the program ran:
    by the process that had the frame mapped, else (a process that lived between two of the
    map's rounds) by what the processes seen had at the line's address, when two or more
    programs had it and all had the same data there (address randomisation is off: a
    program's files load at the same addresses in every process), marked `(by address)`."""

    def __init__(self, *paths: Path):
        self.owners, blocks = read_page_map(*paths)
        self.distinct = list(dict.fromkeys(blocks))
        # each process's last maps seen: those it wrote at exit (after any it wrote before
        # an execve, whose program's were different), else the page map's last round
        self.latest = {maps.pid: maps for maps in blocks}
        self._names: dict[tuple, str] = {}
        self._by_address: dict[int, str | None] = {}

    def owner(self, paddr: int, vaddr: int | None = None) -> tuple[ProcessMaps, int] | None:
        """The process that had the line at paddr, and where: its frame's owner seen most
        often, or, given the user address it was touched at, the most frequent owner that
        had it there, else the one process among its owners with memory at that address
        (the frame moved within it: a block grown by mremap, a heap trimmed and grown), or
        its one owner when none had (a block mapped there after its last map seen: named
        by the process's allocation records, profile_heap); None when several could have
        (the frame changed hands)."""
        owners = self.owners.get(paddr // PAGE)
        if not owners:
            return None
        fitting = [owner for owner in owners if vaddr is None or owner[1] == vaddr & ~(PAGE - 1)]
        if fitting or vaddr is None:
            maps, page = max(fitting, key=owners.__getitem__)
            return maps, page + paddr % PAGE
        holding = [owner for owner in owners if owner[0].holding(vaddr) is not None]
        if not holding and len({maps.pid for maps, _ in owners}) == 1:
            holding = list(owners)  # mapped there after every map seen (unmapped memory of P)
        if len({maps.pid for maps, _ in holding}) != 1:
            return None
        return max(holding, key=owners.__getitem__)[0], vaddr

    def name(self, paddr: int, vaddr: int | None = None) -> str | None:
        """The name of the line at paddr from its owner (`owner`)."""
        found = self.owner(paddr, vaddr)
        if found is None:
            return None
        key = (id(found[0]), found[1])
        if key not in self._names:
            self._names[key] = user_data_name(*found)
        return self._names[key]

    def name_by_address(self, vaddr: int) -> str | None:
        if vaddr not in self._by_address:
            holders = [maps for maps in self.distinct if maps.holding(vaddr) is not None]
            found = {user_data_name(maps, vaddr) for maps in holders}
            agreed = len(found) == 1 and len({maps.comm for maps in holders}) >= 2
            name = found.pop() if agreed else ""
            self._by_address[vaddr] = f"{name}{BY_ADDRESS}" if is_specific(name) else None
        return self._by_address[vaddr]


def is_specific(name: str) -> bool:
    """Whether a line's name says what data it is, beyond the kind of memory."""
    bare = name.removeprefix("kernel: ").removeprefix("user: ").removeprefix("page of ")
    return not bare.startswith(UNSPECIFIC) and bare.split(" (")[0] not in BARE_NAMES
