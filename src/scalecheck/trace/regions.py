"""Reads the QEMU plugin's binary output and finds the cache lines two regions conflict on.

File layout (little-endian; see docs/tracer.md): the 8-byte magic ``SCTRACE1``, then one
record per traced region::

    u32 'REGN', u32 vcpu, u32 tag, u32 flags, u64 accesses, u64 dropped_in_interrupts,
    u32 interrupts, u32 nlines, then nlines x
        (u64 paddr_line, u64 vaddr_line, u64 read_mask, u64 write_mask, u32 npcs,
         npcs x (u64 pc, u8 wrote))

The file is appended while the guest runs; ``RegionReader`` hands out complete records
only, so it can follow a file that is still growing or was cut short by a crash.
"""

import struct
from dataclasses import dataclass, field
from pathlib import Path

FILE_MAGIC = b"SCTRACE1"
REGION_MAGIC = 0x4E474552
FLAG_CTXSWITCH = 1
FLAG_RESTARTED = 2
FLAG_PCS_TRUNCATED = 4

_HEAD = struct.Struct("<IIII QQ II")
_LINE = struct.Struct("<QQQQI")
_PC = struct.Struct("<QB")


@dataclass
class Line:
    paddr: int
    vaddr: int
    read_mask: int
    write_mask: int
    pcs: list  # [(pc, wrote)]

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
        paddr, vaddr, rmask, wmask, npcs = _LINE.unpack_from(buf, pos)
        pos += _LINE.size
        if len(buf) - pos < npcs * _PC.size:
            return None
        pcs = [_PC.unpack_from(buf, pos + i * _PC.size) for i in range(npcs)]
        pos += npcs * _PC.size
        region.lines[paddr] = Line(paddr, vaddr, rmask, wmask, [(pc, bool(w)) for pc, w in pcs])
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


def conflicting_lines(a: Region, b: Region, granularity: str = "line") -> list:
    """Lines both regions touched, at least one of them writing.

    With granularity "bytes" the touched bytes must overlap too (no false sharing).
    """
    out = []
    for paddr in sorted(a.lines.keys() & b.lines.keys()):
        la, lb = a.lines[paddr], b.lines[paddr]
        if not (la.written or lb.written):
            continue
        if granularity == "bytes":
            touched_a = la.read_mask | la.write_mask
            touched_b = lb.read_mask | lb.write_mask
            if not (la.write_mask & touched_b or lb.write_mask & touched_a):
                continue
        out.append((la, lb))
    return out
