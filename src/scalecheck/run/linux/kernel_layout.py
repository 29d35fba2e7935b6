"""The layouts data naming reads from the traced kernel's own BTF: offsets in struct page,
struct slab and struct kmem_cache, how the kernel marks a slab's pages (this changed in
6.10 and 6.12), and what naming can do on a kernel (for the results header and report).
"""

from dataclasses import dataclass
from typing import cast

from scalecheck.run.linux.btf import Types


@dataclass(frozen=True)
class SlabMark:
    """How a kernel marks the head struct page of a slab (or of another page type, such as
    "table": a page table), from its BTF: the word at ``offset`` in struct page (``size``
    bytes), masked with ``mask``, equals ``value``.

    - up to Linux 6.9: bit PG_slab (enum pageflags) of ``page.flags``;
    - 6.10 and 6.11: ``page.page_type`` starts as all ones and a type clears its bit
      (enum pagetype: PAGE_TYPE_BASE still set, PG_slab cleared);
    - 6.12 and later: the top byte of ``page.page_type`` is the type (PGTY_slab).
    """

    offset: int
    size: int
    mask: int
    value: int

    @classmethod
    def of(cls, types: Types, kind: str = "slab") -> "SlabMark | None":
        flags, page_types = types.enum("pageflags"), types.enum("pagetype")
        flags_at = types.offset_of("page", "flags")
        type_at = types.offset_of("page", "page_type")
        if f"PG_{kind}" in flags and flags_at is not None:
            bit = 1 << flags[f"PG_{kind}"]
            return cls(flags_at, 8, bit, bit)
        if type_at is None:
            return None
        if f"PGTY_{kind}" in page_types:
            return cls(type_at, 4, 0xFF << 24, page_types[f"PGTY_{kind}"] << 24)
        if f"PG_{kind}" in page_types and "PAGE_TYPE_BASE" in page_types:
            # BTF keeps 32-bit enum values signed: 0x80000000 reads as negative.
            base = page_types["PAGE_TYPE_BASE"] & 0xFFFF_FFFF
            return cls(type_at, 4, base | page_types[f"PG_{kind}"] & 0xFFFF_FFFF, base)
        return None

    def matches(self, word: int) -> bool:
        return word & self.mask == self.value


@dataclass(frozen=True)
class Layout:
    """Offsets of the fields of struct page, struct slab and struct kmem_cache that
    naming reads, and how a slab's page is marked, from the kernel's BTF."""

    page_size: int
    compound_head: int
    mapping: int
    slab_cache: int
    cache_name: int
    cache_size: int
    cache_object_size: int
    cache_red_left_pad: int | None  # only with CONFIG_SLUB_DEBUG
    slab_mark: SlabMark

    @classmethod
    def of(cls, types: Types) -> "Layout | None":
        """None when the BTF lacks one of them (a kernel whose slabs this does not know)."""
        off = types.offset_of
        page = types.struct("page")
        slab_cache = off("slab", "slab_cache")
        found = {
            "page_size": types.size(page) if page is not None else None,
            "compound_head": off("page", "compound_head"),
            "mapping": off("page", "mapping"),
            "slab_cache": off("page", "slab_cache") if slab_cache is None else slab_cache,
            "cache_name": off("kmem_cache", "name"),
            "cache_size": off("kmem_cache", "size"),
            "cache_object_size": off("kmem_cache", "object_size"),
            "slab_mark": SlabMark.of(types),
        }
        if None in found.values():
            return None
        return cls(cache_red_left_pad=off("kmem_cache", "red_left_pad"), **cast(dict, found))


def naming_support(types: Types | None, symbols) -> dict:
    """What naming can do on this kernel, for the results header and the report: whether
    it has BTF, a slab layout naming knows, per-cpu offsets, and one line saying what is
    missing ("" when nothing is)."""
    slabs = types is not None and Layout.of(types) is not None
    percpu = bool(symbols.percpu_offsets)
    missing = []
    if types is None:
        missing.append("no BTF (CONFIG_DEBUG_INFO_BTF): heap data unnamed, symbols without fields")
    elif not slabs:
        missing.append(
            "BTF lacks a slab layout naming knows (struct slab, kmem_cache, page "
            "type): heap data unnamed"
        )
    if not percpu:
        missing.append(
            "no per-cpu offsets (probe could not read /proc/kcore): per-cpu data unnamed"
        )
    return {
        "btf": types is not None,
        "slabs": slabs,
        "percpu": percpu,
        "missing": "; ".join(missing),
    }
