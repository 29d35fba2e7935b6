"""Time limits of Z3 queries, kept by one watchdog thread per process.

Z3's own limits (a solver's ``timeout``, ``TryFor``) start a timer for every query: a
timer thread is woken and parked again through several futex calls, and a new thread is
made when the last one has not yet gone back to its pool, as happens with both cores busy.
The analysis and test generation make tens of thousands of short queries, and those
timers cost about a tenth of their CPU time. The queries almost never come near their
limit, so one thread that looks a few times a second whether the running query is past
its deadline does the same job: it interrupts the query (Z3_interrupt), which then ends
as on Z3's own timeout, a check answering ``unknown``, a tactic raising Z3Exception.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time

import z3

# A Z3 query's limit where the user sets none (`scalecheck analyze --solver-timeout`).
QUERY_LIMIT_MS = 60_000
# How often the watchdog looks: a query may run this much longer than its limit.
PERIOD_SECONDS = 0.1
# Z3's value for "no timeout": no timer. The parameter is still set, because a solver
# given a timeout, whatever its value, finds other models than one given none, and the
# analysis's conditions and tests were made with one.
_NO_TIMER = 2**32 - 1

# Z3_interrupt called without releasing the GIL (z3's own binding releases it), so that
# the querying thread cannot end its query between the watchdog's look and the interrupt.
_interrupt = ctypes.cast(
    z3.z3core.Z3_interrupt.__defaults__[0].f, ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
)


class _Query:
    def __init__(self, ctx: z3.Context, deadline: float):
        self.ctx, self.deadline = ctx, deadline
        self.interrupted = False


class _Watchdog:
    """The process's watchdog: threads do not survive a fork, so a forked worker makes its
    own (and its own lock: the parent's may have been held when it forked)."""

    def __init__(self):
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.running: _Query | None = None
        threading.Thread(target=self._watch, name="z3-deadlines", daemon=True).start()

    def _watch(self):
        while True:
            time.sleep(PERIOD_SECONDS)
            with self.lock:
                query = self.running
                if query is not None and time.monotonic() > query.deadline:
                    query.interrupted = True
                    _interrupt(query.ctx.ref())


_watchdog: _Watchdog | None = None


@contextlib.contextmanager
def limit(ctx: z3.Context, milliseconds: int):
    """Interrupts the Z3 query of the body (one check or tactic) once it has run
    ``milliseconds``."""
    global _watchdog
    if _watchdog is None or _watchdog.pid != os.getpid():
        _watchdog = _Watchdog()
    watchdog = _watchdog
    query = _Query(ctx, time.monotonic() + milliseconds / 1000)
    with watchdog.lock:
        watchdog.running = query
    try:
        yield
    finally:
        with watchdog.lock:
            watchdog.running = None
        if query.interrupted:
            # An interrupt that came as the query ended stays pending in the context, and
            # would end the next tactic or simplification at once; a check clears it.
            z3.Solver(ctx=ctx).check()


class Solver(z3.Solver):
    """A Z3 solver whose checks answer ``unknown`` after ``milliseconds`` (what
    ``solver.set("timeout", milliseconds)`` does, without a timer per check). ``logic``:
    as ``z3.SolverFor``."""

    def __init__(self, milliseconds: int, ctx: z3.Context | None = None, logic: str = ""):
        ctx = z3.get_ctx(ctx)
        raw = (
            z3.Z3_mk_solver_for_logic(ctx.ref(), z3.to_symbol(logic, ctx))
            if logic
            else z3.Z3_mk_solver(ctx.ref())
        )
        super().__init__(raw, ctx)
        self.set("timeout", _NO_TIMER)
        self.milliseconds = milliseconds

    def check(self, *assumptions) -> z3.CheckSatResult:
        with limit(self.ctx, self.milliseconds):
            return super().check(*assumptions)
