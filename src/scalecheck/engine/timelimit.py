"""A time limit on model code, per path: an operation that loops for ever becomes a model
error on its path instead of hanging the analysis. Solver queries do not count (they have
their own timeout, and a hard query is not a bug of the model).

The limit is a SIGALRM timer, so it works where the analysis runs: on the main thread of
the command or of a worker process. Elsewhere (a thread) there is no limit."""

from __future__ import annotations

import contextlib
import signal
import threading

# After the first expiry the timer fires again this often until disarmed: an exception
# raised where Python drops it (a destructor) must not leave the model running for ever.
REARM_SECONDS = 0.05


class ModelTimeLimit(Exception):
    """Model code ran longer than the limit on one path."""


@contextlib.contextmanager
def limit(seconds: float | None):
    """Raises ModelTimeLimit in the body once it has run ``seconds`` outside solver
    queries (``None``: no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise ModelTimeLimit(
            f"model code ran longer than {seconds:g} s on this path (a loop that never "
            "ends? raise the limit with --model-timeout)"
        )

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds, REARM_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def paused():
    """The time of the body does not count against the current limit (a solver query)."""
    remaining, interval = signal.getitimer(signal.ITIMER_REAL)
    if not remaining:
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, remaining, interval)
