"""Builds a library's test program: the library and its adapter, compiled with the
library's flags, linked with the harness (tracer/user/) into one static program."""

from __future__ import annotations

import os
from pathlib import Path

from scalecheck.common import sources
from scalecheck.run.tracer_build import run_step
from scalecheck.run.user.library import Library

# Allocation functions the harness wraps (ld --wrap) to record each test's heap blocks.
WRAPPED = ("malloc", "calloc", "realloc", "aligned_alloc", "free")


def user_dir() -> Path:
    return sources.root() / "tracer" / "user"


def build_program(library: Library, out: Path) -> Path:
    """Compiles the library and its adapter with the library's flags and links them with
    the harness into one static program (rebuilt when any input changed)."""
    run_step(["make", "-s", "-C", str(user_dir())], "user-space harness")
    harness = user_dir() / "build" / "trace_harness.o"
    program = out / f"{library.name}-{library.fingerprint()}"
    if program.exists() and program.stat().st_mtime >= harness.stat().st_mtime:
        return program
    out.mkdir(parents=True, exist_ok=True)
    include = ["-I", str(user_dir()), "-I", str(library.adapter.parent)]
    cc = os.environ.get("CC", "cc")
    objects = []
    for source in (library.adapter, *library.sources):
        obj = _object_path(library, source, out)
        run_step(
            [cc, *library.cflags, "-pthread", *include, "-c", "-o", str(obj), str(source)],
            f"library source {source.name}",
        )
        objects.append(str(obj))
    wrap = ",".join(f"--wrap={name}" for name in WRAPPED)
    run_step(
        [cc, "-static", "-pthread", f"-Wl,{wrap}", "-o", str(program), str(harness), *objects],
        f"test program of {library.name}",
    )
    return program


def _object_path(library: Library, source: Path, out: Path) -> Path:
    return out / f"{library.name}-{source.stem}.o"


def adapter_object(library: Library, out: Path) -> Path:
    """The compiled adapter: its variables' types lead to the library's heap objects."""
    return _object_path(library, library.adapter, out)


def library_objects(library: Library, out: Path) -> list[Path]:
    """The compiled library sources (the adapter is the harness's side of the line)."""
    return [_object_path(library, source, out) for source in library.sources]
