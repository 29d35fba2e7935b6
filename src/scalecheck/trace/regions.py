"""Reads the QEMU plugin's binary output and finds the cache lines two regions conflict on.

File layout (little-endian; see docs/tracer.md): the 8-byte magic ``SCTRACE2``, then one
record per traced region::

    u32 'REGN', u32 vcpu, u32 tag, u32 flags, u64 accesses, u64 dropped_in_interrupts,
    u32 interrupts, u32 nlines, then nlines x
        (u64 paddr_line, u64 vaddr_line, u64 read_mask, u64 write_mask, u32 nsites,
         nsites x (u64 pc, u64 read_mask, u64 write_mask))

A site with PC 0 stands for the PCs beyond the plugin's per-line limit.

The file is appended while the guest runs; ``RegionReader`` hands out complete records
only, so it can follow a file that is still growing or was cut short by a crash.
"""

import struct
from dataclasses import dataclass, field
from pathlib import Path

FILE_MAGIC = b"SCTRACE2"
REGION_MAGIC = 0x4E474552
FLAG_CTXSWITCH = 1
FLAG_RESTARTED = 2
FLAG_PCS_TRUNCATED = 4

_HEAD = struct.Struct("<IIII QQ II")
_LINE = struct.Struct("<QQQQI")
_SITE = struct.Struct("<QQQ")


@dataclass
class Site:
    """The bytes of a line one instruction read and wrote."""
    pc: int
    read_mask: int
    write_mask: int

    @property
    def touched(self) -> int:
        return self.read_mask | self.write_mask


@dataclass
class Line:
    paddr: int
    vaddr: int
    read_mask: int
    write_mask: int
    sites: list  # [Site]

    @property
    def written(self) -> bool:
        return self.write_mask != 0


@dataclass
class Region:
    vcpu: int
    tag: int
    flags: int
    accesses: int
    dropped_in_interrupts: int
    interrupts: int
    lines: dict = field(default_factory=dict)  # paddr -> Line

    @property
    def context_switched(self) -> bool:
        return bool(self.flags & FLAG_CTXSWITCH)

    def without_sites(self, dropped) -> tuple:
        """This region with the code sites for which ``dropped(pc)`` holds left out (a line
        they alone touched goes too), and how many (line, site) entries went."""
        kept_lines, gone = {}, 0
        for paddr, line in self.lines.items():
            sites = [s for s in line.sites if not dropped(s.pc)]
            gone += len(line.sites) - len(sites)
            if len(sites) == len(line.sites):
                kept_lines[paddr] = line
            elif sites:
                read = write = 0
                for s in sites:
                    read, write = read | s.read_mask, write | s.write_mask
                kept_lines[paddr] = Line(paddr, line.vaddr, read, write, sites)
        return Region(self.vcpu, self.tag, self.flags, self.accesses, self.dropped_in_interrupts,
                      self.interrupts, kept_lines), gone


class TraceFormatError(Exception):
    pass


def _parse_region(buf: bytes, pos: int):
    """Returns (region, next_pos), or None if the record is not complete yet."""
    if len(buf) - pos < _HEAD.size:
        return None
    magic, vcpu, tag, flags, accesses, dropped, interrupts, nlines = _HEAD.unpack_from(buf, pos)
    if magic != REGION_MAGIC:
        raise TraceFormatError(f"bad region record at byte {pos}")
    pos += _HEAD.size
    region = Region(vcpu, tag, flags, accesses, dropped, interrupts)
    for _ in range(nlines):
        if len(buf) - pos < _LINE.size:
            return None
        paddr, vaddr, rmask, wmask, nsites = _LINE.unpack_from(buf, pos)
        pos += _LINE.size
        if len(buf) - pos < nsites * _SITE.size:
            return None
        sites = [Site(*fields) for fields in _SITE.iter_unpack(buf[pos:pos + nsites * _SITE.size])]
        pos += nsites * _SITE.size
        region.lines[paddr] = Line(paddr, vaddr, rmask, wmask, sites)
    return region, pos


class RegionReader:
    """Follows a growing trace file and yields each complete region once."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = len(FILE_MAGIC)
        self._checked_magic = False

    def read_new(self) -> list:
        try:
            with open(self.path, "rb") as f:
                if not self._checked_magic:
                    magic = f.read(len(FILE_MAGIC))
                    if len(magic) < len(FILE_MAGIC):
                        return []
                    if magic != FILE_MAGIC:
                        raise TraceFormatError(f"{self.path} is not a scalecheck trace")
                    self._checked_magic = True
                f.seek(self._offset)
                buf = f.read()
        except FileNotFoundError:
            return []
        regions, pos = [], 0
        while True:
            parsed = _parse_region(buf, pos)
            if parsed is None:
                break
            region, pos = parsed
            regions.append(region)
        self._offset += pos
        return regions


def shared_lines(a: Region, b: Region) -> list:
    """Lines both regions touched, at least one of them writing (pairs of Line)."""
    return [(a.lines[paddr], b.lines[paddr]) for paddr in sorted(a.lines.keys() & b.lines.keys())
            if a.lines[paddr].written or b.lines[paddr].written]
