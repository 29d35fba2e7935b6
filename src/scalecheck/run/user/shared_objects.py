"""Shared objects in a test program linked with ``link = "shared"`` (docs/installed-
libraries.md): their symbols (from their separate debug file by build-id when installed,
else their own .symtab, else the exported .dynsym), and where one run of the program
loaded them (the harness writes its link map, tracer/user/trace_alloc.c)."""

from __future__ import annotations

import functools
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck.common.errors import UserError
from scalecheck.run.user.installed import build_id_debug_file


def _debug_file(path: Path) -> Path | None:
    try:
        with open(path, "rb") as f:
            return build_id_debug_file(ELFFile(f))
    except (OSError, ELFError):
        return None


@functools.lru_cache(maxsize=64)
def object_symbols(path: Path, kind: str) -> tuple:
    """Sorted (offset, size, name) of a shared object's symbols of one kind (STT_FUNC,
    STT_OBJECT), offsets from its load address."""
    for source in (_debug_file(path), path):
        if source is None:
            continue
        try:
            with open(source, "rb") as f:
                elf = ELFFile(f)
                table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
                if table is None or (source != path and table.name != ".symtab"):
                    continue
                return tuple(
                    sorted(
                        (sym["st_value"], sym["st_size"], sym.name)
                        for sym in table.iter_symbols()
                        if sym["st_info"]["type"] == kind
                        and sym["st_shndx"] != "SHN_UNDEF"
                        and sym.name
                    )
                )
        except (OSError, ELFError) as err:
            raise UserError(f"cannot read {source}: {err}") from None
    return ()


def read_link_map(path: Path) -> tuple[tuple[int, Path], ...]:
    """(load address, file) of each shared object one run of the program loaded."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return ()
    loaded = []
    for line in lines:
        base, _, name = line.partition(" ")
        loaded.append((int(base, 16), Path(name)))
    return tuple(loaded)
