"""Naming of conflicting data: the BTF reader (bpftool) and field lookup on a small BTF blob
made from tests/data/btf_types.c with `gcc -g` + `pahole`, the slab-cache-to-type table,
guest-memory translation, and the namer over a fake guest memory. No VM is booted here;
tests/test_trace_vm.py checks the names a real kernel gives."""

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from scalecheck.run import outcome
from scalecheck.run.linux import datanames, kernel_layout, type_tables
from scalecheck.run.linux.btf import Types
from scalecheck.run.linux.kernel_symbols import DIRECT_MAP, KERNEL_IMAGE, VMEMMAP, KernelSymbols
from scalecheck.run.linux.kernelmem import GuestMemory, KernelMemory, ram_mapping, read_kernel_btf
from scalecheck.run.regions import Line

SOURCE = Path(__file__).parent / "data" / "btf_types.c"
TOOLS = ("gcc", "pahole", "bpftool")

needs_tools = pytest.mark.skipif(
    not all(shutil.which(t) for t in TOOLS),
    reason="needs gcc, pahole (dwarves) and bpftool (scripts/setup.d/20-tracer.sh)",
)


@pytest.fixture(scope="module")
def btf_file(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("btf")
    obj, blob = out / "types.o", out / "types.btf"
    subprocess.run(["gcc", "-g", "-c", str(SOURCE), "-o", str(obj)], check=True)
    subprocess.run(["pahole", f"--btf_encode_detached={blob}", str(obj)], check=True)
    return blob


@pytest.fixture(scope="module")
def types(btf_file) -> Types:
    return Types.from_file(btf_file)


# ---- BTF reader and field lookup ----


@needs_tools
def test_btf_reader_finds_structs_offsets_vars_and_enums(types):
    files = types.struct("files_struct")
    assert files is not None and types.size(files) == 152
    assert types.struct("no_such_struct") is None
    assert types.offset_of("files_struct", "file_lock") == 48
    # Members of anonymous structs and unions are found through them.
    assert types.offset_of("files_struct", "anon_b") == 20
    assert types.offset_of("page", "compound_head") == 8
    assert types.offset_of("page", "mapping") == 24
    assert types.offset_of("slab", "slab_cache") == 24
    assert types.enum("pageflags")["PG_slab"] == 9
    assert types.var_type("runqueues") == types.struct("rq")
    assert types.size(types.struct("page")) == 64
    # `void *mapping` points to type 0, void.
    (pointee,) = [t for path, _, t in types.pointers(types.struct("page")) if path == "mapping"]
    assert types.resolve(pointee)["kind"] == "VOID"


@needs_tools
def test_field_lookup_names_the_fields_a_byte_range_covers(types):
    files = types.struct("files_struct")
    assert types.fields(files, 48, 52) == ["file_lock"]
    assert types.fields(files, 48, 56) == ["file_lock", "next_fd"]
    # Anonymous struct: its members are named directly.
    assert types.fields(files, 20, 24) == ["anon_b"]
    # Union: the first member that overlaps stands for the bytes.
    assert types.fields(files, 12, 16) == ["second_alternative"]
    assert types.fields(files, 8, 12) == ["first_alternative"]
    # An embedded struct up to a line is one field; a larger one is looked into.
    assert types.fields(files, 32, 40) == ["fdtab"]
    assert types.fields(files, 56 + 80, 56 + 84) == ["wide.inner"]
    # Bit fields, the hole after them, and a flexible array at the end.
    assert types.fields(files, 144, 145) == ["small_bits", "more_bits"]
    assert types.fields(files, 148, 152) == []
    assert types.fields(files, 160, 168) == ["fd_array"]
    # Padding holds no field.
    assert types.fields(files, 5, 8) == []


@needs_tools
def test_field_lookup_is_computed_once_per_type_and_range(btf_file):
    # A real BTF; resolve() counted to see whether the struct is walked again.
    walked = Types.from_file(btf_file)
    calls = []
    resolve = walked.resolve
    walked.resolve = lambda type_id: calls.append(type_id) or resolve(type_id)  # type: ignore[method-assign]
    files = walked.struct("files_struct")
    first = walked.fields(files, 48, 56)
    assert first == ["file_lock", "next_fd"] and walked.size(files) == 152 and calls
    calls.clear()
    first.append("changed by the caller")
    assert walked.fields(files, 48, 56) == ["file_lock", "next_fd"]
    assert walked.size(files) == 152
    assert calls == []


@needs_tools
def test_names_read_struct_dot_field(types):
    files = types.struct("files_struct")
    assert types.name_bytes(files, "files_struct", [(48, 52)]) == "files_struct.file_lock"
    assert (
        types.name_bytes(files, "files_struct", [(0, 4), (52, 56)])
        == "files_struct.{count,next_fd}"
    )
    assert types.name_bytes(files, "files_struct", [(5, 7)]) == "files_struct+0x5"
    # Fields of one embedded struct share its name.
    assert (
        types.name_bytes(files, "files_struct", [(56 + 72, 56 + 84)])
        == "files_struct.wide.{words,inner}"
    )


# ---- the slab-cache-to-type table ----


def test_type_tables_are_data_and_reject_malformed_lines():
    tables = type_tables.TypeTables.load()
    assert tables.slabs["files_cache"] == "files_struct"
    assert tables.slabs["filp"] == "file"
    assert tables.slabs["shmem_inode_cache"] == "shmem_inode_info"
    assert tables.statics["init_ucounts"] == "ucounts"
    assert type_tables.load_type_table("x.txt", "# comment\nmy_cache  my_struct  # why\n\n") == {
        "my_cache": "my_struct"
    }
    with pytest.raises(ValueError, match=r"x\.txt: expected `name struct`"):
        type_tables.load_type_table("x.txt", "only_one_word\n")


# ---- guest memory ----


def _ram_file(path: Path, size: int, writes: dict[int, bytes]) -> GuestMemory:
    with open(path, "wb") as f:
        f.truncate(size)
        for paddr, data in writes.items():
            f.seek(paddr)
            f.write(data)
    return GuestMemory(path, size)


def _entry(paddr: int, huge: bool = False) -> bytes:
    return struct.pack("<Q", paddr | 0x63 | (0x80 if huge else 0))


def test_kernel_memory_walks_page_tables_and_reads_btf(tmp_path):
    """A 4-level walk through the guest's RAM file: a 2 MiB mapping and a 4 KiB one."""
    top = 0x1000  # physical address of init_top_pgt
    huge_va = VMEMMAP[0] + 0x20_1234
    small_va = VMEMMAP[0] + (1 << 30) + 0x5678
    banner_va, btf_va = KERNEL_IMAGE[0] + 0x8000, KERNEL_IMAGE[0] + 0x9000
    pml4 = (VMEMMAP[0] >> 39) & 511
    writes = {
        top + pml4 * 8: _entry(0x2000),
        0x2000 + 0 * 8: _entry(0x3000),  # the first GiB of vmemmap
        0x2000 + 1 * 8: _entry(0x4000),  # the second
        0x3000 + 1 * 8: _entry(0x40_0000, huge=True),  # 2 MiB page at 4 MiB
        0x4000 + 0 * 8: _entry(0x5000),
        0x5000 + 5 * 8: _entry(0x7000),  # 4 KiB page
        0x40_0000 + 0x1234: b"huge",
        0x7000 + 0x678: b"small",
        0x8000: b"Linux version 6.1.0 (test)\0",
        0x9000: b"\x9f\xeb\x01\0BTF",
    }
    memory = _ram_file(tmp_path / "ram", 8 << 20, writes)
    kernel = KernelMemory(memory, KERNEL_IMAGE[0] + top)
    assert kernel.phys(huge_va) == 0x40_1234
    assert kernel.read(huge_va, 4) == b"huge"
    assert kernel.read(small_va, 5) == b"small"
    assert kernel.phys(VMEMMAP[0] + (2 << 30)) is None  # not mapped
    assert kernel.phys(DIRECT_MAP[0] + 0x7678) == 0x7678
    assert kernel.string(DIRECT_MAP[0] + 0x8000) == "Linux version 6.1.0 (test)"
    symbols = {"__start_BTF": btf_va, "__stop_BTF": btf_va + 7, "linux_banner": banner_va}
    assert read_kernel_btf(kernel, symbols) == b"\x9f\xeb\x01\0BTF"
    # A kernel image not where it was linked: no BTF rather than wrong bytes.
    assert read_kernel_btf(kernel, dict(symbols, linux_banner=banner_va + 8)) is None
    memory.close()


def test_qemu_ram_is_its_one_anonymous_mapping_of_the_guest_size():
    maps = (
        "55d0c0a00000-55d0c0c00000 r-xp 00000000 fe:01 123  /usr/bin/qemu-system-x86_64\n"
        "7feaafe00000-7feacfe00000 rw-p 00000000 00:00 0\n"
        "7feacfe00000-7feacfe01000 ---p 00000000 00:00 0\n"
        "7feb00000000-7feb20000000 rw-s 00000000 00:1b 181  /dev/shm/other.ram\n"
    )
    assert ram_mapping(maps, 512 << 20) == 0x7FEAAFE00000
    assert ram_mapping(maps, 256 << 20) is None
    # Two candidates: none is trusted.
    twice = maps + "7fec00000000-7fec20000000 rw-p 00000000 00:00 0\n"
    assert ram_mapping(twice, 512 << 20) is None


def test_guest_memory_reads_from_a_base_offset_and_refuses_beyond_its_size(tmp_path):
    path = tmp_path / "mem"
    path.write_bytes(b"x" * 100 + b"guest ram" + b"\0" * 27)
    memory = GuestMemory(path, size=36, base=100)
    assert memory.read(0, 9) == b"guest ram"
    assert memory.read(30, 8) is None  # beyond the guest's RAM
    memory.close()


# ---- the namer over a fake guest memory ----


class FakeKernelMemory:
    """Stands in for KernelMemory in unit tests: kernel virtual memory as a dict of pages."""

    def __init__(self):
        self.pages: dict[int, bytearray] = {}

    def write(self, vaddr: int, data: bytes):
        for i, byte in enumerate(data):
            page = self.pages.setdefault((vaddr + i) >> 12, bytearray(4096))
            page[(vaddr + i) & 4095] = byte

    def read(self, vaddr: int, size: int) -> bytes:
        return bytes(
            self.pages.get((vaddr + i) >> 12, bytes(4096))[(vaddr + i) & 4095] for i in range(size)
        )

    def u64(self, vaddr: int) -> int:
        return struct.unpack("<Q", self.read(vaddr, 8))[0]

    def u32(self, vaddr: int) -> int:
        return struct.unpack("<I", self.read(vaddr, 4))[0]

    def string(self, vaddr: int) -> str:
        return self.read(vaddr, 64).split(b"\0")[0].decode()


SLAB_FRAME, TAIL_FRAME, ANON_FRAME, CACHE_FRAME, PAGE_CACHE_FRAME = (
    0x100,
    0x101,
    0x200,
    0x300,
    0x400,
)
CACHE = DIRECT_MAP[0] + 0x30_0000


def _page(frame: int) -> int:
    return VMEMMAP[0] + frame * 64


def _slab(mem, types, frame: int, cache: int, name: str, object_size: int, stride: int):
    """A slab of cache ``name`` (its kmem_cache at ``cache``) in ``frame``."""
    mem.write(_page(frame), struct.pack("<Q", 1 << 9 | 1 << 6))  # PG_slab | PG_head
    mem.write(_page(frame) + types.offset_of("slab", "slab_cache"), struct.pack("<Q", cache))
    mem.write(
        cache + types.offset_of("kmem_cache", "size"), struct.pack("<II", stride, object_size)
    )
    mem.write(cache + types.offset_of("kmem_cache", "name"), struct.pack("<Q", cache + 0x100))
    mem.write(cache + 0x100, name.encode() + b"\0")


def _guest(types: Types, cache_name: str, object_size: int, stride: int) -> FakeKernelMemory:
    """A slab of ``cache_name`` at SLAB_FRAME (two pages: a head and a tail), an anonymous
    page and a page-cache page."""
    mem = FakeKernelMemory()
    _slab(mem, types, SLAB_FRAME, CACHE, cache_name, object_size, stride)
    mem.write(_page(TAIL_FRAME) + 8, struct.pack("<Q", _page(SLAB_FRAME) + 1))  # compound_head
    mem.write(_page(ANON_FRAME) + 24, struct.pack("<Q", DIRECT_MAP[0] + 0x5001))
    mem.write(_page(PAGE_CACHE_FRAME) + 24, struct.pack("<Q", DIRECT_MAP[0] + 0x6000))
    return mem


def _symbols() -> KernelSymbols:
    kallsyms = (
        "0000000000000000 A __per_cpu_start\n"
        "0000000000001000 A runqueues\n"
        "0000000000002000 A __per_cpu_end\n"
        "ffffffff82000000 D jiffies\n"
        "ffffffff82001000 D init_files\n"
        "ffffffff82002000 D after_init_files\n"
    )
    return KernelSymbols(kallsyms, {"1": DIRECT_MAP[0] + 0x100_0000})


def _namer(types, mem) -> datanames.DataNamer:
    return datanames.DataNamer(_symbols(), types, type_tables.TypeTables.load(), mem)


def _mask(start: int, end: int) -> int:
    return ((1 << (end - start)) - 1) << start


@needs_tools
def test_heap_line_named_by_slab_cache_struct_and_field(types):
    namer = _namer(types, _guest(types, "files_cache", 152, 192))
    slab = SLAB_FRAME << 12
    # Object 2 starts at slab offset 384 = line 6; file_lock is at 48 in the object.
    line = slab + 384
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(48, 52)) == (
        "files_struct.file_lock"
    )
    # Object 1 (offset 192) spans lines 3 and 4; line 4 holds its bytes 64-127 (`wide`).
    line = slab + 256
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(0, 8)) == (
        "files_struct.wide.words"
    )
    # A line on the slab's second page (a tail page of the compound page): object 21
    # (offset 4032) ends there; bytes 4096-4099 are its offset 64.
    line = (TAIL_FRAME << 12) + 0
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(0, 4)) == (
        "files_struct.wide.words"
    )
    # With a stride of 160, line 2 holds the end of object 0 (from its offset 128) and the
    # start of object 1: both are named.
    namer = _namer(types, _guest(types, "files_cache", 152, 160))
    line = slab + 128
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(24, 28) | _mask(32, 36)) == (
        "files_struct.fd_array & files_struct.count"
    )


@needs_tools
def test_caches_without_a_known_type_fall_back_to_cache_and_offset(types):
    line = (SLAB_FRAME << 12) + 64
    # kmalloc caches hold objects of many types.
    namer = _namer(types, _guest(types, "kmalloc-192", 192, 192))
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(8, 16)) == "kmalloc-192+0x48"
    # A table entry whose struct does not fit the cache's objects (another kernel's layout).
    namer = _namer(types, _guest(types, "files_cache", 96, 96))
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(0, 8)) == "files_cache+0x40"
    # A cache named like a struct of the kernel needs no table entry.
    namer = _namer(types, _guest(types, "rq", 24, 24))
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(12, 16)) == "rq.nr_running"


@needs_tools
def test_untyped_objects_named_by_the_typed_pointer_that_leads_to_them(types):
    """An `owner` object points to an fdtable (kmalloc-32), whose open_fds points to a
    bitmap (kmalloc-512); owner.direct_bits points to another kmalloc-512 object."""
    mem = FakeKernelMemory()
    owner_frame, table_frame, bits_frame = 0x600, 0x700, 0x800
    _slab(mem, types, owner_frame, CACHE, "owner", 24, 24)
    _slab(mem, types, table_frame, CACHE + 0x1000, "kmalloc-32", 32, 32)
    _slab(mem, types, bits_frame, CACHE + 0x2000, "kmalloc-512", 512, 512)
    owner = DIRECT_MAP[0] + (owner_frame << 12)
    table = DIRECT_MAP[0] + (table_frame << 12) + 32
    bits = DIRECT_MAP[0] + (bits_frame << 12)
    mem.write(owner + 8, struct.pack("<QQ", table, bits + 512))
    mem.write(table + 16, struct.pack("<Q", bits))
    namer = _namer(types, mem)

    def line(address: int, start: int, end: int):
        """The line holding bytes [start, end) of the object at address."""
        at = address & ~63
        return ("heap", at, at - DIRECT_MAP[0], _mask(address - at + start, address - at + end))

    assert namer.name_lines(
        [
            line(owner, 0, 4),
            line(bits, 8, 16),  # through owner.fdt, then fdtable.open_fds
            line(table, 8, 16),  # the fdtable itself: owner.fdt gives its type
            line(bits + 512, 0, 8),  # owner.direct_bits
            line(bits + 1536 + 64, 0, 8),  # nothing points there
        ]
    ) == [
        "owner.count",
        "fdtable.open_fds[]",
        "fdtable.fd",
        "owner.direct_bits[]",
        "kmalloc-512+0x40",
    ]
    # Without a typed object among the lines, there is nothing to follow.
    assert namer.name_lines([line(bits, 8, 16)]) == ["kmalloc-512+0x8"]


@needs_tools
def test_pages_that_are_not_slabs_are_named_by_what_they_hold(types):
    namer = _namer(types, _guest(types, "files_cache", 152, 192))
    for frame, name in (
        (ANON_FRAME, "anon page"),
        (PAGE_CACHE_FRAME, "page cache"),
        (0x500, "page"),
    ):
        assert namer.name("heap", DIRECT_MAP[0] + (frame << 12), frame << 12, 0xFF) == name
    # struct page lines: a slab's head page is described as a struct slab.
    slab_page = VMEMMAP[0] + SLAB_FRAME * 64
    assert namer.name("heap", slab_page, 0, _mask(24, 32)) == "slab[files_cache].slab_cache"
    assert namer.name("heap", VMEMMAP[0] + ANON_FRAME * 64, 0, _mask(52, 56)) == "page._refcount"
    assert namer.name("pagetable", DIRECT_MAP[0], 0, 0xFF) == "page table"
    assert namer.name("user", 0x1000, 0, 0xFF) == "user memory"


@needs_tools
def test_static_and_percpu_data_named_by_symbol_and_field(types):
    namer = _namer(types, FakeKernelMemory())
    runqueues_cpu1 = DIRECT_MAP[0] + 0x100_1000
    assert namer.name("percpu", runqueues_cpu1, 0, _mask(4, 8)) == "runqueues.nr_running"
    assert namer.name("percpu", runqueues_cpu1, 0, _mask(0, 8)) == "runqueues.{__lock,nr_running}"
    # No BTF type for the variable: the symbol and offset.
    assert namer.name("static", 0xFFFFFFFF82000000, 0, _mask(8, 16)) == "jiffies+0x8"
    assert namer.name("static", 0xFFFFFFFF82000000, 0, _mask(0, 8)) == "jiffies"
    # static_types.txt gives the type BTF does not (init_files is a files_struct), where
    # the struct covers the bytes.
    assert namer.name("static", 0xFFFFFFFF82001000, 0, _mask(48, 52)) == "init_files.file_lock"
    assert namer.name("static", 0xFFFFFFFF820010C0, 0, _mask(0, 8)) == "init_files+0xc0"


def test_without_btf_or_guest_memory_heap_data_stays_unnamed():
    namer = datanames.DataNamer(_symbols(), None, type_tables.TypeTables({}, {}), None)
    assert namer.name("heap", DIRECT_MAP[0] + 0x1000, 0x1000, 0xFF) == ""
    assert namer.name("static", 0xFFFFFFFF82000000, 0, _mask(8, 16)) == "jiffies+0x8"


def test_conflict_bytes_are_the_shared_bytes_or_else_the_written_ones():
    a = Line(0, 0, read_mask=0x0F, write_mask=0xF0)
    b = Line(0, 0, read_mask=0xF0, write_mask=0)
    assert outcome.conflict_bytes(a, b) == 0xF0  # B read what A wrote
    c = Line(0, 0, read_mask=0, write_mask=0xF00)
    assert outcome.conflict_bytes(a, c) == 0xFF0  # false sharing: what either wrote


# ---- layouts of real kernels: Debian 12's 6.1 and 6.12 ----

# tests/data/layout-SERIES.c: the offsets naming reads, dumped from each kernel's BTF by
# tests/data/dump_kernel_layouts.py. What each kernel's BTF says, written out here:
KERNEL_LAYOUTS = {
    # Up to 6.9 a slab's head page has bit PG_slab (9) of page.flags set.
    "6.1": kernel_layout.Layout(
        page_size=64,
        compound_head=8,
        mapping=24,
        slab_cache=24,
        cache_name=96,
        cache_size=24,
        cache_object_size=28,
        cache_red_left_pad=88,
        slab_mark=kernel_layout.SlabMark(offset=0, size=8, mask=1 << 9, value=1 << 9),
    ),
    # From 6.12 the top byte of page.page_type is the page's type: PGTY_slab (0xf5);
    # struct slab lost its list_head before slab_cache.
    "6.12": kernel_layout.Layout(
        page_size=64,
        compound_head=8,
        mapping=24,
        slab_cache=8,
        cache_name=96,
        cache_size=24,
        cache_object_size=28,
        cache_red_left_pad=88,
        slab_mark=kernel_layout.SlabMark(offset=48, size=4, mask=0xFF << 24, value=0xF5 << 24),
    ),
}
# PREEMPT_RT: the same page and slab layouts, but spinlock_t is an rt_mutex (32 bytes, not
# 4), so the structs holding one have other offsets: files_struct.next_fd moves from 132 to 160.
KERNEL_LAYOUTS["6.12-rt"] = KERNEL_LAYOUTS["6.12"]
NEXT_FD = {"6.1": 132, "6.12": 132, "6.12-rt": 160}


@pytest.fixture(scope="module", params=sorted(KERNEL_LAYOUTS))
def kernel_types(request, tmp_path_factory) -> tuple[str, Types]:
    series = request.param
    out = tmp_path_factory.mktemp(f"btf-{series}")
    obj, blob = out / "layout.o", out / "layout.btf"
    source = SOURCE.parent / f"layout-{series}.c"
    subprocess.run(["gcc", "-g", "-c", str(source), "-o", str(obj)], check=True)
    subprocess.run(["pahole", f"--btf_encode_detached={blob}", str(obj)], check=True)
    return series, Types.from_file(blob)


@needs_tools
def test_each_kernels_layout_is_read_from_its_btf(kernel_types):
    series, types = kernel_types
    assert kernel_layout.Layout.of(types) == KERNEL_LAYOUTS[series]
    assert types.offset_of("files_struct", "file_lock") == 128
    assert types.offset_of("files_struct", "next_fd") == NEXT_FD[series]


@needs_tools
def test_heap_lines_named_on_each_kernel_as_it_marks_its_slabs(kernel_types):
    """A files_cache slab marked the way this kernel marks slabs (and nothing else: 6.12's
    page.flags has no slab bit, 6.1's page_type is unused) is recognised; a page whose
    mark says something else is not a slab."""
    series, types = kernel_types
    mem = FakeKernelMemory()
    head = _page(SLAB_FRAME)
    if series == "6.1":
        mem.write(head, struct.pack("<Q", 1 << 9))
    else:
        mem.write(head + 48, struct.pack("<I", 0xF5 << 24))
        mem.write(_page(0x500) + 48, struct.pack("<I", 0xF0 << 24))  # PGTY_buddy
    mem.write(head + types.offset_of("slab", "slab_cache"), struct.pack("<Q", CACHE))
    mem.write(CACHE + types.offset_of("kmem_cache", "size"), struct.pack("<II", 768, 704))
    mem.write(CACHE + types.offset_of("kmem_cache", "name"), struct.pack("<Q", CACHE + 0x2100))
    mem.write(CACHE + 0x2100, b"files_cache\0")
    namer = _namer(types, mem)
    line = (SLAB_FRAME << 12) + 768 + 128  # object 1's file_lock and next_fd
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(0, 4)) == "files_struct.file_lock"
    # The 8 bytes from file_lock: the lock and next_fd, or on PREEMPT_RT the lock alone.
    both = (
        "files_struct.{file_lock,next_fd}" if NEXT_FD[series] == 132 else "files_struct.file_lock"
    )
    assert namer.name("heap", DIRECT_MAP[0] + line, line, _mask(0, 8)) == both
    assert namer.name("heap", DIRECT_MAP[0] + (0x500 << 12), 0x500 << 12, 0xFF) == "page"


def test_slab_mark_of_each_scheme_from_btf_enums():
    """How a slab page is marked, from the enums BTF holds: PG_slab of enum pageflags (to
    6.9), PG_slab of enum pagetype with PAGE_TYPE_BASE (6.10, 6.11: a type clears its bit
    in a page_type that starts all ones; BTF stores 0x80000000 signed), PGTY_slab (6.12+);
    none of them: no layout, heap data stays unnamed."""
    u32 = {"id": 1, "kind": "INT", "name": "unsigned int", "size": 4}
    u64 = {"id": 2, "kind": "INT", "name": "unsigned long", "size": 8}
    page = {
        "id": 3,
        "kind": "STRUCT",
        "name": "page",
        "size": 64,
        "members": [
            {"name": "flags", "type_id": 2, "bits_offset": 0},
            {"name": "page_type", "type_id": 1, "bits_offset": 48 * 8},
        ],
    }

    def mark(enum_name, values):
        enum = {
            "id": 4,
            "kind": "ENUM",
            "name": enum_name,
            "size": 4,
            "values": [{"name": k, "val": v} for k, v in values.items()],
        }
        return kernel_layout.SlabMark.of(Types([u32, u64, page, enum]))

    assert mark("pageflags", {"PG_slab": 7}) == kernel_layout.SlabMark(0, 8, 1 << 7, 1 << 7)
    middle = mark("pagetype", {"PAGE_TYPE_BASE": -0x80000000, "PG_slab": 0x02000000})
    assert middle == kernel_layout.SlabMark(48, 4, 0x82000000, 0x80000000)
    assert middle.matches(0xFFFFFFFF & ~0x02000000) and not middle.matches(0xFFFFFFFF)
    assert mark("pagetype", {"PGTY_slab": 0xF5}) == kernel_layout.SlabMark(
        48, 4, 0xFF << 24, 0xF5 << 24
    )
    assert mark("pagetype", {"PGTY_buddy": 0xF0}) is None
    assert mark("other", {"PG_slab": 9}) is None


@needs_tools
def test_naming_support_says_what_a_kernel_lacks(kernel_types):
    _, types = kernel_types
    full = kernel_layout.naming_support(types, _symbols())
    assert full == {"btf": True, "slabs": True, "percpu": True, "missing": ""}
    bare = kernel_layout.naming_support(None, KernelSymbols("", {}))
    assert not bare["btf"] and not bare["slabs"] and not bare["percpu"]
    assert bare["missing"].startswith("no BTF") and "per-cpu" in bare["missing"]
    # BTF without a slab layout naming knows (here: none at all).
    assert kernel_layout.naming_support(Types([]), _symbols())["missing"].startswith("BTF lacks")
