"""A library's heap objects reached only through a handle: typed from DWARF of where the
handle comes from (the struct the allocating function returns, the adapter's variable),
and blocks of no known type named by allocation site and offset in the block, the same
in every run."""

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from scalecheck.run.run_cli import run_tests
from scalecheck.run.user import dwarfnames, heapnames
from test_trace_user import generate

ROOT = Path(__file__).resolve().parents[1]
IDTAB = ROOT / "tests" / "data" / "idtab"

LIBRARY = """
struct slot { long used, value; };
struct idtab { long lock, taken; struct slot *slots; };
struct idtab *idtab_new(void) { return 0; }
void *helper(void) { return 0; }
void *made_here(void) { struct idtab *made = 0; return made; }
"""
# The adapter's side: the handle's struct declared only, as a public header leaves it.
ADAPTER = "struct idtab;\nstruct idtab *tab;\n"


def test_blocks_are_typed_by_the_function_that_returned_them_or_the_adapter_handle(tmp_path):
    objects = []
    for name, text in (("adapter", ADAPTER), ("library", LIBRARY)):
        (tmp_path / f"{name}.c").write_text(text)
        objects.append(tmp_path / f"{name}.o")
        subprocess.run(
            ["cc", "-g", "-c", "-o", str(objects[-1]), f"{tmp_path / name}.c"], check=True
        )
    fields = dwarfnames.FieldNames(objects)
    pointer = struct.Struct("<Q").pack
    sites = {1: "idtab_new", 2: "helper"}
    # A fake snapshot: a table and its two slots, both made by idtab_new (the slots'
    # 32 bytes could be a struct idtab too: the table's typed pointer says otherwise).
    table, slots, untyped = 0x1000, 0x2000, 0x3010
    memory = {table: bytes(16) + pointer(slots), slots: bytes(32), untyped: bytes(100)}
    allocations = [(table, 24, 1), (slots, 32, 1), (untyped, 100, 2)]

    def namer(roots):
        return heapnames.DataNamer(fields, [], allocations, memory, roots, sites.__getitem__)

    def name(namer, block, first, last):
        """The name of bytes first..last of the block (on one line)."""
        line = (block + first) & ~63
        mask = sum(1 << (block + i - line) for i in range(first, last))
        return namer.name_lines([("heap", line, 0, mask)])[0]

    by_return = namer([])
    assert name(by_return, table, 8, 16) == "struct idtab.taken"
    assert name(by_return, slots, 24, 32) == "struct slot[1].value"
    # A block of no known type: its allocation site and the offset from its start.
    assert name(by_return, untyped, 0x20, 0x28) == "helper:alloc(100)+0x20"
    # The same block where malloc put it in another run, on another alignment.
    moved = 0x3030
    memory[moved] = memory.pop(untyped)
    allocations[2] = (moved, 100, 2)
    assert name(namer([]), moved, 0x20, 0x28) == "helper:alloc(100)+0x20"
    # A block made by a function that returns it as `void *`: the struct its local
    # pointer points to.
    sites[3] = "made_here"
    allocations.append((0x5000, 24, 3))
    memory[0x5000] = bytes(24)
    assert name(namer([]), 0x5000, 8, 16) == "struct idtab.taken"
    # Through the adapter's `struct idtab *tab` (incomplete where the adapter is built),
    # with no allocating function to go by.
    sites[1] = "main"
    memory[0x100] = pointer(table)
    by_handle = namer([(0x100, 8, "tab")])
    assert name(by_handle, table, 8, 16) == "struct idtab.taken"
    assert name(by_handle, slots, 8, 16) == "struct slot[0].value"


def _fields(name: str) -> set[str]:
    """`struct idtab.{lock,taken}` -> {`struct idtab.lock`, `struct idtab.taken`}."""
    label, _, rest = name.partition(".")
    inner = rest[1:-1].split(",") if rest.startswith("{") else [rest]
    return {f"{label}.{field}" for field in inner}


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user not installed")
def test_an_opaque_handle_library_is_named_by_struct_and_field_in_every_run(tmp_path, monkeypatch):
    tests_dir = generate(str(IDTAB / "model.py"), tmp_path / "tests")
    runs = []
    # The second run puts every block on pages of its own (glibc's mmap threshold below
    # the blocks' sizes): other addresses, other offsets in their lines.
    for tunables in (None, "glibc.malloc.mmap_threshold=32"):
        if tunables:
            monkeypatch.setenv("GLIBC_TUNABLES", tunables)
        else:
            monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
        shutil.rmtree(tests_dir / "trace", ignore_errors=True)
        run_tests(tests_dir, target=f"lib:{IDTAB / 'idtab.toml'}", quiet=True, jobs=1)
        lines = (tests_dir / "trace" / "results.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines[1:]]
        assert {r["status"] for r in records} <= {"ok", "left_path"}
        runs.append({(r["id"], c["line"], c["data"]) for r in records for c in r["conflicts"]})
    at = [{line for _, line, _ in run} for run in runs]
    assert at[0] and not at[0] & at[1]  # every conflicting line elsewhere
    named = [set().union(*(_fields(data) for _, _, data in run)) for run in runs]
    # Which fields share a line depends on where a block lands; the fields do not.
    assert named[0] == named[1], named
    assert {"struct idtab.lock", "struct idtab.taken", "struct slot[0].used"} <= named[0]
    assert all(f.startswith(("struct idtab.", "struct slot[")) for f in named[0]), named
