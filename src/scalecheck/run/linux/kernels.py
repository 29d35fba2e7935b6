"""Other kernels of the distribution, as inputs to ``run --kernel`` (the command is
``scalecheck kernel``, run/kernel_cli.py).

``fetch("6.12")`` downloads Debian's newest ``linux-image-6.12.*-amd64-unsigned``
package with ``apt-get download`` and unpacks it with ``dpkg -x`` into
``~/.cache/scalecheck/kernels/<release>/`` (never /boot, nothing installed): the kernel
image, its config and a ``kernel.json`` saying which package it came from. The modules are
left out: the traced guest loads none. ``--kernel`` of ``run`` and ``pipeline`` then takes
an image path, a fetched release (``6.12.117+deb12-amd64``) or a short name: ``6.12`` (the
newest fetched 6.12 of the standard flavour), ``6.12-rt`` (PREEMPT_RT), ``6.1``.
"""

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.sources import cache_dir

# Debian's kernel image packages: linux-image-6.12.117+deb12-amd64-unsigned,
# linux-image-6.1.0-56-rt-amd64-unsigned. The unsigned package holds the same image as the
# signed one, without the Secure Boot signature, which QEMU's direct kernel boot ignores.
PACKAGE = re.compile(
    r"^linux-image-(?P<version>\d+\.\d+(?:\.\d+)*(?:-\d+)?(?:\+\w+)?)"
    r"-(?P<flavour>rt-amd64|amd64)-unsigned$"
)
FLAVOURS = {"": "amd64", "rt": "rt-amd64"}
SHORT_NAME = re.compile(r"^(?P<series>\d+\.\d+)(?:-(?P<flavour>rt))?$")
INFO = "kernel.json"
MODULES = Path("lib/modules")  # in a fetched kernel's directory, as on a Debian system


def kernels_dir() -> Path:
    return cache_dir() / "kernels"


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def series_of(version: str) -> str:
    """``6.12`` of ``6.12.117+deb12``, ``6.1`` of ``6.1.0-56``."""
    return ".".join(version.split(".")[:2])


def parse_short_name(name: str) -> tuple[str, str]:
    """(series, flavour) of ``6.12`` or ``6.12-rt``."""
    found = SHORT_NAME.match(name)
    if not found:
        raise UserError(f"kernel name {name!r}: expected a series such as 6.12, 6.1 or 6.12-rt")
    return found["series"], FLAVOURS[found["flavour"] or ""]


def newest_package(package_names: list[str], series: str, flavour: str) -> str | None:
    """The package of the newest kernel of ``series`` and ``flavour`` among the names."""
    candidates = []
    for name in package_names:
        found = PACKAGE.match(name)
        if found and found["flavour"] == flavour and series_of(found["version"]) == series:
            candidates.append((_numbers(found["version"]), name))
    return max(candidates)[1] if candidates else None


def _package_tool(args: list[str], cwd: Path | None = None) -> str:
    """Runs apt-cache, apt-get or dpkg; their last line of stderr is the error."""
    tool = shutil.which(args[0])
    if not tool:
        raise UserError(f"{args[0]} not found: `kernel fetch` needs Debian's apt and dpkg")
    done = subprocess.run([tool, *args[1:]], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"{' '.join(args)} failed: {why}")
    return done.stdout


def keep_parts(unpacked: Path, kept: Path, release: str) -> None:
    """Moves what is kept of an unpacked package into ``kept``: the image, its config and
    System.map, and its modules (scalecheck profile loads 9p's from there: `modprobe -d`)."""
    kept.mkdir()
    for part in ("vmlinuz", "config", "System.map"):
        source = unpacked / "boot" / f"{part}-{release}"
        if source.exists():
            source.rename(kept / source.name)
    modules = next(
        (p for p in (unpacked / MODULES, unpacked / "usr" / MODULES) if p.is_dir()), None
    )
    if modules:
        (kept / MODULES).parent.mkdir(parents=True)
        modules.rename(kept / MODULES)


def fetch(name: str, log=print) -> Path:
    """Downloads and unpacks the newest kernel of ``name`` (``6.12``, ``6.12-rt``); returns
    its directory. A release already fetched is not downloaded again."""
    series, flavour = parse_short_name(name)
    listing = _package_tool(["apt-cache", "search", "--names-only", "^linux-image-"])
    names = [line.split(" - ")[0] for line in listing.splitlines()]
    package = newest_package(names, series, flavour)
    if package is None:
        raise UserError(
            f"apt knows no linux-image-{series}.*-{flavour}-unsigned package "
            "(run `apt-get update`; Debian 12 ships 6.1 and, from its security archive, 6.12)"
        )
    release = package.removeprefix("linux-image-").removesuffix("-unsigned")
    target = kernels_dir() / release
    # (a kernel fetched before its modules were kept is fetched again)
    if (target / INFO).exists() and (target / MODULES).is_dir():
        log(f"{release} already fetched: {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Downloaded and unpacked beside the target and renamed into place: a fetch cut short
    # is never taken for a complete one.
    with tempfile.TemporaryDirectory(prefix="fetch-", dir=target.parent) as staging_dir:
        staging = Path(staging_dir)
        log(f"downloading {package} ...")
        _package_tool(["apt-get", "download", package], cwd=staging)
        debs = list(staging.glob("*.deb"))
        if len(debs) != 1:
            raise UserError(f"apt-get download {package} left no single .deb in {staging}")
        deb = debs[0]
        version = _package_tool(["dpkg-deb", "-f", str(deb), "Version"]).strip()
        unpacked = staging / "root"
        _package_tool(["dpkg", "-x", str(deb), str(unpacked)])
        image = unpacked / "boot" / f"vmlinuz-{release}"
        if not image.is_file():
            raise UserError(f"{deb.name} holds no boot/vmlinuz-{release}")
        kept = staging / "kernel"
        keep_parts(unpacked, kept, release)
        info: dict[str, str | int] = {
            "release": release,
            "series": series,
            "flavour": flavour,
            "package": package,
            "version": version,
            "package_bytes": deb.stat().st_size,
            "image": f"vmlinuz-{release}",
            "image_bytes": (kept / f"vmlinuz-{release}").stat().st_size,
        }
        (kept / INFO).write_text(json.dumps(info, indent=1) + "\n")
        if target.exists():
            shutil.rmtree(target)
        kept.rename(target)
    log(f"{release}: {target / f'vmlinuz-{release}'}")
    return target


def fetched() -> list[dict]:
    """What ``fetch`` left in the cache, newest first, each with ``path`` to its image."""
    found = []
    root = kernels_dir()
    for info_file in root.glob(f"*/{INFO}") if root.is_dir() else []:
        try:
            info = json.loads(info_file.read_text())
        except (OSError, ValueError):
            continue
        image = info_file.parent / info.get("image", "")
        if image.is_file():
            found.append({**info, "path": str(image)})
    return sorted(found, key=lambda k: _numbers(k["release"]), reverse=True)


def resolve(name: str | Path) -> Path:
    """The kernel image ``--kernel`` names: a path to an image, a fetched release, or a short
    name (``6.12``, ``6.12-rt``) for the newest fetched one of that series."""
    path = Path(name)
    if path.exists() or "/" in str(name):
        return path
    kernels = fetched()
    for kernel in kernels:
        if kernel["release"] == str(name):
            return Path(kernel["path"])
    if SHORT_NAME.match(str(name)):
        series, flavour = parse_short_name(str(name))
        for kernel in kernels:
            if kernel["series"] == series and kernel["flavour"] == flavour:
                return Path(kernel["path"])
        raise UserError(f"kernel {name} is not fetched: run `scalecheck kernel fetch {name}`")
    raise UserError(
        f"--kernel {name}: neither an image file nor a fetched kernel "
        "(`scalecheck kernel list` shows them)"
    )
