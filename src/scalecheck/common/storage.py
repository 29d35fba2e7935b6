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

from scalecheck.common.errors import UserError

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


# What to do about each OS error a user can fix, said after the file's name.
_REMEDY = {
    errno.EROFS: "the file system is read-only: give a directory on a writable one",
    errno.EACCES: "permission denied: give a directory you may write, or change its permissions",
    errno.EPERM: "operation not permitted: give a directory you may write",
    errno.ENOTDIR: "a part of this path is a file, not a directory",
    errno.EISDIR: "a directory where a file is needed",
    errno.ENOENT: "no such file or directory",
}


def os_error(err: OSError, where) -> UserError:
    """The one line for an OS error while reading or writing ``where`` (a file or the
    command's directory): a read-only or foreign directory, or a file where a directory
    belongs, is bad input."""
    path = Path(err.filename or where)
    if err.errno in (errno.EEXIST, errno.ENOTDIR):
        for part in reversed([path, *path.parents]):
            if part.exists() and not part.is_dir():
                return UserError(f"{part} is a file where a directory is needed: move it away")
    also = f" (and {err.filename2})" if err.filename2 else ""
    return UserError(f"{path}{also}: {os_reason(err)}")


def os_reason(err: OSError) -> str:
    return (err.errno is not None and _REMEDY.get(err.errno)) or err.strerror or str(err)


def require_space(path: Path, needed: int) -> None:
    """Stops before work that needs about ``needed`` bytes under ``path`` and would not
    find them."""
    free = _free_bytes(Path(path))
    if free is not None and free < needed:
        raise no_space(path, needed)


def write_json_atomically(path: Path, data, indent: int | None = 1) -> None:
    """``indent=None`` writes one line, for large files programs read: Python's JSON
    encoder is several times faster without indentation."""
    write_text_atomically(path, json.dumps(data, indent=indent) + "\n")


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


# Lines of an append-only JSON-lines store (results) that are not a record: torn by a
# crash or a full disk, or edited by hand. Readers skip them and say so.
def parse_record(line: str) -> dict | None:
    """The record of a line of the store, or None for a damaged line: not JSON (torn by a
    crash or a full disk, or edited), not an object, or without a test id."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("id"), str) else None


def damaged_note(damaged: list) -> str:
    """How many lines are damaged and which, for a one-line note."""
    numbers = [number for number, _ in damaged]
    shown = ", ".join(map(str, numbers[:10])) + (" ..." if len(numbers) > 10 else "")
    return f"{len(numbers)} damaged line{'s' if len(numbers) > 1 else ''} ({shown})"
