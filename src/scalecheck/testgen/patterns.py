"""The Z3 side of test generation: a path's observed terms read through Z3's C API, the
isomorphism class and value-equality patterns of a solution and the clauses that exclude
them (testgen.py's module doc says what they are)."""

from __future__ import annotations

import ctypes
from collections import defaultdict
from itertools import combinations
from typing import ClassVar

import z3
from z3.z3 import _to_expr_ref  # wraps a raw AST; z3 exports no public equivalent

from scalecheck.engine.commute import OBSERVED
from scalecheck.engine.rawz3 import assert_all, not_
from scalecheck.testgen.z3_c_api import (
    clause,
    differ,
    equal,
    model_eval,
    raw_assertions,
    raw_value,
)


class ObservedTerms:
    """The arguments of the path's ``observed(t0, t1, ...)`` atom (engine/commute.py).

    They are kept as raw Z3 ASTs and read through Z3's C API: wrapping each term and each
    model value in Z3's Python classes costs several times what the solver does. A term
    becomes a Python expression only when a clause needs it (``terms[i]``)."""

    def __init__(self, solver: z3.Solver):
        self.context = solver.ctx
        self._solver = solver  # keeps the atom, hence its arguments, alive
        ref = self.context.ref()
        atom = _observed_atom(solver)
        self.raw = [
            z3.Z3_get_app_arg(ref, atom, i) for i in range(z3.Z3_get_app_num_args(ref, atom))
        ]
        self._wrapped: dict[int, z3.ExprRef] = {}
        # (the term as a plain pointer, whether it is a Boolean: else an integer)
        self._reads = [(term.value, _is_bool(ref, term)) for term in self.raw]

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, index: int) -> z3.ExprRef:
        if index not in self._wrapped:
            self._wrapped[index] = _to_expr_ref(self.raw[index], self.context)
        return self._wrapped[index]

    def values(self, model: z3.ModelRef) -> list:
        """The terms' values in ``model`` (completed, so every term has one), as Python
        bools and ints, evaluated in order: completion fixes a value for a symbol the
        model leaves free, and later terms see that value."""
        ref, raw_model = self.context.ref().value, model.model.value
        result = ctypes.c_void_p()
        out = ctypes.byref(result)
        values: list[bool | int] = []
        for term, is_bool in self._reads:
            if not model_eval(ref, raw_model, term, True, out):
                raise z3.Z3Exception("failed to evaluate an observed term in the model")
            # No reference of ours to the value: Z3 keeps a context's last result alive
            # until the next one, and these reads make none.
            values.append(raw_value(ref, result, is_bool))
        return values


def _observed_atom(solver: z3.Solver):
    """The raw ``observed(...)`` assertion of the path's SMT-LIB text."""
    ref = solver.ctx.ref()
    for assertion in raw_assertions(solver):
        if z3.Z3_get_ast_kind(ref, assertion) != z3.Z3_APP_AST:
            continue
        decl = z3.Z3_get_app_decl(ref, z3.Z3_to_app(ref, assertion))
        if z3.Z3_get_symbol_string(ref, z3.Z3_get_decl_name(ref, decl)) == OBSERVED:
            return z3.Z3_to_app(ref, assertion)
    raise ValueError(f"the path's constraints have no {OBSERVED}(...) atom")


def _is_bool(ref, term) -> bool:
    return z3.Z3_get_sort_kind(ref, z3.Z3_get_sort(ref, term)) == z3.Z3_BOOL_SORT


class ValuePattern:
    """The equalities of values (value_features) inside one isomorphism class, and the
    clause that excludes a pattern of them once it has a test. A stored value counts only
    where its key is present: an absent key holds no value."""

    def __init__(self, terms, features: list[tuple[int, int, int | None]], text=str):
        self.terms, self.features = terms, features
        # Printed once per path: every test of it names its pattern with them.
        self._names = [(text(terms[j]), text(terms[i])) for i, j, _ in features]
        # Built by the first exclude() (value cap above 1), kept alive with their raw ASTs.
        self._equal: list = []
        self._equal_raw: list = []

    def _holds(self, values) -> list[bool]:
        return [
            values[i] == values[j] and (present is None or values[present])
            for i, j, present in self.features
        ]

    def exclude(self, values) -> z3.BoolRef:
        if not self._equal:
            terms = self.terms
            self._equal = [
                terms[i] == terms[j]
                if present is None
                else z3.And(terms[present], terms[i] == terms[j])
                for i, j, present in self.features
            ]
            self._equal_raw = [equal.as_ast() for equal in self._equal]
        # The very terms of z3.Or and z3.Not, made through the C API: the Python API's
        # checks of every argument's sort cost more than the solver's checks themselves.
        holds = self._holds(values)
        return clause(self._equal[0].ctx, self._equal_raw, [not held for held in holds])

    def describe(self, values) -> list[str]:
        """The pattern of ``values``, readable: ``A.value == B.value``,
        ``table(A.key) != B.value`` (a stored value of an absent key: not compared)."""
        return sorted(
            f"{left} {'==' if holds else '!='} {right}"
            for (_, _, present), (left, right), holds in zip(
                self.features, self._names, self._holds(values), strict=True
            )
            if present is None or values[present]
        )


class TermText:
    """Terms as Z3's Python API prints them, each printed once per pair: the paths of a
    pair share most terms (one node per term in the pair's context), and printing them
    cost as much as a quarter of the solver's time. Pairs share many terms too (an fd's
    offset), each in its own context: a term's SMT-LIB text, which Z3 prints in C and
    which spells the whole term, finds the Python text printed for another pair."""

    # SMT-LIB text -> Python text, for the pairs one worker process makes.
    _by_smtlib: ClassVar[dict[str, str]] = {}

    def __init__(self):
        # By node id, with the term itself: kept alive, its id is not given to another.
        self._printed: dict[int, tuple[z3.ExprRef, str]] = {}

    def __call__(self, term: z3.ExprRef) -> str:
        key = term.get_id()
        if key not in self._printed:
            smtlib = term.sexpr()
            if smtlib not in self._by_smtlib:
                self._by_smtlib[smtlib] = str(term)
            self._printed[key] = (term, self._by_smtlib[smtlib])
        return self._printed[key][1]


class IsomorphismPattern:
    """The features whose values define a test's isomorphism class (see the module doc),
    and the clause that excludes a class once it has a test."""

    def __init__(self, observations, kinds, terms, context: z3.Context):
        self.terms = terms
        self.context = context
        self.equalities, self.valued = pattern_features(observations, kinds)
        self._literals: dict = {}

    def exclude(self, values) -> z3.BoolRef:
        """A clause true exactly outside the class of ``values``."""
        literals = [
            self._equality_differs(i, j, values[i] == (0 if j is None else values[j]))
            for i, j in self.equalities
        ]
        literals += [self._value_differs(i, values[i]) for i in self.valued]
        if not literals:
            return z3.BoolVal(False, self.context)
        # Z3's Python Or() re-checks every argument's sort: the C call is much cheaper.
        context = literals[0].ctx
        array = (z3.Ast * len(literals))(*[literal.as_ast() for literal in literals])
        return z3.BoolRef(z3.Z3_mk_or(context.ref(), len(literals), array), context)

    def _equality_differs(self, i, j, now_equal):
        if (i, j) not in self._literals:  # built once per path, reused by every test
            right = z3.IntVal(0, self.context) if j is None else self.terms[j]
            self._literals[i, j] = (differ(self.terms[i], right), equal(self.terms[i], right))
        return self._literals[i, j][0 if now_equal else 1]

    def _value_differs(self, i, value):
        if (i, value) not in self._literals:
            self._literals[i, value] = differ(self.terms[i], value)
        return self._literals[i, value]


def value_variants(
    solver, pattern, values_pattern, first: tuple, terms, value_cap: int
) -> tuple[list, bool]:
    """``first`` (values and model) and, within its isomorphism class, one solution per
    further pattern of value equalities (``values_pattern``), up to ``value_cap`` in all;
    and whether patterns were left over (not asked at ``value_cap`` 1, which switches
    value patterns off: the check would cost as much as finding the class)."""
    variants = [first]
    if not values_pattern.features or value_cap == 1:
        return variants, False
    solver.push()
    assert_all(solver, [not_(pattern.exclude(first[0])), values_pattern.exclude(first[0])])
    while len(variants) < value_cap and solver.check() == z3.sat:
        model = solver.model()
        variants.append((terms.values(model), model))
        assert_all(solver, [values_pattern.exclude(variants[-1][0])])
    capped = len(variants) == value_cap and solver.check() == z3.sat
    solver.pop()
    return variants, capped


def value_features(observations, kinds, pattern) -> list:
    """Pairs of terms (i, j, the presence term of j's key or None) whose equality the
    isomorphism class leaves open although an implementation can branch on it: an
    argument against another argument or against a value the path reads from the initial
    state, of one kind (`set(k, v)` with v equal to what k holds, a write of the byte a
    file already holds). Flags (booleans, enums) are not values here: their values count
    where the path decides on them."""

    def is_value(entry):
        return (
            entry is not None
            and not entry["chosen"]
            and entry["kind"] not in ("bool", "enum")
            and kinds.get(entry["kind"], {}).get("class") not in (None, "enum")
        )

    arguments = [
        entry
        for call_args in observations["args"].values()
        for entry in call_args.values()
        if is_value(entry)
    ]
    # (entry, the presence of its key: None for an argument or a key always present)
    stored = [
        (leaf, read["present"]["obs"] if read["present"] else None)
        for read in observations["reads"]
        if not (read["key"] and read["key"]["chosen"])
        for leaf in read["leaves"].values()
        if is_value(leaf)
    ]
    candidates = [(entry, None) for entry in arguments]
    counted = set(pattern.equalities)
    features: dict[tuple, int | None] = {}
    for n, (argument, _) in enumerate(candidates):
        for other, present in candidates[n + 1 :] + stored:
            i, j = argument["obs"], other["obs"]
            if (
                argument["kind"] == other["kind"]
                and i != j
                and tuple(sorted((i, j))) not in counted
            ):
                features.setdefault((i, j), present)
    return [(i, j, present) for (i, j), present in sorted(features.items())]


def all_observations(observations):
    for read in observations["reads"]:
        for entry in (read["key"], read["present"], *read["leaves"].values()):
            if entry:
                yield entry
    for call_args in observations["args"].values():
        yield from call_args.values()
    for order_results in observations["results"].values():
        yield from _result_entries(order_results)


def _result_entries(value):
    if isinstance(value, dict) and "obs" in value:
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _result_entries(item)
    elif isinstance(value, list):
        for item in value:
            yield from _result_entries(item)


def pattern_features(observations, kinds) -> tuple[list, list]:
    """(pairs of term indices whose equality counts, term indices whose value counts).

    Keys of the initial state and uninterpreted arguments always count: which names, fds or
    pages alias is what tests are about. A boolean or enum counts only where the path's
    condition decides on it (an argument of a call that failed early does not). For kinds
    with a special zero (bytes), equality with zero counts too (index None)."""

    def is_identity(entry):
        return kinds.get(entry["kind"], {}).get("class") in ("uninterpreted", "key")

    def is_flag(entry):
        return (
            entry["kind"] in ("bool", "enum") or kinds.get(entry["kind"], {}).get("class") == "enum"
        )

    reads = observations["reads"]
    arguments = [
        entry for call_args in observations["args"].values() for entry in call_args.values()
    ]
    counted = [read["key"] for read in reads if read["key"]]
    counted += [
        entry for entry in arguments if is_identity(entry) or (is_flag(entry) and entry["decided"])
    ]
    counted += [
        entry
        for read in reads
        for entry in (read["present"], *read["leaves"].values())
        if entry and is_flag(entry) and entry["decided"]
    ]
    by_kind = defaultdict(list)
    valued = []
    for entry in counted:
        if entry["chosen"]:
            continue
        if is_identity(entry):
            by_kind[entry["kind"]].append(entry["obs"])
        else:
            valued.append(entry["obs"])
    equalities = []
    for kind, indices in by_kind.items():
        indices = sorted(set(indices))
        equalities += list(combinations(indices, 2))
        if kinds[kind].get("zero"):
            equalities += [(index, None) for index in indices]
    return equalities, sorted(set(valued))
