"""Reads the guest kernel's memory from the host, without stopping or asking the guest.

QEMU backs the guest's RAM with a shared file (``-object memory-backend-file,share=on``),
so guest-physical address P is byte P of that file (the VM has less RAM than the PCI hole
starts at). Kernel virtual addresses are translated as the kernel does: direct map and
kernel image by subtraction (``nokaslr``: the image runs where it was linked), anything
else (vmemmap, vmalloc) by walking the kernel's page tables from ``init_top_pgt``.
"""

import mmap
import struct
from pathlib import Path

from scalecheck.trace.symbols import DIRECT_MAP, KERNEL_IMAGE

PAGE_SHIFT = 12
_PRESENT, _HUGE = 1, 1 << 7
_FRAME = 0x000F_FFFF_FFFF_F000
# Levels of a 4-level walk: (shift of the index, size of a huge mapping at that level).
_LEVELS = ((39, None), (30, 1 << 30), (21, 1 << 21), (12, None))
BANNER = b"Linux version "


class GuestMemory:
    """Guest-physical memory of one boot, mapped read-only from QEMU's RAM file."""

    def __init__(self, path: Path):
        self.path = path
        self._map: mmap.mmap | None = None

    def read(self, paddr: int, size: int) -> bytes | None:
        if self._map is None:
            try:
                with open(self.path, "rb") as f:
                    self._map = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            except (OSError, ValueError):
                return None
        if paddr < 0 or paddr + size > len(self._map):
            return None
        return self._map[paddr : paddr + size]

    def close(self):
        if self._map is not None:
            self._map.close()
            self._map = None


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
