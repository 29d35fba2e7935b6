"""Kernel objects allocated at boot from memblock, which the data namer sees as bare pages
(no slab, no page cache, no symbol): each memory node's pglist_data (its zones' free lists,
locks and counters, which the page allocator writes on every allocation and free) and the
large hash tables of the dentry, inode and mount caches. Each is found through the kernel
variable that points to it, and its size through the variable that sizes it, read from the
guest's memory while it runs; a line in one is named by its BTF fields
(`pglist_data.node_zones.free_area`) or as the table's buckets (`dentry_hashtable[]`).
"""

import bisect
from dataclasses import dataclass

from scalecheck.run.linux.datanames import typed_name
from scalecheck.run.naming import LINE_BYTES, mask_bytes

MAX_NODES = 1024  # MAX_NUMNODES at its largest (node_data's length)
POINTER_BYTES = 8
# Hash tables: (the pointer to its buckets, the variable that sizes it, how: "shift" (the
# buckets are 1 << (32 - shift), dcache's d_hash) or "mask" (mask + 1 buckets)); each
# bucket a list head of one pointer.
HASH_TABLES = (
    ("dentry_hashtable", "d_hash_shift", "shift"),
    ("inode_hashtable", "i_hash_mask", "mask"),
    ("mount_hashtable", "m_hash_mask", "mask"),
    ("mountpoint_hashtable", "mp_hash_mask", "mask"),
)


@dataclass(frozen=True)
class BootObject:
    start: int
    end: int
    label: str
    type_id: int | None  # BTF's, for field names (None: the table's buckets)


def boot_objects(memory, symbols, types) -> list[BootObject]:
    """The nodes' pglist_data and the hash tables of this boot, by address."""
    address = symbols.address_of.get
    found = []
    pglist = types.struct("pglist_data") if types else None
    nodes = address("node_data")
    for node in range(MAX_NODES if nodes and pglist is not None else 0):
        at = memory.u64(nodes + POINTER_BYTES * node)
        if not at:
            break
        found.append(BootObject(at, at + types.size(pglist), "pglist_data", pglist))
    for table, sizer, how in HASH_TABLES:
        at = memory.u64(address(table)) if address(table) else None
        size = memory.u32(address(sizer)) if address(sizer) else None
        if not at or size is None or (how == "shift" and not 0 < size <= 32):
            continue
        buckets = 1 << (32 - size) if how == "shift" else size + 1
        found.append(BootObject(at, at + buckets * POINTER_BYTES, f"{table}[]", None))
    return sorted(found, key=lambda obj: obj.start)


def boot_object_name(objects: list[BootObject], types, vaddr: int, mask: int) -> str | None:
    """The name of the line at vaddr (the bytes of mask) when a boot object holds it."""
    i = bisect.bisect_right([obj.start for obj in objects], vaddr + LINE_BYTES - 1) - 1
    if i < 0 or vaddr >= objects[i].end:
        return None
    obj = objects[i]
    if obj.type_id is None:
        return obj.label
    offsets = [vaddr + at - obj.start for at in (mask_bytes(mask) or range(LINE_BYTES))]
    inside = [at for at in offsets if 0 <= at < obj.end - obj.start]
    return typed_name(types, obj.type_id, obj.label, inside) if inside else obj.label
