"""One command at a time per run directory.

Two commands writing one directory would mix their files (two runs appending to one
results store, each booting VMs in the same ``trace/vm0/``), so every stage that writes a
directory (analyze, testgen, run, report, and pipeline through them) holds
``DIR/.scalecheck.lock`` while it works. The lock is an ``flock`` on that file: the
kernel releases it when its holder ends, however it ends, so the lock of a killed process
never stays behind. The file says who holds it (pid, host, command, since when) for the
one line a second command refuses with. On a cluster, the process that owns the
directory (the one that submitted the work) holds the lock; the workers write elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import inspect
import json
import os
import shlex
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.storage import NO_SPACE, os_reason

LOCK_NAME = ".scalecheck.lock"
# How long a refused command waits for a holder that has just taken the lock to name itself.
NAME_WAIT_SECONDS = 2.0

# Directories this process holds (resolved path -> the lock file's descriptor): a stage
# called by another (pipeline -> run) finds its directory already held.
_held: dict[Path, int] = {}


def holding(parameter: str, create: bool = False):
    """Decorates a stage function: it runs holding the lock of the directory given as
    its argument ``parameter``. ``create``: make the directory first (a stage that starts
    a directory); otherwise a missing directory is left to the stage to report."""

    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def locked_call(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            with locked(Path(bound.arguments[parameter]), create):
                return function(*args, **kwargs)

        return locked_call

    return decorate


@contextlib.contextmanager
def locked(directory: Path, create: bool = False):
    """Holds ``directory``'s lock, or raises a one-line UserError naming its holder."""
    key = directory.resolve()
    if key in _held or not (create or directory.is_dir()):
        yield
        return
    descriptor = _open(directory)
    if descriptor is None:
        # No room for the lock file: the command cannot write anything here either, and
        # its first write says so, naming the file and the room left.
        yield
        return
    try:
        _take(descriptor, directory)
        _held[key] = descriptor
        try:
            yield
        finally:
            del _held[key]
            # Emptied, not removed: a waiting process may have the file open already.
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, 0)
    finally:
        os.close(descriptor)


def _open(directory: Path) -> int | None:
    """The lock file's descriptor; None on a full disk."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as err:
        if err.errno in NO_SPACE:
            return None
        raise UserError(f"cannot write output directory {directory}: {os_reason(err)}") from None


def _take(descriptor: int, directory: Path) -> None:
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _busy(directory, _named_holder(descriptor)) from None
    except OSError as err:
        # A file system without flock (some network mounts): the recorded pid decides.
        if err.errno != errno.ENOLCK:
            raise
        holder = _read(descriptor)
        if holder and _alive(holder):
            raise _busy(directory, holder) from None
    previous = _read(descriptor)
    if previous and previous.get("pid") != os.getpid():
        print(
            f"scalecheck: note: {directory} was locked by {_holder_text(previous)}, which "
            "ended without releasing it; taking it over",
            file=sys.stderr,
        )
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": shlex.join(["scalecheck", *sys.argv[1:]])[:300],
        "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    os.ftruncate(descriptor, 0)
    try:
        os.pwrite(descriptor, (json.dumps(me) + "\n").encode(), 0)
    except OSError as err:
        if err.errno not in NO_SPACE:
            raise
        # Held all the same (an flock takes no room); a second command cannot name us.


def _named_holder(descriptor: int) -> dict:
    """The holder's record. A holder writes it just after taking the lock: a command
    that meets the lock in between waits a moment for the name."""
    deadline = time.monotonic() + NAME_WAIT_SECONDS
    while not (holder := _read(descriptor)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return holder


def _read(descriptor: int) -> dict:
    text = os.pread(descriptor, 4096, 0).decode(errors="replace").strip()
    try:
        holder = json.loads(text) if text else {}
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _alive(holder: dict) -> bool:
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return True  # another machine's process cannot be asked: assume it runs
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _busy(directory: Path, holder: dict) -> UserError:
    return UserError(
        f"{directory} is in use by {_holder_text(holder)}: one command at a time per "
        "directory; wait for it to end, or stop it"
    )


def _holder_text(holder: dict) -> str:
    if not holder:
        return "another scalecheck command (starting: it has not written its name yet)"
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} (`{holder.get('command')}`) "
        f"since {holder.get('since')}"
    )


def _forget_in_child() -> None:
    """A forked worker closes its copies of the lock descriptors: the lock is then
    released when the process holding it ends, even if an orphaned worker lives on."""
    for descriptor in _held.values():
        with contextlib.suppress(OSError):
            os.close(descriptor)
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)
