"""A pair's condition: short, labelled, and exactly the union of its commutative paths."""

import functools
import json

import pytest
import z3

from scalecheck.cli import main
from scalecheck.engine.commute import analyze_pair, explore_pair
from scalecheck.engine.conditions import Region, pair_conditions, recheck
from scalecheck.engine.sexpr import show
from scalecheck.interfaces.counter import RefCounter
from scalecheck.interfaces.posix import Posix
from scalecheck.interfaces.rename import RenameFS
from scalecheck.model import (
    Array,
    Bool,
    Dict,
    Int,
    Model,
    Uninterpreted,
    error,
    ok,
    operation,
)
from scalecheck.report.html_page import _heat_cell, commute_conditions
from scalecheck.report.stats import Counts

# ---------------------------------------------------------------- small models of our own

Key = Uninterpreted("Key")
Value = Uninterpreted("Value")


class KeyValue(Model):
    def __init__(self):
        self.store = Dict(Key, Value).any()

    @operation(k=Key, v=Value)
    def put(self, k, v):
        self.store[k] = v
        return ok()


class BoundedQueue(Model):
    def __init__(self):
        self.items = Array(Value, 3).any()
        self.length = Int(0, 3).any()

    @operation(x=Value)
    def enqueue(self, x):
        if self.length == 3:
            return error("EFULL")
        self.items[self.length] = x
        self.length += 1
        return ok()


@functools.cache
def conditions(model_cls, a, b):
    return analyze_pair(model_cls, a, b)["conditions"]


def stored_formula(condition: dict) -> z3.BoolRef:
    (formula,) = z3.parse_smt2_string(condition["smt2"])  # the condition is one assertion
    return formula


def disjuncts(condition: dict) -> list:
    formula = stored_formula(condition)
    return list(formula.children()) if z3.is_or(formula) else [formula]


def equivalent(a, b, *facts) -> bool:
    solver = z3.Solver()
    solver.add(*facts, a != b)
    return solver.check() == z3.unsat


class NameSet(Model):
    """Adding a name that is there already fails: two adds of one new name diverge."""

    def __init__(self):
        self.names = Dict(Key, Bool()).any()

    @operation(k=Key)
    def add(self, k):
        if k in self.names:
            return error("EEXIST")
        self.names[k] = True
        return ok()


# ---------------------------------------------------------------- known answers


def test_counter_inc_iszero_commutes_when_count_is_not_zero():
    result = conditions(RefCounter, "inc", "iszero")
    assert result["commutes"]["text"] == "count != 0"
    assert result["diverges"]["text"] == "count == 0"
    assert result["commutes"]["cases"][0]["label"] == "both succeed"
    assert result["commutes"]["cases"][0]["results"] == {"A first: A": "ok", "A first: B": "ok"}


def test_always_and_never_print_as_words():
    result = conditions(RefCounter, "iszero", "iszero")
    assert result["commutes"]["text"] == "always"
    assert result["diverges"]["text"] == "never"
    assert result["diverges"]["cases"] == []


def test_key_value_puts_commute_when_keys_differ_or_values_are_equal():
    result = conditions(KeyValue, "put", "put")
    assert sorted(case["text"] for case in result["commutes"]["cases"]) == [
        "A.k != B.k",
        "A.v == B.v",
    ]
    assert result["commutes"]["text"] == "[both succeed] A.k != B.k\n[both succeed] A.v == B.v"


def test_bounded_queue_enqueues_commute_when_full_or_the_items_are_equal():
    result = conditions(BoundedQueue, "enqueue", "enqueue")
    length, a_x, b_x = z3.Ints("length A.x B.x")
    expected = z3.Or(length == 3, z3.And(length != 2, a_x == b_x))
    assert equivalent(stored_formula(result["commutes"]), expected, length >= 0, length <= 3)
    assert {case["label"] for case in result["commutes"]["cases"]} >= {"both fail with EFULL"}
    assert result["commutes"]["figures"]["atoms"] <= 3


# The talk's six cases of rename(a, b) || rename(c, d), in the model's vocabulary.
a, b, c, d = z3.Ints("A.src A.dst B.src B.dst")
present = z3.Function("fname_to_inum.present", z3.IntSort(), z3.BoolSort())
inum = z3.Function("fname_to_inum", z3.IntSort(), z3.IntSort())
TALK_CASES = {
    "both sources exist, all names differ": z3.And(present(a), present(c), z3.Distinct(a, b, c, d)),
    "neither source exists": z3.And(z3.Not(present(a)), z3.Not(present(c))),
    "only a exists, c is not A's destination": z3.And(present(a), z3.Not(present(c)), c != b),
    "only c exists, a is not B's destination": z3.And(present(c), z3.Not(present(a)), a != d),
    "both self-renames": z3.And(a == b, c == d),
    "A self-renames an existing file, a != c": z3.And(present(a), a == b, a != c),
    "B self-renames an existing file, a != c": z3.And(present(c), c == d, a != c),
    # hard links: neither call is a self-rename (those are the cases above)
    "a and c are hard links, a != c, b == d": z3.And(
        present(a), present(c), inum(a) == inum(c), a != c, b == d, a != b, c != d
    ),
}


def test_rename_condition_is_short_and_holds_each_of_the_talks_cases():
    result = conditions(RenameFS, "rename", "rename")["commutes"]
    assert result["simplified"]
    assert len(result["cases"]) <= 8
    assert all(case["atoms"] <= 5 for case in result["cases"])
    printed = disjuncts(result)
    for name, case in TALK_CASES.items():
        assert any(equivalent(z3.Implies(case, disjunct), True) for disjunct in printed), name


def test_rename_cases_are_labelled_by_the_results_they_imply():
    result = conditions(RenameFS, "rename", "rename")
    labelled = {}
    cases = result["commutes"]["cases"]
    for case, disjunct in zip(cases, disjuncts(result["commutes"]), strict=True):
        labelled[case["label"]] = disjunct
    # a case names a result only when every path it meets gives that result
    assert equivalent(labelled["both fail with ENOENT"], TALK_CASES["neither source exists"])
    assert set(labelled) == {
        "both fail with ENOENT",
        "A fails with ENOENT",
        "B fails with ENOENT",
        "A succeeds",
        "B succeeds",
        "",  # all names differ, or self-renames: each call may or may not find its source
    }
    # A renames onto B's source: A first, B's source is there; B first, A's is gone
    onto = "A first: both succeed; B first: A succeeds, B fails with ENOENT"
    assert onto in [case["label"] for case in result["diverges"]["cases"]]


def test_name_set_adds_diverge_on_one_new_name_and_say_who_fails_in_which_order():
    result = conditions(NameSet, "add", "add")
    (case,) = result["diverges"]["cases"]
    assert case["label"] == (
        "A first: A succeeds, B fails with EEXIST; B first: A fails with EEXIST, B succeeds"
    )
    assert case["results"] == {
        "A first: A": "ok",
        "A first: B": "EEXIST",
        "B first: A": "EEXIST",
        "B first: B": "ok",
    }
    labels = sorted(case["label"] for case in result["commutes"]["cases"])
    assert labels in (["", "A fails with EEXIST"], ["", "B fails with EEXIST"])


# ---------------------------------------------------------------- exact by construction


def _recheck_pair(model_cls, a, b, **options):
    _, regions, _ = explore_pair(model_cls, a, b)
    result = pair_conditions(regions, symmetric=a == b, **options)
    return result, [recheck(regions, result, verdict) for verdict in ("commutes", "diverges")]


# A sample of the posix model's pairs (all 171 in bench/condition_quality.py): names, fds, memory,
# and lseek || lseek, whose hundreds of paths make one of the costliest constructions.
POSIX_SAMPLE = [
    ("rename", "unlink"),
    ("close", "close"),
    ("lseek", "write"),
    ("mprotect", "munmap"),
    ("lseek", "lseek"),
]


@pytest.mark.parametrize("pair", POSIX_SAMPLE, ids=" || ".join)
def test_printed_condition_is_equivalent_to_the_paths_on_posix(pair):
    result, problems = _recheck_pair(Posix, *pair)
    assert problems == ["", ""]
    assert result["commutes"]["simplified"] and result["diverges"]["simplified"]


def test_a_condition_out_of_time_is_printed_raw_and_flagged_yet_exact():
    result, problems = _recheck_pair(RenameFS, "rename", "rename", budget_seconds=0)
    assert problems == ["", ""]
    commutes = result["commutes"]
    assert not commutes["simplified"] and commutes["why"] == "out of time"
    assert commutes["figures"]["disjuncts"] == commutes["figures"]["raw_disjuncts"] == 17


def test_recheck_finds_a_wrong_condition():
    x = z3.Int("x")
    regions = [Region([x > 0], [], True, ("ok", "ok")), Region([x <= 0], [], False)]
    result = pair_conditions(regions, symmetric=False)
    assert result["commutes"]["text"] == "x > 0"
    wrong = {"commutes": {"smt2": "(declare-fun x () Int) (assert (> x 1))"}}
    assert recheck(regions, wrong, "commutes") == "commutes: misses a path"


def test_presence_prints_as_membership():
    key = z3.Int("A.src")
    assert show(present(key)) == "A.src in fname_to_inum"
    assert show(z3.Not(present(key))) == "A.src not in fname_to_inum"
    assert show(z3.Int("B.k") == z3.Int("A.k")) == "A.k == B.k"
    assert show(z3.Not(z3.Int("n") <= 2)) == "n > 2"


def test_heat_map_cells_show_the_pairs_condition(tmp_path):
    pair_dir = tmp_path / "analysis" / "pairs"
    pair_dir.mkdir(parents=True)
    (pair_dir / "inc-iszero.json").write_text(
        json.dumps({"conditions": analyze_pair(RefCounter, "inc", "iszero")["conditions"]})
    )
    # the report may list a pair in the other order than the model does
    conditions = commute_conditions(tmp_path, [("iszero", "inc"), ("inc", "inc")])
    assert conditions == {("iszero", "inc"): "count != 0"}
    cell = _heat_cell(("iszero", "inc"), Counts(tests=2), conditions[("iszero", "inc")])
    assert "commutes: count != 0" in cell
    # several cases: one per line, each with its label
    put = analyze_pair(KeyValue, "put", "put")["conditions"]["commutes"]["text"]
    cell = _heat_cell(("put", "put"), Counts(tests=1), put)
    assert "commutes:\n[both succeed] A.k != B.k\n[both succeed] A.v == B.v" in cell


def test_analyze_conditions_prints_each_pair_and_the_totals(tmp_path, capsys):
    args = ["analyze", "--model", "counter", "--out", str(tmp_path), "--jobs", "1"]
    assert main([*args, "--conditions"]) == 0
    out = capsys.readouterr().out
    assert "== inc || iszero: 1 of 2 paths commute" in out
    assert "  commutes (1 case, 1 atom; raw: 1 path, 2 atoms): count != 0" in out
    assert "== iszero || iszero: 1 of 1 paths commute\n  commutes always\n  diverges never" in out
    assert "pairs left unsimplified: none" in out
    summary = json.loads((tmp_path / "analysis" / "summary.json").read_text())
    assert summary["conditions"]["unsimplified_pairs"] == []
    assert (
        summary["conditions"]["commutes"]["atoms"] < summary["conditions"]["commutes"]["raw_atoms"]
    )
