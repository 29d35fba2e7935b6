"""Z3's C functions called directly for test generation's per-test work: reading values
out of models, a path's assertions, and the clauses that exclude a pattern.

Test generation makes several tests per isomorphism class, each one a model read term by
term and a clause made literal by literal: through z3's Python classes, each of those
calls converts its arguments in Python, checks the context's error code and wraps its
result, which cost more than the solver's own work. (Kept out of engine/rawz3.py: the
engine's sources are part of a model's fingerprint, and a change here must not make
every analysis stale.)
"""

from __future__ import annotations

import ctypes

import z3

# Z3's C functions themselves, for the clauses test generation makes by the thousand: its
# Python wrappers ask for the context's error code after every call, one C call more each.
_mk_not = z3.z3core.Z3_mk_not.__defaults__[0].f
_mk_or = z3.z3core.Z3_mk_or.__defaults__[0].f
_inc_ref = z3.z3core.Z3_inc_ref.__defaults__[0].f
_dec_ref = z3.z3core.Z3_dec_ref.__defaults__[0].f
_mk_eq = z3.z3core.Z3_mk_eq.__defaults__[0].f
_mk_distinct = z3.z3core.Z3_mk_distinct.__defaults__[0].f
_mk_true = z3.z3core.Z3_mk_true.__defaults__[0].f
_mk_false = z3.z3core.Z3_mk_false.__defaults__[0].f
_mk_int_sort = z3.z3core.Z3_mk_int_sort.__defaults__[0].f
_mk_numeral = z3.z3core.Z3_mk_numeral.__defaults__[0].f


def clause(ctx: z3.Context, atoms: list, signs: list[bool]) -> z3.BoolRef:
    """``or_([atom if sign else not_(atom) ...])`` of raw Boolean ASTs, with no Python
    object per literal: the very terms, made in the same order and each negation kept
    alive until the disjunction holds it (Z3 numbers the terms it makes, reusing freed
    numbers, and the numbers steer the solutions found after)."""
    ref = ctx.ref()
    literals = (z3.Ast * len(atoms))()
    negations = []
    for index, (atom, sign) in enumerate(zip(atoms, signs, strict=True)):
        if sign:
            literals[index] = atom
            continue
        negation = _mk_not(ref, atom)
        _inc_ref(ref, negation)
        negations.append(negation)
        literals[index] = negation
    made = z3.BoolRef(_mk_or(ref, len(atoms), literals), ctx)
    for negation in negations:
        _dec_ref(ref, negation)
    return made


def equal(term: z3.ExprRef, other) -> z3.BoolRef:
    """``term == other``: ``other`` a term of ``term``'s sort or a Python bool (Boolean
    term) or int (integer term). The very term z3's ``==`` makes, its constants made in
    the same order (a Python value's first), without z3's Python checks of both sorts: a
    path's tests make thousands of these literals, each costing z3 several times the C
    call."""
    ref = term.ctx.ref()
    left, right = _operands(ref, term, other)
    return z3.BoolRef(_mk_eq(ref, left, right), term.ctx)


def differ(term: z3.ExprRef, other) -> z3.BoolRef:
    """``term != other``, as ``equal`` makes ``==``."""
    ref = term.ctx.ref()
    pair = (z3.Ast * 2)(*_operands(ref, term, other))
    return z3.BoolRef(_mk_distinct(ref, 2, pair), term.ctx)


def _operands(ref, term: z3.ExprRef, other) -> tuple:
    """The raw ASTs in the order z3's operator puts them: Python runs the operator of the
    right operand when its class is a subclass of the left's (a numeral, IntNumRef,
    against an ArithRef: ``x != IntVal(0)`` is ``(distinct 0 x)``); a Python bool or int
    becomes the constant z3 makes of it."""
    if isinstance(other, z3.ExprRef):
        if type(other) is not type(term) and isinstance(other, type(term)):
            return other.as_ast(), term.as_ast()
        return term.as_ast(), other.as_ast()
    if isinstance(other, bool):
        return term.as_ast(), _mk_true(ref) if other else _mk_false(ref)
    return term.as_ast(), _mk_numeral(ref, str(other).encode(), _mk_int_sort(ref))


def raw_assertions(solver: z3.Solver) -> list:
    """The solver's assertions as raw ASTs (alive while the solver holds them): wrapping
    each in a Python object, as ``solver.assertions()`` does, costs more than reading
    them."""
    ref = solver.ctx.ref()
    vector = z3.Z3_solver_get_assertions(ref, solver.solver)
    z3.Z3_ast_vector_inc_ref(ref, vector)
    try:
        return [
            z3.Z3_ast_vector_get(ref, vector, i) for i in range(z3.Z3_ast_vector_size(ref, vector))
        ]
    finally:
        z3.Z3_ast_vector_dec_ref(ref, vector)


# Z3's C functions themselves, taking plain pointers, for the hundreds of thousands of
# reads of values in test generation: z3's own prototypes convert every argument through
# a Python method and ask for the context's error code after every call; these reads
# check what the calls return instead.
def _c_function(function, restype, *argtypes):
    return ctypes.cast(function.__defaults__[0].f, ctypes.PYFUNCTYPE(restype, *argtypes))


_POINTER = ctypes.c_void_p
model_eval = _c_function(
    z3.Z3_model_eval, ctypes.c_bool, _POINTER, _POINTER, _POINTER, ctypes.c_bool, _POINTER
)
numeral_string = _c_function(z3.Z3_get_numeral_string, ctypes.c_char_p, _POINTER, _POINTER)
_get_bool_value = _c_function(z3.Z3_get_bool_value, ctypes.c_int, _POINTER, _POINTER)
# For the walks through a path's terms (allowed.ConstantNames, open_equalities): read-only,
# so no term is made or freed. An argument comes back as z3's Ast, which z3's own
# functions and classes take as they take their own.
ast_id = _c_function(z3.Z3_get_ast_id, ctypes.c_uint, _POINTER, _POINTER)
ast_kind = _c_function(z3.Z3_get_ast_kind, ctypes.c_int, _POINTER, _POINTER)
app_arity = _c_function(z3.Z3_get_app_num_args, ctypes.c_uint, _POINTER, _POINTER)
app_arg = _c_function(z3.Z3_get_app_arg, z3.Ast, _POINTER, _POINTER, ctypes.c_uint)
app_decl = _c_function(z3.Z3_get_app_decl, _POINTER, _POINTER, _POINTER)
decl_kind = _c_function(z3.Z3_get_decl_kind, ctypes.c_int, _POINTER, _POINTER)
_decl_name = _c_function(z3.Z3_get_decl_name, _POINTER, _POINTER, _POINTER)
_symbol_string = _c_function(z3.Z3_get_symbol_string, ctypes.c_char_p, _POINTER, _POINTER)
_sort = _c_function(z3.Z3_get_sort, _POINTER, _POINTER, _POINTER)
_sort_kind = _c_function(z3.Z3_get_sort_kind, ctypes.c_int, _POINTER, _POINTER)


def app_args(ref, app) -> list:
    """The arguments of an application (plain pointer context ``ref``; an application
    AST): Z3's own, not counted by us, alive while ``app`` is."""
    return [app_arg(ref, app, i) for i in range(app_arity(ref, app))]


def decl_name(ref, decl) -> str:
    """The name of a declaration, as z3's ``Z3_get_symbol_string`` gives it."""
    return z3.z3core._to_pystr(_symbol_string(ref, _decl_name(ref, decl)))


def is_bool(ref, term) -> bool:
    return _sort_kind(ref, _sort(ref, term)) == z3.Z3_BOOL_SORT


def bool_value(ref, value) -> bool:
    """The truth of a Boolean constant (plain pointers: context, AST)."""
    answer = _get_bool_value(ref, value)
    if answer == z3.Z3_L_UNDEF:
        raise ValueError("a Boolean term has no value in the model")
    return answer == z3.Z3_L_TRUE


def raw_value(ref, value, is_bool: bool) -> bool | int:
    """A Boolean or integer constant (plain pointers: context, AST) as a Python bool or
    int; ValueError for a term that is no constant (one a model left unevaluated)."""
    if is_bool:
        return bool_value(ref, value)
    digits = numeral_string(ref, value)
    if not digits:
        raise ValueError("an integer term has no value in the model")
    return int(digits)


def python_value(value: z3.ExprRef) -> bool | int:
    """A Boolean or integer constant (a model's value) as a Python bool or int."""
    return raw_value(value.ctx.ref().value, value.as_ast().value, isinstance(value, z3.BoolRef))


def holds_in(model: z3.ModelRef, formula: z3.BoolRef) -> bool:
    """``z3.is_true(model.eval(formula, model_completion=True))``."""
    ref, value = formula.ctx.ref().value, ctypes.c_void_p()
    if not model_eval(ref, model.model.value, formula.as_ast().value, True, ctypes.byref(value)):
        raise z3.Z3Exception("failed to evaluate a formula in the model")
    return _get_bool_value(ref, value) == z3.Z3_L_TRUE
