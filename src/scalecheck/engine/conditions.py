"""One short, exact commutativity condition per pair, from the pair's explored paths.

Each explored path is a *region* of inputs (initial state, arguments, implementation
choices): its branch decisions together with its assumptions (argument domains, the
initial state's invariants, what the implementation's choices satisfy). The pair commutes
on the union of its commutative regions and diverges (or hits a model error) on the rest;
inputs outside every region break the model's own assumptions, so the printed condition
may say anything there. That freedom is what makes short conditions possible: the
condition is a disjunction of cubes (conjunctions of the model's atoms: argument
equalities, ``present`` facts, state values) that covers every commutative region and
meets no other region, the problem two-level logic minimisation solves with don't-cares.

A cube starts as the values, in one model, of the atoms its path decides on and loses
every atom it can while it stays clear of the other verdict's regions; cubes the others
make redundant are dropped. Each cube is then labelled by the results it implies ("both
succeed", "A fails with EEXIST, B succeeds"): a call's result in an order is stated only
when every path of the verdict the cube meets gives it.
The construction is itself Z3's proof that the condition is exact: every cube was
checked clear of the other regions (unsat), the cover loop ends only when no region of
the verdict is left outside the cubes (unsat), and a cube is dropped only when another
cube's literals are among its own or the rest still cover it (unsat). When a query
answers unknown or the pair's CPU budget runs out, the raw path conditions are kept and
the condition is flagged: never a short answer that is wrong. ``recheck`` checks a
stored condition again from its SMT-LIB text.
"""

from __future__ import annotations

import functools
import gc
import time
from dataclasses import dataclass, field

import z3

from scalecheck.engine import deadline
from scalecheck.engine.rawz3 import and_, assert_all, ast_id, holds_in, implies, not_, or_
from scalecheck.engine.sexpr import expand_lets, numbered_lets, parse_sexpr, show

SOLVER_TIMEOUT_MS = 5_000  # one query; a pair's construction has its own budget
PAIR_BUDGET_SECONDS = 20.0  # CPU seconds; the costliest posix pair takes about 9
MAX_LIFTED_ATOMS = 24  # more atoms from lifting one decision read worse than its terms


@dataclass
class Region:
    """One explored path, as the simplifier sees it."""

    decisions: list  # the path's branch conditions, as taken
    assumptions: list  # facts the path relies on (domains, invariants, choices)
    commutes: bool | None  # None: the path ended in a model error
    results: tuple = ()  # RESULT_SLOTS: what each call returns in each order ("ok", "ENOENT")
    names: list = field(default_factory=list)  # (name, term): terms the condition may name
    hints: list = field(default_factory=list)  # atoms worth trying first (A.result < B.fd)

    def definitions(self) -> list:
        return [name == term for name, term in self.names]


@dataclass
class Cube:
    literals: list
    label: str = ""
    results: dict = field(default_factory=dict)  # the results it implies, by slot

    @functools.cached_property
    def formula(self) -> z3.BoolRef:
        return and_(self.literals) if self.literals else z3.BoolVal(True)

    @functools.cached_property
    def outside(self) -> z3.BoolRef:
        return not_(self.formula)


@dataclass
class Condition:
    """A pair's condition for one verdict (commutes or diverges)."""

    cubes: list[Cube] = field(default_factory=list)
    raw: list = field(default_factory=list)  # the path conditions it summarises
    always: bool = False  # no other region exists: the pair commutes (diverges) everywhere
    exact: bool = True  # False: simplification failed and ``cubes`` hold the raw form
    why: str = ""

    def formula(self) -> z3.BoolRef:
        return z3.Or([cube.formula for cube in self.cubes]) if self.cubes else z3.BoolVal(False)


class OutOfTime(Exception):
    pass


# ---------------------------------------------------------------- outcomes and atoms


RESULT_SLOTS = ("A first: A", "A first: B", "B first: A", "B first: B")


def result_kinds(results: dict) -> tuple:
    """What each call returned in each order (RESULT_SLOTS), as a label says it: ``ok``,
    ``ENOENT``, ``SIGSEGV``. ``results`` is keyed by (order, call): ("AB", "A")."""
    return tuple(
        _result_kind(results[order, call]) for order in ("AB", "BA") for call in ("A", "B")
    )


def _result_kind(result) -> str:
    if isinstance(result, dict):
        return result.get("errno") or result.get("signal") or "ok"
    return "ok"


_CONNECTIVES = {z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_NOT, z3.Z3_OP_IMPLIES, z3.Z3_OP_XOR}


_TEXT_CONNECTIVES = {"and", "or", "not", "=>", "xor"}
_TEXT_BOOLEAN_HEADS = _TEXT_CONNECTIVES | {"=", "<", "<=", ">", ">=", "distinct"}


def count_atoms(formula: z3.BoolRef) -> int:
    """The atom occurrences of ``formula``, counted on its text (walking the AST through
    Z3's Python API is slow). An equality of two atoms counts both; if-then-else terms
    inside an atom leave it one atom."""
    return _count_atoms(expand_lets(parse_sexpr(formula.sexpr()), {}))


def count_raw_atoms(paths: list) -> int:
    """The atom occurrences of the path conditions; paths share most decisions (a common
    prefix), so each decision is counted once and its count reused."""
    counts: dict = {}
    total = 0
    for decisions in paths:
        for decision in decisions:
            if ast_id(decision) not in counts:
                counts[ast_id(decision)] = count_atoms(decision)
            total += counts[ast_id(decision)]
    return total


def _count_atoms(node) -> int:
    if node in ("true", "false"):
        return 0
    if isinstance(node, str):
        return 1
    head, args = node[0], node[1:]
    boolean_args = head == "=" and isinstance(args[0], list) and args[0][0] in _TEXT_BOOLEAN_HEADS
    if head in _TEXT_CONNECTIVES or boolean_args:
        return sum(_count_atoms(arg) for arg in args)
    return 1


def distinct_atoms(formulas) -> list:
    """The atoms of ``formulas``, each once, in order of first occurrence. Lifted formulas
    share subterms heavily, so every node is visited once; the walk uses Z3's C API
    directly, since wrapping every node in a Python object costs more than the solver."""
    if not formulas:
        return []
    ctx = formulas[0].ctx
    ref = ctx.ref()
    seen, atoms, todo = set(), [], [formula.as_ast() for formula in reversed(formulas)]
    while todo:
        ast = todo.pop()
        key = z3.Z3_get_ast_id(ref, ast)
        if key in seen:
            continue
        seen.add(key)
        app = z3.Z3_to_app(ref, ast)
        kind = z3.Z3_get_decl_kind(ref, z3.Z3_get_app_decl(ref, app))
        if kind in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE):
            continue
        arity = z3.Z3_get_app_num_args(ref, app)
        if _joins_atoms(ref, app, kind, arity):
            todo.extend(z3.Z3_get_app_arg(ref, app, i) for i in reversed(range(arity)))
        else:
            atoms.append(z3.BoolRef(ast, ctx))
    return atoms


def _joins_atoms(ref, app, kind: int, arity: int) -> bool:
    """A connective, or an equality or if-then-else between Boolean terms: it combines
    atoms, it is not one."""
    if kind in _CONNECTIVES:
        return True
    if kind not in (z3.Z3_OP_EQ, z3.Z3_OP_ITE):
        return False
    last = z3.Z3_get_app_arg(ref, app, arity - 1)
    return z3.Z3_get_sort_kind(ref, z3.Z3_get_sort(ref, last)) == z3.Z3_BOOL_SORT


_LIFT_TERM_ITES = z3.Then("blast-term-ite", "simplify")
LIFT_TIMEOUT_MS = 2_000


def lifted(decision: z3.BoolRef) -> list:
    """The decision with if-then-else terms lifted out of its atoms, so that atoms compare
    plain state values and arguments (``fname_to_inum(A.src) == fname_to_inum(B.src)``)."""
    goal = z3.Goal()
    goal.add(decision)
    try:
        with deadline.limit(goal.ctx, LIFT_TIMEOUT_MS):
            return list(_LIFT_TERM_ITES(goal)[0])
    except z3.Z3Exception:  # out of time: the atoms keep their if-then-else terms
        return [decision]


# ---------------------------------------------------------------- solving over the regions


class _Clock:
    """The pair's time budget, and the one place solver answers are checked. The budget is
    CPU time (Z3 runs in this process), so other work on the machine does not use it up."""

    def __init__(self, budget_seconds: float):
        self.deadline = time.process_time() + budget_seconds

    def check(self, solver, *assumptions):
        if time.process_time() > self.deadline:
            raise OutOfTime("out of time")
        # z3's Solver.check casts every assumption, which costs more than the check
        # itself for the dozens of trackers a cube has; they are Boolean constants already
        array = (z3.Ast * len(assumptions))(*[tracker.as_ast() for tracker in assumptions])
        with deadline.limit(solver.ctx, solver.milliseconds):
            answer = z3.CheckSatResult(
                z3.Z3_solver_check_assumptions(
                    solver.ctx.ref(), solver.solver, len(assumptions), array
                )
            )
        if answer == z3.unknown:
            raise OutOfTime(f"solver answered unknown ({solver.reason_unknown()})")
        return answer


class _Space:
    """A pair's regions as formulas. Assumptions every path makes (argument domains, the
    invariants of what all paths read) go once into a background shared by all queries;
    each region keeps its decisions and its own assumptions."""

    def __init__(self, regions: list[Region], clock: _Clock, timeout_ms: int):
        self.clock, self.timeout_ms = clock, timeout_ms
        counts: dict = {}
        for region in regions:
            for assumption in unique_exprs(region.assumptions):
                counts[ast_id(assumption)] = counts.get(ast_id(assumption), 0) + 1
        shared = {key for key, count in counts.items() if count == len(regions)}
        self.background = [a for a in unique_exprs(regions[0].assumptions) if ast_id(a) in shared]
        self.unions: dict = {}
        self.decision_atoms: dict = {}
        self.spelled_out: set = set()  # ids of atoms only lifting if-then-else terms made
        self.formulas = {
            id(region): and_(
                region.decisions
                + [a for a in region.assumptions if ast_id(a) not in shared]
                + region.definitions()
            )
            for region in regions
        }

    def atoms(self, region: Region) -> list:
        """The atoms the region's decisions are made of; paths share most decisions (a
        common prefix), so each decision is lifted and walked once per pair."""
        names = tuple((ast_id(name), ast_id(term)) for name, term in region.names)
        keys = [(ast_id(decision), names) for decision in region.decisions]
        for key, decision in zip(keys, region.decisions, strict=True):
            if key not in self.decision_atoms:
                named = z3.substitute(decision, *[(t, n) for n, t in region.names])
                own_atoms = distinct_atoms([named])
                atoms = distinct_atoms(lifted(named))
                if len(atoms) > MAX_LIFTED_ATOMS:  # a blow-up: keep the if-then-else terms
                    atoms = own_atoms
                own = {ast_id(atom) for atom in own_atoms}
                self.spelled_out.update(ast_id(a) for a in atoms if ast_id(a) not in own)
                self.decision_atoms[key] = atoms
        return unique_exprs(
            region.hints + [atom for key in keys for atom in self.decision_atoms[key]]
        )

    def union(self, regions: list[Region]) -> z3.BoolRef:
        key = tuple(id(region) for region in regions)
        if key not in self.unions:  # building a large Or is slow in Z3's Python API
            self.unions[key] = or_([self.formulas[id(region)] for region in regions])
        return self.unions[key]

    def solver(self, *facts) -> deadline.Solver:
        solver = deadline.Solver(self.timeout_ms)
        solver.add(self.background)
        solver.add(*facts)
        return solver


def unique_exprs(exprs) -> list:
    """The expressions, each once (by Z3's id), in their first order."""
    seen, unique = set(), []
    for expr in exprs:
        if ast_id(expr) not in seen:
            seen.add(ast_id(expr))
            unique.append(expr)
    return unique


class _Tracked:
    """A solver whose checks assume formulas through Boolean trackers (a check's
    assumptions must be constants): ``tracker -> formula``, declared once per formula."""

    def __init__(self, solver: deadline.Solver, clock: _Clock):
        self.solver, self.clock = solver, clock
        self.trackers: dict = {}

    def tracker(self, formula) -> z3.BoolRef:
        key = ast_id(formula)
        if key not in self.trackers:
            self.trackers[key] = z3.Bool(f"track!{len(self.trackers)}")
            assert_all(self.solver, [implies(self.trackers[key], formula)])
        return self.trackers[key]

    def unsat_with(self, formulas) -> bool:
        trackers = [self.tracker(formula) for formula in formulas]
        return self.clock.check(self.solver, *trackers) == z3.unsat

    def sat_with(self, formulas) -> bool:
        return not self.unsat_with(formulas)


# ---------------------------------------------------------------- the cover


def _cover(
    space: _Space, group: list[Region], forbidden: list[Region], symmetric: bool
) -> list[Cube]:
    """Cubes whose union holds every region of ``group`` and meets no ``forbidden`` one."""
    if not group:
        return []
    if not forbidden:
        return [Cube([])]
    path_atoms = [space.atoms(region) for region in group]
    vocabulary = unique_exprs([atom for atoms in path_atoms for atom in atoms])

    clear = _Tracked(space.solver(space.union(forbidden)), space.clock)
    selectors = [z3.Bool(f"region!{i}") for i in range(len(group))]
    uncovered = space.solver(z3.Or(selectors))  # the group's inputs no cube holds yet
    for selector, region in zip(selectors, group, strict=True):
        uncovered.add(z3.Implies(selector, space.formulas[id(region)]))
    cubes: list[Cube] = []
    while space.clock.check(uncovered) == z3.sat:
        model = uncovered.model()
        index = next(i for i, s in enumerate(selectors) if holds_in(model, s, completion=False))
        for atoms in (vocabulary, vocabulary + group[index].assumptions):
            literals = [_literal(atom, model) for atom in atoms]
            if clear.unsat_with(literals):
                break
        else:
            raise OutOfTime("a path's region could not be told apart from the others")
        found = [Cube(_expand(clear, literals, space.spelled_out))]
        if symmetric:  # the mirror costs one check; expanding the cube it saves, a dozen
            mirror = Cube(_mirror(found[0].literals))
            if _ids(mirror) != _ids(found[0]) and clear.unsat_with(mirror.literals):
                found.append(mirror)
        for cube in found:
            cubes.append(cube)
            uncovered.add(cube.outside)
    return _irredundant(space, cubes, group)


def _atom(literal):
    return literal.arg(0) if z3.is_not(literal) else literal


def _literal(atom, model):
    return atom if holds_in(model, atom) else not_(atom)


def _expand(clear: _Tracked, literals: list, spelled_out: set) -> list:
    """Drop every literal the cube can lose and stay clear. Atoms that only lifting an
    if-then-else produced (``spelled_out``: which fds are free, say) go first, all at once
    if the cube allows it; then the last-decided first, so what stays are the early checks
    of the operations' code, which read as cases ("A's source exists and A is a
    self-rename"). After each successful drop the proof's unsat core says which of the
    rest it needed: often far fewer, dropped in one step."""
    kept = list(range(len(literals)))
    plain = [i for i in kept if ast_id(_atom(literals[i])) not in spelled_out]
    if len(plain) < len(kept) and clear.unsat_with([literals[i] for i in plain]):
        kept = _needed(clear, literals, plain)
    for dropped in reversed(range(len(literals))):
        if dropped not in kept:
            continue
        trial = [i for i in kept if i != dropped]
        if clear.unsat_with([literals[i] for i in trial]):
            kept = _needed(clear, literals, trial)
    return [literals[i] for i in kept]


def _needed(clear: _Tracked, literals: list, indices: list) -> list:
    """The literals (by index) in the unsat core of the check just made."""
    core = {ast_id(tracker) for tracker in clear.solver.unsat_core()}
    return [i for i in indices if ast_id(clear.tracker(literals[i])) in core]


def _mirror(literals: list) -> list:
    """The cube with calls A and B swapped (``A.src`` <-> ``B.src``). For a pair of equal
    operations the mirror of an allowed cube is usually allowed too (it is checked), and
    offering both lets the cover read the same way for either call."""
    swaps, seen, todo = [], set(), list(literals)
    while todo:
        expr = todo.pop()
        if ast_id(expr) in seen:
            continue
        seen.add(ast_id(expr))
        if z3.is_const(expr) and expr.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            name = expr.decl().name()
            if name[:2] in ("A.", "B."):
                twin = ("B." if name[0] == "A" else "A.") + name[2:]
                swaps.append((expr, z3.Const(twin, expr.sort())))
        else:
            todo.extend(expr.children())
    return [z3.substitute(literal, *swaps) for literal in literals] if swaps else literals


def _irredundant(space: _Space, cubes: list[Cube], group: list[Region]) -> list[Cube]:
    """Drop each cube that the other cubes make unnecessary: first repeats and those whose
    literals include another cube's (no solver needed), then, the largest first and of
    equal ones the latest found, each whose part of the group the others cover."""
    ids = [_ids(cube) for cube in cubes]
    first = {key: index for index, key in reversed(list(enumerate(ids)))}
    kept = [
        cube
        for index, cube in enumerate(cubes)
        if first[ids[index]] == index and not any(other < ids[index] for other in first)
    ]
    order = {id(cube): index for index, cube in enumerate(cubes)}
    outside = _Tracked(space.solver(space.union(group)), space.clock)
    for cube in sorted(kept, key=lambda c: (-len(c.literals), -order[id(c)])):
        others = [c for c in kept if c is not cube]
        # the cube's own literals only narrow the query: the group lies inside all cubes
        if outside.unsat_with(cube.literals + [c.outside for c in others]):
            kept = others
    return kept


def _ids(cube: Cube) -> frozenset:
    return frozenset(ast_id(literal) for literal in cube.literals)


# ---------------------------------------------------------------- the pair's conditions


class _Labeller:
    """Which results a cube implies: a slot's result (RESULT_SLOTS) is implied when every
    region of the verdict the cube meets gives the same one. One model of the cube inside
    the verdict's regions names a candidate per slot; one check per slot shows that no
    region the cube meets gives another."""

    def __init__(self, space: _Space, wanted: list[Region], slots: range):
        self.wanted, self.slots = wanted, slots
        self.selectors = [z3.Bool(f"labelled!{i}") for i in range(len(wanted))]
        solver = space.solver(z3.Or(self.selectors))
        for selector, region in zip(self.selectors, wanted, strict=True):
            solver.add(z3.Implies(selector, space.formulas[id(region)]))
        self.meets = _Tracked(solver, space.clock)

    def implied(self, cube: Cube) -> dict:
        if not self.meets.sat_with(cube.literals):
            return {}
        model = self.meets.solver.model()
        seed = next(
            region
            for selector, region in zip(self.selectors, self.wanted, strict=True)
            if holds_in(model, selector)
        )
        implied = {}
        for slot in self.slots:
            kind = seed.results[slot]
            others = [
                selector
                for selector, region in zip(self.selectors, self.wanted, strict=True)
                if region.results[slot] != kind
            ]
            if not others or self.meets.unsat_with([*cube.literals, or_(others)]):
                implied[RESULT_SLOTS[slot]] = kind
        return implied


_KIND_WORDS = {"ok": ("succeeds", "succeed")}  # an errno or a signal: see _kind_words


def _kind_words(kind: str) -> tuple[str, str]:
    """The verb for one call and for both: ``succeeds`` / ``fails with ENOENT``."""
    if kind in _KIND_WORDS:
        return _KIND_WORDS[kind]
    if kind.startswith("SIG"):
        return f"gets {kind}", f"get {kind}"
    return f"fails with {kind}", f"fail with {kind}"


def _order_label(a_kind: str | None, b_kind: str | None) -> str:
    """``both succeed``, ``A fails with EEXIST, B succeeds``, ``B succeeds`` or ""."""
    if a_kind and a_kind == b_kind:
        return f"both {_kind_words(a_kind)[1]}"
    return ", ".join(
        f"{call} {_kind_words(kind)[0]}" for call, kind in (("A", a_kind), ("B", b_kind)) if kind
    )


def label_text(results: dict, commutes: bool) -> str:
    """A commutative case's results are the same in either order, so one order says them;
    a diverging case says each order's (``A first: both succeed; B first: ...``)."""
    first, second = (
        _order_label(results.get(RESULT_SLOTS[a]), results.get(RESULT_SLOTS[b]))
        for a, b in ((0, 1), (2, 3))
    )
    if commutes:
        return first
    if first == second:
        return f"{first} in either order" if first else ""
    return "; ".join(
        f"{order}: {text}" for order, text in (("A first", first), ("B first", second)) if text
    )


def pair_conditions(
    regions: list[Region],
    symmetric: bool,
    budget_seconds: float = PAIR_BUDGET_SECONDS,
    timeout_ms: int = SOLVER_TIMEOUT_MS,
) -> dict:
    """The pair's commutativity and divergence conditions with their figures, as JSON.
    ``symmetric``: the two calls are of the same operation, so swapping them is worth a
    try when looking for cases."""
    gc.collect()  # at the same point on every run (common/parallel._fresh_worker)
    started, started_cpu = time.monotonic(), time.process_time()
    space = _Space(regions, _Clock(budget_seconds), timeout_ms) if regions else None
    commuting = [r for r in regions if r.commutes]
    diverging = [r for r in regions if r.commutes is False]
    erring = [r for r in regions if r.commutes is None]
    verdicts: dict = {}
    for name, wanted, others in (
        ("commutes", commuting, diverging + erring),
        ("diverges", diverging, commuting + erring),
    ):
        try:
            condition = Condition(_cover(space, wanted, others, symmetric) if space else [])
            if space and wanted and wanted[0].results:
                labeller = _Labeller(space, wanted, range(2 if name == "commutes" else 4))
                for cube in condition.cubes:
                    cube.results = labeller.implied(cube)
                    cube.label = label_text(cube.results, name == "commutes")
                condition.cubes.sort(key=lambda cube: len(cube.literals))  # simplest first
        except OutOfTime as reason:
            condition = raw_condition(wanted)
            condition.exact, condition.why = False, str(reason)
        condition.raw = [region.decisions for region in wanted]
        condition.always = bool(wanted) and not others
        verdicts[name] = condition_json(condition)
    verdicts["seconds"] = round(time.monotonic() - started, 3)
    verdicts["cpu_seconds"] = round(time.process_time() - started_cpu, 3)
    return verdicts


def raw_condition(wanted: list[Region]) -> Condition:
    """The path conditions themselves, one case per path: exact, not short."""
    return Condition([Cube(list(region.decisions)) for region in wanted])


def condition_json(condition: Condition) -> dict:
    solver = z3.Solver()
    solver.add(condition.formula())
    return {
        "text": condition_text(condition),
        "cases": [
            {
                "label": cube.label,
                "results": cube.results,
                "text": " and ".join(show(lit) for lit in cube.literals) or "always",
                "atoms": len(cube.literals),
            }
            for cube in condition.cubes
        ],
        "smt2": numbered_lets(solver.to_smt2()),
        "simplified": condition.exact,
        "why": condition.why,
        "figures": {
            "raw_disjuncts": len(condition.raw),
            "raw_atoms": count_raw_atoms(condition.raw),
            "disjuncts": len(condition.cubes),
            "atoms": sum(count_atoms(lit) for cube in condition.cubes for lit in cube.literals),
        },
    }


def condition_text(condition: Condition) -> str:
    """``always``, ``never``, one case, or one case per line (``[both succeed] ...``)."""
    if condition.always:
        return "always"
    if not condition.cubes:
        return "never"
    if len(condition.cubes) == 1:
        return " and ".join(show(lit) for lit in condition.cubes[0].literals)
    return "\n".join(
        (f"[{cube.label}] " if cube.label else "")
        + " and ".join(show(lit) for lit in cube.literals)
        for cube in condition.cubes
    )


# ---------------------------------------------------------------- checking a stored condition


def recheck(
    regions: list[Region], stored: dict, verdict: str, timeout_ms: int = deadline.QUERY_LIMIT_MS
) -> str:
    """Check a condition as the analysis stored it (its ``smt2``) against the pair's
    explored regions, with none of the code that built it: every region of the verdict
    lies inside it and every other region outside. Returns what fails, or ""."""
    condition = z3.And(list(z3.parse_smt2_string(stored[verdict]["smt2"])))
    wanted = [r for r in regions if r.commutes is (verdict == "commutes")]
    others = [r for r in regions if r.commutes is not (verdict == "commutes")]
    for name, part, facts in (
        ("misses a path", wanted, [z3.Not(condition)]),
        ("holds on a path of another verdict", others, [condition]),
    ):
        if not part:
            continue
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(
            z3.Or([z3.And(r.decisions + r.assumptions + r.definitions()) for r in part]), *facts
        )
        answer = solver.check()
        if answer != z3.unsat:
            return f"{verdict}: {name}" if answer == z3.sat else f"{verdict}: unknown"
    return ""
