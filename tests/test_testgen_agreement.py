"""bench/testgen_agreement.py's coverage measures: the value patterns a path's tests
cover, and the counts per pair of two testgen.json summaries."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import testgen_agreement  # noqa: E402


def _test(path: int, values: list[str], **extra) -> dict:
    return {"id": "", "pair": ["set", "set"], "path": path, "values": values, **extra}


def test_a_path_that_lacks_a_value_pattern_the_old_tests_covered_is_named():
    equal, differ = ["A.value == B.value"], ["A.value != B.value"]
    old = [_test(0, equal), _test(0, differ), _test(1, equal)]
    # Path 0 covers both patterns again (other tests, another order); path 1 only covers
    # the other pattern, and a test made for an open equality's side does not count.
    new = [_test(0, differ), _test(0, equal), _test(0, differ), _test(1, differ)]
    new.append(_test(1, equal, covers="A.key == B.key"))
    assert testgen_agreement.lost_value_patterns(old, new) == [["set", "set", 1, 1]]
    assert testgen_agreement.lost_value_patterns(old, old + new) == []


def _summary(capped: int, both_ways: int) -> dict:
    counts = dict.fromkeys(testgen_agreement.PAIR_COUNTS, 0)
    open_equalities = {"found": 4, "both_ways": both_ways, "infeasible_one_way": 0}
    row = {**counts, "capped_paths": capped, "open_equalities": open_equalities}
    return {"pairs": [{"pair": ["set", "get"], **row}]}


def test_pair_counts_that_differ_are_listed_with_both_values():
    same = testgen_agreement.pair_count_differences(_summary(2, 4), _summary(2, 4))
    assert same == []
    assert testgen_agreement.pair_count_differences(_summary(2, 4), _summary(3, 3)) == [
        ["set-get", "capped_paths", 2, 3],
        ["set-get", "open_equalities.both_ways", 4, 3],
    ]


def test_pairs_with_a_capped_path_or_class_are_told_apart():
    summary = _summary(0, 4)
    summary["pairs"].append({**summary["pairs"][0], "pair": ["get", "get"], "capped_paths": 1})
    summary["pairs"].append({**summary["pairs"][0], "pair": ["set", "set"]})
    summary["pairs"][-1]["value_capped_classes"] = 2
    assert testgen_agreement.capped_pairs(summary) == {("get", "get"), ("set", "set")}
