"""SIM-commutativity of a pair of operations.

For calls A and B with one symbolic argument set each, both orders run from the same
symbolic initial state; a path *commutes* when each call returns the same result in both
orders and the two final states are equal. Implementation choices (``fresh()``,
``any_free_key()``) are one constant per call shared by both orders: the implementation
may make the same choice whichever call runs first, so equal states up to those choices
are simply equal states.

Every commutative path carries ``smt2``: the path condition plus one atom
``observed(t0, t1, ...)`` whose arguments are everything a test needs (arguments,
initial-state reads, results). Test generation (testgen.py) needs nothing but that text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3

from scalecheck.engine import deadline, explore
from scalecheck.engine.conditions import Region, pair_conditions, result_kinds, unique_exprs
from scalecheck.engine.explore import join_name
from scalecheck.engine.rawz3 import and_, ast_id, implies
from scalecheck.engine.sexpr import numbered_lets, show
from scalecheck.engine.types import (
    ArrayValue,
    Int,
    Key,
    MapType,
    MapValue,
    ScalarType,
    StructValue,
    SymType,
    Unbound,
    as_expr,
)
from scalecheck.model.op_results import Chosen, is_result, not_a_result

# ---------------------------------------------------------------- model state handling


def instantiate(model_cls, path: explore.Path):
    """A fresh model instance whose ``any()`` placeholders are named initial values."""
    model = model_cls()
    for name, value in list(vars(model).items()):
        setattr(model, name, _bind(value, name, path))
    return model


def _bind(value, name, path):
    if isinstance(value, Unbound):
        symtype = value.symtype
        if isinstance(symtype, MapType):
            return MapValue(symtype, name)
        leaf_specs = symtype.leaves()
        leaves = [z3.Const(join_name(name, suffix), leaf.sort) for suffix, leaf in leaf_specs]
        bound = symtype.build(iter(leaves))
        for constraint in symtype.invariant(bound):
            path.assume(constraint)
        path.reads.append(
            explore.BaseRead(
                name,
                None,
                None,
                leaves,
                [t for _, t in leaf_specs],
                None,
                [suffix for suffix, _ in leaf_specs],
            )
        )
        return bound
    if isinstance(value, (list, tuple)):
        return type(value)(_bind(item, f"{name}[{i}]", path) for i, item in enumerate(value))
    if hasattr(value, "__dict__") and not isinstance(value, (z3.AstRef, SymType)):
        for attr, item in list(vars(value).items()):
            setattr(value, attr, _bind(item, f"{name}.{attr}", path))
    return value


def clone(value):
    """A copy of model state that shares the immutable parts (expressions, map bases)."""
    if isinstance(value, MapValue):
        return value.copy()
    if isinstance(value, StructValue):
        twin = StructValue(value._type)
        for name in value._type.fields:
            object.__setattr__(twin, name, clone(getattr(value, name)))
        return twin
    if isinstance(value, ArrayValue):
        return ArrayValue(value.type, list(value.items))
    if isinstance(value, (list, tuple)):
        return type(value)(clone(item) for item in value)
    if isinstance(value, dict):
        return {key: clone(item) for key, item in value.items()}
    if hasattr(value, "__dict__") and not isinstance(value, (z3.AstRef, SymType)):
        twin = object.__new__(type(value))
        for attr, item in vars(value).items():
            object.__setattr__(twin, attr, clone(item))
        return twin
    return value


def state_components(a, b) -> list:
    """Equality of two model states, as a list of conditions (one per map key written)."""
    if isinstance(a, MapValue):
        return [
            _entry_equal(a, b, key) for key in unique_exprs(a.written_keys() + b.written_keys())
        ]
    if isinstance(a, (list, tuple)):
        return [part for x, y in zip(a, b, strict=True) for part in state_components(x, y)]
    if hasattr(a, "__dict__") and not isinstance(a, (z3.AstRef, StructValue, ArrayValue)):
        return [
            part
            for attr, item in vars(a).items()
            for part in state_components(item, getattr(b, attr))
        ]
    return [equal(a, b)]


def _entry_equal(a: MapValue, b: MapValue, key) -> z3.BoolRef:
    present_a, leaves_a = a.lookup(key)
    present_b, leaves_b = b.lookup(key)
    same_leaves = and_([x == y for x, y in zip(leaves_a, leaves_b, strict=True)])
    return and_([present_a == present_b, implies(present_a, same_leaves)])


def equal(a, b) -> z3.BoolRef:
    """The condition under which two results or two states are equal."""
    if isinstance(a, MapValue):
        return z3.And(state_components(a, b))
    if isinstance(a, StructValue):
        return equal(a._type.flatten(a), b._type.flatten(b))
    if isinstance(a, ArrayValue):
        return equal(a.items, b.items)
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return z3.BoolVal(False)
        return z3.And([equal(a[key], b[key]) for key in a])
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            return z3.BoolVal(False)
        return z3.And([equal(x, y) for x, y in zip(a, b, strict=True)])
    if isinstance(a, Chosen):
        return equal(a.value, b.value) if isinstance(b, Chosen) else z3.BoolVal(False)
    if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
        return a == b
    if hasattr(a, "__dict__"):
        if type(a) is not type(b):
            return z3.BoolVal(False)
        return z3.And([equal(item, getattr(b, attr)) for attr, item in vars(a).items()])
    return z3.BoolVal(a == b)


# ---------------------------------------------------------------- one pair


@dataclass
class PathRecord:
    number: int
    commutes: bool | None  # None: the path ended in an error
    unknown: bool  # Z3 answered unknown somewhere on this path
    error: str  # the model error on this path, if any
    condition: z3.BoolRef  # the path condition (including the commute outcome)
    smt2: str = ""
    observations: dict = field(default_factory=dict)


def analyze_pair(
    model_cls,
    op_a: str,
    op_b: str,
    solver_timeout_ms: int = deadline.QUERY_LIMIT_MS,
    model_timeout: float | None = None,
    bounds: explore.Bounds | None = None,
) -> dict:
    """Explore every path of ``op_a || op_b``; return the pair's analysis as JSON data.
    ``model_timeout``: seconds model code may run per path; ``bounds``: what the whole
    exploration may take (explore.explore)."""
    started, started_cpu = time.monotonic(), time.process_time()
    records, regions, stats = explore_pair(
        model_cls, op_a, op_b, solver_timeout_ms, model_timeout, bounds
    )
    conditions = pair_conditions(regions, symmetric=op_a == op_b)
    timing = {
        "seconds": round(time.monotonic() - started, 3),
        "cpu_seconds": round(time.process_time() - started_cpu, 3),
        "conditions_seconds": conditions.pop("seconds"),
        "conditions_cpu_seconds": conditions.pop("cpu_seconds"),
    }
    return {
        "pair": [op_a, op_b],
        "solver_checks": stats.solver_checks,
        "unknown_checks": stats.unknown_checks,
        "conditions": conditions,
        "paths": [_path_json(record) for record in records],
        TIMING: timing,
    }


# The key of analyze_pair's result that holds its times: they go to analysis/timings.json,
# not into the pair's file, which is the same whenever the analysis is made.
TIMING = "timing"


def explore_pair(
    model_cls,
    op_a: str,
    op_b: str,
    solver_timeout_ms: int = deadline.QUERY_LIMIT_MS,
    model_timeout: float | None = None,
    bounds: explore.Bounds | None = None,
):
    """Every path of ``op_a || op_b``: its record, its region (for the pair's condition),
    and the exploration's solver statistics. A pair whose exploration goes past its
    ``bounds`` is one path, a model error naming the bound."""
    operations = model_cls.operations()
    records: list[PathRecord] = []
    regions: list[Region] = []
    program = _pair_program(model_cls, op_a, op_b)
    stats = explore.Stats()
    try:
        for number, (path, outcome) in enumerate(
            explore.explore(program, solver_timeout_ms, stats, model_timeout, bounds)
        ):
            _record_path(number, path, outcome, (op_a, op_b), operations, records, regions)
    except explore.ExplorationBound as bound:
        # The paths found so far do not cover the pair: all of it is one model error.
        error = f"{type(bound).__name__}: {bound}"
        records = [PathRecord(0, None, False, error, z3.BoolVal(True))]
        regions = [Region([], [], None)]
    return records, regions, stats


def _pair_program(model_cls, op_a: str, op_b: str):
    """The program the exploration runs on each path: both orders of the two calls from
    one symbolic state, and whether they commute (one branch per component)."""
    operations = model_cls.operations()

    def program(path):
        base = instantiate(model_cls, path)
        args = {
            call: {
                name: _argument(f"{call}.{name}", symtype, path)
                for name, symtype in operations[op].argument_types.items()
            }
            for call, op in (("A", op_a), ("B", op_b))
        }
        ops = {"A": op_a, "B": op_b}
        results, states = {}, {}
        for order in ("AB", "BA"):
            state = clone(base)
            path.start_order()
            for call in order:
                path.call = call
                results[order, call] = result = getattr(state, ops[call])(**args[call])
                if not is_result(result):
                    raise explore.ModelError(not_a_result(ops[call], result))
            path.call = ""
            states[order] = state
        # One branch per component, so a path's condition names only what decides it.
        components = [
            equal(results["AB", "A"], results["BA", "A"]),
            equal(results["AB", "B"], results["BA", "B"]),
            *state_components(states["AB"], states["BA"]),
        ]
        commutes = all(path.decide(z3.simplify(component)) for component in components)
        return base, args, results, commutes

    return program


def _record_path(number, path, outcome, ops, operations, records, regions) -> None:
    """The path's record and region, added to ``records`` and ``regions``."""
    condition = and_(path.decisions) if path.decisions else z3.BoolVal(True)
    if isinstance(outcome, Exception):
        regions.append(Region(path.decisions, path.assumptions, None))
        records.append(
            PathRecord(
                number, None, path.unknown, f"{type(outcome).__name__}: {outcome}", condition
            )
        )
        return
    base, args, results, commutes = outcome
    record = PathRecord(number, commutes, path.unknown, "", condition)
    returned = result_kinds(results)
    names = _named_results(results)
    hints = _comparisons(names, args, operations, *ops)
    regions.append(Region(path.decisions, path.assumptions, commutes, returned, names, hints))
    if commutes and not path.unknown:
        kinds = {call: operations[op].argument_types for call, op in zip("AB", ops, strict=True)}
        record.smt2, record.observations = _observations(path, base, args, kinds, results)
    records.append(record)


def _named_results(results) -> list:
    """Names for what each call returns when it runs first, where that is a computed term
    (the lowest free fd, a byte read at an offset): ``A.result``, ``B.result.data``. A
    condition then says ``B.fd != A.result`` instead of spelling out the computation."""
    names = []
    for call, order in (("A", "AB"), ("B", "BA")):
        result = results[order, call]
        for key, value in result.items() if isinstance(result, dict) else ():
            name = f"{call}.result" + ("" if key == "ret" else f".{key}")
            items = enumerate(value) if isinstance(value, list) else [(None, value)]
            for index, item in items:
                if isinstance(item, z3.ExprRef) and "ite" in item.sexpr():
                    suffix = "" if index is None else f"[{index}]"
                    names.append((z3.Const(name + suffix, item.sort()), item))
    return names


def _comparisons(names, args, operations, op_a, op_b) -> list:
    """Atoms a designer would use that no branch spells: a named result against an ordered
    argument (``A.result < B.fd``: the fd A's open gets lies below the one B closes)."""
    ordered = [
        expr
        for call, op in (("A", op_a), ("B", op_b))
        for arg, expr in args[call].items()
        if type(operations[op].argument_types[arg]) in (Int, Key)
    ]
    return [
        atom
        for name, _ in names
        for arg in ordered
        if name.sort() == arg.sort()
        for atom in (name == arg, name < arg)
    ]


def _argument(name, symtype: ScalarType, path):
    def build():
        expr = z3.Const(name, symtype.sort)
        return expr, list(symtype.domain(expr))

    expr, domain = explore.shared(path, ("argument", name, id(symtype)), build)
    for constraint in domain:
        path.assume(constraint)
    return expr


def _path_json(record: PathRecord) -> dict:
    return {
        "path": record.number,
        "commutes": record.commutes,
        "unknown": record.unknown,
        "error": record.error,
        "condition": readable_condition(record.condition),
        "smt2": record.smt2,
        "observations": record.observations,
    }


_SIMPLIFY = z3.Then("simplify", "ctx-simplify", "simplify")
SIMPLIFY_TIMEOUT_MS = 500


def readable_condition(condition: z3.BoolRef) -> str:
    """The path condition, simplified in context and printed on one line."""
    goal = z3.Goal()
    goal.add(condition)
    try:
        with deadline.limit(goal.ctx, SIMPLIFY_TIMEOUT_MS):
            parts = list(_SIMPLIFY(goal)[0])
        simplified = parts[0] if len(parts) == 1 else and_(parts)
    except z3.Z3Exception:  # out of time: the unsimplified condition is still exact
        simplified = condition
    return show(simplified)


# ---------------------------------------------------------------- what testgen needs


class _Observer:
    """Gives every term a test needs a position among the observed atom's arguments."""

    def __init__(self, path: explore.Path):
        self.terms: list = []
        self.choice_names = tuple(f"|{name}|" for name in path.choices)
        self.kind_table: dict = {}
        self.decided = _subterm_ids(path.decisions)
        # Whether a term shows a choice, by term and choices: the paths of an exploration
        # observe mostly the same terms (arguments, initial-state reads), and printing them
        # again for each path cost more than the rest of the observations.
        self.chosen_terms = explore.shared(path, "observed terms showing choices", dict)

    def observe(self, term, symtype):
        term = as_expr(term, None)
        kind = symtype.kind if symtype else ("bool" if z3.is_bool(term) else "int")
        if symtype:
            self.kind_table[kind] = symtype.describe()
        self.terms.append(term)
        key = (ast_id(term), self.choice_names)
        if key not in self.chosen_terms:  # the term is kept with its id: no other gets it
            text = term.sexpr()
            self.chosen_terms[key] = (term, any(name in text for name in self.choice_names))
        return {
            "obs": len(self.terms) - 1,
            "kind": kind,
            "chosen": self.chosen_terms[key][1],
            "decided": ast_id(term) in self.decided,
        }

    def observe_result(self, value):
        if isinstance(value, dict):
            return {key: self.observe_result(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.observe_result(item) for item in value]
        if isinstance(value, str):
            return value
        if isinstance(value, Chosen):
            return "*"
        return self.observe(value, None)

    def observe_read(self, read) -> dict:
        observe = self.observe
        return {
            "map": read.map_name,
            "key": observe(read.key, read.key_type) if read.key is not None else None,
            "present": observe(read.present, None) if read.present is not None else None,
            "leaves": {
                suffix: observe(leaf, leaf_type)
                for suffix, leaf, leaf_type in zip(
                    read.leaf_names, read.leaves, read.leaf_types, strict=True
                )
            },
        }


def _observations(path: explore.Path, base, args, kinds, results) -> tuple[str, dict]:
    """The path's constraints plus one atom ``observed(t0, t1, ...)`` whose arguments are
    every term a test needs; observation entries refer to those terms by position."""
    observer = _Observer(path)
    reads = [observer.observe_read(read) for read in path.reads]
    arguments = {
        call: {name: observer.observe(expr, kinds[call][name]) for name, expr in call_args.items()}
        for call, call_args in args.items()
    }
    observed_results = {
        order: [observer.observe_result(results[order, call]) for call in "AB"]
        for order in ("AB", "BA")
    }
    terms = observer.terms
    observed = z3.Function(OBSERVED, *[term.sort() for term in terms], z3.BoolSort())
    constraints = [*path.decisions, *path.assumptions, *base.setup_constraints(path.reads)]
    return _smtlib(constraints, _apply(observed, terms)), {
        "reads": reads,
        "args": arguments,
        "results": observed_results,
        "kinds": observer.kind_table,
    }


OBSERVED = "observed"


def _subterm_ids(exprs) -> set:
    """Ids of every subterm of the path's branch conditions (walked through Z3's C API:
    wrapping every node in a Python object costs more than the walk)."""
    if not exprs:
        return set()
    ref = exprs[0].ctx.ref()
    seen, todo = set(), [expr.as_ast() for expr in exprs]
    while todo:
        node = todo.pop()
        node_id = z3.Z3_get_ast_id(ref, node)
        if node_id in seen:
            continue
        seen.add(node_id)
        if z3.Z3_get_ast_kind(ref, node) == z3.Z3_APP_AST:
            app = z3.Z3_to_app(ref, node)
            todo += [
                z3.Z3_get_app_arg(ref, app, i) for i in range(z3.Z3_get_app_num_args(ref, app))
            ]
    return seen


def _apply(function: z3.FuncDeclRef, terms: list) -> z3.BoolRef:
    """``function(*terms)`` for terms already of its domain's sorts, without the Python
    API's per-argument casts."""
    ctx = function.ctx
    array = (z3.Ast * len(terms))(*[term.as_ast() for term in terms])
    return z3.BoolRef(z3.Z3_mk_app(ctx.ref(), function.ast, len(terms), array), ctx)


def _smtlib(constraints: list, last: z3.BoolRef) -> str:
    """The SMT-LIB text ``Solver.to_smt2`` writes for a solver holding ``constraints``
    then ``last``; printed directly, since asserting every constraint into a solver and
    reading them back through the Python API costs more than the printing. Let names
    numbered (sexpr.numbered_lets)."""
    ctx = last.ctx
    asts = [(c if isinstance(c, z3.BoolRef) else z3.BoolVal(c, ctx)).as_ast() for c in constraints]
    text = z3.Z3_benchmark_to_smtlib_string(
        ctx.ref(),
        "benchmark generated from python API",
        "",
        "unknown",
        "",
        len(asts),
        (z3.Ast * len(asts))(*asts),
        last.as_ast(),
    )
    return numbered_lets(text)


# ---------------------------------------------------------------- checks before analysis


def first_path_result(model_cls, op: str, model_timeout: float | None = None):
    """What ``op`` returns on the first path it takes alone from the initial state (or
    the exception it raises there): a cheap look for an operation that does not return
    a result, before pairs are analysed."""
    program = _op_alone(model_cls, op)
    for _, outcome in explore.explore(program, model_timeout=model_timeout):
        return outcome
    return None


def path_count(
    model_cls, op: str, model_timeout: float | None = None, bounds: explore.Bounds | None = None
) -> int:
    """How many paths ``op`` takes alone from the initial state: far cheaper than any
    pair with it, and the product of two operations' counts foretells their pair's
    cost (analyze's order and its estimate). Raises ExplorationBound past ``bounds``."""
    program = _op_alone(model_cls, op)
    paths = explore.explore(program, model_timeout=model_timeout, bounds=bounds)
    return sum(1 for _ in paths)


def _op_alone(model_cls, op: str):
    """The program of ``op`` called alone, as call A, on the initial state."""
    argument_types = model_cls.operations()[op].argument_types

    def program(path):
        base = instantiate(model_cls, path)
        args = {
            name: _argument(f"A.{name}", symtype, path) for name, symtype in argument_types.items()
        }
        path.call = "A"
        return getattr(base, op)(**args)

    return program
