"""Reads a library's DWARF (built with ``-g``, read with pyelftools): the type of each
static variable, with its fields at byte offsets (``buckets`` + 0x80 is
``buckets[1].lock``), and what each function says of the heap blocks it makes: the
struct it returns a pointer to, the structs its local pointers point to. heapnames.py
names a test's conflicting lines with them."""

import functools
import os
import pickle
from pathlib import Path

from elftools.common.exceptions import DWARFError, ELFError
from elftools.elf.elffile import ELFFile

# Type DIEs that only qualify or rename the type they point at.
_TRANSPARENT = {
    "DW_TAG_typedef",
    "DW_TAG_const_type",
    "DW_TAG_volatile_type",
    "DW_TAG_atomic_type",
    "DW_TAG_restrict_type",
}
_AGGREGATES = {"DW_TAG_structure_type", "DW_TAG_union_type", "DW_TAG_class_type"}
_KEYWORDS = {"DW_TAG_structure_type": "struct ", "DW_TAG_union_type": "union "}
# Elements of an array followed for pointers (static tables and heap arrays alike).
MAX_ELEMENTS = 4096
LINE = 64


class FieldNames:
    """Static variables of some object files, by name, with their DWARF types; the struct
    each function declares it returns a pointer to (``struct idtab *idtab_new``), and
    the structs its local pointers (those of what is inlined into it too) point to."""

    def __init__(self, objects: list[Path], sources: list[Path] | None = None):
        """``sources``: read only the compilation units of these files (those of a linked
        program, whose DWARF needs no relocation: pyelftools cannot relocate an object
        file's DWARF that holds a `__thread` variable); None: every unit."""
        wanted = _wanted(sources)
        self._types: dict[str, Layout] = {}
        self._returns: dict[str, Layout] = {}
        self._locals: dict[str, dict[str, Layout]] = {}  # function -> label -> struct
        # (function, size) -> allocated(): asked for every block of every named repeat
        self._allocated: dict[tuple[str, int], Layout | None] = {}
        every: list[Layout] = []
        for path in objects:
            try:
                with open(path, "rb") as f:
                    elf = ELFFile(f)
                    if not elf.has_dwarf_info():
                        continue
                    layouts: dict = {}  # DIE offset -> Layout, per file (types recurse)
                    for cu in elf.get_dwarf_info().iter_CUs():
                        if wanted is not None and _source_of(cu) not in wanted:
                            continue
                        for die in cu.iter_DIEs():
                            # (A function's locals are _note_locals'; a namesake
                            # local must not give a static its type.)
                            if _is_static_variable(die):
                                name = die.attributes.get("DW_AT_name")
                                type_die = _type_of(die)
                                if name and type_die is not None:
                                    self._types[name.value.decode()] = _layout(type_die, layouts)
                            elif die.tag == "DW_TAG_subprogram":
                                self._note_return(die, layouts)
                                self._note_locals(die, layouts)
                    every += layouts.values()
            except (OSError, ELFError, DWARFError):
                continue  # no field names for this object: symbol names remain
        _complete(every)

    def _note_return(self, die, layouts: dict) -> None:
        name, type_die = die.attributes.get("DW_AT_name"), _type_of(die)
        if name is None or type_die is None:
            return
        pointee = _layout(type_die, layouts).pointee  # None unless a typed pointer
        known = self._returns.get(name.value.decode())
        # A struct declared only here may be defined in another file (_complete); a
        # definition here wins over another file's declaration.
        defined = known is not None and known.size
        if pointee is not None and pointee.is_aggregate and pointee.label and not defined:
            self._returns[name.value.decode()] = pointee

    def _note_locals(self, die, layouts: dict) -> None:
        if "DW_AT_low_pc" not in die.attributes and "DW_AT_ranges" not in die.attributes:
            return  # a declaration, or the abstract form of an inlined function
        name = _attribute(die, "DW_AT_name")
        if name is None:
            return
        found = self._locals.setdefault(name.decode(), {})
        todo = list(die.iter_children())
        while todo:
            child = todo.pop()
            if child.tag == "DW_TAG_variable":
                type_die = _type_of(_origin(child))
                pointee = _layout(type_die, layouts).pointee if type_die is not None else None
                if pointee is not None and pointee.is_aggregate and pointee.label:
                    found.setdefault(pointee.label, pointee)
            elif child.has_children:
                todo.extend(child.iter_children())

    def allocated(self, function: str, size: int) -> "Layout | None":
        """The struct a block of ``size`` bytes that ``function`` allocated is: the one it
        returns a pointer to, else the only one its local pointers point to, when the
        block can be one (at least one, less than two: a flexible array member may
        follow; any larger size when the struct ends in one, as an array of its
        elements). Else, a whole number of two or more of the struct it returns a
        pointer to is an array of them (LDU's queues, one per worker), as a typed
        pointer to such a block says (heapnames.type_heap): not before its locals, as a
        function that returns a pointer to the block's first member (`struct objset *`
        of a `struct ldu_set`) allocates the larger struct its local points to."""
        key = (function, size)
        if key not in self._allocated:
            self._allocated[key] = self._allocated_struct(function, size)
        return self._allocated[key]

    def _allocated_struct(self, function: str, size: int) -> "Layout | None":
        def fits(layout: Layout) -> bool:
            return 0 < layout.size <= size and (size < 2 * layout.size or layout.open_ended)

        returned = self._returns.get(function)
        if returned is not None and fits(returned):
            return returned
        local = [layout for layout in self._locals.get(function, {}).values() if fits(layout)]
        if len(local) == 1:
            return local[0]
        if returned is not None and returned.size and size % returned.size == 0:
            return array_of(returned, size)
        return None

    def field(self, variable: str, offset: int) -> str:
        """``variable`` with the path of the field at ``offset`` ("" when unknown)."""
        layout = self._types.get(variable)
        return variable + layout.path(offset) if layout else ""

    def layout(self, variable: str) -> "Layout | None":
        return self._types.get(variable)

    def holds_pointers(self, variable: str) -> bool:
        layout = self._types.get(variable)
        return bool(layout and layout.pointers())


def cached_field_names(
    objects: list[Path], sources: list[Path] | None, cache: Path
) -> "FieldNames":
    """FieldNames(objects, sources), kept in ``cache`` until an object changes: reading the
    DWARF was most of a library run's start (a second's CPU for libsv6). The key holds
    this module's own text: what another version kept is read again."""
    key = ([str(path) for path in objects], _wanted(sources), Path(__file__).read_bytes())
    try:
        if cache.stat().st_mtime >= max(path.stat().st_mtime for path in objects):
            with open(cache, "rb") as f:
                stored_key, names = pickle.load(f)
            if stored_key == key:
                return names
    except (OSError, EOFError, pickle.UnpicklingError, ValueError):
        pass  # none kept yet, or unreadable: read again
    names = FieldNames(objects, sources)
    temporary = cache.with_name(cache.name + ".tmp")
    try:
        temporary.write_bytes(pickle.dumps((key, names)))
        os.replace(temporary, cache)
    except OSError:
        temporary.unlink(missing_ok=True)  # kept next time, perhaps
    return names


# Kept per (type, size): an array's pointers are listed once, not once per block.
@functools.lru_cache(maxsize=4096)
def array_of(element: "Layout", size: int) -> "Layout":
    """The layout of a block of ``size`` bytes holding objects of type ``element``, named
    as they are (``struct ldu_queue``: its elements ``struct ldu_queue[3].head``)."""
    array = Layout()
    array.tag, array.element, array.size, array.label = (
        "DW_TAG_array_type",
        element,
        size,
        element.label,
    )
    return array


def _wanted(sources: list[Path] | None) -> set[str] | None:
    return None if sources is None else {os.path.realpath(s) for s in sources}


class Layout:
    """A type's members, array elements and pointed-to type as offsets, read once from its
    DIEs (by _layout, which keeps one per DIE: `struct node` points to itself)."""

    def __init__(self) -> None:
        self.tag = ""
        self.label = ""  # `struct node`, `long`, a typedef's name for an anonymous struct
        self.size = 0
        self.members: list = []  # (offset, name, Layout)
        self.element: Layout | None = None
        self.pointee: Layout | None = None  # None for void *
        self._pointers: list | None = None
        self._typed: list | None = None
        self._phases: set[int] | None = None

    def path(self, offset: int, whole_small: bool = False) -> str:
        """The path of the field at ``offset`` (``[1].pair.b``). ``whole_small``: a member
        that is a struct or union of at most a line is named as a whole (``.lock``, not
        ``.lock.__data.__lock``), as the Linux target names its fields."""
        if self.element is not None and self.element.size:
            index, inner = divmod(offset, self.element.size)
            return f"[{index}]" + self.element.path(inner, whole_small)
        # A union's bytes are named by its first member (they all start at 0).
        members = self.members if self.tag == "DW_TAG_union_type" else reversed(self.members)
        for start, name, layout in members:
            if start <= offset:
                if whole_small and layout.is_aggregate and layout.size <= LINE:
                    return f".{name}"
                return f".{name}" + layout.path(offset - start, whole_small)
        return f"+{offset:#x}" if offset else ""

    @property
    def open_ended(self) -> bool:
        """A struct whose last member is a flexible array (``struct set_object ring[]``):
        DWARF gives the array no bound, so it reaches past the struct's size."""
        if not self.is_aggregate or not self.members:
            return False
        start, _, last = max(self.members, key=lambda member: member[0])
        return last.element is not None and start + last.size > self.size

    @property
    def is_aggregate(self) -> bool:
        return self.tag in _AGGREGATES

    def pointers(self) -> list:
        """(offset, path, pointee) of every pointer an object of this type holds: in its
        members, nested structs and array elements (the first MAX_ELEMENTS)."""
        if self._pointers is None:
            self._pointers = []  # a struct that holds itself only through pointers
            found: list = []
            if self.tag == "DW_TAG_pointer_type":
                found.append((0, "", self.pointee))
            elif self.element is not None and self.element.size:
                inner = self.element.pointers()
                count = self.size // self.element.size if self.size else 0
                for i in range(min(count, MAX_ELEMENTS) if inner else 0):
                    at = i * self.element.size
                    found += [(at + off, f"[{i}]{path}", to) for off, path, to in inner]
            else:
                for start, name, layout in self.members:
                    found += [(start + off, f".{name}{p}", to) for off, p, to in layout.pointers()]
            self._pointers = found
        return self._pointers

    def typed_pointers(self) -> list:
        """The ``pointers()`` to a type of known size, the only ones that type what they
        point to (an array of `void *` has a thousand others)."""
        if self._typed is None:
            self._typed = [entry for entry in self.pointers() if entry[2] and entry[2].size]
        return self._typed

    def typed_pointer_phases(self) -> set[int]:
        """The offsets of this type's typed pointers modulo 8 (``{0}`` unless packed)."""
        if self._phases is None:
            self._phases = {offset % 8 for offset, _, _ in self.typed_pointers()}
        return self._phases


def _layout(die, layouts: dict) -> Layout:
    label = ""
    while die is not None and die.tag in _TRANSPARENT:
        if die.tag == "DW_TAG_typedef" and not label:
            label = die.attributes["DW_AT_name"].value.decode()
        die = _type_of(die)
    key = die.offset if die is not None else None
    if key in layouts:
        return layouts[key]
    layout = layouts[key] = Layout()
    if die is None:
        return layout
    layout.tag, layout.size = die.tag, _size(die)
    name = die.attributes.get("DW_AT_name")
    if name:
        label = _KEYWORDS.get(die.tag, "") + name.value.decode()
    layout.label = label
    if die.tag in _AGGREGATES:
        for child in die.iter_children():
            if child.tag != "DW_TAG_member" or "DW_AT_name" not in child.attributes:
                continue
            where = child.attributes.get("DW_AT_data_member_location")
            start = where.value if where and isinstance(where.value, int) else 0
            member = _layout(_type_of(child), layouts)
            layout.members.append((start, child.attributes["DW_AT_name"].value.decode(), member))
    elif die.tag == "DW_TAG_array_type":
        layout.element = _layout(_type_of(die), layouts)
    elif die.tag == "DW_TAG_pointer_type" and "DW_AT_type" in die.attributes:
        layout.pointee = _layout(_type_of(die), layouts)
    return layout


def _complete(layouts: list[Layout]) -> None:
    """Gives a struct that a file only declares (an opaque handle's `struct idtab`, in the
    adapter) the members another file defines it with."""
    defined = {lay.label: lay for lay in layouts if lay.is_aggregate and lay.size and lay.label}
    for layout in layouts:
        if layout.is_aggregate and not layout.size and layout.label in defined:
            layout.__dict__.update(defined[layout.label].__dict__)


def _source_of(cu) -> str:
    """The real path of the file a compilation unit was compiled from."""
    top = cu.get_top_DIE()
    name, where = top.attributes.get("DW_AT_name"), top.attributes.get("DW_AT_comp_dir")
    if name is None:
        return ""
    directory = where.value.decode(errors="replace") if where else ""
    return os.path.realpath(os.path.join(directory, name.value.decode(errors="replace")))


def _is_static_variable(die) -> bool:
    """A variable of the file's scope that has storage here (not a function's local)."""
    if die.tag != "DW_TAG_variable" or "DW_AT_location" not in die.attributes:
        return False
    parent = die.get_parent()
    return parent is not None and parent.tag == "DW_TAG_compile_unit"


def _origin(die):
    """The DIE that holds a concrete (inlined or out-of-line) entity's name and type."""
    while "DW_AT_abstract_origin" in die.attributes or "DW_AT_specification" in die.attributes:
        key = (
            "DW_AT_abstract_origin"
            if "DW_AT_abstract_origin" in die.attributes
            else "DW_AT_specification"
        )
        die = die.get_DIE_from_attribute(key)
    return die


def _attribute(die, key: str):
    attribute = (
        _origin(die).attributes.get(key) if key not in die.attributes else die.attributes[key]
    )
    return attribute.value if attribute is not None else None


def _type_of(die):
    attribute = die.attributes.get("DW_AT_type")
    return die.get_DIE_from_attribute("DW_AT_type") if attribute else None


def _strip(die):
    while die is not None and die.tag in _TRANSPARENT:
        die = _type_of(die)
    return die


def _size(die) -> int:
    if die is None:
        return 0
    if "DW_AT_byte_size" in die.attributes:
        return die.attributes["DW_AT_byte_size"].value
    if die.tag == "DW_TAG_array_type":
        count = 1
        for child in die.iter_children():
            if child.tag == "DW_TAG_subrange_type":
                if "DW_AT_count" in child.attributes:
                    count *= child.attributes["DW_AT_count"].value
                elif "DW_AT_upper_bound" in child.attributes:
                    count *= child.attributes["DW_AT_upper_bound"].value + 1
        return count * _size(_strip(_type_of(die)))
    return 0
