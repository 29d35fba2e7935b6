"""The outcomes the model allows for one concrete test, one per choice the implementation
can make (docs/format-tests.md, ``outcomes`` and ``left_path``).

A test fixes the initial state and the arguments; where the model lets the implementation
choose (an fd under O_ANYFD, any free id), the test's expected results say ``"*"``. That
is too loose where a choice decides another call's result (``alloc -> 0`` then
``lookup(0)`` finds it), and too strict where the implementation takes a choice the test's
path excluded (the path assumed the id differs from lookup's argument): the history is
legal, but it is not the path the test was made for.

So, for a test whose results show a choice as is (a call returns the chosen value), every
legal value of those choices is tried in the test's world (its initial state and
arguments fixed): with the choices bound, either the path still holds, and each result is
computed (a value where the world and the choices decide it, else ``"*"``), or the choice
leaves the path: then the chosen values are all that is known of that outcome, and a
result showing them has "left the path" -- legal, but not a test of this path.

A choice is legal when it satisfies the constraints the path puts on the choices alone
(an unused key, within the key's range): the path's assertions that mention no argument
and no other part of the world. The enumeration is capped: beyond the cap, the test keeps
its ``"*"`` expectation only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import z3

from scalecheck.engine import deadline
from scalecheck.engine.rawz3 import assert_all, or_
from scalecheck.testgen.z3_c_api import (
    app_args,
    app_decl,
    ast_id,
    ast_kind,
    decl_kind,
    decl_name,
    differ,
    equal,
    python_value,
)

# Legal assignments of a test's visible choices tried at most; more leave it as it was.
CHOICE_CAP = 8


class Terms(Protocol):
    """The path's observed terms, by index (testgen.ObservedTerms)."""

    def __getitem__(self, index: int) -> z3.ExprRef: ...


class ConstantNames:
    """The names of the uninterpreted constants (arity 0) and functions in a path's terms,
    walked through Z3's C API: wrapping every node in Z3's Python classes cost more than
    the solver's checks of the whole path. Each term is walked once: testgen keeps one
    per pair (one Z3 context), whose paths share most terms and constraints."""

    def __init__(self, context: z3.Context):
        self.ref = context.ref().value
        # By node id, with the term itself: kept alive, its id is not given to another.
        self._walked: dict[int, tuple[z3.AstRef, frozenset[str], frozenset[str]]] = {}

    def of(self, term: z3.AstRef) -> tuple[frozenset[str], frozenset[str]]:
        """(the constants' names, the applied functions' names) in ``term``."""
        key = ast_id(self.ref, term.as_ast())
        if key not in self._walked:
            self._walked[key] = (term, *self._walk(term))
        return self._walked[key][1:]

    def _walk(self, term: z3.AstRef) -> tuple[frozenset[str], frozenset[str]]:
        ref, seen = self.ref, set()
        constants: set[str] = set()
        functions: set[str] = set()
        todo = [term.as_ast()]
        while todo:
            node = todo.pop()
            node_id = ast_id(ref, node)
            if node_id in seen or ast_kind(ref, node) != z3.Z3_APP_AST:
                continue
            seen.add(node_id)
            args = app_args(ref, node)  # an application AST is its app (Z3_to_app)
            decl = app_decl(ref, node)
            if decl_kind(ref, decl) == z3.Z3_OP_UNINTERPRETED:
                (functions if args else constants).add(decl_name(ref, decl))
            todo.extend(args)
        return frozenset(constants), frozenset(functions)


def fill_results(shape, value: Callable):
    """The results of an observation ``shape`` (docs/format-analysis.md: dicts and lists
    whose leaves are observation entries or constants) with each entry's ``value``."""
    if isinstance(shape, dict) and "obs" in shape:
        return value(shape)
    if isinstance(shape, dict):
        return {key: fill_results(item, value) for key, item in shape.items()}
    if isinstance(shape, list):
        return [fill_results(item, value) for item in shape]
    return shape


class PathChoices:
    """What one path lets the implementation choose, found once per path: the choices a
    result shows as is, and the path's constraints on the choices alone.

    ``assertions``: the path's constraints (docs/format-analysis.md, smt2; a list or
    the solver's AstVector, read only when a result shows a choice); ``terms``:
    the observed terms; ``entries``: every observation entry of the path; ``results``:
    the path's observed results; ``names``: the walker of the terms, shared by the paths
    of one Z3 context (one of the path's own without)."""

    def __init__(
        self,
        assertions,
        terms: Terms,
        entries: list[dict],
        results: dict,
        names: ConstantNames | None = None,
    ):
        self.assertions, self.terms, self.results = assertions, terms, results
        self.visible: dict[str, z3.ExprRef] = {}
        self.on_choices_alone: list = []
        self.world_terms = sorted({e["obs"] for e in entries if not e["chosen"]})
        # Made by the path's first test (see test_outcomes).
        self._legal: z3.Solver | None = None
        self._path: z3.Solver | None = None
        self._world_literals: dict[tuple, z3.BoolRef] = {}  # (term, value): reused by tests
        # The world's terms that can bear on which choices are legal (see _tied_terms), and
        # the legal assignments found so far by their values.
        self._tied: list[int] = []
        self._legal_by_world: dict[tuple, list[dict] | None] = {}
        chosen = sorted({e["obs"] for e in entries if e["chosen"]})
        # The chosen terms that are constants, by name (read once per path: a test's
        # results off the path show them).
        self._chosen_names = {
            index: terms[index].decl().name() for index in chosen if z3.is_const(terms[index])
        }
        # Only a choice a result shows as is (a constant) can be visible: without one, the
        # path's terms need no walk.
        shown = {
            name: terms[index]
            for index, name in self._chosen_names.items()
            if terms[index].decl().kind() == z3.Z3_OP_UNINTERPRETED
        }
        if not shown:
            return
        names = names or ConstantNames(terms[chosen[0]].ctx)
        world_symbols: dict[int, set[str]] = {}
        world_names: set[str] = set()
        for index in self.world_terms:
            constants, functions = names.of(terms[index])
            world_names |= constants
            world_symbols[index] = set(constants | functions)
        choices: set[str] = set()
        for index in chosen:
            choices |= names.of(terms[index])[0] - world_names
        self.visible = {name: term for name, term in shown.items() if name in choices}
        if self.visible:
            self.on_choices_alone = [
                a for a in assertions if (found := names.of(a)[0]) and found <= choices
            ]
            applied: set[str] = set()
            for assertion in self.on_choices_alone:
                applied |= names.of(assertion)[1]
            self._tied = _tied_terms(applied, world_symbols)

    def test_outcomes(self, values: list) -> tuple[list, list, list] | None:
        """(on-path outcomes, left-path outcomes, every legal choice) of the test whose
        values of the terms are ``values``, each {"AB": [A, B], "BA": [A, B]} of raw
        results ("*" where undecided; a legal choice shows the chosen values only); None
        when no result shows a choice as is, or when the choices have more legal values
        than CHOICE_CAP."""
        visible, terms, results = self.visible, self.terms, self.results
        if not visible:
            return None
        if self._path is None:
            # Two solvers per path, their constraints asserted once for all its tests
            # (the path's own Z3 context: testgen gives each pair one): the constraints
            # on the choices alone, and all of the path's.
            context = next(iter(visible.values())).ctx
            self._legal = deadline.Solver(deadline.QUERY_LIMIT_MS, ctx=context)
            self._path = deadline.Solver(deadline.QUERY_LIMIT_MS, ctx=context)
            assert_all(self._legal, self.on_choices_alone)
            assert_all(self._path, self.assertions)
        world = [self._world_literal(index, values[index]) for index in self.world_terms]
        tied = tuple(values[index] for index in self._tied)
        if tied not in self._legal_by_world:
            tied_world = [self._world_literal(index, values[index]) for index in self._tied]
            self._legal_by_world[tied] = _legal_assignments(self._legal, visible, tied_world)
        legal = self._legal_by_world[tied]
        if legal is None:
            return None
        path = self._path
        path.push()
        assert_all(path, world)
        on_path, left, shown = [], [], []
        for assignment in legal:
            chosen_values = {name: python_value(value) for name, value in assignment.items()}
            chosen_only = {
                order: [_left_result(result, self._chosen_names, chosen_values) for result in calls]
                for order, calls in results.items()
            }
            shown.append(chosen_only)
            path.push()
            assert_all(path, [equal(visible[name], value) for name, value in assignment.items()])
            if path.check() == z3.sat:
                on_path.append(fill_results(results, _decided_value(path, terms, results)))
            else:
                left.append(chosen_only)
            path.pop()
        path.pop()
        return on_path, left, shown

    def _world_literal(self, index: int, raw) -> z3.BoolRef:
        """term == raw, built once per path (a path's tests share most values)."""
        key = (index, raw)
        if key not in self._world_literals:
            self._world_literals[key] = equal(self.terms[index], raw)
        return self._world_literals[key]


def _tied_terms(symbols: set[str], world_symbols: dict[int, set[str]]) -> list[int]:
    """The world's terms (by index) tied to ``symbols`` (the functions the constraints on
    the choices alone apply): those that name one of them, and, again and again, those
    that name an uninterpreted symbol a tied term names. Which choices are legal in a
    test's world depends on the values of these terms only: the other terms' values
    share no symbol with the constraints or with these terms, and they hold together
    (they are one model's), so they rule no choice out. Tests of a path that agree on
    these values have the same legal choices (the world varies mostly elsewhere: which
    names alias)."""
    reached, tied = set(symbols), []
    left = dict(world_symbols)
    grew = True
    while grew:
        grew = False
        for index, names in list(left.items()):
            if names & reached:
                reached |= names
                tied.append(index)
                del left[index]
                grew = True
    return sorted(tied)


def _legal_assignments(solver: z3.Solver, visible: dict, world: list) -> list[dict] | None:
    """Every assignment (name -> value) of the visible choices that ``solver``'s
    constraints allow in the test's ``world``, in order of their values (not of Z3's
    answers, which depend on what the solver saw before); None beyond CHOICE_CAP."""
    solver.push()
    assert_all(solver, world)
    found: list[dict] = []
    while solver.check() == z3.sat and len(found) <= CHOICE_CAP:
        model = solver.model()
        assignment = {name: model.eval(c, model_completion=True) for name, c in visible.items()}
        found.append(assignment)
        # The literals' Python objects end with the statement, as z3's would: an object
        # alive after the pop below frees its term later, and Z3 reuses a freed term's
        # number (the numbers steer the solutions found after).
        assert_all(solver, [or_([differ(visible[n], v) for n, v in assignment.items()])])
    solver.pop()
    if len(found) > CHOICE_CAP:
        return None
    return sorted(found, key=lambda a: [python_value(value) for value in a.values()])


def _decided_value(path: z3.Solver, terms: Terms, results) -> Callable:
    """A result's value where the test's world and the bound choices decide it, else "*"
    (``path`` holds both and is satisfiable).

    A value is decided when no solution gives it another: one check asks whether any of
    the results can differ at once, and each solution that shows some differing rules
    those out, so a test whose results are all decided costs one check, not one each. A
    check that answers unknown leaves each remaining result to a check of its own, and
    a result whose own check is not unsat is undecided."""
    model = path.model()
    observed: list[int] = []
    fill_results(results, lambda entry: observed.append(entry["obs"]))
    raw = {obs: model.eval(terms[obs], model_completion=True) for obs in observed}
    undecided: set[int] = set()
    open_ = sorted(raw)
    while open_:
        path.push()
        assert_all(path, [or_([differ(terms[obs], raw[obs]) for obs in open_])])
        answer = path.check()
        other = path.model() if answer == z3.sat else None
        path.pop()
        if answer == z3.unsat:
            break
        differing = set()
        if other is not None:
            differing = {
                obs
                for obs in open_
                if python_value(other.eval(terms[obs], model_completion=True))
                != python_value(raw[obs])
            }
        if not differing:  # unknown: one check per remaining result, as alone
            undecided |= {obs for obs in open_ if not _fixed(path, terms[obs], raw[obs])}
            break
        undecided |= differing
        open_ = [obs for obs in open_ if obs not in differing]

    def value(entry: dict):
        obs = entry["obs"]
        return "*" if obs in undecided else python_value(raw[obs])

    return value


def _fixed(path: z3.Solver, term: z3.ExprRef, raw: z3.ExprRef) -> bool:
    path.push()
    path.add(differ(term, raw))
    fixed = path.check() == z3.unsat
    path.pop()
    return fixed


def _left_result(result, chosen_names: dict[int, str], chosen_values: dict[str, int]):
    """A call's result off the path: the chosen values it shows (``chosen_values``, by the
    names of the chosen constants, ``chosen_names`` by term), in the shape this path
    gives them ("*" for the rest); a result that shows none is unknown ("*")."""

    def value(entry: dict):
        name = chosen_names.get(entry["obs"], "") if entry["chosen"] else ""
        return chosen_values.get(name, "*")

    shown = fill_results(result, value)
    return shown if _shows_a_value(shown) else "*"


def _shows_a_value(result) -> bool:
    if isinstance(result, dict):
        return any(_shows_a_value(item) for item in result.values())
    if isinstance(result, list):
        return any(_shows_a_value(item) for item in result)
    return isinstance(result, int) and not isinstance(result, bool)
