"""Where the native sources live that scalecheck builds on first use: the QEMU plugin and
the guest driver (``tracer/``), the benchmarks, harness, scheduler and libraries
(``native/``).

From a checkout they are the checkout's own. An installed wheel carries a copy of them
(``scalecheck/_sources``, put there by setup.py's build step); since builds write next to
the sources, that copy is unpacked once per content into the user's cache and built there,
so that a wheel works from any directory without write access to site-packages.
"""

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from scalecheck.common.errors import UserError

# The top-level directories of the checkout that the wheel carries.
SHIPPED_DIRS = ("tracer", "native")
_CHECKOUT = Path(__file__).resolve().parents[3]
_SHIPPED = Path(__file__).resolve().parents[1] / "_sources"


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "scalecheck"


def _is_source_root(path: Path) -> bool:
    return all((path / name).is_dir() for name in SHIPPED_DIRS)


@functools.cache
def root() -> Path:
    """The directory holding ``tracer/`` and ``native/`` (SCALECHECK_REPO overrides)."""
    override = os.environ.get("SCALECHECK_REPO")
    if override:
        if not _is_source_root(Path(override)):
            raise UserError(f"SCALECHECK_REPO={override} holds no tracer/ and native/")
        return Path(override)
    if _is_source_root(_CHECKOUT):
        return _CHECKOUT
    if _is_source_root(_SHIPPED):
        return _unpacked(_SHIPPED)
    raise UserError(
        f"scalecheck's native sources are neither in a checkout ({_CHECKOUT}) nor in the "
        f"installed package ({_SHIPPED}): reinstall scalecheck, or set SCALECHECK_REPO"
    )


def _content_digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(directory)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _unpacked(shipped: Path) -> Path:
    """A writable copy of the shipped sources in the cache, one per content (an upgrade
    gets a fresh copy; builds in an old one stay usable by the old version)."""
    target = cache_dir() / f"sources-{_content_digest(shipped)}"
    if _is_source_root(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Copied beside the target and renamed into place: a copy cut short by Ctrl-C or a
    # full disk is never taken for a complete one.
    staging = Path(tempfile.mkdtemp(prefix="sources-", dir=target.parent))
    try:
        for name in SHIPPED_DIRS:
            shutil.copytree(shipped / name, staging / name, symlinks=True)
        try:
            staging.rename(target)
        except OSError:
            if not _is_source_root(target):  # not merely a concurrent first use
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
