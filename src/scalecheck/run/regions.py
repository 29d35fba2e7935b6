"""Reads the QEMU plugin's binary output and finds the cache lines two regions conflict on.

File layout (little-endian; see docs/tracer.md): the 8-byte magic ``SCTRACE3``, then one
record per traced region::

    u32 'REGN', u32 vcpu, u32 tag, u32 flags, u64 accesses, u64 dropped_in_interrupts,
    u32 interrupts, u32 nlines, then nlines x
        (u64 paddr_line, u64 vaddr_line, u64 read_mask, u64 write_mask, u32 nsites,
         [u32 transfers, u32 invalidations, when flags has FLAG_TRANSFERS],
         [u32 pair_transfers, when flags has FLAG_PAIR_TRANSFERS],
         [u32 load_transfers, u32 atomic_transfers, u32 atomic_invalidations, when flags
          has FLAG_ACCESS_KINDS],
         nsites x (u64 pc, u64 read_mask, u64 write_mask))

A site with PC 0 stands for the PCs beyond the plugin's per-line limit.

The file is appended while the guest runs; ``RegionReader`` hands out complete records
only, so it can follow a file that is still growing or was cut short by a crash.
"""

import functools
import struct
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

FILE_MAGIC = b"SCTRACE3"
REGION_MAGIC = 0x4E474552
FLAG_CTXSWITCH = 1
FLAG_RESTARTED = 2
FLAG_PCS_TRUNCATED = 4
FLAG_TRANSFERS = 8  # the plugin ran with transfers=on: lines carry both counts
FLAG_PAIR_TRANSFERS = 16  # ... and, from a plugin that counts them, their pair transfers
FLAG_SCHEDULE_LAPSED = 32  # quantum=Q: the vCPU once ran without its turn
FLAG_ACCESS_KINDS = 64  # transfers=on: lines carry their moves by the kind of access

_HEAD = struct.Struct("<IIII QQ II")
_LINE = struct.Struct("<QQQQI")
_SITE = struct.Struct("<QQQ")
_COUNTS = struct.Struct("<II")
_PAIR_COUNT = struct.Struct("<I")
_KIND_COUNTS = struct.Struct("<III")
# Parts of a line's fields (_LINE), read in place.
_PADDR_NSITES = struct.Struct("<Q24xI")
_NSITES = struct.Struct("<32xI")
_WRITE_MASK = struct.Struct("<24xQ")
_VADDR_WRITE_MASK = struct.Struct("<8xQ8xQ")


@functools.cache
def _pcs_of(nsites: int) -> struct.Struct:
    """Reads only the PCs of nsites sites."""
    return struct.Struct("<" + "Q16x" * nsites)


@dataclass(frozen=True)
class MoveKinds:
    """A line's moves by the kind of access that made them (the plugin's FLAG_ACCESS_KINDS):
    what a move costs a core depends on it. A load that misses waits for the line; a plain
    store's transfer or invalidation waits in the store buffer; an atomic read-modify-write
    (lock-prefixed, or an exchange with memory) waits for the line and drains the stores,
    and moves it once (the plugin counts its read as taking the line for writing)."""

    load: int = 0
    store: int = 0
    store_invalidation: int = 0
    atomic: int = 0
    atomic_invalidation: int = 0

    @classmethod
    def of(
        cls, transfers: int, invalidations: int, loads: int, atomics: int, atomics_inv: int
    ) -> "MoveKinds":
        """From the plugin's counts: the loads' and atomics' parts of the totals, the
        rest the plain stores'."""
        return cls(
            loads, transfers - loads - atomics, invalidations - atomics_inv, atomics, atomics_inv
        )


# The kinds' names, as `scalecheck sharing`'s JSON gives them (`moves_by_kind`).
MOVE_KINDS = tuple(field.name for field in fields(MoveKinds))


@dataclass
class Site:
    """The bytes of a line one instruction read and wrote."""

    pc: int
    read_mask: int
    write_mask: int

    @property
    def touched(self) -> int:
        return self.read_mask | self.write_mask


class Line:
    """One cache line a region touched. Its sites are decoded from the trace only when
    asked for: a region has hundreds of lines and only the few it shares with the other
    call are looked at site by site."""

    __slots__ = (
        "_site_bytes",
        "_sites",
        "invalidations",
        "kinds",
        "paddr",
        "pair_transfers",
        "read_mask",
        "transfers",
        "vaddr",
        "write_mask",
    )

    def __init__(
        self,
        paddr: int,
        vaddr: int,
        read_mask: int,
        write_mask: int,
        sites: list | None = None,
        site_bytes: bytes = b"",
        transfers: int | None = None,
        invalidations: int | None = None,
        pair_transfers: int | None = None,
        kinds: MoveKinds | None = None,
    ):
        self.paddr, self.vaddr, self.read_mask, self.write_mask = (
            paddr,
            vaddr,
            read_mask,
            write_mask,
        )
        self._sites, self._site_bytes = sites, site_bytes
        # This region's accesses that had to bring the line from another vCPU's cache
        # (None: the plugin did not count them).
        self.transfers = transfers
        # This region's writes to the line while it held it beside another vCPU: no data
        # moved, the other copies were invalidated (None: not counted).
        self.invalidations = invalidations
        # This region's accesses that would have been transfers had the coherence unit
        # been the line's 128-byte pair (what x86's spatial prefetcher moves), and were not
        # transfers of the line (None: not counted).
        self.pair_transfers = pair_transfers
        # Its transfers and invalidations by the kind of access that made them (None: not
        # counted).
        self.kinds = kinds

    @property
    def sites(self) -> list:
        if self._sites is None:
            self._sites = [Site(*fields) for fields in _SITE.iter_unpack(self._site_bytes)]
        return self._sites

    def site_fields(self) -> list:
        """(pc, read_mask, write_mask) of each site, as tuples: a record looks at the sites
        of every shared line, and building a Site each was a good part of its CPU."""
        if self._sites is not None:
            return [(s.pc, s.read_mask, s.write_mask) for s in self._sites]
        return list(_SITE.iter_unpack(self._site_bytes))

    def site_pcs(self) -> tuple:
        if self._sites is not None:
            return tuple(site.pc for site in self._sites)
        return _pcs_of(len(self._site_bytes) // _SITE.size).unpack(self._site_bytes)

    @property
    def written(self) -> bool:
        return self.write_mask != 0


class Region:
    """One call's traced region. Lines read from a trace stay raw (where their record starts
    in the trace) until one is looked at: a region has hundreds of lines and a test's record
    looks at the few it shares with the other call, or whose lock bytes were written, so
    building every ``Line`` was most of a record's host CPU."""

    def __init__(
        self,
        vcpu: int,
        tag: int,
        flags: int,
        accesses: int,
        dropped_in_interrupts: int,
        interrupts: int,
        lines: dict | None = None,
        trace: bytes = b"",
        span: tuple[int, int] | None = None,
        chunk: "TraceChunk | None" = None,
    ):
        self.vcpu, self.tag, self.flags = vcpu, tag, flags
        self.accesses, self.dropped_in_interrupts = accesses, dropped_in_interrupts
        self.interrupts = interrupts
        # paddr -> Line, or the offset of its raw record in ``trace`` (an int)
        self._lines: dict = {} if lines is None else lines
        self._trace = trace
        # Where the region's lines lie in ``trace`` (read from a trace: every line raw),
        # with each line's start and address in order; None for a region made otherwise.
        self._span = span
        self._chunk = chunk  # the read ``trace`` came from (with span)
        self._starts = list(self._lines.values()) if span else None
        self._all_built = False  # until `lines` has built them

    def line(self, paddr: int) -> Line:
        entry = self._lines[paddr]
        if entry.__class__ is int:
            entry = self._lines[paddr] = _raw_line(self._trace, entry, self.flags)
        return entry

    def write_mask_of(self, paddr: int) -> int:
        entry = self._lines[paddr]
        if entry.__class__ is int:
            return _WRITE_MASK.unpack_from(self._trace, entry)[0]
        return entry.write_mask

    @property
    def lines(self) -> dict:
        """paddr -> Line, every line built (once: callers look lines up in it in loops)."""
        if not self._all_built:
            for paddr in self._lines:
                self.line(paddr)
            self._all_built = True
        return self._lines

    def paddrs(self):
        """The addresses of the lines touched (a set-like view)."""
        return self._lines.keys()

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def written_at(self, mask: int) -> list:
        """(paddr, vaddr) of the lines whose write mask has a bit of ``mask``. Looks at
        every line, so it reads the fields in place and builds no Line (all at once for a
        region read from a trace)."""
        if self._span is not None:
            return self._raw_written_at(mask)
        found = []
        for paddr, entry in self._lines.items():
            if entry.__class__ is int:
                vaddr, write_mask = _VADDR_WRITE_MASK.unpack_from(self._trace, entry)
                if write_mask & mask:
                    found.append((paddr, vaddr))
            elif entry.write_mask & mask:
                found.append((paddr, entry.vaddr))
        return found

    def _raw_written_at(self, mask: int) -> list:
        starts = np.array(self._starts, dtype=np.int64)
        hit = np.flatnonzero(_u64_at(self._trace, starts + 24) & np.uint64(mask))
        vaddrs = _u64_at(self._trace, starts[hit] + 8)  # only the lines written there
        paddrs = list(self._lines)
        return [(paddrs[i], v) for i, v in zip(hit.tolist(), vaddrs.tolist(), strict=True)]

    @property
    def context_switched(self) -> bool:
        return bool(self.flags & FLAG_CTXSWITCH)

    def without_sites(self, dropped: "PcSet") -> tuple:
        """This region with the code sites whose PC is in ``dropped`` left out (a line they
        alone touched goes too), and how many (line, site) entries went."""
        kept_lines, gone = dict(self._lines), 0  # the lines kept whole stay as they are
        candidates = self._lines_holding(dropped.spans)
        for paddr in self._lines if candidates is None else candidates:
            entry = self._lines[paddr]
            if entry.__class__ is int:  # a raw line: its PCs read from the trace in place
                (nsites,) = _NSITES.unpack_from(self._trace, entry)
                sites_at = entry + _LINE.size + _counts_size(self.flags)
                pcs = _pcs_of(nsites).unpack_from(self._trace, sites_at)
            else:
                pcs = entry.site_pcs()
            if not dropped.any_of(pcs):
                continue
            line = self.line(paddr)
            sites = [s for s in line.sites if s.pc not in dropped]
            gone += len(line.sites) - len(sites)
            if not sites:
                del kept_lines[paddr]
                continue
            read = write = 0
            for s in sites:
                read, write = read | s.read_mask, write | s.write_mask
            # its transfers are not known per site: left uncounted
            kept_lines[paddr] = Line(paddr, line.vaddr, read, write, sites)
        kept = Region(
            self.vcpu,
            self.tag,
            self.flags,
            self.accesses,
            self.dropped_in_interrupts,
            self.interrupts,
            kept_lines,
            self._trace,
        )
        return kept, gone

    def _lines_holding(self, spans) -> set | None:
        """The addresses of the lines whose record holds a 64-bit value inside one of
        ``spans`` (sorted, disjoint [start, end) pairs) at any field position: a superset
        of the lines with a site whose PC is in them, found over the raw trace at once
        (a line's other fields rarely fall there; such a line is only looked at in
        full). None when not known: every line is to be looked at."""
        if spans is None or self._span is None or self._chunk is None:
            return None
        found = self._chunk.offsets_inside(spans)
        at = found[np.searchsorted(found, self._span[0]) : np.searchsorted(found, self._span[1])]
        if not at.size:
            return set()
        which = np.searchsorted(np.array(self._starts), at, side="right") - 1
        paddrs = list(self._lines)
        return {paddrs[i] for i in np.unique(which).tolist()}


_PAGE_SHIFT = 12


@functools.cache
def _span_pages(spans: tuple) -> tuple:
    """The first span's start, whether a span covers part of each 4 KiB page from there to
    the last span's end, and the spans' bounds in one sorted array."""
    low, high = spans[0][0], spans[-1][1]
    pages = np.zeros(((high - 1 - low) >> _PAGE_SHIFT) + 1, dtype=bool)
    for start, end in spans:
        pages[(start - low) >> _PAGE_SHIFT : ((end - 1 - low) >> _PAGE_SHIFT) + 1] = True
    return np.uint64(low), pages, np.array(spans, dtype=np.uint64).ravel()


def _inside(values: np.ndarray, spans: tuple) -> np.ndarray:
    """The indices of the values inside one of ``spans``. Most of a region's values are
    far from them: a page table over the spans rules those out in a few passes, and only
    the values on a page a span touches are looked up among the spans' bounds."""
    low, pages, bounds = _span_pages(spans)
    page = (values - low) >> np.uint64(_PAGE_SHIFT)  # below ``low``: wraps to far above
    near = np.flatnonzero(page < len(pages))
    near = near[pages[page[near]]]
    return near[(np.searchsorted(bounds, values[near], side="right") & 1).astype(bool)]


class TraceChunk:
    """One read of a trace (``data``, the regions read from it point into it), and where
    it holds values inside given spans (found once for all its regions)."""

    # Bytes of the chunk looked at in one pass (bounds the temporary arrays).
    _BLOCK = 1 << 23

    def __init__(self, data: bytes):
        self.data = data
        self._inside: dict[tuple, np.ndarray] = {}

    def offsets_inside(self, spans: tuple) -> np.ndarray:
        """The sorted byte offsets of the 64-bit values inside one of ``spans`` (sorted,
        disjoint [start, end) pairs) at any multiple of 4: a trace's every field starts on
        one (a region's head is 40 bytes, a line's 36, its counts 0 to 24, its sites 24)."""
        found = self._inside.get(spans)
        if found is None:
            found = self._inside[spans] = np.concatenate(
                [np.empty(0, dtype=np.int64)]
                + [
                    self._block_inside(start, spans)
                    for start in range(0, len(self.data), self._BLOCK)
                ]
            )
        return found

    def _block_inside(self, start: int, spans: tuple) -> np.ndarray:
        """offsets_inside for the values starting in [start, start + _BLOCK)."""
        found = []
        for first in (start, start + 4):
            count = (min(start + self._BLOCK, len(self.data)) - first + 7) // 8
            count = min(count, (len(self.data) - first) // 8)  # whole values only
            if count > 0:
                values = np.frombuffer(self.data, dtype="<u8", count=count, offset=first)
                found.append(first + 8 * _inside(values, spans))
        return np.sort(np.concatenate(found)) if found else np.empty(0, dtype=np.int64)


def _u64_at(trace: bytes, offsets) -> np.ndarray:
    """The little-endian 64-bit values at these byte offsets of ``trace``."""
    raw = np.frombuffer(trace, dtype=np.uint8)[offsets[:, None] + np.arange(8)]
    return raw.view("<u8").ravel()


def _counts_size(flags: int) -> int:
    """The bytes of counts between a line's fields and its sites."""
    return (
        (_COUNTS.size if flags & FLAG_TRANSFERS else 0)
        + (_PAIR_COUNT.size if flags & FLAG_PAIR_TRANSFERS else 0)
        + (_KIND_COUNTS.size if flags & FLAG_ACCESS_KINDS else 0)
    )


def _raw_line(trace: bytes, at: int, flags: int) -> Line:
    """The Line whose record starts at byte ``at`` of the trace."""
    paddr, vaddr, read_mask, write_mask, nsites = _LINE.unpack_from(trace, at)
    at += _LINE.size
    transfers = invalidations = pair_transfers = None
    if flags & FLAG_TRANSFERS:
        transfers, invalidations = _COUNTS.unpack_from(trace, at)
        at += _COUNTS.size
    if flags & FLAG_PAIR_TRANSFERS:
        (pair_transfers,) = _PAIR_COUNT.unpack_from(trace, at)
        at += _PAIR_COUNT.size
    kinds = None
    if flags & FLAG_ACCESS_KINDS:
        counted = _KIND_COUNTS.unpack_from(trace, at)
        at += _KIND_COUNTS.size
        if transfers is not None and invalidations is not None:  # the plugin sets both flags
            kinds = MoveKinds.of(transfers, invalidations, *counted)
    sites = trace[at : at + nsites * _SITE.size]
    return Line(
        paddr,
        vaddr,
        read_mask,
        write_mask,
        None,
        sites,
        transfers,
        invalidations,
        pair_transfers,
        kinds,
    )


class PcSet:
    """The code addresses for which ``member(pc)`` holds, decided once per address: a
    trace holds few distinct PCs and very many sites. ``spans``, when given: sorted,
    disjoint [start, end) address pairs holding every member (Region.without_sites looks
    only at the lines with a value there)."""

    def __init__(self, member, spans: tuple | None = None):
        self._member = member
        self._in: set[int] = set()
        self._out: set[int] = set()
        self.spans = spans

    def __contains__(self, pc: int) -> bool:
        if pc not in self._in and pc not in self._out:
            (self._in if self._member(pc) else self._out).add(pc)
        return pc in self._in

    def any_of(self, pcs) -> bool:
        if self._out.issuperset(pcs):
            return False
        return any(pc in self for pc in pcs)


def disjoint_spans(spans) -> tuple:
    """[start, end) pairs sorted, overlapping and touching ones merged (PcSet's spans)."""
    merged: list = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        elif start < end:
            merged.append([start, end])
    return tuple((start, end) for start, end in merged)


class TraceFormatError(Exception):
    pass


def _parse_region(chunk: TraceChunk, pos: int):
    """Returns (region, next_pos), or None if the record is not complete yet."""
    buf = chunk.data
    if len(buf) - pos < _HEAD.size:
        return None
    magic, vcpu, tag, flags, accesses, dropped, interrupts, nlines = _HEAD.unpack_from(buf, pos)
    if magic != REGION_MAGIC:
        raise TraceFormatError(f"bad region record at byte {pos}")
    lines: dict = {}
    end = _lines(buf, pos + _HEAD.size, nlines, _LINE.size + _counts_size(flags), lines)
    if end is None:
        return None
    span = (pos + _HEAD.size, end)
    return Region(vcpu, tag, flags, accesses, dropped, interrupts, lines, buf, span, chunk), end


def _lines(buf: bytes, pos: int, nlines: int, head_size: int, lines: dict) -> int | None:
    """Reads nlines lines, each ``head_size`` bytes before its sites, into ``lines`` as raw
    entries (Region); the position after them, or None if the record is not complete
    yet. (Most of a run's parsing: kept lean, a line's address and site count read only.)"""
    unpack, site_size = _PADDR_NSITES.unpack_from, _SITE.size
    try:
        for _ in range(nlines):
            paddr, nsites = unpack(buf, pos)
            lines[paddr] = pos
            pos += head_size + nsites * site_size
    except struct.error:  # the line's fields are not all there yet
        return None
    return pos if pos <= len(buf) else None


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
        regions, pos, chunk = [], 0, TraceChunk(buf)
        while True:
            parsed = _parse_region(chunk, pos)
            if parsed is None:
                break
            region, pos = parsed
            regions.append(region)
        self._offset += pos
        return regions


def shared_lines(a: Region, b: Region) -> list:
    """Lines both regions touched, at least one of them writing (pairs of Line)."""
    return [
        (a.line(paddr), b.line(paddr))
        for paddr in sorted(a.paddrs() & b.paddrs())
        if a.write_mask_of(paddr) or b.write_mask_of(paddr)
    ]
