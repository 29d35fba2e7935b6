"""Writes the guest's initramfs: cpio "newc" archives, which the kernel unpacks in order.

The base archive (driver as /init, busybox for debugging by hand) is built once; each boot
appends a small second archive holding only that boot's batch of tests, since the kernel
accepts concatenated archives.
"""

import os
import stat
from pathlib import Path

BUSYBOX = Path("/bin/busybox")


class CpioWriter:
    def __init__(self, path: Path):
        # The writer owns the file until close().
        self._file = open(path, "wb")  # noqa: SIM115
        self._inode = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev=(0, 0)):
        encoded = name.encode() + b"\0"
        fields = [self._inode, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(encoded), 0]
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        self._inode += 1
        self._file.write(header + encoded)
        self._pad()
        self._file.write(data)
        self._pad()

    def _pad(self):
        self._file.write(b"\0" * (-self._file.tell() % 4))

    def directory(self, name: str):
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, executable=False):
        self._entry(name, stat.S_IFREG | (0o755 if executable else 0o644), data)

    def symlink(self, name: str, target: str):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def char_device(self, name: str, major: int, minor: int):
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def close(self):
        self._entry("TRAILER!!!", 0)
        self._file.close()


# Programs built beside the driver that its calls run, each as /bin/<name>: exit0 (what
# posix_spawn starts) and exec_image (what exec replaces a test process with).
PROGRAMS = ("exit0", "exec_image")


def build_base(driver: Path, out: Path) -> Path:
    """The driver as /init, /dev/console for the kernel's first open, busybox as /bin/sh,
    and the PROGRAMS built beside the driver."""
    tmp = out.with_suffix(".tmp")
    cpio = CpioWriter(tmp)
    for d in ("dev", "proc", "bin", "t"):
        cpio.directory(d)
    cpio.char_device("dev/console", 5, 1)
    cpio.file("init", driver.read_bytes(), executable=True)
    for program in PROGRAMS:
        cpio.file(f"bin/{program}", (driver.parent / program).read_bytes(), executable=True)
    if BUSYBOX.exists():
        cpio.file("bin/busybox", BUSYBOX.read_bytes(), executable=True)
        cpio.symlink("bin/sh", "busybox")
    cpio.close()
    os.replace(tmp, out)
    return out


def build_boot_image(base: Path, batch_text: str, out: Path) -> Path:
    """Base archive followed by an archive holding /batch.txt."""
    batch_cpio = out.with_suffix(".batch.cpio")
    cpio = CpioWriter(batch_cpio)
    cpio.file("batch.txt", batch_text.encode())
    cpio.close()
    with open(out, "wb") as dst:
        dst.write(base.read_bytes())
        dst.write(batch_cpio.read_bytes())
    batch_cpio.unlink()
    return out
