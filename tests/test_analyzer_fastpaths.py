"""The analyzer's and test generator's direct uses of Z3's C API give what the Python API
gives: the SMT-LIB text of a path, the subterms of its decisions, and the values of its
observed terms in a model (real Z3, real paths of the posix model)."""

import pytest
import z3

from scalecheck.engine import commute, explore
from scalecheck.engine.commute import _apply, _smtlib, _subterm_ids, explore_pair
from scalecheck.engine.sexpr import numbered_lets
from scalecheck.interfaces.loading import load_model
from scalecheck.testgen import patterns


@pytest.fixture(scope="module")
def paths():
    """(path, smt2) of every commutative path of open || unlink, with the Python API's
    own SMT-LIB text of the same constraints beside ours."""
    model_cls = load_model("posix")
    seen = []
    original = commute._observations

    def observations(path: explore.Path, base, args, kinds, results):
        smt2, observed = original(path, base, args, kinds, results)
        constraints = [*path.decisions, *path.assumptions, *base.setup_constraints(path.reads)]
        seen.append((path, constraints, smt2))
        return smt2, observed

    commute._observations = observations
    try:
        records, _regions, _stats = explore_pair(model_cls, "open", "unlink")
    finally:
        commute._observations = original
    assert len(seen) == sum(1 for r in records if r.commutes and not r.unknown) > 5
    return seen


def test_smtlib_text_is_what_a_solver_prints(paths):
    for _path, constraints, _smt2 in paths:
        atom = z3.Function("observed", z3.IntSort(), z3.BoolSort())(z3.Int("A.fd"))
        solver = z3.Solver()
        solver.add(constraints)
        solver.add(atom)
        assert _smtlib(constraints, atom) == numbered_lets(solver.to_smt2())


def test_apply_builds_the_same_term_as_a_call():
    f = z3.Function("observed", z3.IntSort(), z3.BoolSort(), z3.BoolSort())
    x, b = z3.Int("x"), z3.Bool("b")
    assert _apply(f, [x + 1, b]).eq(f(x + 1, b))


def test_subterm_ids_are_those_of_a_python_walk(paths):
    for path, _constraints, _smt2 in paths:
        seen, todo = set(), list(path.decisions)
        while todo:
            node = todo.pop()
            if node.get_id() not in seen:
                seen.add(node.get_id())
                todo.extend(node.children())
        assert _subterm_ids(path.decisions) == seen


def test_observed_values_are_the_models_values_of_each_term(paths):
    checked = 0
    for _path, _constraints, smt2 in paths:
        solver = z3.Solver()
        solver.from_string(smt2)
        terms = patterns.ObservedTerms(solver)
        atom = next(a for a in solver.assertions() if a.decl().name() == "observed")
        assert [terms[i].eq(child) for i, child in enumerate(atom.children())] == [True] * len(
            terms
        )
        assert solver.check() == z3.sat
        model, fresh_model = solver.model(), solver.model()  # completion changes a model
        expected = []
        for term in atom.children():
            value = model.eval(term, model_completion=True)
            expected.append(z3.is_true(value) if z3.is_bool(value) else value.as_long())
        assert terms.values(fresh_model) == expected
        checked += 1
    assert checked == len(paths)


def test_let_names_are_numbered_in_order_of_appearance():
    """Z3 names a let by its term's id, which the terms a process made before decide."""
    text = "(let (($x347 (= a b))) (let ((?x12 (f $x347))) (and $x347 ?x12 $x3470)))"
    assert numbered_lets(text) == "(let (($x0 (= a b))) (let ((?x1 (f $x0))) (and $x0 ?x1 $x2)))"
