"""Z3 terms made and asserted through Z3's C API directly.

Z3's Python functions (``And``, ``If``, ``Not``, ``Solver.add``) cast and check every
argument, and paths replay thousands of them: that cost more than the solver in the
analysis and in test generation. These make the very same terms (Z3 shares equal terms,
so the result is the node the Python function would give), for arguments that need no
cast; any other argument takes the Python function's way.
"""

from __future__ import annotations

import ctypes

import z3
from z3.z3 import _to_expr_ref  # wraps a raw AST; z3 exports no public equivalent


def and_(formulas: list) -> z3.BoolRef:
    """``z3.And(formulas)``."""
    made = _connective(z3.Z3_mk_and, formulas, True)
    return z3.And(formulas) if made is None else made


def or_(formulas: list) -> z3.BoolRef:
    """``z3.Or(formulas)``."""
    made = _connective(z3.Z3_mk_or, formulas, False)
    return z3.Or(formulas) if made is None else made


def _connective(make, formulas: list, empty: bool) -> z3.BoolRef | None:
    """The connective of ``formulas``; None when one of them needs a cast. (Never ``or``
    these results: a Boolean term's truth value is a branch of the explored path.)"""
    if not formulas:
        return z3.BoolVal(empty)
    if not all(isinstance(formula, z3.BoolRef) for formula in formulas):
        return None
    ctx = formulas[0].ctx
    array = (z3.Ast * len(formulas))(*[formula.as_ast() for formula in formulas])
    return z3.BoolRef(make(ctx.ref(), len(formulas), array), ctx)


def not_(formula) -> z3.BoolRef:
    """``z3.Not(formula)``."""
    if not isinstance(formula, z3.BoolRef):
        return z3.Not(formula)
    ctx = formula.ctx
    return z3.BoolRef(z3.Z3_mk_not(ctx.ref(), formula.as_ast()), ctx)


def implies(premise, conclusion) -> z3.BoolRef:
    """``z3.Implies(premise, conclusion)``."""
    if not (isinstance(premise, z3.BoolRef) and isinstance(conclusion, z3.BoolRef)):
        return z3.Implies(premise, conclusion)
    ctx = premise.ctx
    return z3.BoolRef(z3.Z3_mk_implies(ctx.ref(), premise.as_ast(), conclusion.as_ast()), ctx)


def ite(condition, then, otherwise) -> z3.ExprRef:
    """``z3.If(condition, then, otherwise)``."""
    if not (
        isinstance(condition, z3.BoolRef)
        and isinstance(then, z3.ExprRef)
        and isinstance(otherwise, z3.ExprRef)
    ):
        return z3.If(condition, then, otherwise)
    ctx = condition.ctx
    try:
        ast = z3.Z3_mk_ite(ctx.ref(), condition.as_ast(), then.as_ast(), otherwise.as_ast())
    except z3.Z3Exception:  # branches of two sorts: z3.If converts one (an Int to a Real)
        return z3.If(condition, then, otherwise)
    return _to_expr_ref(ast, ctx)


def is_true(formula) -> bool:
    """``z3.is_true(formula)``: one C call, where z3's wraps the term's declaration and
    its kind in Python objects first (the exploration asks at every branch)."""
    return _bool_value(formula) == z3.Z3_L_TRUE


def is_false(formula) -> bool:
    """``z3.is_false(formula)``."""
    return _bool_value(formula) == z3.Z3_L_FALSE


def _bool_value(formula) -> int:
    if not isinstance(formula, z3.ExprRef):  # z3's is_true of a Python value is False
        return z3.Z3_L_UNDEF
    return z3.Z3_get_bool_value(formula.ctx.ref(), formula.as_ast())


def holds_in(model: z3.ModelRef, formula: z3.BoolRef, completion: bool = True) -> bool:
    """``z3.is_true(model.eval(formula, model_completion=completion))``, without a Python
    object for the value. The value is ``true``, ``false`` (terms Z3 never frees) or,
    without completion, ``formula`` itself: no term is made or freed at another moment
    than z3's own eval would, so term numbering stays as it was."""
    ref = model.ctx.ref()
    value = (z3.Ast * 1)()
    if not z3.Z3_model_eval(ref, model.model, formula.as_ast(), completion, value):
        raise z3.Z3Exception("failed to evaluate expression in the model")
    return z3.Z3_get_bool_value(ref, value[0]) == z3.Z3_L_TRUE


# Z3_get_ast_id itself, on plain pointers: z3's ``get_id`` converts both arguments in
# Python and asks for the context's error code after the call, several times the C call,
# and the conditions' construction keys everything by id (tens of thousands a pair).
_get_ast_id = ctypes.cast(
    z3.z3core.Z3_get_ast_id.__defaults__[0].f,
    ctypes.PYFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p),
)


def ast_id(expr: z3.ExprRef) -> int:
    """``expr.get_id()``: Z3's number of the term."""
    return _get_ast_id(expr.ctx.ref().value, expr.ast.value)


def assert_all(solver: z3.Solver, constraints) -> None:
    """``solver.add(*constraints)`` for Boolean expressions."""
    ref, raw = solver.ctx.ref(), solver.solver
    for constraint in constraints:
        if isinstance(constraint, z3.BoolRef):
            z3.Z3_solver_assert(ref, raw, constraint.as_ast())
        else:
            solver.add(constraint)
