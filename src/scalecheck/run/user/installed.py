"""The installed libraries a manifest links (``pkg-config``, ``libs``; docs/usertarget.md):
their flags, the static archives linked into the test program, the symbols those define
(the library's code and data, beside its sources'), and where their DWARF is: in the
archive's objects, or in a separate debug file Debian's -dbgsym packages install (by
build-id under /usr/lib/debug/.build-id, or by .gnu_debuglink)."""

from __future__ import annotations

import io
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck.common.errors import UserError
from scalecheck.run.user.library import Library

DEBUG_ROOT = Path("/usr/lib/debug")
# Where the linker finds -lNAME when no -L says otherwise (Debian's x86-64 multiarch).
SYSTEM_LIB_DIRS = (
    Path("/usr/lib/x86_64-linux-gnu"),
    Path("/usr/lib"),
    Path("/lib/x86_64-linux-gnu"),
)
# The C runtime's own libraries: what a library calls in them is not the library.
RUNTIME_LIBS = {"c", "m", "pthread", "dl", "rt"}


def pkg_config(library: Library, *what: str) -> list[str]:
    """pkg-config's flags for the manifest's packages; a package it does not know is one
    line naming it."""
    if not library.packages:
        return []
    try:
        done = subprocess.run(
            ["pkg-config", *what, *library.packages], capture_output=True, text=True
        )
    except FileNotFoundError:
        raise UserError(f"{library.manifest}: pkg-config is not installed") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["failed"])[0]
        raise UserError(f"{library.manifest}: pkg-config {' '.join(library.packages)}: {said}")
    return shlex.split(done.stdout)


def linked_archives(library: Library) -> list[Path]:
    """The static archives of the library itself (not of its dependencies, nor libc): its
    ``libs`` and its packages' own -l names, found as the linker finds them."""
    return [] if library.shared else _own_libraries(library, ".a")


def linked_shared_objects(library: Library) -> list[Path]:
    """The shared objects of the library itself (``link = "shared"``), their real files."""
    return [path.resolve() for path in _own_libraries(library, ".so")] if library.shared else []


def _own_libraries(library: Library, suffix: str) -> list[Path]:
    flags = [*library.ldflags, *pkg_config(library, "--libs")]
    dirs = [Path(f[2:]) for f in flags if f.startswith("-L")] + list(SYSTEM_LIB_DIRS)
    names = [lib for lib in library.libs if "/" not in lib]
    names += [f[2:] for f in flags if f.startswith("-l")]
    found = [Path(lib) for lib in library.libs if lib.endswith(suffix)]
    for name in dict.fromkeys(names):
        if name in RUNTIME_LIBS:
            continue
        found += [d / f"lib{name}{suffix}" for d in dirs if (d / f"lib{name}{suffix}").exists()][:1]
    return found


def archive_symbols(archive: Path) -> tuple[set[str], set[str]]:
    """The functions and the data an archive's objects define."""
    done = subprocess.run(
        ["nm", "--defined-only", str(archive)], capture_output=True, text=True, check=False
    )
    code: set[str] = set()
    data: set[str] = set()
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            kind = parts[1].lower()
            (code if kind in "tw" else data if kind in "bdrgsv" else set()).add(parts[2])
    return code, data


@dataclass
class DebugInfo:
    """Where an archive's DWARF is: separate debug files found for its objects, and the
    objects that have none (named by symbol only)."""

    files: list[Path]
    lacking: list[str]


def debug_info(archive: Path, linked: set[str]) -> DebugInfo:
    """Of the archive's objects the program linked (those defining a function of
    ``linked``)."""
    info = DebugInfo([], [])
    for member, content in _members(archive):
        try:
            elf = ELFFile(io.BytesIO(content))
            if not _defines_any(elf, linked) or elf.get_section_by_name(".debug_info"):
                continue
            separate = _separate_debug_file(elf, archive.parent)
        except ELFError:
            continue  # not an object file (a symbol index)
        if separate is not None:
            info.files.append(separate)
        else:
            info.lacking.append(f"{archive.name}({member})")
    return info


def shared_debug_info(path: Path) -> DebugInfo:
    """A shared object's DWARF: its own, its debug file by build-id, or none."""
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            if elf.get_section_by_name(".debug_info") is not None:
                return DebugInfo([], [])
            separate = build_id_debug_file(elf)
    except (OSError, ELFError):
        separate = None
    return DebugInfo([separate], []) if separate else DebugInfo([], [path.name])


def _defines_any(elf: ELFFile, names: set[str]) -> bool:
    symtab = elf.get_section_by_name(".symtab")
    return symtab is not None and any(
        sym.name in names and sym["st_shndx"] != "SHN_UNDEF" for sym in symtab.iter_symbols()
    )


def _members(archive: Path) -> list[tuple[str, bytes]]:
    listed = subprocess.run(["ar", "t", str(archive)], capture_output=True, text=True)
    members = []
    for name in dict.fromkeys(listed.stdout.split()):
        done = subprocess.run(["ar", "p", str(archive), name], capture_output=True)
        members.append((name, done.stdout))
    return members


def build_id_debug_file(elf: ELFFile) -> Path | None:
    """The separate debug file of an object by its build-id, when installed."""
    note = elf.get_section_by_name(".note.gnu.build-id")
    for entry in note.iter_notes() if note is not None else ():
        if entry["n_type"] == "NT_GNU_BUILD_ID":
            build_id = entry["n_desc"]
            path = DEBUG_ROOT / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
            return path if path.is_file() else None
    return None


def _separate_debug_file(elf: ELFFile, folder: Path) -> Path | None:
    """The debug file of an object: by its build-id, else by its .gnu_debuglink name
    beside it, in .debug/ there, or under /usr/lib/debug (gdb's search)."""
    by_id = build_id_debug_file(elf)
    if by_id is not None:
        return by_id
    link = elf.get_section_by_name(".gnu_debuglink")
    if link is None:
        return None
    name = link.data().split(b"\0", 1)[0].decode()
    for candidate in (
        folder / name,
        folder / ".debug" / name,
        DEBUG_ROOT / folder.relative_to("/") / name,
    ):
        if candidate.is_file():
            return candidate
    return None
