"""Names a profiled program's heap lines by the blocks that held them: the program and its
children run with the allocation-site recorder preloaded (tracer/sharing/alloc_sites.c),
each process writing its blocks (address, size, the return address into the function that
asked, TSC) to a file of its own, named by its pid, when it exits; a line of `[heap] of P`
(or of P's anonymous memory: malloc's thread arenas, its large blocks) becomes
`heap: 64-byte block from smtp_get (smtp-source)`, the site resolved through the process's
page map and the ELF symbols of the file mapped there. The recorder also records the
anonymous mappings a program asks mmap for itself (an allocator of its own: GCC's
garbage-collected pages): a line there is `mapping: 2097152-byte anonymous mmap from
_Z18ggc_internal_allocmPFvPvEmm (cc1)`.

The plugin does not time its touches, so a line several blocks held in turn is named by
the one that held it longest: a block given back at once (a scratch buffer) does not name
the line a long-lived one then held. A process killed without running its exit handlers
(SIGKILL, or a SIGTERM it handles and then dies of) wrote nothing: its heap lines stay
`[heap] of P (no record)`. Anonymous memory only the dynamic loader's code touched is its
own data (mapped before the recorder runs). The guest's own processes' lines (the run
script's `harness` file) are marked as the harness's, counted apart from the program's.
"""

import bisect
from pathlib import Path

from scalecheck.bench.profile_lines import is_kernel, representative
from scalecheck.bench.profile_user import BY_ADDRESS, HARNESS, MEMORY, ProcessMaps, UserPages
from scalecheck.bench.sharing import read_allocations
from scalecheck.binding import abi
from scalecheck.run.linux.kernel_symbols import USER_END
from scalecheck.run.user.shared_objects import object_symbols

# The directory (in the run's) the recorder writes a file per process to.
ALLOCATIONS = "allocations"
LINE_BYTES = 64
HEAP, ANONYMOUS, UNMAPPED = "[heap] of ", "anonymous memory of ", "unmapped memory of "
NO_RECORD = " (no record)"
# The recorder's mark on the site of an anonymous mapping the program made itself.
MAPPED = abi.value("SITE_MAPPED")
# The dynamic loader: the anonymous memory it maps for itself before any preloaded library
# runs (link maps, symbol lookup's data), touched by its code alone.
LOADER = "ld-linux-x86-64.so.2"


def held_blocks(records: list) -> list[tuple[int, int, int, int]]:
    """Each block (address, size, site, TSC ticks held), by address; one never given back
    is held until the process's last record."""
    ordered = sorted(records, key=lambda record: record[3])
    last = ordered[-1][3] if ordered else 0
    live: dict[int, tuple[int, int, int]] = {}
    blocks = []
    for addr, size, site, tsc in ordered:
        if site:
            live[addr] = (size, site, tsc)
        elif addr in live:
            size, site, start = live.pop(addr)
            blocks.append((addr, size, site, tsc - start))
    blocks += [(addr, size, site, last - start) for addr, (size, site, start) in live.items()]
    return sorted(blocks)


def site_name(maps: ProcessMaps, site: int) -> str:
    """The function a return address is in, and its file's name, through the process's maps."""
    index = maps.holding(site - 1)
    path = maps.mappings[index].path if index is not None else ""
    bias = maps.load_bias(path) if path.startswith("/") else None
    if bias is None:
        return f"{site:#x}"
    functions = object_symbols(Path(path), "STT_FUNC")
    i = bisect.bisect_right(functions, (site - 1 - bias, float("inf"))) - 1
    known = i >= 0 and site - 1 - bias < functions[i][0] + max(functions[i][1], 1)
    return f"{functions[i][2] if known else hex(site - bias)} ({Path(path).name})"


def longest_blocks(lines: list[int], blocks: list) -> dict[int, tuple[int, int]]:
    """Each line address's (size, site) of the block that held it longest (none: unnamed)."""
    starts = sorted(set(lines))
    longest: dict[int, tuple] = {}
    for addr, size, site, held in blocks:
        first = bisect.bisect_right(starts, addr - LINE_BYTES)
        for line in starts[first : bisect.bisect_left(starts, addr + max(size, 1))]:
            if line not in longest or (held, -size) > longest[line][:2]:
                longest[line] = (held, -size, site)
    return {line: (-size, site) for line, (_, size, site) in longest.items()}


def block_names(maps: ProcessMaps, lines: list[int], blocks: list) -> dict[int, str]:
    """Each line address's name by the block that held it longest (none: unnamed)."""
    return {
        line: block_name(block_site(maps, site), [size])
        for line, (size, site) in longest_blocks(lines, blocks).items()
    }


def block_site(maps: ProcessMaps, site: int) -> tuple[bool, str]:
    """Whether a block is an anonymous mapping the program made itself, and its caller."""
    return bool(site & MAPPED), site_name(maps, site & ~MAPPED)


def block_name(site: tuple[bool, str], sizes: list[int]) -> str:
    """A block's name, a heap block or a mapping, with its size (several blocks of one site
    that processes held at one address: the range of their sizes)."""
    low, high = min(sizes), max(sizes)
    size = f"{low}" if low == high else f"{low}- to {high}"
    mapped, caller = site
    if mapped:
        return f"mapping: {size}-byte anonymous mmap from {caller}"
    return f"heap: {size}-byte block from {caller}"


def name_heap_lines(names: dict, contended: dict, pages: UserPages, directory: Path) -> None:
    """Renames the contended lines (paddr -> name) of a process's heap, anonymous memory or
    memory its maps seen did not hold by their blocks; then the user lines no process seen
    held by the one process whose records hold a block there (name_by_address)."""
    by_process: dict[ProcessMaps, dict[int, int]] = {}
    for paddr, name in names.items():
        touches = contended[paddr]
        owner = pages.owner(paddr, None if is_kernel(touches) else representative(touches).vaddr)
        if (HEAP in name or ANONYMOUS in name or UNMAPPED in name) and owner:
            by_process.setdefault(owner[0], {})[paddr] = owner[1] & -LINE_BYTES
    blocks: dict[int, list] = {}
    for maps, lines in by_process.items():
        path = directory / str(maps.pid)
        if maps.pid not in blocks:
            blocks[maps.pid] = held_blocks(read_allocations(path))
        found = block_names(maps, list(lines.values()), blocks[maps.pid])
        for paddr, line in lines.items():
            if line in found:
                names[paddr] = names[paddr].replace(f"[heap] of {maps.comm}", found[line])
                for kind in (ANONYMOUS, UNMAPPED):
                    names[paddr] = names[paddr].replace(f"{kind}{maps.comm}", found[line])
            elif not path.exists() and HEAP in names[paddr]:
                names[paddr] += NO_RECORD
    name_by_address(names, contended, pages, directory, blocks)
    name_loader_memory(names, contended, pages)


def name_loader_memory(names: dict, contended: dict, pages: UserPages) -> None:
    """Names a line of P's anonymous memory that no block named and only the dynamic
    loader's code touched (each user access's code, through P's maps: LOADER's; none
    unknown) as the loader's own data: it maps it for itself, before the recorder runs."""
    for paddr, name in names.items():
        touches = contended[paddr]
        if is_kernel(touches) or not name.startswith(f"user: {ANONYMOUS}"):
            continue
        owner = pages.owner(paddr, representative(touches).vaddr)
        pcs = {site.pc for _, _, line in touches if line.vaddr < USER_END for site in line.sites}
        if owner and pcs and all(code_file(owner[0], pc) == LOADER for pc in pcs):
            names[paddr] = (
                f"user: {LOADER}'s own data of {owner[0].comm} (only its code touched it)"
            )


def code_file(maps: ProcessMaps, pc: int) -> str:
    """The name of the file mapped at pc ("": none, or pc 0: code beyond the plugin's limit)."""
    index = maps.holding(pc) if pc else None
    return Path(maps.mappings[index].path).name if index is not None else ""


def name_by_address(
    names: dict, contended: dict, pages: UserPages, directory: Path, blocks: dict
) -> None:
    """Names a user line that no process seen held at the address it was touched at
    (`unmapped memory of P`: the frame was P's, then another's between two rounds of the
    page map, e.g. a heap trimmed and its page given to another process's mmap'd block;
    `memory`: a frame the page map never saw) by the block there, marked `(by address)`,
    when the blocks the processes' records hold at that address are all from one site (one
    process; runs of one program; two programs calling one library's allocator, as
    postfix's smtp-sink and smtp-source call its wrapper mymalloc for their ~128 KB blocks:
    sizes as a range) and no other process seen had memory there (address randomisation is off:
    processes share addresses). Which of those processes held it is not known: the frame
    changed hands between two rounds, and the plugin does not time its touches."""
    lines = {
        paddr: representative(contended[paddr]).vaddr & -LINE_BYTES
        for paddr, name in names.items()
        if not is_kernel(contended[paddr]) and (UNMAPPED in name or name == f"user: {MEMORY}")
    }
    holders: dict[int, list[tuple[int, tuple[bool, str], int]]] = {}
    for maps in pages.latest.values() if lines else ():
        path = directory / str(maps.pid)
        if not path.exists():
            continue
        if maps.pid not in blocks:
            blocks[maps.pid] = held_blocks(read_allocations(path))
        for line, (size, site) in longest_blocks(list(lines.values()), blocks[maps.pid]).items():
            holders.setdefault(line, []).append((maps.pid, block_site(maps, site), size))
    for paddr, line in lines.items():
        found = holders.get(line, [])
        if len({site for _, site, _ in found}) != 1:
            continue
        mapped = {maps.pid for maps in pages.distinct if maps.holding(line) is not None}
        if mapped <= {pid for pid, _, _ in found}:
            name = block_name(found[0][1], [size for _, _, size in found])
            names[paddr] = f"user: {name}{BY_ADDRESS}"


def read_harness(path: Path) -> set[int]:
    """The pids the run script wrote of the guest's own processes (none: a run without)."""
    try:
        return {int(word) for word in path.read_text().split() if word.isdigit()}
    except OSError:
        return set()


def mark_harness(names: dict, contended: dict, pages: UserPages, harness: set[int]) -> None:
    """Marks (HARNESS) the lines of the guest's own processes' memory: a user line named by
    a harness process's maps, a kernel line on a page of one (`kernel: page of ...`), and a
    user line no process seen held whose every user-code access ran the harness's code
    (only harness processes mapped a file there: the guest's busybox is static, at fixed
    addresses)."""
    for paddr, name in names.items():
        touches = contended[paddr]
        kernel = is_kernel(touches)
        if name.endswith((BY_ADDRESS, HARNESS)) or (
            kernel and not name.startswith("kernel: page of ")
        ):
            continue
        owner = pages.owner(paddr, None if kernel else representative(touches).vaddr)
        if (owner and owner[0].pid in harness) or (
            name == f"user: {MEMORY}" and ran_only_harness_code(touches, pages, harness)
        ):
            names[paddr] = name + HARNESS


def ran_only_harness_code(touches: list, pages: UserPages, harness: set[int]) -> bool:
    """Whether the user code that touched the line is, at each of its addresses, a file
    (any: the guest's init runs its own busybox) mapped by harness processes only, and by
    at least one."""
    pcs = {site.pc for _, _, line in touches if line.vaddr < USER_END for site in line.sites}
    if not pcs or 0 in pcs:  # 0: accesses beyond the plugin's limit, code unknown
        return False
    for pc in pcs:
        holders = [(maps, maps.holding(pc)) for maps in pages.distinct]
        files = [maps.mappings[index].path for maps, index in holders if index is not None]
        pids = {maps.pid for maps, index in holders if index is not None}
        if not files or not all(path.startswith("/") for path in files) or not pids <= harness:
            return False
    return True
