"""Reads a run directory's ``tests.jsonl`` and ``trace/results.jsonl`` (format version 1).

The report reads nothing else, so every check of those two files lives here: a bad file
stops the report with a one-line ``UserError`` naming the file and line.
"""

import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.storage import damaged_note
from scalecheck.formats.testfile import content_hash, read_jsonl, read_tests

RESULTS_FORMAT = "scalecheck-results"
KNOWN_VERSION = 1

RAN_STATUSES = {"ok", "left_path", "mismatch"}
NOT_RUN_STATUSES = {"timeout", "crash", "error"}
CONFLICT_KINDS = {"static", "percpu", "heap", "user", "pagetable", "unknown"}


@dataclass
class Run:
    """One run directory: its generated tests (in file order) and the traced results."""

    directory: Path
    model: str
    ops: list[str]  # the model's operations, in order of first appearance
    tests: list[dict]
    results: dict[str, dict]  # test id -> its line of results.jsonl
    results_header: dict
    damaged_lines: list[int] = field(default_factory=list)  # lines of results.jsonl skipped

    @property
    def implementation(self) -> str:
        """What ran the tests: "library" (`--target lib:`) or "kernel"."""
        return "library" if "library" in self.results_header else "kernel"

    @property
    def kernel_name(self) -> str:
        kernel = self.results_header.get("kernel") or {}
        return kernel.get("release") or self.results_header.get("target") or "unknown kernel"

    @cached_property
    def _op_index(self) -> dict[str, int]:
        return {op: index for index, op in enumerate(self.ops)}

    def pair_of(self, test: dict) -> tuple[str, str]:
        """Pairs are unordered: the operation that comes first in the model comes first."""
        first, second = sorted(test["pair"], key=self._op_index.__getitem__)
        return first, second


def load_run(directory) -> Run:
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: no such directory")
    tests_path = directory / "tests.jsonl"
    results_path = directory / "trace" / "results.jsonl"
    if not tests_path.is_file():
        raise UserError(f"{tests_path}: not found; run `scalecheck testgen {directory}` first")
    if not results_path.is_file():
        raise UserError(
            f"{results_path}: not found; run `scalecheck run --target linux {directory}` first"
        )

    tests_header, tests = read_tests(tests_path)
    for test in tests:
        _check_pair(test, f"{tests_path}: test {test['id']}")
    hashes = {test["id"]: content_hash(test) for test in tests}

    if not tests:
        raise UserError(f"{tests_path}: no tests after the header, nothing to report")

    damaged: list = []
    results_header, result_lines = read_jsonl(
        results_path, RESULTS_FORMAT, KNOWN_VERSION, damaged=damaged
    )
    if damaged:
        print(
            f"scalecheck: note: {results_path}: {damaged_note(damaged)} skipped, their tests "
            "count as not run; `scalecheck run` sets them aside and traces those tests again",
            file=sys.stderr,
        )
    results = {}
    for where, result in result_lines:
        _check_result(result, where)
        if result["id"] not in hashes:
            raise UserError(
                f"{where}: test id {result['id']!r} is not in {tests_path} "
                "(were the tests regenerated after the run?)"
            )
        # Records made before results carried their test's hash cannot be checked.
        if result.get("test_hash", hashes[result["id"]]) != hashes[result["id"]]:
            raise UserError(
                f"{where}: the result of {result['id']!r} is for another test of that id "
                f"({tests_path} was regenerated after the run); rerun `scalecheck run`"
            )
        # The file is an append-only log, so a later line about the same test supersedes.
        results[result["id"]] = result

    return Run(
        directory=directory,
        model=str(tests_header.get("model", "unknown model")),
        ops=_ops_in_order_of_appearance(tests),
        tests=tests,
        results=results,
        results_header=results_header,
        damaged_lines=[number for number, _ in damaged],
    )


def _ops_in_order_of_appearance(tests) -> list[str]:
    ops: dict = {}
    for test in tests:
        for op in test["pair"]:
            ops.setdefault(op, None)
    return list(ops)


def _require(obj: dict, key: str, kind: type, where: str):
    value = obj.get(key)
    if not isinstance(value, kind):
        raise UserError(f"{where}: field {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _check_pair(test: dict, where: str):
    pair = _require(test, "pair", list, where)
    if len(pair) != 2 or not all(isinstance(op, str) for op in pair):
        raise UserError(f"{where}: field 'pair' must be two operation names, got {pair!r}")
    for call in test["calls"]:
        if not isinstance(call, dict) or not isinstance(call.get("op"), str):
            raise UserError(f"{where}: every call must be an object with an 'op', got {call!r}")


def _check_result(result: dict, where: str):
    _require(result, "id", str, where)
    status = _require(result, "status", str, where)
    if status not in RAN_STATUSES | NOT_RUN_STATUSES:
        known = ", ".join(sorted(RAN_STATUSES | NOT_RUN_STATUSES))
        raise UserError(f"{where}: unknown status {status!r} (known: {known})")
    if status in NOT_RUN_STATUSES:
        return
    _require(result, "conflict_free", bool, where)
    for conflict in _require(result, "conflicts", list, where):
        if not isinstance(conflict, dict):
            raise UserError(f"{where}: every conflict must be an object, got {conflict!r}")
        kind = conflict.get("kind")
        if kind not in CONFLICT_KINDS:
            raise UserError(
                f"{where}: conflict kind {kind!r} is not one of {', '.join(sorted(CONFLICT_KINDS))}"
            )
        for side in ("a", "b"):
            access = _require(conflict, side, dict, where)
            pcs = access.get("pcs")
            if not isinstance(pcs, list) or not all(isinstance(pc, str) for pc in pcs):
                raise UserError(
                    f"{where}: conflict side {side!r} needs 'pcs', "
                    f"a list of code sites, got {pcs!r}"
                )
