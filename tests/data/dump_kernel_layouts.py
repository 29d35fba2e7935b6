"""Writes a small C file whose types have the layout of a real kernel's, for the unit tests
of data naming (tests/test_trace_names.py compiles it with `gcc -g` and `pahole` into BTF).

Only what naming reads is kept: the members listed below at their offsets in the kernel's
BTF (each as an integer or byte array of its size, padding between), each struct's size,
and the enums that say how a slab page is marked. Run on the BTF of each kernel the tests
cover (the bytes of /sys/kernel/btf/vmlinux, or the `btf` file a probe boot left in
~/.cache/scalecheck/kernels/<key>/):

    python3 tests/data/dump_kernel_layouts.py BTF_FILE RELEASE > tests/data/layout-SERIES.c
"""

import sys
from pathlib import Path

from scalecheck.run.linux.btf import AGGREGATES, Types, dump_types

MEMBERS = {
    "page": ["flags", "compound_head", "mapping", "page_type"],
    "slab": ["slab_cache", "__page_type"],
    "kmem_cache": ["size", "object_size", "red_left_pad", "name"],
    "files_struct": ["count", "fdt", "next_fd", "file_lock", "fd_array"],
    "mm_struct": ["mmap_lock", "map_count"],
}
ENUMS = {"pageflags": ["PG_head", "PG_slab"], "pagetype": None}  # None: every value
SCALARS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long"}


def find_member(types: Types, type_id: int, member: str) -> tuple[int, int] | None:
    """(byte offset, type id) of a member, looked for through anonymous members."""
    for m in types.resolve(type_id).get("members", []):
        if m["name"] == member:
            return m["bits_offset"] // 8, m["type_id"]
        if m["name"] in ("", "(anon)") and types.resolve(m["type_id"])["kind"] in AGGREGATES:
            inner = find_member(types, m["type_id"], member)
            if inner is not None:
                return m["bits_offset"] // 8 + inner[0], inner[1]
    return None


def struct_text(types: Types, name: str, members: list[str]) -> str:
    struct_id = types.struct(name)
    assert struct_id is not None, name
    found = []
    for member in members:
        where = find_member(types, struct_id, member)
        if where is not None:
            found.append((where[0], member, types.size(where[1])))
    lines, at = [], 0
    for offset, member, size in sorted(found):
        assert offset >= at, (name, member)
        if offset > at:
            lines.append(f"\tunsigned char __pad_{at}[{offset - at}];")
        # A flexible array member (size 0) becomes one element.
        size = size or 8
        kind = SCALARS.get(size)
        lines.append(f"\t{kind} {member};" if kind else f"\tunsigned char {member}[{size}];")
        at = offset + size
    end = types.size(struct_id)
    if end > at:
        lines.append(f"\tunsigned char __pad_{at}[{end - at}];")
    return f"struct {name} {{\n" + "\n".join(lines) + "\n};\n"


def enum_text(types: Types, name: str, keep: list[str] | None) -> str:
    values = types.enum(name)
    kept = [(k, v) for k, v in values.items() if keep is None or k in keep]
    if not kept:
        return ""
    body = "\n".join(f"\t{k} = {v & 0xFFFF_FFFF:#x}," for k, v in kept)
    return f"enum {name} {{\n{body}\n}};\n"


def main(btf_file: str, release: str) -> None:
    types = Types(dump_types(Path(btf_file)))
    parts = [
        f"/* Layouts of Linux {release} (its BTF) that data naming reads, written by\n"
        " * tests/data/dump_kernel_layouts.py. Only offsets and sizes matter. */"
    ]
    parts += [enum_text(types, name, keep) for name, keep in ENUMS.items()]
    parts += [struct_text(types, name, members) for name, members in MEMBERS.items()]
    # Referenced, so that gcc emits debug info (and pahole BTF) for every type.
    parts += [f"struct {name} *{name}_p;" for name in MEMBERS]
    parts += [f"enum {name} {name}_v;" for name, keep in ENUMS.items() if types.enum(name)]
    print("\n".join(p for p in parts if p))


if __name__ == "__main__":
    main(*sys.argv[1:])
