"""A time limit on model code, per path: an operation that loops for ever becomes a model
error on its path instead of hanging the analysis. Solver queries do not count (they have
their own timeout, and a hard query is not a bug of the model).

The limit counts the process's CPU seconds (a SIGPROF timer), not the clock's: on a
loaded machine a path's model code waits for a core, and a wall-clock limit turned paths
that take a second into model errors, so the verdicts depended on the load. The timer
works where the analysis runs: on the main thread of the command or of a worker process.
Elsewhere (a thread) there is no limit."""

from __future__ import annotations

import contextlib
import signal
import threading

# A timer of the CPU time the process uses (user and system), and the signal it sends.
_TIMER, _SIGNAL = signal.ITIMER_PROF, signal.SIGPROF
# After the first expiry the timer fires again this often until disarmed: an exception
# raised where Python drops it (a destructor) must not leave the model running for ever.
REARM_SECONDS = 0.05


class ModelTimeLimit(Exception):
    """Model code ran longer than the limit on one path."""


@contextlib.contextmanager
def limit(seconds: float | None):
    """Raises ModelTimeLimit in the body once it has used ``seconds`` of CPU outside
    solver queries (``None``: no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise ModelTimeLimit(
            f"model code ran longer than {seconds:g} s of CPU on this path (a loop that never "
            "ends? raise the limit with --model-timeout)"
        )

    previous = signal.signal(_SIGNAL, expired)
    signal.setitimer(_TIMER, seconds, REARM_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(_TIMER, 0)
        signal.signal(_SIGNAL, previous)


@contextlib.contextmanager
def paused():
    """The time of the body does not count against the current limit (a solver query)."""
    remaining, interval = signal.getitimer(_TIMER)
    if not remaining:
        yield
        return
    signal.setitimer(_TIMER, 0)
    try:
        yield
    finally:
        signal.setitimer(_TIMER, remaining, interval)
