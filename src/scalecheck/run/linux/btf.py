"""The kernel's own type information (BTF), read with bpftool, and the names of the fields a
byte range of an object covers.

BTF comes from the traced kernel itself (the bytes behind /sys/kernel/btf/vmlinux, see
``kernelmem.read_kernel_btf``), so struct layouts are those of the kernel that ran, whoever
built it. ``bpftool btf dump file F`` with ``-j`` lists every type as JSON; this module
only looks things up in that list.
"""

import json
import shutil
import subprocess
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.run.naming import join_fields

# Typedefs and qualifiers stand for the type they name.
ALIASES = frozenset({"TYPEDEF", "CONST", "VOLATILE", "RESTRICT", "TYPE_TAG"})
AGGREGATES = frozenset({"STRUCT", "UNION"})
# Type id 0 is void (what a `void *` points to).
VOID = {"id": 0, "kind": "VOID", "name": "void"}
POINTER_SIZE = 8
# Arrays of pointers are read element by element up to this many elements.
MAX_POINTER_ELEMENTS = 256
# A field is named down to the first member no larger than a cache line: `inode.i_rwsem`,
# not `inode.i_rwsem.count.counter`; a larger embedded struct is looked into
# (`shmem_inode_info.vfs_inode.i_rwsem`). Anonymous structs and unions are transparent.
LINE = 64


def dump_types(btf_file: Path) -> list[dict]:
    """Every type of a BTF file (raw BTF, or an ELF object with a .BTF section)."""
    tool = shutil.which("bpftool")
    if not tool:
        raise UserError("bpftool not found: run scripts/setup.sh (installs bpftool)")
    done = subprocess.run(
        [tool, "-j", "btf", "dump", "file", str(btf_file)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise UserError(f"bpftool cannot read BTF from {btf_file}: {done.stderr.strip()}")
    return json.loads(done.stdout)["types"]


def _named(name: str) -> bool:
    return bool(name) and name != "(anon)"


class Types:
    """Structs, unions, per-cpu variables and named enums of one BTF."""

    def __init__(self, types: list[dict]):
        self._by_id = {t["id"]: t for t in types}
        self._aggregates: dict[str, int] = {}
        self._vars: dict[str, int] = {}
        self._enums: dict[str, dict[str, int]] = {}
        self._pointers: dict[int, list[tuple[str, int, int]]] = {}
        # Sizes and field names are asked for again and again (every test names the same
        # few structs' fields): each is computed once per run.
        self._sizes: dict[int, int] = {}
        self._fields: dict[tuple[int, int, int], tuple[str, ...]] = {}
        for t in types:
            if t["kind"] in AGGREGATES and _named(t["name"]):
                self._aggregates.setdefault(t["name"], t["id"])
            elif t["kind"] == "VAR":
                self._vars.setdefault(t["name"], t["type_id"])
            elif t["kind"] in ("ENUM", "ENUM64") and _named(t["name"]):
                values = {v["name"]: v["val"] for v in t.get("values", [])}
                self._enums.setdefault(t["name"], values)

    @classmethod
    def from_file(cls, btf_file: Path) -> "Types":
        return cls(dump_types(btf_file))

    def struct(self, name: str) -> int | None:
        """The type id of a named struct or union."""
        return self._aggregates.get(name)

    def var_type(self, name: str) -> int | None:
        """The type id of a variable BTF describes (per-cpu variables in vmlinux BTF)."""
        return self._vars.get(name)

    def enum(self, name: str) -> dict[str, int]:
        """The values of a named enum (empty if BTF has no such enum): the same value name
        can move from one enum to another between kernel releases (PG_slab did)."""
        return self._enums.get(name, {})

    def resolve(self, type_id: int) -> dict:
        t = self._by_id.get(type_id, VOID)
        while t["kind"] in ALIASES:
            t = self._by_id[t["type_id"]]
        return t

    def size(self, type_id: int) -> int:
        if type_id not in self._sizes:
            self._sizes[type_id] = self._size(type_id)
        return self._sizes[type_id]

    def _size(self, type_id: int) -> int:
        t = self.resolve(type_id)
        if t["kind"] == "PTR":
            return POINTER_SIZE
        if t["kind"] == "ARRAY":
            return t["nr_elems"] * self.size(t["type_id"])
        return t.get("size", 0)

    def offset_of(self, struct_name: str, member: str) -> int | None:
        """Byte offset of a member of a named struct (anonymous members looked through)."""
        struct_id = self.struct(struct_name)
        return None if struct_id is None else self._find_member(struct_id, member)

    def _find_member(self, type_id: int, member: str) -> int | None:
        for m in self.resolve(type_id).get("members", []):
            if m["name"] == member:
                return m["bits_offset"] // 8
            if not _named(m["name"]) and self.resolve(m["type_id"])["kind"] in AGGREGATES:
                inner = self._find_member(m["type_id"], member)
                if inner is not None:
                    return m["bits_offset"] // 8 + inner
        return None

    def fields(self, type_id: int, start: int, end: int) -> list[str]:
        """The fields of the object of type ``type_id`` that bytes [start, end) overlap, in
        declaration order. Of a union's members only the first that overlaps is named."""
        key = (type_id, start, end)
        if key not in self._fields:
            self._fields[key] = tuple(self._fields_of(type_id, start, end))
        return list(self._fields[key])

    def _fields_of(self, type_id: int, start: int, end: int) -> list[str]:
        t = self.resolve(type_id)
        if t["kind"] not in AGGREGATES:
            return []
        found: list[str] = []
        members = t["members"]
        for i, m in enumerate(members):
            m_start = m["bits_offset"] // 8
            if m.get("bitfield_size"):
                m_end = (m["bits_offset"] + m["bitfield_size"] + 7) // 8
            else:
                m_end = m_start + self.size(m["type_id"])
                if m_end == m_start and i == len(members) - 1:
                    m_end = end  # a flexible array member runs to the end of the object
            if m_end <= start or m_start >= end:
                continue
            inner = self.resolve(m["type_id"])
            named = _named(m["name"])
            if inner["kind"] in AGGREGATES and (not named or inner["size"] > LINE):
                prefix = m["name"] + "." if named else ""
                below = self.fields(m["type_id"], max(start, m_start) - m_start, end - m_start)
                found += [prefix + f for f in below] or ([m["name"]] if named else [])
            else:
                found.append(m["name"])
            if t["kind"] == "UNION" and found:
                break
        return list(dict.fromkeys(found))

    def name_bytes(self, type_id: int, label: str, ranges: list[tuple[int, int]]) -> str:
        """``label.field`` or ``label.outer.{field,field}`` for the fields the byte ranges
        cover, or ``label+0xOFF`` where they cover none (padding, bytes beyond the type)."""
        found: list[str] = []
        for start, end in ranges:
            found += self.fields(type_id, start, end)
        return join_fields(label, found, ranges[0][0])

    def pointers(self, type_id: int) -> list[tuple[str, int, int]]:
        """(field path, byte offset, type id pointed to) of every pointer an object of this
        type holds: members of embedded and anonymous structs and unions, and the elements
        of arrays of pointers (which share their array's name)."""
        if type_id not in self._pointers:
            found: list[tuple[str, int, int]] = []
            self._collect_pointers(type_id, 0, "", found)
            self._pointers[type_id] = found
        return self._pointers[type_id]

    def _collect_pointers(self, type_id: int, at: int, path: str, found: list) -> None:
        t = self.resolve(type_id)
        if t["kind"] == "PTR":
            found.append((path, at, t["type_id"]))
        elif t["kind"] == "ARRAY":
            element = t["type_id"]
            if self.resolve(element)["kind"] in ("PTR", *AGGREGATES):
                step = self.size(element)
                for i in range(min(t["nr_elems"], MAX_POINTER_ELEMENTS)):
                    self._collect_pointers(element, at + i * step, path, found)
        elif t["kind"] in AGGREGATES:
            for m in t["members"]:
                if m.get("bitfield_size"):
                    continue
                name = m["name"] if _named(m["name"]) else ""
                inner = f"{path}.{name}" if path and name else path or name
                self._collect_pointers(m["type_id"], at + m["bits_offset"] // 8, inner, found)
