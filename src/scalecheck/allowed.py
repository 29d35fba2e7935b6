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

# Legal assignments of a test's visible choices tried at most; more leave it as it was.
CHOICE_CAP = 8


class Terms(Protocol):
    """The path's observed terms, by index (testgen.ObservedTerms)."""

    def __getitem__(self, index: int) -> z3.ExprRef: ...


def _constants(term: z3.ExprRef) -> dict[str, z3.ExprRef]:
    """The uninterpreted constants (arity 0) in ``term``, by name."""
    found: dict[str, z3.ExprRef] = {}
    seen: set[int] = set()
    todo = [term]
    while todo:
        node = todo.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if z3.is_const(node) and node.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            found[node.decl().name()] = node
        todo.extend(node.children())
    return found


def _value(term: z3.ExprRef, raw) -> z3.BoolRef:
    return term == (z3.BoolVal(raw, term.ctx) if isinstance(raw, bool) else raw)


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

    ``assertions``: the path's constraints (docs/format-analysis.md, smt2); ``terms``:
    the observed terms; ``entries``: every observation entry of the path; ``results``:
    the path's observed results."""

    def __init__(self, assertions: list, terms: Terms, entries: list[dict], results: dict):
        self.assertions, self.terms, self.results = assertions, terms, results
        chosen = {e["obs"] for e in entries if e["chosen"]}
        self.world_terms = sorted({e["obs"] for e in entries if not e["chosen"]})
        world_names: set[str] = set()
        for index in self.world_terms:
            world_names |= _constants(terms[index]).keys()
        choices: dict[str, z3.ExprRef] = {}
        for index in chosen:
            choices |= {
                name: c for name, c in _constants(terms[index]).items() if name not in world_names
            }
        self.visible = {
            terms[index].decl().name(): terms[index]
            for index in chosen
            if z3.is_const(terms[index]) and terms[index].decl().name() in choices
        }
        self.on_choices_alone = (
            [a for a in assertions if (names := _constants(a).keys()) and names <= choices.keys()]
            if self.visible
            else []
        )

    def test_outcomes(self, values: list) -> tuple[list, list, list] | None:
        """(on-path outcomes, left-path outcomes, every legal choice) of the test whose
        values of the terms are ``values``, each {"AB": [A, B], "BA": [A, B]} of raw
        results ("*" where undecided; a legal choice shows the chosen values only); None
        when no result shows a choice as is, or when the choices have more legal values
        than CHOICE_CAP."""
        visible, terms, results = self.visible, self.terms, self.results
        if not visible:
            return None
        world = [_value(terms[index], values[index]) for index in self.world_terms]
        legal = _legal_assignments(visible, world + self.on_choices_alone)
        if legal is None:
            return None
        # The path's own Z3 context (testgen gives each pair one).
        path = z3.Solver(ctx=next(iter(visible.values())).ctx)
        path.set("timeout", 60_000)
        path.add(*self.assertions, *world)
        on_path, left, shown = [], [], []
        for assignment in legal:
            chosen_only = {
                order: [_left_result(result, terms, assignment) for result in calls]
                for order, calls in results.items()
            }
            shown.append(chosen_only)
            path.push()
            path.add(*(visible[name] == value for name, value in assignment.items()))
            if path.check() == z3.sat:
                on_path.append(fill_results(results, _decided_value(path, terms)))
            else:
                left.append(chosen_only)
            path.pop()
        return on_path, left, shown


def _legal_assignments(visible: dict, constraints: list) -> list[dict] | None:
    """Every assignment (name -> value) of the visible choices that the constraints
    allow; None beyond CHOICE_CAP."""
    solver = z3.Solver(ctx=next(iter(visible.values())).ctx)
    solver.set("timeout", 60_000)
    solver.add(*constraints)
    found: list[dict] = []
    while solver.check() == z3.sat:
        if len(found) == CHOICE_CAP:
            return None
        model = solver.model()
        assignment = {name: model.eval(c, model_completion=True) for name, c in visible.items()}
        found.append(assignment)
        solver.add(z3.Or([visible[name] != value for name, value in assignment.items()]))
    return found


def _decided_value(path: z3.Solver, terms: Terms) -> Callable:
    """A result's value where the test's world and the bound choices decide it, else "*"
    (``path`` holds both and is satisfiable)."""
    model = path.model()

    def value(entry: dict):
        term = terms[entry["obs"]]
        raw = model.eval(term, model_completion=True)
        path.push()
        path.add(term != raw)
        decided = path.check() == z3.unsat
        path.pop()
        return _python(raw) if decided else "*"

    return value


def _left_result(result, terms: Terms, assignment: dict):
    """A call's result off the path: the chosen values it shows, in the shape this path
    gives them ("*" for the rest); a result that shows none is unknown ("*")."""

    def value(entry: dict):
        term = terms[entry["obs"]]
        if entry["chosen"] and z3.is_const(term) and term.decl().name() in assignment:
            return _python(assignment[term.decl().name()])
        return "*"

    shown = fill_results(result, value)
    return shown if _shows_a_value(shown) else "*"


def _shows_a_value(result) -> bool:
    if isinstance(result, dict):
        return any(_shows_a_value(item) for item in result.values())
    if isinstance(result, list):
        return any(_shows_a_value(item) for item in result)
    return isinstance(result, int) and not isinstance(result, bool)


def _python(value: z3.ExprRef):
    if z3.is_true(value) or z3.is_false(value):
        return z3.is_true(value)
    return value.as_long()
