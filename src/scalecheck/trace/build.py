"""Builds the tracer's parts from the repository: the QEMU plugin, the guest driver and
the base initramfs. Each step is a no-op when its output is up to date."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from scalecheck.errors import UserError
from scalecheck.trace import initramfs

REPO = Path(__file__).resolve().parents[3]
PLUGIN_DIR = REPO / "tracer" / "plugin"
GUEST_DIR = REPO / "tracer" / "guest"
PLUGIN = PLUGIN_DIR / "target" / "release" / "libscalecheck_tracer.so"
DRIVER = GUEST_DIR / "build" / "driver"
BASE_IMAGE = GUEST_DIR / "build" / "base.cpio"


def _run(cmd, what):
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise UserError(
            f"cannot build the {what}: {cmd[0]} not found (run scripts/setup.sh)"
        ) from None
    except subprocess.CalledProcessError as err:
        last = (err.stderr or err.stdout or "").strip().splitlines()[-1:] or ["(no output)"]
        raise UserError(f"building the {what} failed: {last[0]}") from None


def _cargo() -> str:
    return shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")


def ensure_built() -> dict:
    """Paths of the plugin, the driver and the base initramfs, rebuilt if stale."""
    if not (PLUGIN_DIR / "Cargo.toml").exists():
        raise UserError(f"tracer sources not found under {REPO / 'tracer'}")
    _run(
        [
            _cargo(),
            "build",
            "--release",
            "--locked",
            "-q",
            "--manifest-path",
            str(PLUGIN_DIR / "Cargo.toml"),
        ],
        "QEMU plugin",
    )
    _run(["make", "-s", "-C", str(GUEST_DIR)], "guest driver")
    if not BASE_IMAGE.exists() or BASE_IMAGE.stat().st_mtime < DRIVER.stat().st_mtime:
        initramfs.build_base(DRIVER, BASE_IMAGE)
    return {"plugin": PLUGIN, "driver": DRIVER, "base_image": BASE_IMAGE}


# What decides the content of a results record: the driver, the plugin, the host's rules
# for noise and conflicts, and those that name the conflicting data.
TRACER_SOURCES = (
    GUEST_DIR / "driver.c",
    *sorted((PLUGIN_DIR / "src").glob("*.rs")),
    *(
        REPO / "src" / "scalecheck" / "trace" / name
        for name in (
            "outcome.py",
            "regions.py",
            "datanames.py",
            "btf.py",
            "kernelmem.py",
            "slab_types.txt",
        )
    ),
)


def tracer_fingerprint() -> str:
    """A short hash of the tracer's sources: results made by another version are not mixed."""
    digest = hashlib.sha256()
    for path in TRACER_SOURCES:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "scalecheck"
