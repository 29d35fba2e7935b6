"""A C library as a target: its manifest (``scalecheck.toml`` in a directory, or a ``.toml``
file) names its model, adapter, sources and compiler flags, and the installed libraries it
links (docs/usertarget.md, docs/installed-libraries.md)."""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

from scalecheck.common import sources
from scalecheck.common.errors import UserError

MANIFEST_NAME = "scalecheck.toml"
# The manifest's keys whose value is a list of strings; all its keys besides model, adapter.
LIST_KEYS = ("sources", "cflags", "pkg-config", "libs", "ldflags", "allocators", "unbound")
MANIFEST_KEYS = {"model", "adapter", "link", *LIST_KEYS}
# How the installed libraries are linked: from their static archives into a static
# program, or as shared objects the dynamic linker loads.
LINKS = ("static", "shared")
# Libraries shipped with scalecheck, by the name `--target NAME` takes (beside lib:PATH).
NAMED_LIBRARIES = {"libsv6": "native/libsv6/scalecheck/libsv6.toml"}


@dataclass(frozen=True)
class Library:
    """A library's manifest, its paths resolved."""

    manifest: Path
    model: str
    adapter: Path
    sources: tuple[Path, ...]
    cflags: tuple[str, ...]
    # Installed libraries linked in: by pkg-config name, as -l names or paths, and raw flags.
    packages: tuple[str, ...] = ()
    libs: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    # The library's allocation wrappers: a block is named by the first caller outside them.
    allocators: tuple[str, ...] = ()
    # Model operations the adapter leaves out on purpose (their tests end as error).
    unbound: tuple[str, ...] = ()
    shared: bool = False  # link = "shared"

    @property
    def name(self) -> str:
        return (
            self.manifest.stem if self.manifest.name != MANIFEST_NAME else self.manifest.parent.name
        )

    def fingerprint(self) -> str:
        """Of the manifest, the sources and the headers they can include (those beside
        them and under the -I directories): the program is rebuilt when one changes."""
        digest = hashlib.sha256(self.manifest.read_bytes())
        for path in (self.adapter, *self.sources, *self._headers(), *self._archives()):
            digest.update(path.read_bytes())
        return digest.hexdigest()[:12]

    def _headers(self) -> list[Path]:
        includes = [Path(flag[2:]) for flag in self.cflags if flag.startswith("-I")]
        folders = {self.adapter.parent, *(source.parent for source in self.sources), *includes}
        return sorted({header for folder in folders for header in folder.rglob("*.h")})

    def _archives(self) -> list[Path]:
        """The libraries linked by path (``libs = ["/usr/lib/.../libck.a"]``)."""
        return [Path(lib) for lib in self.libs if "/" in lib and Path(lib).is_file()]


def library_spec(target: str) -> str | None:
    """The manifest path of a library target (``lib:PATH`` or a shipped library's name);
    None for any other target."""
    if target.startswith("lib:"):
        return target.removeprefix("lib:")
    named = NAMED_LIBRARIES.get(target)
    return str(sources.root() / named) if named else None


def load_library(spec: str) -> Library:
    """The library named by ``--target lib:PATH``; one-line UserError when it is not usable."""
    path = Path(spec)
    manifest = path / MANIFEST_NAME if path.is_dir() else path
    if not manifest.is_file():
        where = f"no {MANIFEST_NAME} in {path.resolve()}" if path.is_dir() else "no such file"
        raise UserError(f"--target lib:{spec}: {where} (docs/usertarget.md)")
    data = _manifest_data(manifest)
    base = manifest.resolve().parent
    files = [(base / data["adapter"]).resolve(), *((base / s).resolve() for s in data["sources"])]
    for file in files:
        if not file.is_file():
            raise UserError(f"{manifest}: {file} does not exist")
    model = data["model"]
    if model.endswith(".py") or ".py:" in model:
        model = str(base / model)
    return Library(
        manifest.resolve(),
        model,
        files[0],
        tuple(files[1:]),
        tuple(_resolved_flag(str(flag), base) for flag in data.get("cflags", ["-O2", "-g"])),
        packages=tuple(data.get("pkg-config", ())),
        libs=tuple(_resolved_lib(str(lib), base) for lib in data.get("libs", ())),
        ldflags=tuple(_resolved_flag(str(flag), base) for flag in data.get("ldflags", ())),
        allocators=tuple(data.get("allocators", ())),
        unbound=tuple(data.get("unbound", ())),
        shared=data.get("link", "static") == "shared",
    )


def _manifest_data(manifest: Path) -> dict:
    """The manifest's keys, checked: known, the required ones there, lists of strings."""
    try:
        data = tomllib.loads(manifest.read_text())
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{manifest}: not TOML: {err}") from None
    unknown = set(data) - MANIFEST_KEYS
    missing = {"model", "adapter", "sources"} - set(data)
    if unknown or missing:
        raise UserError(
            f"{manifest}: "
            + (f"unknown key(s) {', '.join(sorted(unknown))}" if unknown else "")
            + ("; " if unknown and missing else "")
            + (f"missing key(s) {', '.join(sorted(missing))}" if missing else "")
        )
    if data.get("link", "static") not in LINKS:
        raise UserError(f"{manifest}: link must be one of {', '.join(LINKS)}")
    for key in LIST_KEYS:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UserError(f"{manifest}: {key} must be a list of strings")
    return data


def _resolved_lib(lib: str, base: Path) -> str:
    """A library named by path (``build/libx.a``, ``libx.a``) is relative to the manifest;
    a bare name (``ck``, ``m``) is linked as ``-lNAME``."""
    return str(base / lib) if "/" in lib or lib.endswith((".a", ".so")) else lib


def _resolved_flag(flag: str, base: Path) -> str:
    """An include or library directory of the manifest's (``-Ipath``, ``-Lpath``) is
    relative to the manifest."""
    if flag[:2] in ("-I", "-L") and len(flag) > 2 and not Path(flag[2:]).is_absolute():
        return f"{flag[:2]}{base / flag[2:]}"
    return flag
