"""Concrete tests for every commutative path of an analysis: the stage's work, pair by
pair in worker processes (the command: testgen_cli.py; the Z3 patterns: patterns.py).

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
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import z3

from scalecheck import __version__, binding
from scalecheck.common import rundir_lock
from scalecheck.common.errors import UserError
from scalecheck.common.parallel import map_unordered, worker_count
from scalecheck.common.progress import stage_progress
from scalecheck.common.storage import read_json, write_json_atomically
from scalecheck.engine import deadline
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
from scalecheck.testgen.patterns import (
    IsomorphismPattern,
    ObservedTerms,
    TermText,
    ValuePattern,
    all_observations,
    value_features,
    value_variants,
)
from scalecheck.testgen.z3_c_api import raw_assertions

DEFAULT_CAP = 8
# testgen.json: the hash of the tests file it describes.
TESTS_HASH = "tests_sha256"
# Value-equality patterns tried per isomorphism class (see patterns.value_features): five
# cover every pattern of three values (two arguments and the value they would replace).
DEFAULT_VALUE_CAP = 5
# testgen.json: each pair's counts and their totals (beside open_equalities).
COUNTS = (
    "tests",
    "commutative_paths",
    "capped_paths",
    "unknown_paths",
    "failed_paths",
    "unrealizable_paths",
    "value_capped_classes",
)


@rundir_lock.holding("out")
def generate_tests(
    out: Path,
    cap: int = DEFAULT_CAP,
    jobs: int | None = None,
    quiet: bool = False,
    value_cap: int = DEFAULT_VALUE_CAP,
) -> dict:
    """`scalecheck testgen OUT`: the tests of OUT/analysis/ written to OUT/tests.jsonl (at
    most ``cap`` isomorphism classes per path, ``value_cap`` value-equality patterns per
    class); returns the summary."""
    if cap < 1:
        raise UserError("--cap must be at least 1")
    meta = read_analysis_meta(out)
    model_cls = load_model(meta["model"])
    pairs = all_pairs(meta["ops"])
    _check_analysis(out, meta, model_cls, pairs)
    # Largest analysis first, so that no worker starts a long pair when the others are
    # about to finish (the tests do not depend on the order: each pair has its own Z3
    # context, and the file lists pairs in model order).
    sizes = {tuple(pair): pair_file(out, *pair).stat().st_size for pair in pairs}
    work = [
        (meta["model"], str(out), a, b, cap, value_cap)
        for a, b in sorted(sizes, key=lambda pair: -sizes[pair])
    ]
    per_pair = _run_pairs(work, sizes, jobs, quiet)
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
    summary = {
        "cap": cap,
        "value_cap": value_cap,
        # What the tests were made from and what they are: `pipeline` reuses a tests
        # file whose analysis, cap and generator are those of now (current_tests).
        "made_from": _made_from(out, meta, cap, value_cap),
        TESTS_HASH: file_hash(out / "tests.jsonl"),
        "totals": _totals(rows),
        "pairs": rows,
    }
    write_json_atomically(out / "testgen.json", summary)
    return summary


def _run_pairs(work: list, sizes: dict, jobs: int | None, quiet: bool) -> dict:
    """Each pair's (tests, counts), made by the workers, with the stage's bar."""
    per_pair = {}
    order = {(job[2], job[3]): index for index, job in enumerate(work)}
    with stage_progress("testgen", quiet) as progress:
        # The time left by the analyses' sizes: the largest pairs come first.
        task = progress.add_task(
            "",
            total=len(work),
            sizes=[sizes[pair] for pair in order],
            workers=worker_count(jobs, len(work)),
        )
        for pair, tests, counts in map_unordered(_pair_tests, work, jobs):
            per_pair[pair] = (tests, counts)
            progress.update(
                task,
                advance=1,
                item=order[pair],
                description=f"{pair[0]} || {pair[1]}: {len(tests)} tests",
            )
    return per_pair


def _check_analysis(out: Path, meta: dict, model_cls, pairs: list) -> None:
    """Refuses an analysis of another model version, or one with pairs missing."""
    if meta.get("fingerprint") != model_fingerprint(model_cls):
        raise UserError(
            f"the analysis in {out} was made from another version of model {meta['model']} "
            "(its file, a module it imports, or scalecheck's engine changed since): "
            "rerun `scalecheck analyze`"
        )
    missing = [
        f"{a}-{b}" for a, b in pairs if not pair_is_current(out, (a, b), meta["fingerprint"])
    ]
    if missing:
        raise UserError(
            f"analysis in {out} is incomplete ({len(missing)} pairs missing or from another "
            f"model version, e.g. {missing[0]}): rerun `scalecheck analyze` to finish it"
        )


def _totals(rows: list[dict]) -> dict:
    """The pairs' counts added up."""
    totals = {key: sum(row[key] for row in rows) for key in COUNTS}
    totals["open_equalities"] = {
        key: sum(row["open_equalities"][key] for row in rows) for key in open_equalities.COUNTS
    }
    return totals


def _made_from(out: Path, meta: dict, cap: int, value_cap: int) -> dict:
    """The analysis (its pairs' files, byte for byte), the caps and the code that turn
    into a tests file: the same inputs give the same file (tests do not depend on --jobs
    or on the order workers finish)."""
    analysis = hashlib.sha256()
    for a, b in all_pairs(meta["ops"]):
        analysis.update(pair_file(out, a, b).read_bytes())
    generator = hashlib.sha256(__version__.encode())
    binding_sources = sorted(Path(inspect.getfile(binding)).parent.glob("*.py"))
    own_sources = sorted(Path(__file__).parent.glob("*.py"))  # the testgen stage's modules
    for source in (*own_sources, Path(inspect.getfile(testfile)), *binding_sources):
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


def pair_tests(
    analysis_dir: Path, a: str, b: str, cap: int = DEFAULT_CAP, value_cap: int = DEFAULT_VALUE_CAP
) -> tuple[list, dict]:
    """The tests and counts of one analysed pair ``a || b``, made in this process."""
    model = read_analysis_meta(Path(analysis_dir))["model"]
    _, tests, counts = _pair_tests((model, str(analysis_dir), a, b, cap, value_cap))
    return tests, counts


def _pair_tests(job: tuple) -> tuple:
    model_spec, out, a, b, cap, value_cap = job
    model_cls = load_model(model_spec)
    analysis = read_json(pair_file(Path(out), a, b))
    tests: list[dict] = []
    counts: dict[str, Any] = {
        **dict.fromkeys(COUNTS, 0),
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
        variants, capped = value_variants(
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
    sides = pair.equalities.sides(raw_assertions(solver), terms, maker.observations, maker.kinds)
    counts, extra = _vary_open_equalities(solver, terms, sides, models)
    for values, covers in extra:
        tests.append({**maker.test(values), "covers": covers})
    return tests, outcome, value_capped, counts


class _TestMaker:
    """One path's solver, observed terms and patterns, and its tests from values."""

    def __init__(self, model_cls, ops, path, pair: PairTools):
        self.concrete = ConcreteTests(model_cls, ops, path)
        self.solver = deadline.Solver(deadline.QUERY_LIMIT_MS, ctx=pair.context)
        self.solver.from_string(path["smt2"])
        self.terms = ObservedTerms(self.solver)
        self.observations = observations = path["observations"]
        self.kinds = kinds = observations["kinds"]
        self.pattern = IsomorphismPattern(observations, kinds, self.terms, pair.context)
        features = value_features(observations, kinds, self.pattern)
        self.values_pattern = ValuePattern(self.terms, features, pair.text)
        self.choices = allowed.PathChoices(
            self.solver.assertions(),
            self.terms,
            list(all_observations(observations)),
            observations["results"],
            pair.names,
        )

    def test(self, values) -> dict:
        test = self.concrete.test(values, self.choices.test_outcomes(values))
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


class ConcreteTests:
    """One path's concrete tests from its terms' values. What every test of the path
    needs and depends on the path alone is found once: the binding's describe and which
    terms get small labels (a path has a few hundred tests, each read the same
    observations again)."""

    def __init__(self, model_cls, ops, path):
        self.ops, self.path = list(ops), path
        self.observations = observations = path["observations"]
        self.describe = binding.for_model(model_cls).describe
        self._labelled = _labelled_terms(observations, observations["kinds"])

    def test(self, values, outcomes=None) -> dict:
        """The test of ``values`` (the path's terms, in order), with ``outcomes``
        (allowed.PathChoices.test_outcomes) where a result shows a choice."""
        observations, ops, describe = self.observations, self.ops, self.describe
        labels = self._labels(values)

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
        setup, calls, expect = describe(ops, dict(snapshot), args, results, label)
        test = {
            "id": "",
            "pair": list(ops),
            "path": self.path["path"],
            "setup": setup,
            "calls": calls,
            "expect": expect,
        }
        if outcomes is not None:
            # Every outcome the model allows, choice by choice (allowed.py): on this path,
            # and off it ("left the path"). A choice that leaves the path is both in
            # ``left`` and in ``shown``, the same object: described once.
            described: dict[int, Any] = {}

            def expected(outcome):
                if id(outcome) not in described:
                    described[id(outcome)] = describe(ops, dict(snapshot), args, outcome, label)[2]
                return described[id(outcome)]

            on_path, left, shown = outcomes
            test["outcomes"] = [expected(o) for o in on_path]
            test["left_path"] = [expected(o) for o in left]
            test["choices"] = [expected(o) for o in shown]
        return test

    def _labels(self, values) -> dict:
        """Small labels for uninterpreted values: 0, 1, 2... in order of value (0 stays 0
        for kinds where zero is special)."""
        labels = {}
        for kind, (indices, zero) in self._labelled.items():
            raws = {values[index] for index in indices}
            ordered = sorted(raws | ({0} if zero else set()))
            labels[kind] = {raw: number for number, raw in enumerate(ordered)}
        return labels


def _labelled_terms(observations, kinds) -> dict:
    """The terms that get small labels, by kind: (their indices, whether zero is special),
    those of the uninterpreted kinds the implementation did not choose."""
    labelled: dict[str, tuple[list, bool]] = {}
    for entry in all_observations(observations):
        info = kinds.get(entry["kind"])
        if info and info["class"] == "uninterpreted" and not entry["chosen"]:
            indices, _ = labelled.setdefault(entry["kind"], ([], bool(info.get("zero"))))
            indices.append(entry["obs"])
    return {kind: (sorted(set(indices)), zero) for kind, (indices, zero) in labelled.items()}
