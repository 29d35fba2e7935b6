"""Path exploration: run model code once per feasible path, deciding branches with Z3.

Model code branches with ordinary Python (``if src == dst:``). While a path runs, Z3's
``BoolRef.__bool__`` asks the current path which way to go: a branch whose outcome is
already implied is taken silently; otherwise, if both sides are feasible, the path goes
one way and a schedule for the other way is queued. Paths are re-executed from the start
(cheap: model code is tiny) against one incremental solver per exploration, with a
push/pop scope per path, so no solver is ever rebuilt.

Z3 may answer ``unknown``; such a branch is explored both ways and every path through it
is marked ``unknown`` so that callers report and count it instead of dropping it.
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass, field

import z3

from scalecheck.engine import deadline, timelimit
from scalecheck.engine.rawz3 import (
    and_,
    assert_all,
    ast_id,
    holds_in,
    is_false,
    is_true,
    not_,
)

# Values of an allocatable uninterpreted type that exist in the initial state lie below
# this bound; values the implementation allocates during a call lie at or above it, so
# "a fresh inode number" needs no quantifier to be unused.
FRESH_BASE = 1000


# Paths explored between two collections of cyclic garbage.
GC_PATHS = 64


def join_name(prefix: str, suffix: str) -> str:
    """``inode`` + ``nlink`` -> ``inode.nlink``; ``data`` + ``[2]`` -> ``data[2]``."""
    return prefix + (suffix if not suffix or suffix.startswith("[") else "." + suffix)


class ModelError(Exception):
    """The model did something undefined on this path (e.g. read an absent key)."""


class BoundExceeded(ModelError):
    """A bounded domain (array size, fd range) was too small on this path."""


class ExplorationBound(Exception):
    """The exploration of a pair went past one of its Bounds: its symbolic branches never
    end (a loop on a symbolic condition), or the pair has far more paths than a model
    should. The pair becomes one model error naming the bound."""


@dataclass(frozen=True)
class Bounds:
    """What one exploration may take: paths, branches on one path, CPU seconds (solver
    queries included). The defaults lie far above the shipped models' largest pairs (a
    few hundred paths of a few dozen branches, seconds each)."""

    paths: int = 20_000
    branches: int = 2_000
    seconds: float = 600.0

    def check_branches(self, taken: int) -> None:
        if taken > self.branches:
            raise ExplorationBound(
                f"a path took more than {self.branches} branches (a loop on a symbolic "
                "condition that never ends? raise the bound with --max-branches)"
            )

    def check_time(self, started: float) -> None:
        if time.process_time() - started > self.seconds:
            raise ExplorationBound(
                f"the pair's exploration ran longer than {self.seconds:g} CPU seconds "
                "(raise the bound with --pair-timeout)"
            )

    def check_paths(self, paths: int) -> None:
        if paths > self.paths:
            raise ExplorationBound(
                f"the pair has more than {self.paths} paths (raise the bound with --max-paths)"
            )


class Infeasible(Exception):
    """The assumptions made on this path contradict each other; the path does not exist."""


_current: Path | None = None


def current() -> Path:
    if _current is None:
        raise RuntimeError("symbolic operation outside of a path exploration")
    return _current


@dataclass
class BaseRead:
    """One read of the initial state: which map, at which key, and what it held."""

    map_name: str
    key: z3.ExprRef
    present: z3.ExprRef | None  # None for total maps
    leaves: list
    leaf_types: list
    key_type: object
    leaf_names: list


@dataclass
class Path:
    solver: z3.Solver
    schedule: list[tuple]  # (outcome, forced, condition) per undecided branch
    queue: list
    stats: Stats
    decisions: list = field(default_factory=list)  # branch conditions, as taken
    assumptions: list = field(default_factory=list)  # domain axioms and implementation choices
    taken: list = field(default_factory=list)
    reads: list[BaseRead] = field(default_factory=list)
    choices: dict = field(default_factory=dict)  # name -> (expr, type)
    unknown: bool = False
    call: str = ""  # which call is running: "A" or "B"
    bounds: Bounds = field(default_factory=Bounds)
    started: float = 0.0  # the exploration's start, in CPU seconds (Bounds.check_time)
    shared_reads: dict = field(
        default_factory=dict
    )  # base reads and other path-independent terms, shared by all paths of an exploration
    _choice_counts: dict = field(default_factory=dict)
    _base_cache: dict = field(default_factory=dict)
    _decided: dict = field(default_factory=dict)
    _kept_alive: list = field(default_factory=list)
    _model: z3.ModelRef | None = None  # a model of the path so far, when one is known
    _models: dict = field(default_factory=dict)  # condition id -> model of path and condition
    _unchecked_assumptions: list = field(
        default_factory=list
    )  # added since the model was last validated

    # -- branching --
    def decide(self, cond: z3.BoolRef) -> bool:
        if is_true(cond):
            return True
        if is_false(cond):
            return False
        cached = self._decided.get(ast_id(cond))
        if cached is not None:
            return cached
        position = len(self.taken)
        self.bounds.check_branches(position + 1)
        self.bounds.check_time(self.started)
        if position < len(self.schedule):
            outcome, forced, scheduled = self.schedule[position]
            # A replay must meet the very branches it was scheduled on (Z3 shares equal
            # terms, so eq() is identity); model code that branches differently on a
            # second run is not deterministic, and the path would be someone else's.
            if not cond.eq(scheduled):
                raise ModelError(
                    f"non-deterministic model code: replayed branch {position + 1} met "
                    f"{_short(cond)} where the first run met {_short(scheduled)}"
                )
        else:
            negation = not_(cond)
            can_true = self._feasible(cond)
            can_false = self._feasible(negation)
            if not (can_true or can_false):
                raise Infeasible()
            forced = not (can_true and can_false)
            outcome = can_true
            if not forced:
                self.queue.append(([*self.taken, (False, False, cond)], self.unknown))
        self.taken.append((outcome, forced, cond))
        taken_cond = cond if outcome else not_(cond)
        if not forced:  # a forced branch is implied by the path so far: keep conditions short
            self.decisions.append(taken_cond)
        assert_all(self.solver, [taken_cond])
        self._keep_model_if(taken_cond)
        self._remember(cond, outcome)
        return outcome

    def _remember(self, cond, outcome):
        # Z3 reuses the id of a freed expression: keep the expressions alive with their ids.
        negation = not_(cond)
        self._decided[ast_id(cond)] = outcome
        self._decided[ast_id(negation)] = not outcome
        self._kept_alive += [cond, negation]

    def _satisfied_by_model(self, cond) -> bool:
        return self._model is not None and holds_in(self._model, cond)

    def _keep_model_if(self, constraint):
        """Keep the path's known model while it satisfies what was just added."""
        if self._satisfied_by_model(constraint):
            return
        candidate = self._models.get(ast_id(constraint))
        self._model = candidate
        self._models.clear()

    def _feasible(self, cond) -> bool:
        # A model of the path that already satisfies cond proves it feasible for free.
        if self._unchecked_assumptions:
            if not self._satisfied_by_model(and_(self._unchecked_assumptions)):
                self._model = None
            self._unchecked_assumptions = []
        if self._satisfied_by_model(cond):
            return True
        self.stats.solver_checks += 1
        self.solver.push()
        assert_all(self.solver, [cond])
        with timelimit.paused():
            answer = self.solver.check()
        if answer == z3.sat:
            self._models[ast_id(cond)] = self.solver.model()
            self._kept_alive.append(cond)
        self.solver.pop()
        if answer == z3.unknown:
            self.unknown = True
            self.stats.unknown_checks += 1
            return True
        return answer == z3.sat

    # -- facts that hold on every path --
    def assume(self, constraint: z3.BoolRef):
        if is_true(constraint):
            return
        self.assumptions.append(constraint)
        assert_all(self.solver, [constraint])
        self._unchecked_assumptions.append(constraint)

    def finish(self):
        """Make sure the replay met every scheduled branch, and that assumptions added
        since the last check left the path feasible."""
        if len(self.taken) < len(self.schedule):
            raise ModelError(
                f"non-deterministic model code: the replay ended after {len(self.taken)} "
                f"of the {len(self.schedule)} branches it was scheduled on"
            )
        if self._unchecked_assumptions and not self._feasible(z3.BoolVal(True)):
            raise Infeasible()

    # -- the initial state, read lazily --
    def read_base(self, map_value, key) -> tuple:
        cache_key = (map_value.name, ast_id(key))
        if cache_key in self._base_cache:
            return self._base_cache[cache_key]
        # Re-executed paths read the same terms again: build each read once per exploration.
        shared = self.shared_reads.get(cache_key)
        if shared is None:
            shared = _build_base_read(map_value, key)
            self.shared_reads[cache_key] = shared
        read, constraints = shared
        for constraint in constraints:
            self.assume(constraint)
        self.reads.append(read)
        result = (read.present if read.present is not None else z3.BoolVal(True), read.leaves)
        self._base_cache[cache_key] = result
        return result

    # -- implementation choices: one constant per call, shared by both orders --
    def start_order(self):
        """The k-th choice a call makes is the same constant in either order."""
        self._choice_counts.clear()

    def choose(self, symtype, label: str, within: range | None = None) -> z3.ExprRef:
        """The implementation's choice of a value of ``symtype``: within its domain, or
        within the integer range ``within``."""
        expr = self._choice(symtype, label)
        domain = [expr >= within.start, expr < within.stop] if within else symtype.domain(expr)
        for constraint in domain:
            self.assume(constraint)
        return expr

    def choose_fresh(self, symtype) -> z3.ExprRef:
        """A value no initial-state value equals, distinct from every other fresh value."""
        expr = self._choice(symtype, f"new_{symtype.kind}")
        self.assume(expr >= FRESH_BASE)
        for other, other_type in self.choices.values():
            if other_type is symtype and not other.eq(expr):
                self.assume(other != expr)
        return expr

    def _choice(self, symtype, label: str) -> z3.ExprRef:
        count = self._choice_counts.get((self.call, label), 0)
        self._choice_counts[(self.call, label)] = count + 1
        name = f"{self.call}.{label}#{count}"
        if name not in self.choices:
            self.choices[name] = (z3.Const(name, symtype.sort), symtype)
        return self.choices[name][0]


def shared(path: Path, key, build):
    """``build()``, made once per exploration for ``key``: paths are replayed from the
    start, and rebuilding the same terms through Z3's Python API costs more than the
    solver does. The value must not depend on the path."""
    found = path.shared_reads.get(key)
    if found is None:
        found = path.shared_reads[key] = build()
    return found


def _build_base_read(map_value, key) -> tuple:
    """A read of the initial state at ``key`` and the constraints its values obey."""
    symtype = map_value.type
    leaf_specs = symtype.value.leaves()
    leaves = [
        _function(join_name(map_value.name, suffix), symtype.key.sort, leaf_type.sort)(key)
        for suffix, leaf_type in leaf_specs
    ]
    present = None
    if symtype.partial:
        present = _function(f"{map_value.name}.present", symtype.key.sort, z3.BoolSort())(key)
    # No constraint on the key itself: arguments and choices carry their own domains, and a
    # key the implementation just allocated lies outside the initial state's.
    constraints = []
    value = symtype.value.build(iter(leaves))
    for constraint in symtype.value.invariant(value):
        constraints.append(z3.Implies(present, constraint) if present is not None else constraint)
    # No initial state uses a key above a bounded domain: allocations take those keys
    # when the domain is full (MapValue.lowest_free_key).
    top = getattr(symtype.key, "hi", None)
    if present is not None and top is not None:
        constraints.append(z3.Implies(key > top, z3.Not(present)))
    constraints = [z3.And(constraints)] if constraints else []  # one solver call per read
    read = BaseRead(
        map_value.name,
        key,
        present,
        leaves,
        [t for _, t in leaf_specs],
        symtype.key,
        [suffix for suffix, _ in leaf_specs],
    )
    return read, constraints


_functions: dict = {}


def _function(name, domain, range_) -> z3.FuncDeclRef:
    """One declaration per base-state function: declaring is costly in Z3's Python API."""
    key = (name, domain.get_id(), range_.get_id())
    if key not in _functions:
        _functions[key] = z3.Function(name, domain, range_)
    return _functions[key]


def _short(cond) -> str:
    text = str(cond).replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class Stats:
    solver_checks: int = 0
    unknown_checks: int = 0


def _symbolic_bool(expr: z3.BoolRef) -> bool:
    return current().decide(expr)


def _symbolic_index(expr: z3.ArithRef) -> int:
    """``some_list[pid]`` with a symbolic index: branch on each possible value."""
    for value in range(64):
        if current().decide(expr == value):
            return value
    raise BoundExceeded("symbolic list index above 63")


@contextlib.contextmanager
def symbolic_python():
    """Let model code use Python's ``if``/``and``/``not``/indexing on Z3 expressions."""
    saved_bool = z3.BoolRef.__bool__
    z3.BoolRef.__bool__ = _symbolic_bool
    z3.ArithRef.__index__ = _symbolic_index
    try:
        yield
    finally:
        z3.BoolRef.__bool__ = saved_bool
        del z3.ArithRef.__index__


def explore(
    program,
    solver_timeout_ms: int = deadline.QUERY_LIMIT_MS,
    stats: Stats | None = None,
    model_timeout: float | None = None,
    bounds: Bounds | None = None,
):
    """Run ``program(path)`` on every feasible path; yield ``(path, outcome_or_exception)``.
    Model code that runs longer than ``model_timeout`` seconds on a path (solver time
    aside) ends the path with a ModelTimeLimit exception; an exploration past its
    ``bounds`` raises ExplorationBound.

    ``program`` must be deterministic given the branch outcomes: a path is replayed
    from the start, and a replay that meets other branches ends in a ModelError.
    Solver counts are added to ``stats`` when given.
    """
    global _current
    solver = deadline.Solver(solver_timeout_ms, logic="QF_UFLIA")
    stats = stats if stats is not None else Stats()
    bounds = bounds or Bounds()
    started = time.process_time()
    queue: list = [([], False)]
    shared_reads: dict = {}
    paths = 0
    with symbolic_python():
        while queue:
            if paths % GC_PATHS == 0:
                gc.collect()  # at the same points on every run (parallel._fresh_worker)
            paths += 1
            bounds.check_paths(paths)
            bounds.check_time(started)
            schedule, unknown = queue.pop()
            path = Path(solver, schedule, queue, stats, unknown=unknown, shared_reads=shared_reads)
            path.bounds, path.started = bounds, started
            solver.push()
            _current = path
            try:
                with timelimit.limit(model_timeout):
                    outcome = program(path)
                    path.finish()
            except Infeasible:
                continue
            except ExplorationBound:
                raise
            except Exception as error:  # a model bug or bound on this path: reported, not dropped
                outcome = error
            finally:
                _current = None
                solver.pop()
            yield path, outcome
