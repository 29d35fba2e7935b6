"""What the commands print on stdout: rich tables at a width that stays readable in a file
or a pipe, and the quiet end when the pipe's reader leaves early (``| head``)."""

import os
import select
import sys

from rich.console import Console

# What a shell reports for a program that SIGPIPE ended: 128 + 13.
READER_GONE_EXIT = 141


class _StdoutConsole(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 itself; the command's one handler decides (stdout_reader_gone).
        raise BrokenPipeError


def stdout_console() -> Console:
    """A console on stdout; 160 columns when stdout is a file or pipe (rich would assume 80)."""
    return _StdoutConsole() if sys.stdout.isatty() else _StdoutConsole(width=160)


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has left, as after a BrokenPipeError that came
    from it: then stdout is pointed at /dev/null, so that Python's flush at exit stays
    quiet, and the caller exits with READER_GONE_EXIT. False for any other broken pipe (a
    child's). Asked of the kernel (a pipe without readers polls as an error), since the
    failed write may have left nothing in Python's buffer to fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a test's capture, or closed
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poller.poll(0)):
        return False
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
    return True


def run_printing(body) -> int:
    """body()'s exit status (None: 0) once what it printed is flushed, or READER_GONE_EXIT
    when stdout's reader left meanwhile (`scalecheck report DIR | head`: what was computed
    is on disk already). A broken pipe to anything else still raises."""
    try:
        code = body()
        sys.stdout.flush()  # here, not at exit, where the error could not be caught
    except BrokenPipeError:
        if not stdout_reader_gone():
            raise
        return READER_GONE_EXIT
    return 0 if code is None else code
