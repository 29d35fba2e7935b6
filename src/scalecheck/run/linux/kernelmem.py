"""Reads the guest kernel's memory from the host, without stopping or asking the guest.

Guest-physical address P is byte P of the guest's RAM as QEMU holds it: its anonymous RAM
mapping, read through ``/proc/<qemu pid>/mem`` while the guest runs (QEMU backs it with huge
pages, which a shared file would not get), or, for the probe boot, whose memory is read
after the guest powered off, a RAM file (``-object memory-backend-file,share=on``). The VM
has less RAM than the PCI hole starts at, so RAM is one block from address 0. Kernel
virtual addresses are translated as the kernel does: direct map and kernel image by
subtraction (``nokaslr``: the image runs where it was linked), anything else (vmemmap,
vmalloc) by walking the kernel's page tables from ``init_top_pgt``.
"""

import ctypes
import os
import struct
from pathlib import Path

from scalecheck.run.linux.kernel_symbols import DIRECT_MAP, KERNEL_IMAGE

PAGE_SHIFT = 12
_PRESENT, _HUGE = 1, 1 << 7
_FRAME = 0x000F_FFFF_FFFF_F000
# Levels of a 4-level walk: (shift of the index, size of a huge mapping at that level).
_LEVELS = ((39, None), (30, 1 << 30), (21, 1 << 21), (12, None))
BANNER = b"Linux version "
# pread through ctypes.PyDLL keeps the GIL for the call (a few microseconds): os.pread
# gives it up, and with the other VMs' threads parsing traces, getting it back waits for
# their switch interval (5 ms) at every read.
_LIBC_HOLDING_GIL = ctypes.PyDLL(None, use_errno=True)
_LIBC_HOLDING_GIL.pread.restype = ctypes.c_ssize_t
_LIBC_HOLDING_GIL.pread.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long)


class GuestMemory:
    """Guest-physical memory of one boot: ``size`` bytes of a file from offset ``base`` (the
    probe's RAM file, or /proc/<pid>/mem at the address of QEMU's RAM mapping)."""

    def __init__(self, path: Path, size: int, base: int = 0):
        self.path, self.size, self.base = path, size, base
        self._fd: int | None = None

    def read(self, paddr: int, size: int) -> bytes | None:
        if paddr < 0 or paddr + size > self.size:
            return None
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        buf = ctypes.create_string_buffer(size)
        done = _LIBC_HOLDING_GIL.pread(self._fd, buf, size, self.base + paddr)
        return buf.raw if done == size else None

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def ram_mapping(maps: str, size: int) -> int | None:
    """The address of QEMU's guest RAM in its /proc/<pid>/maps text: the one anonymous
    writable mapping of exactly the guest's RAM size (None if there is not exactly one)."""
    found = []
    for line in maps.splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[1].startswith("rw"):
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if end - start == size:
                found.append(start)
    return found[0] if len(found) == 1 else None


def qemu_ram(pid: int, size: int) -> GuestMemory | None:
    """The guest RAM of the running QEMU process ``pid`` (None if it cannot be found)."""
    try:
        base = ram_mapping(Path(f"/proc/{pid}/maps").read_text(), size)
    except OSError:
        return None
    return None if base is None else GuestMemory(Path(f"/proc/{pid}/mem"), size, base)


class KernelMemory:
    """Kernel virtual memory of one boot. Page-table translations are cached for the boot:
    the kernel's own mappings of vmemmap do not change while it runs."""

    def __init__(self, memory: GuestMemory, top_table: int):
        self.memory = memory
        self._top_table = top_table  # init_top_pgt, a kernel image address
        self._pages: dict[int, int | None] = {}

    def phys(self, vaddr: int) -> int | None:
        if DIRECT_MAP[0] <= vaddr < DIRECT_MAP[1]:
            return vaddr - DIRECT_MAP[0]
        if KERNEL_IMAGE[0] <= vaddr < KERNEL_IMAGE[1]:
            return vaddr - KERNEL_IMAGE[0]
        page = vaddr >> PAGE_SHIFT
        if page not in self._pages:
            self._pages[page] = self._walk(page << PAGE_SHIFT)
        frame = self._pages[page]
        return None if frame is None else frame | (vaddr & ((1 << PAGE_SHIFT) - 1))

    def _walk(self, vaddr: int) -> int | None:
        table = self.phys(self._top_table)
        for shift, huge_size in _LEVELS:
            if table is None:
                return None
            entry = self.memory.read(table + ((vaddr >> shift) & 511) * 8, 8)
            if entry is None:
                return None
            (value,) = struct.unpack("<Q", entry)
            if not value & _PRESENT:
                return None
            if huge_size and value & _HUGE:
                return (value & _FRAME & ~(huge_size - 1)) | (vaddr & (huge_size - 1))
            table = value & _FRAME
        return table

    def read(self, vaddr: int, size: int) -> bytes | None:
        out = b""
        while len(out) < size:
            at = vaddr + len(out)
            paddr = self.phys(at)
            page_left = (1 << PAGE_SHIFT) - (at & ((1 << PAGE_SHIFT) - 1))
            chunk = (
                None if paddr is None else self.memory.read(paddr, min(size - len(out), page_left))
            )
            if chunk is None:
                return None
            out += chunk
        return out

    def u64(self, vaddr: int) -> int | None:
        raw = self.read(vaddr, 8)
        return None if raw is None else struct.unpack("<Q", raw)[0]

    def u32(self, vaddr: int) -> int | None:
        raw = self.read(vaddr, 4)
        return None if raw is None else struct.unpack("<I", raw)[0]

    def string(self, vaddr: int, limit: int = 64) -> str | None:
        raw = b""
        while len(raw) < limit:
            chunk = self.read(vaddr + len(raw), 8 - (vaddr + len(raw)) % 8)
            if chunk is None:
                return None
            raw += chunk
            if b"\0" in chunk:
                break
        return raw.split(b"\0")[0].decode("ascii", "replace")


def read_kernel_btf(kernel: KernelMemory, symbols: dict) -> bytes | None:
    """The kernel's BTF (what /sys/kernel/btf/vmlinux shows: the bytes between
    ``__start_BTF`` and ``__stop_BTF``), or None if the kernel has none or its image is not
    where it was linked (checked on ``linux_banner``)."""
    start, stop, banner = (symbols.get(n) for n in ("__start_BTF", "__stop_BTF", "linux_banner"))
    if not (start and stop and banner) or kernel.read(banner, len(BANNER)) != BANNER:
        return None
    paddr = kernel.phys(start)
    return None if paddr is None else kernel.memory.read(paddr, stop - start)
