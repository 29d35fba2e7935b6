"""engine/rawz3.py: terms made through Z3's C API are the very terms Z3's Python functions
make (Z3 shares equal terms, so ``eq`` is identity), and arguments that need a cast take
the Python functions' way."""

import z3

from scalecheck.engine.rawz3 import (
    and_,
    assert_all,
    ast_id,
    holds_in,
    implies,
    is_false,
    is_true,
    ite,
    not_,
    or_,
)

x, y = z3.Ints("x y")
p, q = z3.Bools("p q")
r = z3.Real("r")


def test_connectives_are_the_python_apis_terms():
    assert and_([p, q, x > y]).eq(z3.And([p, q, x > y]))
    assert or_([p, x == y]).eq(z3.Or([p, x == y]))
    assert and_([p]).eq(z3.And([p]))
    assert not_(p).eq(z3.Not(p))
    assert implies(p, x < y).eq(z3.Implies(p, x < y))
    assert ite(p, x, y).eq(z3.If(p, x, y))


def test_empty_connectives_are_their_units():
    assert z3.is_true(and_([]))
    assert z3.is_false(or_([]))


def test_arguments_that_need_a_cast_take_the_python_way():
    assert and_([p, True]).eq(z3.And([p, True]))
    assert ite(p, x, 3).eq(z3.If(p, x, 3))
    assert ite(p, x, r).eq(z3.If(p, x, r))  # an Int branch converted to Real
    assert ite(p, x, r).sort() == z3.RealSort()
    assert not_(False).eq(z3.Not(False))


def test_assert_all_asserts_every_constraint():
    solver = z3.Solver()
    assert_all(solver, [x > 1, x < 3, True])
    assert [str(a) for a in solver.assertions()] == ["x > 1", "x < 3", "True"]
    assert solver.check() == z3.sat and solver.model()[x].as_long() == 2


def test_truth_values_are_the_python_apis():
    for term in (z3.BoolVal(True), z3.BoolVal(False), p, x > y, z3.Not(p), x, z3.IntVal(1)):
        assert is_true(term) == z3.is_true(term)
        assert is_false(term) == z3.is_false(term)
    assert not is_true(True) and not is_false(False)  # Python values, as z3's: not terms


def test_holds_in_is_the_python_apis_evaluation():
    solver = z3.Solver()
    solver.add(x > y, p)
    assert solver.check() == z3.sat
    model = solver.model()
    for formula in (x > y, x < y, p, q, z3.Not(q), z3.And(p, x == y)):
        assert holds_in(model, formula) == z3.is_true(model.eval(formula, model_completion=True))
    # Without completion a constant the model leaves free is its own value: not true.
    assert not holds_in(model, q, completion=False)
    assert holds_in(model, p, completion=False)


def test_ast_id_is_z3s_id_of_the_term():
    terms = [x, p, x + 1 > y, z3.Not(p), z3.IntVal(7)]
    assert [ast_id(term) for term in terms] == [term.get_id() for term in terms]
    assert len({ast_id(term) for term in terms}) == len(terms)
