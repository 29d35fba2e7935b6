"""Equalities a commutative path leaves open between the two calls, and tests on both sides.

An isomorphism class fixes which arguments alias, but a path capped at ``--cap`` classes
may have all its tests on one side of an equality its condition never decides: the
condition of ``sendto || sendto`` on an unordered socket holds whether or not both calls
name one socket (``A.sock == B.sock`` sits inside an if-then-else of it), and every test
Z3 happened to find used two sockets. Here every such equality is found, the tests
already made are looked at, and each side no test takes is solved for once more: a test
on it, or the proof that the path excludes it.

The equalities: an argument of A against an argument of B of the same kind (flags
aside), and every equality atom of the path's constraints, conditional terms included,
whose one side names only A's arguments and the other only B's (``fd.off(A.fd) ==
fd.off(B.fd)``: the state they name). A constraint that is itself the equality or its
negation decides it: not open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import z3

from scalecheck.testgen.z3_c_api import (
    app_arg,
    app_args,
    app_decl,
    ast_id,
    ast_kind,
    decl_kind,
    holds_in,
    is_bool,
)

# Counts per pair and in all (testgen.json "open_equalities"): equalities found open,
# varied both ways by the tests, excluded one way by the path (unsat), and left with a
# side neither tested nor excluded (the solver answered unknown).
COUNTS = ("found", "both_ways", "infeasible_one_way", "not_varied")
CHOICE_MARK = "#"  # implementation choices are named CALL.label#n (engine/explore.py)


def read_coverage(out: Path) -> dict | None:
    """The counts of all pairs that ``out/testgen.json`` holds, or None (no testgen.json,
    or one written before the counts were)."""
    try:
        return json.loads((out / "testgen.json").read_text())["totals"]["open_equalities"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def empty_counts() -> dict:
    return dict.fromkeys(COUNTS, 0)


@dataclass
class Side:
    """One side of an open equality: the literal and how it reads (``A.sock == B.sock``)."""

    literal: z3.BoolRef
    text: str


class EqualityFinder:
    """Finds the open equalities of a pair's paths. One per pair (one Z3 context): the
    paths share most terms, so each node's equality atoms are collected once."""

    def __init__(self, context: z3.Context, names, text):
        self.ref, self.context = context.ref(), context
        self.raw = self.ref.value  # the context as a plain pointer, for z3_c_api's readers
        self.names, self.text = names, text  # allowed.ConstantNames, TermText
        self._below: dict[int, tuple] = {}  # node id -> the equality atoms under it
        self._kept: list = []  # the nodes whose ids key _below
        # An equality atom's id -> its two terms, wrapped once per pair.
        self._sides_of: dict[int, tuple] = {}

    def sides(self, assertions: list, terms, observations, kinds) -> list[Side]:
        """Both sides of every open equality of the path (``assertions``: its constraints,
        raw ASTs), ordered by their text (the same path gives the same order in any
        process)."""
        decided = {ast_id(self.raw, self._atom(a)) for a in assertions}
        found: dict[str, z3.BoolRef] = {}
        for left, right in [*_argument_pairs(terms, observations, kinds), *self._atoms(assertions)]:
            oriented = self._oriented(left, right)
            if oriented is None:
                continue
            equality = z3.BoolRef(
                z3.Z3_mk_eq(self.ref, oriented[0].as_ast(), oriented[1].as_ast()), self.context
            )
            if equality.get_id() in decided or _mirrored(equality).get_id() in decided:
                continue
            found.setdefault(self.text(equality), equality)
        sides = []
        for text, equality in sorted(found.items()):
            # The other side's text from its two terms' (no new term: Z3 numbers each
            # term it makes, and the numbers steer the pair's later solutions).
            differ = f"{self.text(equality.arg(0))} != {self.text(equality.arg(1))}"
            sides += [Side(equality, text), Side(z3.Not(equality), differ)]
        return sides

    def _oriented(self, left, right):
        """(A's term, B's term), or None when the sides are not one call's each."""
        calls = (self._call(left), self._call(right))
        if calls == ("A", "B"):
            return left, right
        if calls == ("B", "A"):
            return right, left
        return None

    def _call(self, term) -> str | None:
        """The call ("A" or "B") whose arguments the term names, all of them; None for a
        term that names both calls', none, or an implementation's choice."""
        constants = {name for name in self.names.of(term)[0] if name[:2] in ("A.", "B.")}
        if not constants or any(CHOICE_MARK in name for name in constants):
            return None
        calls = {name[0] for name in constants}
        return calls.pop() if len(calls) == 1 else None

    def _atom(self, assertion):
        """The raw atom of an assertion: the assertion, or what it negates."""
        ref = self.raw
        # (an application AST is its app: Z3_to_app casts)
        if (
            ast_kind(ref, assertion) == z3.Z3_APP_AST
            and decl_kind(ref, app_decl(ref, assertion)) == z3.Z3_OP_NOT
        ):
            return app_arg(ref, assertion, 0)
        return assertion

    def _atoms(self, assertions: list) -> list[tuple]:
        pairs = []
        for assertion in assertions:
            for key in self._under(assertion):
                pairs.append(self._sides_of[key])
        return pairs

    def _under(self, root) -> tuple:
        """The ids of the equality atoms between non-Boolean terms under ``root`` (their
        two terms: ``_sides_of``), conditions of if-then-else terms included (post-order,
        each node once per pair)."""
        ref, below = self.raw, self._below
        todo = [(root, False)]
        while todo:
            node, children_done = todo.pop()
            key = ast_id(ref, node)
            if key in below:
                continue
            if ast_kind(ref, node) != z3.Z3_APP_AST:
                below[key] = ()
                continue
            args = app_args(ref, node)  # an application AST is its app
            if not children_done:
                todo.append((node, True))
                todo.extend((arg, False) for arg in args)
                continue
            atoms: dict[int, None] = {}  # ordered, each once
            for arg in args:
                atoms.update(dict.fromkeys(below[ast_id(ref, arg)]))
            if _is_term_equality(ref, node, args):
                expr = z3.BoolRef(node, self.context)
                atoms[key] = None
                self._sides_of[key] = (expr.arg(0), expr.arg(1))
            below[key] = tuple(atoms)
            self._kept.append(z3.AstRef(node, self.context))
        return below[ast_id(ref, root)]


def _is_term_equality(ref, app, args) -> bool:
    if decl_kind(ref, app_decl(ref, app)) != z3.Z3_OP_EQ or len(args) != 2:
        return False
    return not is_bool(ref, args[0])


def _mirrored(equality: z3.BoolRef) -> z3.BoolRef:
    return equality.arg(1) == equality.arg(0)


def _argument_pairs(terms, observations, kinds) -> list[tuple]:
    """A's argument against B's, of one kind; flags (booleans, enums) have values, not
    identities, and an implementation's choice is not an input."""

    def arguments(call):
        return [
            entry
            for entry in observations["args"][call].values()
            if not entry["chosen"]
            and entry["kind"] not in ("bool", "enum")
            and kinds.get(entry["kind"], {}).get("class") not in (None, "bool", "enum")
        ]

    return [
        (terms[a["obs"]], terms[b["obs"]])
        for a in arguments("A")
        for b in arguments("B")
        if a["kind"] == b["kind"]
    ]


def covered(side: Side, models: list) -> bool:
    """Whether a test (by its model) already lies on ``side``."""
    return any(holds_in(model, side.literal) for model in models)


def tally(sides: list[Side], taken: set[str], excluded: set[str]) -> dict:
    """The path's counts (COUNTS) from the sides its tests take and those it excludes."""
    counts = empty_counts()
    for index in range(0, len(sides), 2):
        pair = (sides[index].text, sides[index + 1].text)
        counts["found"] += 1
        if all(text in taken for text in pair):
            counts["both_ways"] += 1
        elif any(text in excluded for text in pair):
            counts["infeasible_one_way"] += 1
        else:
            counts["not_varied"] += 1
    return counts


def coverage_line(counts: dict) -> str:
    """``open equalities: 40 found, 38 tested both ways (100% of the 38 feasible), ...``"""
    feasible = counts["found"] - counts["infeasible_one_way"]
    share = f"{100 * counts['both_ways'] / feasible:.1f}%" if feasible else "all"
    return (
        f"open equalities between the calls: {counts['found']} found, "
        f"{counts['both_ways']} tested both ways ({share} of the {feasible} feasible both "
        f"ways), {counts['infeasible_one_way']} infeasible one way, "
        f"{counts['not_varied']} not varied (solver unknown)"
    )
