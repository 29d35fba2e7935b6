"""Names one test's conflicting lines of a library's data, static and heap, by the
types dwarfnames.py reads (docs/heap-names.md).

A heap object's type is found the way the Linux target names untyped kmalloc objects
(datanames.py): by a typed pointer that leads to it. The harness snapshots the library's
and its adapter's static variables that hold pointers and its live allocations after a
test's last calls; starting from the statics, every pointer field whose value is the
start of an allocation gives that allocation the type pointed to, and the objects so
typed are followed in turn (``table`` -> ``struct table.buckets[2]`` -> ``struct
node.next`` -> ...). A block no pointer types takes the type its allocating function
gives it (dwarfnames.FieldNames.allocated); one of no known type is named by its
allocation site and the offset in the block.
"""

import bisect
import functools
import re
import struct
from collections import deque
from collections.abc import Mapping

from scalecheck.run.naming import join_fields, join_names, mask_bytes
from scalecheck.run.user.dwarfnames import LINE, FieldNames, Layout, array_of

_POINTER = struct.Struct("<Q")
_LAST_INDEX = re.compile(r"\[\d+\]$")


def name_bytes(layout: Layout, label: str, offsets: list[int], whole_small: bool = True) -> str:
    """``label`` with the fields that bytes at ``offsets`` cover: ``struct node.value``,
    ``buckets[3].head``, ``struct table.{lock,buckets[0]}``; one name per array element.
    ``whole_small``: a small struct member named as a whole (Layout.path)."""
    if layout.element is not None and layout.element.size:
        by_index: dict[int, list[int]] = {}
        for offset in offsets:
            index, inner = divmod(offset, layout.element.size)
            by_index.setdefault(index, []).append(inner)
        return join_names(
            name_bytes(layout.element, f"{label}[{index}]", inner, whole_small)
            for index, inner in by_index.items()
        )
    # The bytes inside one field (`value+0x3`) are the field.
    paths = [layout.path(offset, whole_small).split("+")[0] for offset in offsets]
    return join_fields(label, _arrays([p.removeprefix(".") for p in paths if p]), offsets[0])


def _arrays(paths: list[str]) -> list[str]:
    """Several elements of one array are the array: `bytes[]`, not `bytes[0]` to
    `bytes[63]` (one element keeps its index: `slots[11]`)."""
    stems = [_LAST_INDEX.sub("[]", path) for path in paths]
    elements: dict[str, set[str]] = {}
    for path, stem in zip(paths, stems, strict=True):
        elements.setdefault(stem, set()).add(path)
    return [
        stem if len(elements[stem]) > 1 else path for path, stem in zip(paths, stems, strict=True)
    ]


def type_heap(
    roots: list[tuple[int, str, Layout]],
    allocations: list,
    memory: Mapping[int, bytes],
    declared: dict[int, Layout] | None = None,
) -> dict[int, tuple[str, Layout]]:
    """(label, layout) of the allocations (start, size, site) that typed pointers lead to
    from the static variables ``roots`` (address, name, layout) and from the objects so
    typed, breadth first: the first pointer found names the object. ``declared`` (start
    -> the struct its allocating function returns) types a block no pointer typed (a
    pointer's type wins: a function may allocate more than the object it returns).
    ``memory``: the snapshot, start address -> bytes."""
    sizes = {start: size for start, size, _ in allocations if start in memory}
    typed: dict[int, tuple[str, Layout]] = {
        start: (layout.label, layout) for start, layout in (declared or {}).items()
    }
    provisional = set(typed)
    todo = deque([(start, label, layout) for start, (label, layout) in typed.items()])
    todo.extend(roots)
    while todo:
        address, label, layout = todo.popleft()
        data = _bytes_at(memory, address, layout.size)
        if not _may_point_into(data, layout, sizes):
            continue
        for offset, path, pointee in layout.typed_pointers():
            if offset + 8 > len(data):
                continue
            (target,) = _POINTER.unpack_from(data, offset)
            if target not in sizes or (target in typed and target not in provisional):
                continue
            size = sizes[target]
            if pointee.is_aggregate and pointee.label:
                # `struct node *`: the object (or the array of them) is named by its type
                name = pointee.label
                found = array_of(pointee, size) if size >= 2 * pointee.size else pointee
            else:
                # `long *counts`: the array is named by the pointer
                name, found = f"{label}{path}", array_of(pointee, max(size, pointee.size))
            provisional.discard(target)
            if typed.get(target, ("",))[0] != name:
                typed[target] = (name, found)
                todo.append((target, name, found))
    return typed


def _may_point_into(data: bytes, layout: Layout, starts: dict) -> bool:
    """Whether a word of ``data`` where ``layout`` holds typed pointers (at any of their
    offsets modulo 8) is the start of a block: most objects' pointers lead to none, and
    reading every word at once is much cheaper than each pointer on its own."""
    for phase in layout.typed_pointer_phases():
        whole = (len(data) - phase) // 8 * 8
        if whole > 0 and not starts.keys().isdisjoint(
            memoryview(data[phase : phase + whole]).cast("Q")
        ):
            return True
    return False


def _bytes_at(memory: Mapping[int, bytes], address: int, size: int) -> bytes:
    """The snapshot's bytes at address (within the range that holds it)."""
    if address in memory:
        return memory[address][:size]
    starts = sorted(memory)
    i = bisect.bisect_right(starts, address) - 1
    if i < 0:
        return b""
    start = starts[i]
    return memory[start][address - start : address - start + size]


class DataNamer:
    """Names one test's conflicting lines of a library (naming.name_data): static data by
    variable and field, heap data by the type and field of its object (the struct its
    allocating function returns, or the type of a pointer that leads to it), else by its
    allocation site and the offset in the block (``idtab_new:alloc(1072)+0x40``: the same
    in every run, wherever the block lands); "" for lines of neither (their data_symbol
    stays)."""

    def __init__(
        self,
        fields: FieldNames,
        statics: list[tuple[int, int, str]],
        allocations: list[tuple[int, int, int]],
        memory: Mapping[int, bytes],
        roots: list[tuple[int, int, str]] | None = None,
        site_function=hex,
    ):
        """``statics`` (address, size, name): the program's, named by field when their
        DWARF is known, else by symbol (only those the conflicting bytes touch); ``roots``:
        the static pointers heap typing starts from (the library's and its adapter's;
        ``statics`` when None); ``site_function``: the function an allocation site (a
        return address) lies in."""
        self.fields, self.memory = fields, memory
        # Sorted when a line is first named: a namer is made for every repeat of every
        # test, and most tests have no line to name.
        self._statics, self._allocations, self._roots = statics, allocations, roots
        self.site_function = site_function
        self._typed: dict[int, tuple[str, Layout]] | None = None

    @functools.cached_property
    def statics(self) -> list[tuple[int, int, str]]:
        return sorted(self._statics)

    @functools.cached_property
    def roots(self) -> list[tuple[int, int, str]]:
        return self.statics if self._roots is None else self._roots

    @functools.cached_property
    def static_starts(self) -> list[int]:
        return [s[0] for s in self.statics]

    @functools.cached_property
    def allocations(self) -> list[tuple[int, int, int]]:
        return sorted(self._allocations)

    @functools.cached_property
    def alloc_starts(self) -> list[int]:
        return [a[0] for a in self.allocations]

    def name_lines(self, lines: list[tuple[str, int, int, int]]) -> list[str]:
        return [self._name(kind, vaddr, mask) for kind, vaddr, _, mask in lines]

    def stable_names(self, lines: list[tuple[str, int, int, int]]) -> list[str]:
        """The names, from this repeat's own snapshot, so as stable as the data: what
        repeats are compared by (naming.name_data)."""
        return self.name_lines(lines)

    def _name(self, kind: str, vaddr: int, mask: int) -> str:
        offsets = mask_bytes(mask) or list(range(LINE))
        if kind == "static":
            return self._group(vaddr, offsets, self.statics, self.static_starts, self._static)
        if kind == "heap":
            return self._group(vaddr, offsets, self.allocations, self.alloc_starts, self._heap)
        return ""

    @staticmethod
    def _group(vaddr, offsets, entries, starts, name_one) -> str:
        """Names the bytes by the entry (start, size, ...) that holds each."""
        held: dict[tuple, list[int]] = {}
        for offset in offsets:
            address = vaddr + offset
            i = bisect.bisect_right(starts, address) - 1
            if i >= 0 and address < entries[i][0] + max(entries[i][1], 1):
                held.setdefault(entries[i], []).append(address - entries[i][0])
        return join_names(name_one(entry, inner) for entry, inner in held.items())

    def _static(self, entry, offsets: list[int]) -> str:
        """A variable by its fields (DWARF), else by its symbol and the offset touched."""
        _, _, name = entry
        layout = self.fields.layout(name)
        if layout:
            return name_bytes(layout, name, offsets)
        return f"{name}+{offsets[0]:#x}" if offsets[0] else name

    def _heap(self, entry, offsets: list[int]) -> str:
        if self._typed is None:
            roots = [
                (address, name, layout)
                for address, _, name in self.roots
                if (layout := self.fields.layout(name)) is not None
            ]
            declared = {
                start: layout
                for start, size, site in self.allocations
                if (layout := self.fields.allocated(self.site_function(site), size)) is not None
            }
            self._typed = type_heap(roots, self.allocations, self.memory, declared)
        found = self._typed.get(entry[0])
        if found:
            return name_bytes(found[1], found[0], offsets)
        _, size, site = entry
        return f"{self.site_function(site)}:alloc({size})+{offsets[0]:#x}"
