"""Names the data of a conflicting cache line: `files_struct.file_lock`, `dentry.d_lockref`,
`runqueues.nr_running`, `kmalloc-192+0x40`, `page cache`, ...

- heap: the host reads the guest's own `struct page` / `struct slab` of the line's frame
  (kernelmem: from QEMU's RAM file, while the guest runs), which gives the slab cache and
  so the object's start; the cache's struct type comes from slab_types.txt (or a struct of
  the cache's own name) and the fields from the kernel's BTF. Objects of caches without a
  type (kmalloc-*) are named by the typed pointer that leads to them from the test's
  other objects (`fdtable.open_fds[]`). Frames that are not slab pages are named by what
  their `struct page` says: page cache, anonymous page, page;
- `struct page` lines: the struct page (or struct slab, for a slab's head page) field;
- static and per-cpu data: the symbol, plus the field where the variable's type is known
  (BTF for per-cpu variables, static_types.txt for others).

Only conflicting lines are named, once per test, when its record is written (the last
repeat's lines). The slab page is read then, while the guest runs the next tests; a slab
page outlives its objects (SLUB keeps it while the cache holds partial slabs), and a frame
that is no longer a slab is named by what it is now ("page"), never guessed.
"""

import bisect
import struct
import time
from dataclasses import dataclass

from scalecheck.run.linux.btf import AGGREGATES, Types
from scalecheck.run.linux.kernel_layout import Layout
from scalecheck.run.linux.kernel_symbols import DIRECT_MAP, VMALLOC, VMEMMAP
from scalecheck.run.linux.kernelmem import PAGE_SHIFT, KernelMemory
from scalecheck.run.linux.type_tables import TypeTables
from scalecheck.run.naming import LINE_BYTES, join_names, mask_bytes

PAGE_MAPPING_ANON = 1
# Structs followed one pointer further when looking for what points to an untyped object.
MAX_FOLLOWED = 256
_POINTER = struct.Struct("<Q")

# Names of data that is not an object of a known type.
KIND_NAMES = {"user": "user memory", "pagetable": "page table", "unknown": ""}


def byte_ranges(offsets) -> list[tuple[int, int]]:
    """Sorted byte offsets -> [start, end) runs."""
    runs: list[list[int]] = []
    for off in sorted(offsets):
        if runs and runs[-1][1] == off:
            runs[-1][1] = off + 1
        else:
            runs.append([off, off + 1])
    return [(start, end) for start, end in runs]


@dataclass(frozen=True)
class SlabCache:
    name: str
    size: int  # object stride in the slab
    object_size: int
    red_left_pad: int
    type_id: int | None  # the objects' struct type, when known
    label: str  # the struct's name, or the cache's when the type is not known


class DataNamer:
    """Names conflicting lines of one boot. ``types`` None (a kernel without BTF) leaves
    symbol names only; ``kernel`` None (no guest memory) leaves heap data unnamed."""

    def __init__(
        self,
        symbols,
        types: Types | None,
        tables: TypeTables,
        kernel: KernelMemory | None,
    ):
        self.symbols, self.types, self.static_types = symbols, types, tables.statics
        layout = Layout.of(types) if types else None
        self.slabs = (
            _Slabs(kernel, types, layout, tables.slabs) if kernel and types and layout else None
        )
        self.kernel = kernel
        self.lines, self.seconds = 0, 0.0  # what naming cost in this boot
        self.named = 0  # of those lines, how many got a name

    def close(self):
        if self.kernel:
            self.kernel.memory.close()

    def name(self, kind: str, vaddr: int, paddr: int, mask: int) -> str:
        """The data name of the bytes ``mask`` of the line at vaddr (guest-physical paddr)."""
        return self.name_lines([(kind, vaddr, paddr, mask)])[0]

    def stable_names(self, lines: list[tuple[str, int, int, int]]) -> list[str]:
        """Names that do not depend on which pointers still lead to the data: an object of
        a cache without a type by cache and offset (`kmalloc-cg-512+0x10`), not by the
        pointer of an owner that an earlier repeat may have freed. What repeats are
        compared by (naming.name_data)."""
        return self.name_lines(lines, follow_pointers=False)

    def name_lines(
        self, lines: list[tuple[str, int, int, int]], follow_pointers: bool = True
    ) -> list[str]:
        """Names of one test's conflicting lines, each (kind, vaddr, paddr, mask). Objects
        of caches without a type (kmalloc-*) are looked for behind the pointers of the
        typed objects among these lines: `fdtable.open_fds[]`, `super_block.s_inodes`."""
        started = time.perf_counter()
        slabs = self.slabs
        located: dict[int, list | str] = {}
        for i, (kind, vaddr, paddr, mask) in enumerate(lines):
            if slabs and kind == "heap" and DIRECT_MAP[0] <= vaddr < DIRECT_MAP[1]:
                located[i] = slabs.objects(paddr, _offsets(mask))
        roots = {
            base: cache.type_id
            for objects in located.values()
            if isinstance(objects, list)
            for cache, base, _ in objects
            if cache.type_id is not None
        }
        names = []
        pointers = None
        for i, line in enumerate(lines):
            objects = located.get(i)
            if slabs is None or objects is None:
                names.append(self._name(*line))
            elif isinstance(objects, str):
                names.append(objects)
            else:
                if (
                    follow_pointers
                    and pointers is None
                    and any(c.type_id is None for c, _, _ in objects)
                ):
                    pointers = slabs.pointer_index(roots)
                names.append(
                    join_names(
                        slabs.object_name(cache, address, offsets, pointers)
                        for cache, address, offsets in objects
                    )
                )
        self.lines += len(lines)
        self.named += sum(1 for name in names if name)
        self.seconds += time.perf_counter() - started
        return names

    def _name(self, kind: str, vaddr: int, paddr: int, mask: int) -> str:
        """The name of a line that is not a slab object's."""
        if kind in KIND_NAMES:
            return KIND_NAMES[kind]
        offsets = _offsets(mask)
        if kind in ("static", "percpu"):
            return self._variables(vaddr, offsets)
        if VMALLOC[0] <= vaddr < VMALLOC[1]:
            return "vmalloc"
        if VMEMMAP[0] <= vaddr < VMEMMAP[1]:
            return self.slabs.struct_page(vaddr, offsets) if self.slabs else "struct page"
        return ""

    def _variables(self, vaddr: int, offsets: list[int]) -> str:
        by_symbol: dict[str, list[int]] = {}
        for i in offsets:
            found = self.symbols.variable(vaddr + i)
            if found:
                by_symbol.setdefault(found[0], []).append(found[1])
        return join_names(
            typed_name(self.types, self._variable_type(sym, offs), sym, offs)
            for sym, offs in by_symbol.items()
        )

    def _variable_type(self, symbol: str, offsets: list[int]) -> int | None:
        """BTF's type of the variable, else static_types.txt's when it covers the bytes."""
        if self.types is None:
            return None
        type_id = self.types.var_type(symbol)
        if type_id is None and symbol in self.static_types:
            type_id = self.types.struct(self.static_types[symbol])
            if type_id is not None and max(offsets) >= self.types.size(type_id):
                type_id = None  # the table does not fit this kernel's variable
        return type_id


class PointerIndex:
    """Pointers (target, struct.field, type pointed to), searchable by target."""

    def __init__(self, entries: list[tuple[int, str, int]]):
        self.entries = sorted(entries)
        self.targets = [target for target, _, _ in self.entries]

    def closest_below(self, start: int, at: int) -> tuple[int, str, int] | None:
        """The pointer to the highest address in [start, at]."""
        i = bisect.bisect_right(self.targets, at) - 1
        return self.entries[i] if i >= 0 and self.targets[i] >= start else None


def _offsets(mask: int) -> list[int]:
    return mask_bytes(mask) or list(range(LINE_BYTES))


def typed_name(types: Types | None, type_id: int | None, label: str, offsets: list[int]) -> str:
    """The fields of ``label`` (of type ``type_id``) at byte offsets, or label+0xOFF."""
    ranges = byte_ranges(offsets)
    if type_id is None or types is None:
        start = ranges[0][0]
        return f"{label}+{start:#x}" if start else label
    return types.name_bytes(type_id, label, ranges)


class _Slabs:
    """Heap lines and struct page lines, named from the guest's struct pages and slabs."""

    def __init__(self, kernel: KernelMemory, types: Types, layout: Layout, slab_types: dict):
        self.kernel, self.types, self.layout, self.slab_types = kernel, types, layout, slab_types
        self._caches: dict[int, SlabCache | None] = {}  # kmem_cache address, for this boot

    def _page_of(self, frame: int) -> int:
        return VMEMMAP[0] + frame * self.layout.page_size

    def _head(self, frame: int) -> int | None:
        """The struct page address of the head of the compound page holding ``frame``."""
        page = self._page_of(frame)
        compound_head = self.kernel.u64(page + self.layout.compound_head)
        if compound_head is None:
            return None
        return compound_head - 1 if compound_head & 1 else page

    def _slab_cache(self, head: int) -> SlabCache | None:
        """The cache of the slab whose head struct page is ``head`` (None: not a slab)."""
        mark = self.layout.slab_mark
        raw = self.kernel.read(head + mark.offset, mark.size)
        if raw is None or not mark.matches(int.from_bytes(raw, "little")):
            return None
        address = self.kernel.u64(head + self.layout.slab_cache)
        if address is None:
            return None
        if address not in self._caches:
            self._caches[address] = self._read_cache(address)
        return self._caches[address]

    def _read_cache(self, address: int) -> SlabCache | None:
        lay, kernel = self.layout, self.kernel
        name_at = kernel.u64(address + lay.cache_name)
        size = kernel.u32(address + lay.cache_size)
        object_size = kernel.u32(address + lay.cache_object_size)
        pad = kernel.u32(address + lay.cache_red_left_pad) if lay.cache_red_left_pad else 0
        name = kernel.string(name_at) if name_at else None
        if not name or not size or object_size is None:
            return None
        type_name = self.slab_types.get(name, name)
        type_id = self.types.struct(type_name)
        if type_id is not None and self.types.size(type_id) > object_size:
            type_id = None  # the table does not fit this kernel's cache
        label = name if type_id is None else type_name
        return SlabCache(name, size, object_size, pad or 0, type_id, label)

    def objects(self, paddr: int, offsets: list[int]) -> list[tuple[SlabCache, int, list]] | str:
        """The slab objects the bytes at ``offsets`` of the line at paddr belong to, as
        (cache, object address, offsets in the object); for a frame that is not a slab,
        what the frame holds ("page cache", ...; "" if unreadable)."""
        head = self._head(paddr >> PAGE_SHIFT)
        if head is None:
            return ""
        cache = self._slab_cache(head)
        if cache is None:
            return self._page_kind(head)
        # Objects follow each other from the slab's first byte (after a red zone, when
        # slub_debug adds one).
        first_object = (((head - VMEMMAP[0]) // self.layout.page_size) << PAGE_SHIFT) + (
            cache.red_left_pad
        )
        line = paddr & ~(LINE_BYTES - 1)
        objects: dict[int, list[int]] = {}
        for i in offsets:
            index, offset = divmod(line + i - first_object, cache.size)
            objects.setdefault(index, []).append(offset)
        return [
            (cache, DIRECT_MAP[0] + first_object + index * cache.size, offs)
            for index, offs in objects.items()
        ]

    def object_name(
        self, cache: SlabCache, address: int, offsets: list, pointers: "PointerIndex | None"
    ) -> str:
        """The fields of a typed object; for an object of unknown type, the pointer that
        leads to it (``pointers``), or cache+offset."""
        if cache.type_id is None and pointers:
            at = address + offsets[0]
            found = pointers.closest_below(address, at)
            if found:
                target, label, pointee = found
                kind = self.types.resolve(pointee)["kind"]
                if kind not in AGGREGATES:
                    return f"{label}[]"  # `unsigned long *open_fds` -> fdtable.open_fds[]
                # A struct pointer names the object's type only if it points to the whole
                # object (not to a list_head inside it).
                if target == address and 2 * self.types.size(pointee) > cache.object_size:
                    name = self.types.resolve(pointee)["name"]
                    return self.types.name_bytes(pointee, name, byte_ranges(offsets))
        return typed_name(self.types, cache.type_id, cache.label, offsets)

    def pointer_index(self, roots: dict[int, int]) -> "PointerIndex":
        """The pointers held by the typed objects ``roots`` (address -> type id) and by the
        structs those point to."""
        entries: list[tuple[int, str, int]] = []
        followed: set[int] = set()
        for root, type_id in roots.items():
            for target, label, pointee in self._pointers_of(root, type_id):
                entries.append((target, label, pointee))
                if (
                    DIRECT_MAP[0] <= target < DIRECT_MAP[1]
                    and target not in followed
                    and target not in roots
                    and len(followed) < MAX_FOLLOWED
                    and self.types.resolve(pointee)["kind"] in AGGREGATES
                ):
                    followed.add(target)
                    entries += self._pointers_of(target, pointee)
        return PointerIndex(entries)

    def _pointers_of(self, address: int, type_id: int) -> list[tuple[int, str, int]]:
        """(value, struct.field, type pointed to) of the pointers of the object at address."""
        raw = self.kernel.read(address, self.types.size(type_id))
        if raw is None:
            return []
        label = self.types.resolve(type_id)["name"]
        values = []
        for path, offset, pointee in self.types.pointers(type_id):
            (value,) = _POINTER.unpack_from(raw, offset)
            if value:
                values.append((value, f"{label}.{path}", pointee))
        return values

    def _page_kind(self, head: int) -> str:
        mapping = self.kernel.u64(head + self.layout.mapping)
        if mapping is None:
            return ""
        if mapping & PAGE_MAPPING_ANON:
            return "anon page"
        return "page cache" if mapping else "page"

    def struct_page(self, vaddr: int, offsets: list[int]) -> str:
        """A line of the struct page array: the field of struct page, or of struct slab when
        the page described is a slab's head page (then with the slab's cache)."""
        pages: dict[int, list[int]] = {}
        for i in offsets:
            frame, offset = divmod(vaddr + i - VMEMMAP[0], self.layout.page_size)
            pages.setdefault(frame, []).append(offset)
        names = []
        for frame, offs in pages.items():
            cache = self._slab_cache(self._page_of(frame))
            struct_name, label = ("slab", f"slab[{cache.name}]") if cache else ("page", "page")
            names.append(typed_name(self.types, self.types.struct(struct_name), label, offs))
        return join_names(names)
