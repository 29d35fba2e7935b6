"""Heap typing's shortcuts (heapnames.type_heap) on hand-made layouts: only pointers to a
type of known size are followed, whatever else the object holds."""

import struct

from scalecheck.run.user.dwarfnames import Layout
from scalecheck.run.user.heapnames import type_heap


def _layout(tag: str, label: str, size: int, **parts) -> Layout:
    layout = Layout()
    layout.tag, layout.label, layout.size = tag, label, size
    layout.__dict__.update(parts)
    return layout


NODE = _layout("DW_TAG_structure_type", "struct node", 16)
NODE.members = [(0, "value", _layout("DW_TAG_base_type", "long", 8))]
FUNCTION = _layout("DW_TAG_subroutine_type", "", 0)
VOID_POINTER = _layout("DW_TAG_pointer_type", "", 8, pointee=None)
FUNCTION_POINTER = _layout("DW_TAG_pointer_type", "", 8, pointee=FUNCTION)
NODE_POINTER = _layout("DW_TAG_pointer_type", "", 8, pointee=NODE)
TABLE = _layout("DW_TAG_structure_type", "struct table", 24)
TABLE.members = [
    (0, "opaque", VOID_POINTER),
    (8, "hook", FUNCTION_POINTER),
    (16, "head", NODE_POINTER),
]


def test_only_pointers_to_a_sized_type_are_followed():
    assert [path for _, path, _ in TABLE.typed_pointers()] == [".head"]
    assert TABLE.typed_pointer_phases() == {0}
    assert len(TABLE.pointers()) == 3


def test_a_block_is_typed_through_its_typed_pointer_whatever_the_others_point_to():
    # Every pointer of the table points to a block: only `head` says what its block is.
    table, opaque, hooked, node = 0x1000, 0x2000, 0x3000, 0x4000
    memory = {
        table: struct.pack("<QQQ", opaque, hooked, node),
        opaque: bytes(16),
        hooked: bytes(16),
        node: bytes(16),
    }
    allocations = [(start, 16, 0) for start in (opaque, hooked, node)]
    typed = type_heap([(table, "table", TABLE)], allocations, memory)
    assert {start: label for start, (label, _) in typed.items()} == {node: "struct node"}
