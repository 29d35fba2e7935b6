"""``scalecheck testgen``: concrete tests for every commutative path of an analysis.

For each commutative path, Z3 gives a model of the path condition; the model becomes a
test; then the test's *isomorphism class* is excluded and the solver asked again, up to
a cap per path. Two tests are isomorphic when they agree on the equality pattern among
arguments and initial-state keys of each uninterpreted kind (names, inodes, fds, pages,
pipes, bytes) and on the booleans and enums the path condition decides on: the concrete
values behind that pattern do not change which code paths an implementation can take.
Values can: inside each class, the equality pattern between arguments of one kind and
between an argument and a stored value the path read is varied too, up to --value-cap
patterns (a `set(k, v)` that skips writing the value k holds).

Reads ``DIR/analysis/`` and writes ``DIR/tests.jsonl`` (docs/format-tests.md) and
``DIR/testgen.json`` (per-pair counts).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, ClassVar

import z3
from rich.table import Table
from z3.z3 import _to_expr_ref  # wraps a raw AST; z3 exports no public equivalent

from scalecheck import __version__, binding
from scalecheck.common import argtypes, rundir_lock
from scalecheck.common.errors import UserError
from scalecheck.common.output import stdout_console
from scalecheck.common.parallel import map_unordered
from scalecheck.common.progress import stage_progress
from scalecheck.common.storage import read_json, write_json_atomically
from scalecheck.engine import deadline
from scalecheck.engine.commute import OBSERVED
from scalecheck.engine.rawz3 import assert_all
from scalecheck.formats import testfile
from scalecheck.formats.analysisfile import (
    all_pairs,
    pair_file,
    pair_is_current,
    read_analysis_meta,
)
from scalecheck.formats.testfile import file_hash, write_tests
from scalecheck.interfaces.loading import load_model, model_fingerprint
from scalecheck.testgen import allowed, open_equalities

DEFAULT_CAP = 8
# testgen.json: the hash of the tests file it describes.
TESTS_HASH = "tests_sha256"
# Value-equality patterns tried per isomorphism class (see _value_features): five cover
# every pattern of three values (two arguments and the value they would replace).
DEFAULT_VALUE_CAP = 5


def register(subparsers):
    parser = subparsers.add_parser(
        "testgen",
        help="generate concrete tests from an analysis",
        description="Write DIR/tests.jsonl: for every commutative path of DIR/analysis, one test "
        "per isomorphism class of its solutions, up to --cap per path.",
    )
    parser.add_argument("dir", type=Path, help="the directory given to `scalecheck analyze --out`")
    add_testgen_options(parser)
    parser.add_argument(
        "--jobs", type=argtypes.count, default=os.cpu_count(), help="pairs processed in parallel"
    )
    parser.add_argument("--json", action="store_true", help="print the per-pair counts as JSON")
    parser.set_defaults(func=run)


def add_testgen_options(parser) -> None:
    """How many tests: options `testgen` and `pipeline` share."""
    parser.add_argument(
        "--cap",
        type=argtypes.count,
        default=DEFAULT_CAP,
        help=f"isomorphism classes (tests, without value patterns) per path at most "
        f"(default {DEFAULT_CAP})",
    )
    parser.add_argument(
        "--value-cap",
        type=argtypes.count,
        default=DEFAULT_VALUE_CAP,
        help="tests per isomorphism class at most, one per pattern of equalities between "
        "arguments and the stored values the path reads (default "
        f"{DEFAULT_VALUE_CAP}; 1 switches value patterns off: one test per class)",
    )


def run(args) -> int:
    summary = generate_tests(args.dir, cap=args.cap, value_cap=args.value_cap, jobs=args.jobs)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print_summary(summary)
    return 1 if summary["totals"]["unknown_paths"] or summary["totals"]["failed_paths"] else 0


@rundir_lock.holding("out")
def generate_tests(
    out: Path,
    cap: int = DEFAULT_CAP,
    jobs: int | None = None,
    quiet: bool = False,
    value_cap: int = DEFAULT_VALUE_CAP,
) -> dict:
    if cap < 1:
        raise UserError("--cap must be at least 1")
    meta = read_analysis_meta(out)
    model_cls = load_model(meta["model"])
    if meta.get("fingerprint") != model_fingerprint(model_cls):
        raise UserError(
            f"the analysis in {out} was made from another version of model {meta['model']} "
            "(its file, a module it imports, or scalecheck's engine changed since): "
            "rerun `scalecheck analyze`"
        )
    pairs = all_pairs(meta["ops"])
    missing = [
        f"{a}-{b}" for a, b in pairs if not pair_is_current(out, (a, b), meta["fingerprint"])
    ]
    if missing:
        raise UserError(
            f"analysis in {out} is incomplete ({len(missing)} pairs missing or from another "
            f"model version, e.g. {missing[0]}): rerun `scalecheck analyze` to finish it"
        )
    # Largest analysis first, so that no worker starts a long pair when the others are
    # about to finish (the tests do not depend on the order: each pair has its own Z3
    # context, and the file lists pairs in model order).
    work = [
        (meta["model"], str(out), a, b, cap, value_cap)
        for a, b in sorted(pairs, key=lambda pair: -pair_file(out, *pair).stat().st_size)
    ]
    per_pair = {}
    with stage_progress("testgen", quiet) as progress:
        task = progress.add_task("", total=len(work))
        for pair, tests, counts in map_unordered(_pair_tests, work, jobs):
            per_pair[pair] = (tests, counts)
            progress.update(
                task, advance=1, description=f"{pair[0]} || {pair[1]}: {len(tests)} tests"
            )
    header = {
        "model": meta["model"],
        "generator": f"scalecheck {__version__}",
        "cap": cap,
        "value_cap": value_cap,
        "constants": dict(binding.for_model(model_cls).constants),
    }
    all_tests, rows = [], []
    for pair in pairs:
        tests, counts = per_pair[tuple(pair)]
        all_tests += tests
        rows.append({"pair": list(pair), **counts})
    write_tests(out / "tests.jsonl", header, all_tests)
    totals = {
        key: sum(row[key] for row in rows)
        for key in (
            "tests",
            "commutative_paths",
            "capped_paths",
            "unknown_paths",
            "failed_paths",
            "unrealizable_paths",
            "value_capped_classes",
        )
    }
    totals["open_equalities"] = {
        key: sum(row["open_equalities"][key] for row in rows) for key in open_equalities.COUNTS
    }
    summary = {
        "cap": cap,
        "value_cap": value_cap,
        # What the tests were made from and what they are: `pipeline` reuses a tests
        # file whose analysis, cap and generator are those of now (current_tests).
        "made_from": _made_from(out, meta, cap, value_cap),
        TESTS_HASH: file_hash(out / "tests.jsonl"),
        "totals": totals,
        "pairs": rows,
    }
    write_json_atomically(out / "testgen.json", summary)
    return summary


def _made_from(out: Path, meta: dict, cap: int, value_cap: int) -> dict:
    """The analysis (its pairs' files, byte for byte), the caps and the code that turn
    into a tests file: the same inputs give the same file (tests do not depend on --jobs
    or on the order workers finish)."""
    analysis = hashlib.sha256()
    for a, b in all_pairs(meta["ops"]):
        analysis.update(pair_file(out, a, b).read_bytes())
    generator = hashlib.sha256(__version__.encode())
    binding_sources = sorted(Path(inspect.getfile(binding)).parent.glob("*.py"))
    sources = (Path(__file__), *(Path(inspect.getfile(m)) for m in (testfile, open_equalities)))
    for source in (*sources, *binding_sources):
        generator.update(source.read_bytes())
    return {
        "fingerprint": meta["fingerprint"],
        "ops": meta["ops"],
        "analysis_sha256": analysis.hexdigest()[:16],
        "cap": cap,
        "value_cap": value_cap,
        "generator_sha256": generator.hexdigest()[:16],
    }


def current_tests(out: Path, cap: int, value_cap: int) -> dict | None:
    """The summary of ``out``'s tests file when it is what testgen would write now (same
    analysis, caps and generator, and the file untouched since), else None."""
    try:
        summary = read_json(out / "testgen.json")
        meta = read_analysis_meta(out)
        if summary.get("made_from") != _made_from(out, meta, cap, value_cap):
            return None
        if summary.get(TESTS_HASH) != file_hash(out / "tests.jsonl"):
            return None
    except (OSError, ValueError, KeyError, UserError):
        return None
    return summary


def _pair_tests(job: tuple) -> tuple:
    model_spec, out, a, b, cap, value_cap = job
    model_cls = load_model(model_spec)
    analysis = read_json(pair_file(Path(out), a, b))
    tests: list[dict] = []
    counts: dict[str, Any] = {
        "tests": 0,
        "commutative_paths": 0,
        "capped_paths": 0,
        "unknown_paths": 0,
        "failed_paths": 0,
        "unrealizable_paths": 0,
        "value_capped_classes": 0,
        "open_equalities": open_equalities.empty_counts(),
        "failures": [],
    }
    pair = PairTools.new()
    for path in analysis["paths"]:
        if not path["commutes"] or path["unknown"]:
            continue
        counts["commutative_paths"] += 1
        try:
            path_tests, outcome, value_capped, equalities = _path_tests(
                model_cls, (a, b), path, cap, value_cap, pair
            )
        except Exception as err:  # counted and reported, never dropped silently
            counts["failed_paths"] += 1
            counts["failures"].append(
                f"{a} || {b} path {path['path']}: {type(err).__name__}: {err}"
            )
            continue
        for key, count in equalities.items():
            counts["open_equalities"][key] += count
        if outcome != "complete":
            counts[outcome] += 1
        counts["value_capped_classes"] += value_capped
        for number, test in enumerate(path_tests, 1):
            test["id"] = f"{a}-{b}/p{path['path']}/t{number}"
            tests.append(test)
    counts["tests"] = len(tests)
    return (a, b), tests, counts


def _path_tests(model_cls, ops, path, cap: int, value_cap: int, pair: PairTools) -> tuple:
    """Tests for one path, how enumeration ended (complete, capped_paths, unknown_paths,
    or unrealizable_paths: no buildable initial state), how many of its isomorphism
    classes had more value-equality patterns than ``value_cap``, and how its tests fall
    on the equalities it leaves open (open_equalities.COUNTS). ``pair``: the pair's Z3
    context and its walkers of terms."""
    maker = _TestMaker(model_cls, ops, path, pair)
    solver, terms = maker.solver, maker.terms
    tests: list[dict] = []
    models: list = []  # each test's model, for the open equalities
    classes = value_capped = 0
    solver.push()  # the classes' exclusions: open equalities are solved for without them
    outcome = "complete"
    while classes < cap:
        answer = solver.check()
        if answer != z3.sat:
            outcome = "unknown_paths" if answer == z3.unknown else outcome
            break
        model = solver.model()
        values = terms.values(model)
        variants, capped = _value_variants(
            solver, maker.pattern, maker.values_pattern, (values, model), terms, value_cap
        )
        value_capped += capped
        for variant_values, variant_model in variants:
            tests.append(maker.test(variant_values))
            models.append(variant_model)
        classes += 1
        assert_all(solver, [maker.pattern.exclude(values)])
    else:
        outcome = "capped_paths" if solver.check() == z3.sat else "complete"
    solver.pop()
    if outcome == "complete" and not tests:
        outcome = "unrealizable_paths"
    if outcome in ("unrealizable_paths", "unknown_paths"):
        return tests, outcome, value_capped, open_equalities.empty_counts()
    sides = pair.equalities.sides(solver.assertions(), terms, maker.observations, maker.kinds)
    counts, extra = _vary_open_equalities(solver, terms, sides, models)
    for values, covers in extra:
        tests.append({**maker.test(values), "covers": covers})
    return tests, outcome, value_capped, counts


class _TestMaker:
    """One path's solver, observed terms and patterns, and its tests from values."""

    def __init__(self, model_cls, ops, path, pair: PairTools):
        self.model_cls, self.ops, self.path = model_cls, ops, path
        self.solver = deadline.Solver(deadline.QUERY_LIMIT_MS, ctx=pair.context)
        self.solver.from_string(path["smt2"])
        self.terms = ObservedTerms(self.solver)
        self.observations = observations = path["observations"]
        self.kinds = kinds = observations["kinds"]
        self.pattern = IsomorphismPattern(observations, kinds, self.terms, pair.context)
        features = _value_features(observations, kinds, self.pattern)
        self.values_pattern = ValuePattern(self.terms, features, pair.text)
        self.choices = allowed.PathChoices(
            self.solver.assertions(),
            self.terms,
            list(_all_observations(observations)),
            observations["results"],
            pair.names,
        )

    def test(self, values) -> dict:
        outcomes = self.choices.test_outcomes(values)
        test = _concrete_test(
            self.model_cls, self.ops, self.path, self.observations, self.kinds, values, outcomes
        )
        if self.values_pattern.features:
            test["values"] = self.values_pattern.describe(values)
        return test


@dataclass
class PairTools:
    """What the paths of one pair share: its Z3 context (the solutions Z3 finds depend on
    what its context saw before, so a context shared with the pairs a worker did earlier
    would make the tests depend on which worker got the pair), and the walkers of its
    terms."""

    context: z3.Context
    text: TermText
    names: allowed.ConstantNames
    equalities: open_equalities.EqualityFinder

    @classmethod
    def new(cls) -> PairTools:
        context = z3.Context()
        text, names = TermText(), allowed.ConstantNames(context)
        return cls(context, text, names, open_equalities.EqualityFinder(context, names, text))


def _vary_open_equalities(solver, terms, sides: list, models: list) -> tuple[dict, list]:
    """The path's counts of open equalities (open_equalities.COUNTS), and the values of
    one more test for each side no test took yet and the path allows, with that side's
    text. ``solver`` holds the path's constraints alone."""
    taken, excluded, extra = set(), set(), []
    for side in sides:
        if open_equalities.covered(side, models):
            taken.add(side.text)
            continue
        solver.push()
        solver.add(side.literal)
        answer = solver.check()
        if answer == z3.sat:
            model = solver.model()
            extra.append((terms.values(model), side.text))
            models.append(model)
            taken.add(side.text)
        elif answer == z3.unsat:
            excluded.add(side.text)
        solver.pop()
    return open_equalities.tally(sides, taken, excluded), extra


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
        self._is_bool = [_is_bool(ref, term) for term in self.raw]  # else an integer

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
        ref = self.context.ref()
        result = (z3.Ast * 1)()
        values: list[bool | int] = []
        for term, is_bool in zip(self.raw, self._is_bool, strict=True):
            if not z3.Z3_model_eval(ref, model.model, term, True, result):
                raise z3.Z3Exception("failed to evaluate an observed term in the model")
            value = result[0]
            z3.Z3_inc_ref(ref, value)
            try:
                values.append(_bool_value(ref, value) if is_bool else _int_value(ref, value))
            finally:
                z3.Z3_dec_ref(ref, value)
        return values


def _observed_atom(solver: z3.Solver):
    """The raw ``observed(...)`` assertion of the path's SMT-LIB text."""
    ref = solver.ctx.ref()
    assertions = z3.Z3_solver_get_assertions(ref, solver.solver)
    z3.Z3_ast_vector_inc_ref(ref, assertions)
    try:
        for index in range(z3.Z3_ast_vector_size(ref, assertions)):
            assertion = z3.Z3_ast_vector_get(ref, assertions, index)
            if z3.Z3_get_ast_kind(ref, assertion) != z3.Z3_APP_AST:
                continue
            decl = z3.Z3_get_app_decl(ref, z3.Z3_to_app(ref, assertion))
            if z3.Z3_get_symbol_string(ref, z3.Z3_get_decl_name(ref, decl)) == OBSERVED:
                return z3.Z3_to_app(ref, assertion)
    finally:
        z3.Z3_ast_vector_dec_ref(ref, assertions)
    raise ValueError(f"the path's constraints have no {OBSERVED}(...) atom")


def _is_bool(ref, term) -> bool:
    return z3.Z3_get_sort_kind(ref, z3.Z3_get_sort(ref, term)) == z3.Z3_BOOL_SORT


def _bool_value(ref, value) -> bool:
    answer = z3.Z3_get_bool_value(ref, value)
    if answer == z3.Z3_L_UNDEF:
        raise ValueError("an observed Boolean term has no value in the model")
    return answer == z3.Z3_L_TRUE


def _int_value(ref, value) -> int:
    """An integer constant of the model (an error for anything else, e.g. a term the
    model leaves unevaluated)."""
    return int(z3.Z3_get_numeral_string(ref, value))


class ValuePattern:
    """The equalities of values (_value_features) inside one isomorphism class, and the
    clause that excludes a pattern of them once it has a test. A stored value counts only
    where its key is present: an absent key holds no value."""

    def __init__(self, terms, features: list[tuple[int, int, int | None]], text=str):
        self.terms, self.features = terms, features
        # Printed once per path: every test of it names its pattern with them.
        self._names = [(text(terms[j]), text(terms[i])) for i, j, _ in features]
        self._equal: list | None = None  # built by the first exclude(): value cap above 1

    def _holds(self, values) -> list[bool]:
        return [
            values[i] == values[j] and (present is None or values[present])
            for i, j, present in self.features
        ]

    def exclude(self, values) -> z3.BoolRef:
        if self._equal is None:
            terms = self.terms
            self._equal = [
                terms[i] == terms[j]
                if present is None
                else z3.And(terms[present], terms[i] == terms[j])
                for i, j, present in self.features
            ]
        return z3.Or(
            [
                equal if not holds else z3.Not(equal)
                for equal, holds in zip(self._equal, self._holds(values), strict=True)
            ]
        )

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
        self.equalities, self.valued = _pattern_features(observations, kinds)
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
            self._literals[i, j] = (self.terms[i] != right, self.terms[i] == right)
        return self._literals[i, j][0 if now_equal else 1]

    def _value_differs(self, i, value):
        if (i, value) not in self._literals:
            self._literals[i, value] = self.terms[i] != value
        return self._literals[i, value]


def _value_variants(
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
    solver.add(z3.Not(pattern.exclude(first[0])), values_pattern.exclude(first[0]))
    while len(variants) < value_cap and solver.check() == z3.sat:
        model = solver.model()
        variants.append((terms.values(model), model))
        solver.add(values_pattern.exclude(variants[-1][0]))
    capped = len(variants) == value_cap and solver.check() == z3.sat
    solver.pop()
    return variants, capped


def _value_features(observations, kinds, pattern) -> list:
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


def _all_observations(observations):
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


def _pattern_features(observations, kinds) -> tuple[list, list]:
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


def _concrete_test(model_cls, ops, path, observations, kinds, values, outcomes=None) -> dict:
    labels = _labels(observations, kinds, values)

    def label(kind, raw):
        return labels[kind][raw] if kind in labels else raw

    def concrete(entry):
        if entry is None:
            return None
        if entry["chosen"]:
            return "*"
        return label(entry["kind"], values[entry["obs"]])

    snapshot: defaultdict[str, dict] = defaultdict(dict)
    for read in observations["reads"]:
        if read["key"] and read["key"]["chosen"]:
            continue  # a read where the implementation allocated: not part of the initial state
        fields = {name: concrete(leaf) for name, leaf in read["leaves"].items()}
        if read["key"] is None:
            snapshot[read["map"]] = fields[""] if list(fields) == [""] else fields
            continue
        if read["present"] is not None:
            fields = {"present": concrete(read["present"]), **fields}
        snapshot[read["map"]][concrete(read["key"])] = fields
    args = [
        {name: concrete(entry) for name, entry in observations["args"][call].items()}
        for call in "AB"
    ]
    results = allowed.fill_results(
        observations["results"], lambda entry: "*" if entry["chosen"] else values[entry["obs"]]
    )
    describe = binding.for_model(model_cls).describe
    setup, calls, expect = describe(list(ops), dict(snapshot), args, results, label)
    test = {
        "id": "",
        "pair": list(ops),
        "path": path["path"],
        "setup": setup,
        "calls": calls,
        "expect": expect,
    }
    if outcomes is not None:
        # Every outcome the model allows, choice by choice (allowed.py): on this path,
        # and off it ("left the path").
        on_path, left, shown = outcomes
        test["outcomes"] = [describe(list(ops), dict(snapshot), args, o, label)[2] for o in on_path]
        test["left_path"] = [describe(list(ops), dict(snapshot), args, o, label)[2] for o in left]
        test["choices"] = [describe(list(ops), dict(snapshot), args, o, label)[2] for o in shown]
    return test


def _labels(observations, kinds, values) -> dict:
    """Small labels for uninterpreted values: 0, 1, 2... in order of value (0 stays 0 for
    kinds where zero is special)."""
    raw_by_kind = defaultdict(set)
    for entry in _all_observations(observations):
        info = kinds.get(entry["kind"])
        if info and info["class"] == "uninterpreted" and not entry["chosen"]:
            raw_by_kind[entry["kind"]].add(values[entry["obs"]])
    labels = {}
    for kind, raws in raw_by_kind.items():
        ordered = sorted(raws | ({0} if kinds[kind].get("zero") else set()))
        labels[kind] = {raw: number for number, raw in enumerate(ordered)}
    return labels


def print_summary(summary: dict):
    console = stdout_console()
    table = Table(title="generated tests")
    for column in (
        "pair",
        "tests",
        "commutative paths",
        "capped",
        "unrealizable",
        "unknown",
        "failed",
    ):
        table.add_column(column, justify="left" if column == "pair" else "right")
    for row in summary["pairs"]:
        table.add_row(
            " || ".join(row["pair"]),
            str(row["tests"]),
            str(row["commutative_paths"]),
            str(row["capped_paths"]),
            str(row["unrealizable_paths"]),
            str(row["unknown_paths"]),
            str(row["failed_paths"]),
        )
    console.print(table)
    for row in summary["pairs"]:
        for failure in row["failures"]:
            console.print(f"[red]failed:[/red] {failure}")
    t = summary["totals"]
    console.print(
        f"{t['tests']} tests from {t['commutative_paths']} commutative paths "
        f"(cap {summary['cap']} per path; {t['capped_paths']} paths capped, "
        f"{t['unrealizable_paths']} unrealizable, {t['unknown_paths']} unknown, "
        f"{t['failed_paths']} failed; "
        + (
            f"{t['value_capped_classes']} classes with more than "
            f"{summary['value_cap']} value-equality patterns)"
            if summary["value_cap"] > 1
            else "value-equality patterns off)"
        )
    )
    console.print(open_equalities.coverage_line(t["open_equalities"]))
