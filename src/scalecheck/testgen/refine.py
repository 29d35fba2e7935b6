"""``scalecheck testgen DIR --refine-left-path``: new tests for the paths a run left.

A test "left the path" when the implementation made a legal choice that the test's path
excluded (allowed.py): the path assumed alloc's id differs from lookup's argument, and the
implementation took that very id. The result is legal but tests nothing of the path. Here
each such result becomes a query: the path's condition plus "each choice equals the value
the implementation took" (read from the run's results). A solution gives new arguments and
initial state in which that choice is on the path (lookup's argument becomes another id),
written as a new test. Where no arguments and state put the choice on the path, the
result is counted as not refinable, with why.

Reads ``DIR/tests.jsonl``, ``DIR/trace/results.jsonl`` and ``DIR/analysis/``; appends the
new tests to ``DIR/tests.jsonl`` (each says which tests it refines and which choice it
fixes, docs/format-tests.md) and records the counts in ``DIR/testgen.json``.
``scalecheck run DIR`` then runs only the new tests: the results of the others are kept.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import z3

from scalecheck.common import rundir_lock
from scalecheck.common.errors import UserError
from scalecheck.common.output import stdout_console
from scalecheck.common.progress import stage_progress
from scalecheck.common.storage import read_json, write_json_atomically
from scalecheck.engine import deadline
from scalecheck.formats.analysisfile import pair_file, read_analysis_meta
from scalecheck.formats.resultsfile import load_run
from scalecheck.formats.testfile import file_hash, read_tests, write_tests
from scalecheck.interfaces.loading import load_model
from scalecheck.testgen import allowed, patterns, testgen

LEFT_PATH = "left_path"
# testgen.json: the counts of the last refinement.
REFINED = "refined_left_path"


def register(subparsers) -> None:
    """Adds --refine-left-path to ``scalecheck testgen`` (registered before this): a run's
    results are refined by the stage that makes tests, but testgen's module stays free of
    the run's files."""
    parser = subparsers.choices["testgen"]
    generate = parser.get_default("func")
    parser.add_argument(
        "--refine-left-path",
        action="store_true",
        help="instead of generating tests: for each result of DIR's run that left its test's "
        "path (a legal choice the path excluded), add a test of that path with the "
        "implementation's choice fixed to DIR/tests.jsonl; `scalecheck run DIR` then runs "
        "only the new tests",
    )
    parser.set_defaults(
        func=lambda args: run(args) if args.refine_left_path else _keeping_refined(generate, args)
    )


def _keeping_refined(generate, args) -> int:
    """``scalecheck testgen DIR``, keeping the tests refined before when it writes the
    generated tests as they were (same analysis, caps and generator): their results in
    DIR's run stay valid, and a run then has nothing new to do."""
    kept, counts = [], None
    if testgen.current_tests(args.dir, args.cap, args.value_cap) is not None:
        kept = [t for t in read_tests(args.dir / "tests.jsonl")[1] if "refines" in t]
        counts = read_json(args.dir / "testgen.json").get(REFINED)
    code = generate(args)
    if kept:
        _append(args.dir, kept, counts)
    return code


def run(args) -> int:
    summary = refine_left_path(args.dir)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print_summary(summary)
    return 1 if summary["unknown"] else 0


class RefinablePath:
    """One path of the analysis, ready for queries: its solver (the path's condition),
    observed terms and choices."""

    def __init__(self, path: dict, context: z3.Context):
        self.path = path
        self.solver = deadline.Solver(deadline.QUERY_LIMIT_MS, ctx=context)
        self.solver.from_string(path["smt2"])
        self.terms = patterns.ObservedTerms(self.solver)
        observations = path["observations"]
        self.choices = allowed.PathChoices(
            self.solver.assertions(),
            self.terms,
            list(patterns.all_observations(observations)),
            observations["results"],
        )

    def observed_choice(self, record: dict) -> dict | None:
        """The value of each choice the path's results show as is, as the run's results
        of ``record`` show it (name -> value); None where they show none in the model's
        shape (a binding that rewrites results). The other results are not compared: off
        the path they differ (lookup finds the id alloc took)."""
        order = record["results"].get("expected_order")
        if order not in ("ab", "ba"):
            return None
        shape = self.path["observations"]["results"][order.upper()]
        found: dict[str, int] = {}
        self._read_choices(shape, [record["results"]["a"], record["results"]["b"]], found)
        return found or None

    def _read_choices(self, shape, got, found: dict) -> None:
        if isinstance(shape, dict) and "obs" in shape:
            term = self.terms[shape["obs"]]
            if (
                shape["chosen"]
                and z3.is_const(term)
                and term.decl().name() in self.choices.visible
                and isinstance(got, int)
                and not isinstance(got, bool)
            ):
                found[term.decl().name()] = got
        elif isinstance(shape, dict) and isinstance(got, dict):
            for key in shape.keys() & got.keys():
                self._read_choices(shape[key], got[key], found)
        elif isinstance(shape, list) and isinstance(got, list) and len(got) == len(shape):
            for item_shape, item in zip(shape, got, strict=True):
                self._read_choices(item_shape, item, found)

    def solve_fixed(self, fixed: dict) -> tuple[z3.CheckSatResult, list | None]:
        """The refine query: the path's condition with each choice of ``fixed`` bound to its
        value. (sat, the terms' values) where some arguments and state put that choice on
        the path; (unsat, None) where none do; (unknown, None) where Z3 cannot tell."""
        visible = self.choices.visible
        self.solver.push()
        try:
            self.solver.add(*(visible[name] == value for name, value in fixed.items()))
            answer = self.solver.check()
            if answer != z3.sat:
                return answer, None
            return answer, self.terms.values(self.solver.model())
        finally:
            self.solver.pop()

    def test(self, model_cls, ops, values: list) -> dict:
        tests = testgen.ConcreteTests(model_cls, ops, self.path)
        return tests.test(values, self.choices.test_outcomes(values))


@rundir_lock.holding("out")
def refine_left_path(out: Path, quiet: bool = False) -> dict:
    """Appends to ``out``'s tests one test per (path, fixed choice) of the run's left-path
    results not refined before, and returns the counts (see print_summary)."""
    run = load_run(out)
    meta = read_analysis_meta(out)
    model_cls = load_model(meta["model"])
    _check_current(out)
    refined_before = {
        test_id for test in run.tests for test_id in test.get("refines", {}).get("tests", [])
    }
    left = [
        run.results[test["id"]]
        for test in run.tests
        if run.results.get(test["id"], {}).get("status") == LEFT_PATH
    ]
    pending = [record for record in left if record["id"] not in refined_before]
    groups, paths, not_refinable = _choices(out, run.tests, pending, quiet)
    new_tests, unknown = [], []
    numbers = _next_numbers(run.tests)
    for (pair, path_number, choice), test_ids in groups.items():
        path = paths[(pair, path_number)]
        answer, values = path.solve_fixed(dict(choice))
        if answer == z3.unknown:
            unknown += [{"test": test_id, "choice": dict(choice)} for test_id in test_ids]
            continue
        if values is None:
            not_refinable += [
                {"test": test_id, "why": f"no arguments or state put {dict(choice)} on the path"}
                for test_id in test_ids
            ]
            continue
        test = path.test(model_cls, pair, values)
        prefix = f"{pair[0]}-{pair[1]}/p{path_number}/r"
        numbers[prefix] += 1
        test["id"] = f"{prefix}{numbers[prefix]}"
        test["refines"] = {"tests": test_ids, "choice": dict(choice)}
        new_tests.append(test)
    summary = {
        "left_path": len(left),
        "already_refined": len(left) - len(pending),
        "refined": sum(len(t["refines"]["tests"]) for t in new_tests),
        "new_tests": [{"id": t["id"], **t["refines"]} for t in new_tests],
        "not_refinable": not_refinable,
        "unknown": unknown,
    }
    counts = {
        "left_path": len(left),
        "refined": summary["refined"],
        "new_tests": len(new_tests),
        "not_refinable": len(not_refinable),
        "unknown": len(unknown),
    }
    _append(out, new_tests, counts)
    return summary


def _check_current(out: Path) -> None:
    """Paths are found by number in the analysis: it must be the one the tests came from."""
    tests_path = out / "tests.jsonl"
    header, _ = read_tests(tests_path)
    if testgen.current_tests(out, header.get("cap", 0), header.get("value_cap", 0)) is None:
        raise UserError(
            f"{tests_path} is not the file testgen made from {out}/analysis (the analysis, the "
            "generator or the file changed since): rerun `scalecheck testgen` and the run"
        )


def _choices(out: Path, tests: list, pending: list, quiet: bool) -> tuple[dict, dict, list]:
    """The pending tests grouped by (pair, path, the choice their results show), the paths
    loaded for it, and the tests whose results show no choice the model makes."""
    by_test = {test["id"]: test for test in tests}
    groups: dict[tuple, list[str]] = defaultdict(list)  # (pair, path, choice) -> test ids
    not_refinable: list[dict] = []
    paths: dict[tuple, RefinablePath] = {}
    with stage_progress("refine", quiet) as progress:
        task = progress.add_task("", total=len(pending))
        for record in pending:
            test = by_test[record["id"]]
            key = (tuple(test["pair"]), test["path"])
            if key not in paths:
                paths[key] = _load_path(out, key, z3.Context())
            choice = paths[key].observed_choice(record)
            if choice is None:
                why = "its results do not show the choice as the model does"
                not_refinable.append({"test": test["id"], "why": why})
            else:
                groups[(*key, tuple(sorted(choice.items())))].append(test["id"])
            progress.update(task, advance=1, description=test["id"])
    return groups, paths, not_refinable


def _load_path(out: Path, key: tuple, context: z3.Context) -> RefinablePath:
    (a, b), number = key
    analysis = read_json(pair_file(out, a, b))
    for path in analysis["paths"]:
        if path["path"] == number:
            return RefinablePath(path, context)
    raise UserError(f"{out}: the analysis of {a} || {b} has no path {number}: rerun testgen")


def _next_numbers(tests: list[dict]) -> defaultdict:
    """Per id prefix ``<pair>/p<path>/r``, the highest refinement number in use."""
    numbers: defaultdict[str, int] = defaultdict(int)
    for test in tests:
        prefix, _, number = test["id"].rpartition("/r")
        if "refines" in test and number.isdigit():
            numbers[prefix + "/r"] = max(numbers[prefix + "/r"], int(number))
    return numbers


def _append(out: Path, new_tests: list[dict], counts: dict | None) -> None:
    """Appends ``new_tests`` to the tests file, and records in testgen.json the file as it
    is now (so that `pipeline` keeps it) and the counts of the last refinement."""
    tests_path = out / "tests.jsonl"
    header, tests = read_tests(tests_path)
    header = {key: value for key, value in header.items() if key not in ("format", "version")}
    write_tests(tests_path, header, tests + new_tests)
    record_path = out / "testgen.json"
    record = read_json(record_path)
    record[testgen.TESTS_HASH] = file_hash(tests_path)
    if counts is not None:
        record[REFINED] = counts
    write_json_atomically(record_path, record)


def print_summary(summary: dict) -> None:
    console = stdout_console()
    for item in summary["new_tests"]:
        choice = ", ".join(f"{name} = {value}" for name, value in item["choice"].items())
        console.print(f"new test {item['id']}: {choice}, refines {', '.join(item['tests'])}")
    for item in summary["not_refinable"]:
        console.print(f"not refinable: {item['test']}: {item['why']}")
    for item in summary["unknown"]:
        console.print(f"[red]unknown:[/red] {item['test']}: Z3 could not tell for {item['choice']}")
    console.print(
        f"{summary['left_path']} results left their path ({summary['already_refined']} refined "
        f"before): {summary['refined']} refined into {len(summary['new_tests'])} new tests, "
        f"{len(summary['not_refinable'])} not refinable, {len(summary['unknown'])} unknown"
    )
