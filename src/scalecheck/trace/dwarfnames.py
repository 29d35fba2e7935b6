"""Names the field of a library's static variable at a byte offset, from the DWARF of an
object file built with ``-g`` (pyelftools): ``buckets`` + 0x80 is ``buckets[1].lock``."""

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


class FieldNames:
    """Static variables of some object files, by name, with their DWARF types."""

    def __init__(self, objects: list[Path]):
        self._types: dict = {}
        for path in objects:
            try:
                with open(path, "rb") as f:
                    elf = ELFFile(f)
                    if not elf.has_dwarf_info():
                        continue
                    for cu in elf.get_dwarf_info().iter_CUs():
                        for die in cu.iter_DIEs():
                            if die.tag == "DW_TAG_variable" and "DW_AT_location" in die.attributes:
                                name = die.attributes.get("DW_AT_name")
                                type_die = _type_of(die)
                                if name and type_die is not None:
                                    self._types[name.value.decode()] = _Layout(type_die)
            except (OSError, ELFError, DWARFError):
                continue  # no field names for this object: symbol names remain

    def field(self, variable: str, offset: int) -> str:
        """``variable`` with the path of the field at ``offset`` ("" when unknown)."""
        layout = self._types.get(variable)
        return variable + layout.path(offset) if layout else ""


class _Layout:
    """A type's members and array elements as offsets, read once from its DIEs."""

    def __init__(self, die):
        die = _strip(die)
        self.tag = die.tag if die is not None else ""
        self.size = _size(die)
        self.members: list = []
        self.element: _Layout | None = None
        if self.tag in ("DW_TAG_structure_type", "DW_TAG_union_type"):
            for child in die.iter_children():
                if child.tag != "DW_TAG_member" or "DW_AT_name" not in child.attributes:
                    continue
                where = child.attributes.get("DW_AT_data_member_location")
                start = where.value if where and isinstance(where.value, int) else 0
                member_type = _type_of(child)
                self.members.append(
                    (start, child.attributes["DW_AT_name"].value.decode(), _Layout(member_type))
                )
        elif self.tag == "DW_TAG_array_type":
            self.element = _Layout(_type_of(die))

    def path(self, offset: int) -> str:
        if self.element is not None and self.element.size:
            index, inner = divmod(offset, self.element.size)
            return f"[{index}]" + self.element.path(inner)
        for start, name, layout in reversed(self.members):
            if start <= offset:
                return f".{name}" + layout.path(offset - start)
        return f"+{offset:#x}" if offset else ""


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
