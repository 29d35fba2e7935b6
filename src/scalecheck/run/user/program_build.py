"""Builds a library's test program: the library and its adapter, compiled with the
library's flags, linked with the harness (tracer/user/) into one static program."""

from __future__ import annotations

import os
from pathlib import Path

from scalecheck.binding import abi
from scalecheck.common import sources
from scalecheck.run.tracer_build import run_step
from scalecheck.run.user.installed import linked_archives, linked_shared_objects, pkg_config
from scalecheck.run.user.library import Library

# Allocation functions the harness wraps (ld --wrap, tracer/user/trace_alloc.c) to record
# each test's heap blocks.
WRAPPED = (
    "malloc",
    "calloc",
    "realloc",
    "aligned_alloc",
    "posix_memalign",
    "memalign",
    "valloc",
    "pvalloc",
    "free",
)
# Wrapped besides in a static program: memset, which zeroes the setup's memory by a system
# call (tracer/user/trace_zero.c).
WRAPPED_STATIC = (*WRAPPED, "memset")
# The harness's objects: statically linked (the entry points wrapped), or with shared
# libraries (the entry points defined over glibc's, tracer/user/trace_alloc.c).
HARNESS_OBJECTS = {
    False: ("trace_harness.o", "trace_alloc.o", "trace_zero.o"),
    True: ("trace_harness.o", "trace_alloc_shared.o"),
}


def user_dir() -> Path:
    return sources.root() / "tracer" / "user"


def build_program(library: Library, out: Path) -> Path:
    """Compiles the library and its adapter with the library's flags and links them with
    the harness into one static program (rebuilt when any input changed)."""
    run_step(["make", "-s", "-C", str(user_dir())], "user-space harness")
    harness = [user_dir() / "build" / name for name in HARNESS_OBJECTS[library.shared]]
    program = out / f"{library.name}-{library.fingerprint()}"
    # Rebuilt when the harness or an installed library (a package upgrade) is newer.
    inputs = [*harness, *linked_archives(library), *linked_shared_objects(library)]
    if program.exists() and program.stat().st_mtime >= max(i.stat().st_mtime for i in inputs):
        return program
    out.mkdir(parents=True, exist_ok=True)
    include = ["-I", str(user_dir()), "-I", str(library.adapter.parent)]
    cc = os.environ.get("CC", "cc")
    cflags = [*library.cflags, *pkg_config(library, "--cflags")]
    objects = []
    for source in (library.adapter, *library.sources):
        obj = _object_path(library, source, out)
        run_step(
            [cc, *cflags, "-pthread", *include, "-c", "-o", str(obj), str(source)],
            f"library source {source.name}",
        )
        objects.append(str(obj))
    link_inputs = [*map(str, harness), *objects, *link_flags(library)]
    run_step(
        [cc, *_link_mode(library), "-o", str(program), *link_inputs],
        f"test program of {library.name}",
    )
    return program


def _link_mode(library: Library) -> list[str]:
    """Static: the allocation entry points wrapped. Shared: not position-independent (the
    program's symbols at their link addresses, as a static program's), its symbols
    exported (the shared objects' allocations bound to the harness's), every symbol bound
    at load (lazy binding would write the GOT inside the calls). Either way the image ends
    at one address, where the heap starts (scalecheck_abi.h)."""
    tail = abi.value("USER_IMAGE_END") - abi.value("USER_IMAGE_TAIL")
    image_end = f"-Wl,--section-start=.scalecheck_image_tail={tail:#x}"
    if library.shared:
        return ["-no-pie", "-rdynamic", "-pthread", "-Wl,-z,now", image_end]
    wrap = ",".join(f"--wrap={name}" for name in WRAPPED_STATIC)
    return ["-static", "-pthread", f"-Wl,{wrap}", image_end]


def link_flags(library: Library) -> list[str]:
    """The installed libraries the manifest links, after the objects that use them: its
    ldflags, its libs (a path, or a name as -lNAME) and its packages' link flags (those
    for static linking, with the dependencies' libraries, unless linked shared)."""
    libs = [lib if "/" in lib else f"-l{lib}" for lib in library.libs]
    static = () if library.shared else ("--static",)
    return [*library.ldflags, *libs, *pkg_config(library, *static, "--libs")]


def _object_path(library: Library, source: Path, out: Path) -> Path:
    return out / f"{library.name}-{source.stem}.o"


def adapter_object(library: Library, out: Path) -> Path:
    """The compiled adapter: its variables' types lead to the library's heap objects."""
    return _object_path(library, library.adapter, out)


def library_objects(library: Library, out: Path) -> list[Path]:
    """The compiled library sources (the adapter is the harness's side of the line)."""
    return [_object_path(library, source, out) for source in library.sources]
