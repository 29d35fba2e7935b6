"""Builds the QEMU plugin, which every target loads, from its sources (scalecheck.common.sources:
the checkout, or the copy an installed wheel unpacks into the cache), and fingerprints
everything that decides a results record. Each step is a no-op when its output is up to
date; a target's own parts are built by its wing (run/linux/guest_build.py,
run/user/program_build.py)."""

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from scalecheck.common import sources
from scalecheck.common.errors import UserError

TRACE_DIR = Path(__file__).resolve().parent


def plugin_dir() -> Path:
    return sources.root() / "tracer" / "plugin"


def run_step(cmd, what):
    """Runs one build command; a failure is one line naming what was being built."""
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise UserError(
            f"cannot build the {what}: {cmd[0]} not found (run scripts/setup.sh)"
        ) from None
    except subprocess.CalledProcessError as err:
        raise UserError(
            f"building the {what} failed: {_diagnostics(err.stderr or err.stdout)}"
        ) from None


# Compiler diagnostics shown at most under a failed build's line.
SHOWN_DIAGNOSTICS = 10


def _diagnostics(output: str | None) -> str:
    """What a failed build said: its compiler diagnostics (``file:line: error: ...``, and
    the warnings -Werror made fatal, which the closing ``cc1: all warnings being treated
    as errors`` does not repeat) and the linker's own lines (``undefined reference to``,
    ``cannot find -lx``; not collect2's closing ``ld returned 1``), the first on the line,
    the rest under it; else its last line."""
    lines = (output or "").strip().splitlines()
    found = [line for line in lines if _is_diagnostic(line)]
    if not found:
        return lines[-1] if lines else "(no output)"
    more = [f"  {line}" for line in found[1 : 1 + SHOWN_DIAGNOSTICS]]
    if len(found) > 1 + SHOWN_DIAGNOSTICS:
        more.append(f"  ... and {len(found) - 1 - SHOWN_DIAGNOSTICS} more")
    return "\n".join([found[0], *more])


def _is_diagnostic(line: str) -> bool:
    if line.startswith("collect2: "):
        return False
    linker = _LINKER_LINE.match(line) is not None and ": in function " not in line
    return linker or ": error: " in line or ": warning: " in line or "undefined reference" in line


# A line the linker wrote itself: `/usr/bin/ld: cannot find -lck: No such file or directory`.
_LINKER_LINE = re.compile(r"^\S*\bld(\.\w+)?: ")


def _cargo() -> str:
    return shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")


def ensure_plugin() -> Path:
    """The QEMU plugin, rebuilt if stale."""
    plugin_sources = plugin_dir()
    run_step(
        [
            _cargo(),
            "build",
            "--release",
            "--locked",
            "-q",
            "--manifest-path",
            str(plugin_sources / "Cargo.toml"),
        ],
        "QEMU plugin",
    )
    return plugin_sources / "target" / "release" / "libscalecheck_tracer.so"


def tracer_sources() -> list[Path]:
    """What decides the content of a results record: the driver, the plugin, the host's
    rules for noise and conflicts, and those that name the conflicting data."""
    return [
        *sorted((sources.root() / "tracer" / "guest").glob("*.[ch]")),
        *sorted((sources.root() / "tracer" / "include").glob("*.h")),
        *sorted((sources.root() / "tracer" / "user").glob("*.[ch]")),
        *sorted((plugin_dir() / "src").glob("*.rs")),
        *(
            TRACE_DIR / name
            for name in (
                "outcome.py",
                "counting.py",
                "regions.py",
                "naming.py",
                "linux/datanames.py",
                "linux/btf.py",
                "linux/kernelmem.py",
                "linux/slab_types.txt",
                "linux/static_types.txt",
            )
        ),
    ]


def tracer_fingerprint() -> str:
    """A short hash of the tracer's sources: results made by another version are not mixed."""
    digest = hashlib.sha256()
    for path in tracer_sources():
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
