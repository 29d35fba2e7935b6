"""The path explorer on small programs whose path counts are known."""

import z3

from scalecheck.engine import explore
from scalecheck.engine.types import SPARE_KEYS, Bool, Dict, Key, MapValue


def paths_of(program):
    return [(path, outcome) for path, outcome in explore.explore(program)]


def test_straight_line_code_has_one_path():
    x = z3.Int("x")
    assert len(paths_of(lambda path: x + 1)) == 1


def test_nested_branches_give_one_path_per_feasible_leaf():
    x = z3.Int("x")

    def program(path):
        if x > 0:
            if x > 5:
                return "big"
            return "small"
        return "non-positive"

    outcomes = sorted(outcome for _, outcome in paths_of(program))
    assert outcomes == ["big", "non-positive", "small"]


def test_infeasible_branches_are_not_explored():
    x = z3.Int("x")

    def program(path):
        if x > 0:
            if x < 0:  # contradicts the branch above
                return "impossible"
            return "positive"
        return "other"

    outcomes = sorted(outcome for _, outcome in paths_of(program))
    assert outcomes == ["other", "positive"]


def test_assumptions_prune_paths():
    x = z3.Int("x")

    def program(path):
        path.assume(x == 3)
        return "three" if x == 3 else "not three"

    assert [outcome for _, outcome in paths_of(program)] == ["three"]


def test_independent_branches_multiply():
    a, b, c = z3.Bools("a b c")

    def program(path):
        return (bool(a), bool(b), bool(c))

    outcomes = {outcome for _, outcome in paths_of(program)}
    assert len(outcomes) == 8


def test_path_conditions_are_recorded():
    x = z3.Int("x")

    def program(path):
        return "pos" if x > 0 else "neg"

    for path, outcome in paths_of(program):
        solver = z3.Solver()
        solver.add(path.decisions)
        solver.add(x > 0 if outcome == "neg" else x <= 0)
        assert solver.check() == z3.unsat  # the condition pins down the outcome


def test_model_errors_are_reported_as_outcomes_not_dropped():
    x = z3.Int("x")

    def program(path):
        if x > 0:
            raise explore.ModelError("bad path")
        return "fine"

    outcomes = [outcome for _, outcome in paths_of(program)]
    assert len(outcomes) == 2
    assert any(isinstance(outcome, explore.ModelError) for outcome in outcomes)


def test_unknown_answers_are_flagged_on_the_path():
    # Nonlinear integer arithmetic with a 1 ms budget makes Z3 give up.
    x, y, z = z3.Ints("x y z")

    def program(path):
        if x * x * x + y * y * y == z * z * z + 33:
            return "cube sum"
        return "other"

    stats = explore.Stats()
    results = list(explore.explore(program, solver_timeout_ms=1, stats=stats))
    assert results, "paths must still be explored when the solver gives up"
    assert all(path.unknown for path, _ in results)
    assert stats.unknown_checks > 0


def test_a_replay_that_meets_other_branches_is_a_model_error():
    """Paths are replayed from the start; model code that branches differently on a
    second run (here: on a counter outside the model) is reported, not trusted."""
    x, y = z3.Ints("x y")
    runs = []

    def program(path):
        runs.append(1)
        first = x > 0 if len(runs) == 1 else y > 0
        return "yes" if first else "no"

    outcomes = [outcome for _, outcome in paths_of(program)]
    assert outcomes[0] == "yes"
    (error,) = outcomes[1:]
    assert isinstance(error, explore.ModelError)
    assert "non-deterministic model code: replayed branch 1 met y > 0" in str(error)


def test_a_replay_that_stops_early_is_a_model_error():
    x, y = z3.Ints("x y")
    runs = []

    def program(path):
        runs.append(1)
        if len(runs) == 1 and x > 0 and y > 0:
            return "both"
        return "fewer branches"

    errors = [o for _, o in paths_of(program) if isinstance(o, explore.ModelError)]
    assert errors and all("the replay ended after 0 of the" in str(e) for e in errors)


def test_a_full_key_domain_allocates_above_it_and_never_vanishes():
    """Every key of the domain in use (all fds open) is a real state: the allocation takes
    the first key above the domain, as Linux does, instead of dropping the path."""
    table_type = Dict(Key("Slot", 2), Bool())

    def program(path):
        table = MapValue(table_type, "table")
        key = table.lowest_free_key()
        table[key] = True
        return "above the domain" if key == 2 else "inside"

    assert sorted(outcome for _, outcome in paths_of(program)) == ["above the domain", "inside"]


def test_more_allocations_than_the_spare_keys_raise_bound_exceeded():
    table_type = Dict(Key("Slot", 2), Bool())

    def program(path):
        table = MapValue(table_type, "table")
        for _ in range(2 + SPARE_KEYS + 1):
            table[table.any_free_key()] = True
        return "fits"

    outcomes = [outcome for _, outcome in paths_of(program)]
    assert outcomes and all(isinstance(o, explore.BoundExceeded) for o in outcomes)
    assert "every key up to 5 in use" in str(outcomes[0])
