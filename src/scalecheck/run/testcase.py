"""A test as the run stage holds it (read from ``tests.jsonl``, docs/format-tests.md), and
whether a target's results fit one of the orders the model allows. Every target reads its
tests through here; each renders them in its own terms (run/linux/guest_render.py,
run/user/program_worker.py).
"""

from dataclasses import dataclass
from pathlib import Path

from scalecheck.formats import testfile as shared_testfile


@dataclass
class Test:
    id: str
    pair: list
    raw: dict


class UnsupportedTest(Exception):
    """A test the driver cannot build from what it says; reported as status "error"."""


class NotRunnable(UnsupportedTest):
    """A well-formed test this target cannot run by its nature (exec || exec in one process
    on the guest driver): status "unsupported", counted apart with the reason, and no
    reason for `run` to exit non-zero."""


def read_tests(path: Path):
    """Returns (header, [Test]); raises UserError on a file that is not a tests file."""
    header, tests = shared_testfile.read_tests(path)
    return header, [from_dict(test) for test in tests]


def from_dict(test: dict) -> Test:
    """A test as the tests file holds it, as the targets take it."""
    return Test(test["id"], test.get("pair") or [call.get("op") for call in test["calls"]], test)


def result_matches(actual, expected) -> bool:
    """Structural equality where an expected "*" matches anything."""
    if expected == "*":
        return True
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(result_matches(actual[k], expected[k]) for k in expected)
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(result_matches(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return actual == expected


# How a test's results stand against its model (docs/format-tests.md, docs/format-results.md).
ON_PATH, LEFT_PATH, MISMATCH = "ok", "left_path", "mismatch"


def check_results(test: Test, results_a, results_b) -> tuple[str | None, str]:
    """(order, verdict): the order ("ab" or "ba") whose allowed results match, and
    ON_PATH, or LEFT_PATH where they match only a legal choice that leaves the path the
    test was made for; (None, MISMATCH) where the model allows neither.

    A test with ``outcomes`` (one per legal choice, docs/format-tests.md) is checked
    against those, then its ``left_path``. A choice the model's bounded domain does not
    hold (an fd or an address beyond the keys it models, which the interface allows) fits
    none of its ``choices``: such results are checked against ``expect``, whose "*" takes
    any choice, as a test without outcomes is."""
    raw = test.raw
    for verdict, outcomes in (
        (ON_PATH, raw.get("outcomes", [])),
        (LEFT_PATH, raw.get("left_path", [])),
    ):
        order = _matching_order(outcomes, results_a, results_b)
        if order:
            return order, verdict
    if "outcomes" in raw and _matching_order(raw.get("choices", []), results_a, results_b):
        return None, MISMATCH  # a choice the model lists, and results it does not allow
    order = _matching_order([raw.get("expect") or {}], results_a, results_b)
    return (order, ON_PATH) if order else (None, MISMATCH)


def _matching_order(outcomes: list, results_a, results_b) -> str | None:
    for expect in outcomes:
        for order in ("ab", "ba"):
            want = expect.get(order)
            if (
                isinstance(want, list)
                and len(want) == 2
                and result_matches(results_a, want[0])
                and result_matches(results_b, want[1])
            ):
                return order
    return None
