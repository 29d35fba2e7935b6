"""A C library as a target: its manifest (``scalecheck.toml`` in a directory, or a ``.toml``
file) names its model, adapter, sources and compiler flags (docs/usertarget.md)."""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

from scalecheck.common import sources
from scalecheck.common.errors import UserError

MANIFEST_NAME = "scalecheck.toml"
MANIFEST_KEYS = {"model", "adapter", "sources", "cflags"}
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

    @property
    def name(self) -> str:
        return (
            self.manifest.stem if self.manifest.name != MANIFEST_NAME else self.manifest.parent.name
        )

    def fingerprint(self) -> str:
        """Of the manifest, the sources and the headers they can include (those beside
        them and under the -I directories): the program is rebuilt when one changes."""
        digest = hashlib.sha256(self.manifest.read_bytes())
        for path in (self.adapter, *self.sources, *self._headers()):
            digest.update(path.read_bytes())
        return digest.hexdigest()[:12]

    def _headers(self) -> list[Path]:
        includes = [Path(flag[2:]) for flag in self.cflags if flag.startswith("-I")]
        folders = {self.adapter.parent, *(source.parent for source in self.sources), *includes}
        return sorted({header for folder in folders for header in folder.rglob("*.h")})


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
        raise UserError(f"--target lib:{spec}: no {MANIFEST_NAME} there (docs/usertarget.md)")
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
    base = manifest.resolve().parent
    files = [base / data["adapter"], *(base / s for s in data["sources"])]
    for file in files:
        if not file.is_file():
            raise UserError(f"{manifest}: {file} does not exist")
    model = data["model"]
    if model.endswith(".py") or ".py:" in model:
        model = str(base / model)
    return Library(
        manifest.resolve(),
        model,
        files[0].resolve(),
        tuple(f.resolve() for f in files[1:]),
        tuple(_resolved_flag(str(flag), base) for flag in data.get("cflags", ["-O2", "-g"])),
    )


def _resolved_flag(flag: str, base: Path) -> str:
    """An include directory of the manifest's (``-Ipath``) is relative to the manifest."""
    if flag.startswith("-I") and len(flag) > 2 and not Path(flag[2:]).is_absolute():
        return f"-I{base / flag[2:]}"
    return flag
