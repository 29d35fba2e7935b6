"""Files that survive a crash: written whole or not at all; and a full disk told in one line.

A full disk (or quota) is bad input: every stage keeps what it finished (results are
appended line by line, other files replaced whole), so the same command resumes once
space is freed. ``no_space`` makes the one line; the CLI's main turns any ENOSPC that
no stage caught into it, naming the command's directory.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

from scalecheck.errors import UserError

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _free_bytes(path: Path) -> int | None:
    for existing in (path, *path.parents):
        if existing.exists():
            return shutil.disk_usage(existing).free
    return None


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count} bytes"


def no_space(path: Path, needed: int | None = None) -> UserError:
    """The one-line error for a full file system while writing ``path`` (a file or the
    directory a command writes into)."""
    free = _free_bytes(Path(path))
    room = f"{_size(free)} free on its file system" if free is not None else "file system full"
    if needed is not None:
        room += f", about {_size(needed)} needed"
    return UserError(
        f"no space left on device writing {path} ({room}); free some space and rerun the "
        "same command: finished work is kept"
    )


def require_space(path: Path, needed: int) -> None:
    """Stops before work that needs about ``needed`` bytes under ``path`` and would not
    find them."""
    free = _free_bytes(Path(path))
    if free is not None and free < needed:
        raise no_space(path, needed)


def write_json_atomically(path: Path, data) -> None:
    write_text_atomically(path, json.dumps(data, indent=1) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    try:
        with open(temporary, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as err:
        temporary.unlink(missing_ok=True)
        if err.errno in NO_SPACE:
            raise no_space(path) from None
        raise UserError(f"cannot write {path}: {err.strerror}") from None


def read_json(path: Path):
    with open(path) as handle:
        return json.load(handle)
