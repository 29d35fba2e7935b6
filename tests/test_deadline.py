"""Time limits of Z3 queries (engine/deadline.py): one watchdog thread instead of Z3's
timer per query."""

import time

import z3

from scalecheck.engine import deadline


def _pigeons(solver, holes: int):
    """holes + 1 pigeons in ``holes`` holes: unsatisfiable, and slow to prove."""
    sits = [[z3.Bool(f"p{p}h{h}") for h in range(holes)] for p in range(holes + 1)]
    for pigeon in sits:
        solver.add(z3.Or(pigeon))
    for h in range(holes):
        for p in range(holes + 1):
            for q in range(p + 1, holes + 1):
                solver.add(z3.Or(z3.Not(sits[p][h]), z3.Not(sits[q][h])))


def test_a_check_past_its_limit_answers_unknown_and_leaves_the_next_queries_alone():
    solver = deadline.Solver(200)
    _pigeons(solver, 12)
    started = time.monotonic()
    assert solver.check() == z3.unknown
    assert time.monotonic() - started < 0.2 + 5 * deadline.PERIOD_SECONDS
    x = z3.Int("x")
    goal = z3.Goal()
    goal.add(x > 3, x < 5)
    with deadline.limit(goal.ctx, 1_000):
        assert len(z3.Tactic("simplify")(goal)[0]) == 2
    easy = deadline.Solver(1_000)
    easy.add(x > 3)
    assert easy.check() == z3.sat


def test_a_tactic_past_its_limit_raises():
    solver = z3.SimpleSolver()
    _pigeons(solver, 12)
    goal = z3.Goal()
    goal.add(solver.assertions())
    try:
        with deadline.limit(goal.ctx, 200):
            z3.Tactic("smt")(goal)
    except z3.Z3Exception as error:
        assert "canceled" in str(error)
        return
    raise AssertionError("the tactic ran past its limit")
