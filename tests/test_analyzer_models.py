"""Commutativity of the shipped models: answers known from the paper and the talk."""

import functools
import json

import pytest

from scalecheck.engine.commute import analyze_pair as analyze_pair_uncached
from scalecheck.interfaces.counter import RefCounter
from scalecheck.interfaces.posix import Posix
from scalecheck.interfaces.rename import RenameFS
from scalecheck.testgen.testgen import DEFAULT_VALUE_CAP, _pair_tests


@functools.cache
def analyze_pair(model_cls, a, b):
    """The posix pairs are the slow part of this file: analyse each once."""
    return analyze_pair_uncached(model_cls, a, b)


def commutative_paths(result):
    return [p for p in result["paths"] if p["commutes"]]


def test_two_iszero_always_commute():
    result = analyze_pair(RefCounter, "iszero", "iszero")
    assert all(p["commutes"] for p in result["paths"])


def test_dec_iszero_commute_except_when_count_is_one():
    result = analyze_pair(RefCounter, "dec", "iszero")
    diverging = [p for p in result["paths"] if p["commutes"] is False]
    assert len(diverging) == 1
    assert diverging[0]["condition"] == "count == 1"
    assert commutative_paths(result)


def test_inc_dec_diverge_only_at_zero():
    result = analyze_pair(RefCounter, "inc", "dec")
    assert [p["condition"] for p in result["paths"] if p["commutes"] is False] == ["count == 0"]


def test_no_path_is_lost_in_the_rename_pair():
    result = analyze_pair(RenameFS, "rename", "rename")
    assert not any(p["unknown"] or p["commutes"] is None for p in result["paths"])
    assert len(commutative_paths(result)) >= 6


@pytest.fixture(scope="module")
def rename_tests(tmp_path_factory):
    out = tmp_path_factory.mktemp("rename")
    pair_dir = out / "analysis" / "pairs"
    pair_dir.mkdir(parents=True)
    (pair_dir / "rename-rename.json").write_text(
        json.dumps(analyze_pair(RenameFS, "rename", "rename"))
    )
    _, tests, counts = _pair_tests(("rename", str(out), "rename", "rename", 8, DEFAULT_VALUE_CAP))
    assert counts["failed_paths"] == 0
    return [json.loads(json.dumps(test)) for test in tests]  # as read back from tests.jsonl


def _facts(test):
    names = test["setup"]["fname_to_inum"]
    a, b = test["calls"][0]["args"]["src"], test["calls"][0]["args"]["dst"]
    c, d = test["calls"][1]["args"]["src"], test["calls"][1]["args"]["dst"]

    def exists(name):
        return names.get(str(name), {}).get("present", False)

    def inode(name):
        return names[str(name)][""]

    return a, b, c, d, exists, inode


TALK_CASES = {
    "both sources exist and all names differ": lambda a, b, c, d, exists, inode: (
        exists(a) and exists(c) and len({a, b, c, d}) == 4
    ),
    "neither source exists": lambda a, b, c, d, exists, inode: not exists(a) and not exists(c),
    "a xor c exists, and it is not the other's destination": lambda a, b, c, d, exists, inode: (
        (exists(a) and not exists(c) and a != d) or (exists(c) and not exists(a) and c != b)
    ),
    "both calls are self-renames": lambda a, b, c, d, exists, inode: a == b and c == d,
    "one call is a self-rename of an existing file and a != c": lambda a, b, c, d, exists, inode: (
        a != c and ((a == b and exists(a)) or (c == d and exists(c)))
    ),
    "a and c are links to one inode, a != c, and b == d": lambda a, b, c, d, exists, inode: (
        exists(a) and exists(c) and a != c and b == d and inode(a) == inode(c)
    ),
}


@pytest.mark.parametrize("case", TALK_CASES)
def test_every_commuting_case_of_the_talk_has_a_test(rename_tests, case):
    assert any(TALK_CASES[case](*_facts(test)) for test in rename_tests)


def test_generated_rename_tests_really_commute(rename_tests):
    for test in rename_tests:
        assert test["expect"]["ab"] == test["expect"]["ba"]


@pytest.mark.parametrize(
    "ops", [("open", "open"), ("pipe", "pipe"), ("write", "read"), ("mmap", "memwrite")]
)
def test_posix_pairs_explore_without_unknowns_or_model_errors(ops):
    result = analyze_pair(Posix, *ops)
    assert result["paths"]
    assert not [p for p in result["paths"] if p["unknown"] or p["commutes"] is None]
    assert commutative_paths(result) and [p for p in result["paths"] if p["commutes"] is False]


def _tests_for(model_cls, tmp_path, a, b, cap=4):
    pair_dir = tmp_path / "analysis" / "pairs"
    pair_dir.mkdir(parents=True, exist_ok=True)
    (pair_dir / f"{a}-{b}.json").write_text(json.dumps(analyze_pair(model_cls, a, b)))
    _, tests, counts = _pair_tests(("posix", str(tmp_path), a, b, cap, DEFAULT_VALUE_CAP))
    assert counts["failed_paths"] == 0 and counts["unknown_paths"] == 0
    return tests


def test_two_lowest_fd_opens_in_one_process_never_both_succeed_in_a_commuting_test(tmp_path):
    tests = _tests_for(Posix, tmp_path, "open", "open")
    assert tests
    for test in tests:
        a, b = test["calls"]
        lowest_fd_same_process = (
            a["proc"] == b["proc"] and not a["args"]["anyfd"] and not b["args"]["anyfd"]
        )
        both_succeed = all("ret" in result for result in test["expect"]["ab"])
        assert not (lowest_fd_same_process and both_succeed), test["id"]
    assert any(
        t["calls"][0]["args"]["anyfd"]
        and t["calls"][1]["args"]["anyfd"]
        and t["calls"][0]["proc"] == t["calls"][1]["proc"]
        and all("ret" in r for r in t["expect"]["ab"])
        for t in tests
    ), "O_ANYFD opens must commute"


def test_posix_tests_build_consistent_setups(tmp_path):
    for test in _tests_for(Posix, tmp_path, "link", "unlink") + _tests_for(
        Posix, tmp_path, "read", "write"
    ):
        setup = test["setup"]
        for inode in set(setup["files"].values()):
            names = sum(1 for value in setup["files"].values() if value == inode)
            assert setup["inodes"][inode]["nlink"] >= names, test["id"]
        for proc in setup["procs"]:
            for fd, entry in proc["fds"].items():
                assert int(fd) >= 10
                assert ("file" in entry and entry["file"] < len(setup["inodes"])) or (
                    "pipe" in entry and entry["pipe"] < len(setup["pipes"])
                )
        assert test["expect"]["ab"] == test["expect"]["ba"]
