"""Builds the Linux target's guest side: the driver (tracer/guest/) and the base initramfs
it boots from, beside the plugin. Each step is a no-op when its output is up to date."""

from pathlib import Path

from scalecheck.common import sources
from scalecheck.run.linux import initramfs
from scalecheck.run.tracer_build import ensure_plugin, run_step


def guest_dir() -> Path:
    return sources.root() / "tracer" / "guest"


def ensure_built() -> dict:
    """Paths of the plugin, the driver and the base initramfs, rebuilt if stale."""
    plugin = ensure_plugin()
    guest = guest_dir()
    driver, base_image = guest / "build" / "driver", guest / "build" / "base.cpio"
    run_step(["make", "-s", "-C", str(guest)], "guest driver")
    newest = max((driver.parent / name).stat().st_mtime for name in ("driver", *initramfs.PROGRAMS))
    if not base_image.exists() or base_image.stat().st_mtime < newest:
        initramfs.build_base(driver, base_image)
    return {"plugin": plugin, "driver": driver, "base_image": base_image}
