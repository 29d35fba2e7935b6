"""What testgen computes per test and per path, on small hand-made paths (real Z3): the
outcomes each legal choice allows (allowed.PathChoices), the constants a term names, and
the value patterns that --value-cap 1 switches off."""

import z3

from scalecheck.testgen import allowed, patterns, testgen, z3_c_api


def _path():
    """A path where A's call returns a chosen fd ``c`` (any fd in [0, 3) not open) and two
    chosen values that results show through a sum (so not as is): ``c2`` is 20 when c
    is 0, ``c3`` is never fixed. The world: A's fd argument ``x`` and which fds are open;
    the path also assumes c != x + 1."""
    open_ = z3.Function("open", z3.IntSort(), z3.BoolSort())
    x, c, c2, c3 = z3.Ints("A.fd choice.c choice.c2 choice.c3")
    terms = [x, open_(0), open_(1), open_(2), c, c2 + 0, c3 + 0]
    assertions = [
        z3.And(c >= 0, c < 3, z3.Not(open_(c))),
        z3.Implies(c == 0, c2 == 20),
        c != x + 1,
    ]
    world = [{"obs": i, "chosen": False} for i in range(4)]
    chosen = [{"obs": i, "chosen": True} for i in (4, 5, 6)]
    results = {"AB": chosen, "BA": chosen}
    return allowed.PathChoices(assertions, terms, world + chosen, results)


def test_each_tests_own_world_decides_its_legal_choices():
    choices = _path()
    assert list(choices.visible) == ["choice.c"]
    # fds 0 and 2 are free: c = 0 stays on the path, c = 2 = x + 1 leaves it.
    on_path, left, shown = choices.test_outcomes([1, False, True, False, 0, 0, 0])
    assert on_path == [{"AB": [0, 20, "*"], "BA": [0, 20, "*"]}]
    assert left == [{"AB": [2, "*", "*"], "BA": [2, "*", "*"]}]
    assert shown == [{"AB": [v, "*", "*"], "BA": [v, "*", "*"]} for v in (0, 2)]
    # The same path, another test: fd 0 is open now, so only 2 is legal (legal choices
    # depend on the world through the open table, not only on the choice's own bounds).
    on_path, left, shown = choices.test_outcomes([1, True, True, False, 0, 0, 0])
    assert on_path == []
    assert shown == left == [{"AB": [2, "*", "*"], "BA": [2, "*", "*"]}]
    # And with x = 0, both free fds stay on the path, in order of the fd.
    on_path, left, _shown = choices.test_outcomes([0, False, True, False, 0, 0, 0])
    assert on_path == [
        {"AB": [0, 20, "*"], "BA": [0, 20, "*"]},
        {"AB": [2, "*", "*"], "BA": [2, "*", "*"]},
    ]
    assert left == []


def test_legal_choices_are_found_once_per_values_of_the_world_they_depend_on(monkeypatch):
    """The legal choices depend on the open table (``open`` is applied to the choice),
    not on the unrelated ``B.len``: tests that differ only there share one enumeration;
    a test with another open table gets its own."""
    choices = _path()
    length = z3.Int("B.len")
    choices.terms.append(length)
    choices.world_terms.append(len(choices.terms) - 1)
    found = []
    enumerate_ = allowed._legal_assignments
    monkeypatch.setattr(
        allowed, "_legal_assignments", lambda *args: found.append(1) or enumerate_(*args)
    )
    free_0_and_2 = [1, False, True, False, 0, 0, 0]
    first = choices.test_outcomes([*free_0_and_2, 5])
    assert choices.test_outcomes([*free_0_and_2, 7]) == first
    assert len(found) == 1
    _, _, shown = choices.test_outcomes([1, True, True, False, 0, 0, 0, 5])
    assert shown == [{"AB": [2, "*", "*"], "BA": [2, "*", "*"]}] and len(found) == 2


def test_tied_terms_are_those_linked_to_the_functions_by_shared_symbols():
    world = {0: {"x"}, 1: {"f", "y"}, 2: {"y", "x"}, 3: {"z"}, 4: {"g", "z"}}
    assert allowed._tied_terms({"f"}, world) == [0, 1, 2]
    assert allowed._tied_terms(set(), world) == []


def test_a_path_without_a_visible_choice_has_no_outcomes():
    x = z3.Int("A.fd")
    choices = allowed.PathChoices([x > 0], [x], [{"obs": 0, "chosen": False}], {"AB": []})
    assert choices.visible == {} and choices.on_choices_alone == []
    assert choices.test_outcomes([1]) is None


def test_constant_names_are_those_of_a_python_walk():
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    a, b, c = z3.Ints("a b c")
    shared = f(a + 1)
    term = z3.And(shared == b, z3.Or(shared > 2, c == 3), z3.BoolVal(True))
    names = allowed.ConstantNames(term.ctx)
    assert names.of(term) == ({"a", "b", "c"}, {"f"})
    assert names.of(z3.IntVal(4) + 1) == (set(), set())
    assert names.of(f(a) > a) == ({"a"}, {"f"})
    assert names.of(term) == ({"a", "b", "c"}, {"f"})  # walked once, kept


class FailingSolver:
    """A fake solver for a unit test: any check fails the test."""

    def check(self):
        raise AssertionError("value-cap 1 asked the solver")

    def push(self):
        raise AssertionError("value-cap 1 asked the solver")


def test_value_cap_one_asks_the_solver_nothing():
    x, y = z3.Ints("A.v B.v")
    pattern = patterns.ValuePattern([x, y], [(0, 1, None)])
    values = [1, 2]
    variants, capped = patterns.value_variants(
        FailingSolver(), None, pattern, values, None, value_cap=1
    )
    assert variants == [values] and capped is False


def test_pairs_start_largest_analysis_first_and_the_file_keeps_model_order(tmp_path, monkeypatch):
    from scalecheck.cli import main
    from scalecheck.common.parallel import map_unordered
    from scalecheck.formats.analysisfile import pair_file
    from scalecheck.formats.testfile import read_tests

    assert main(["analyze", "--model", "counter", "--out", str(tmp_path), "--jobs", "1"]) == 0
    started = []

    def recording_map(function, work, jobs):
        """The real map_unordered, recording the order pairs are handed out."""
        started.extend((a, b) for _model, _out, a, b, *_ in work)
        yield from map_unordered(function, list(reversed(work)), jobs)

    monkeypatch.setattr(testgen, "map_unordered", recording_map)
    testgen.generate_tests(tmp_path, jobs=1, quiet=True)
    sizes = [pair_file(tmp_path, a, b).stat().st_size for a, b in started]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) > 1
    _header, tests = read_tests(tmp_path / "tests.jsonl")
    ops = ["inc", "dec", "iszero"]
    order = [(ops.index(t["pair"][0]), ops.index(t["pair"][1])) for t in tests]
    assert order == sorted(order)


def test_term_text_prints_as_python_does_and_once_per_term():
    context = z3.Context()
    f = z3.Function("inodes.length", z3.IntSort(context), z3.IntSort(context))
    term = f(z3.Int("A.pn", context)) + 1
    text = patterns.TermText()
    assert text(term) == str(term)
    # The same term parsed again (another path of the pair) is the same node: not printed again.
    again = z3.parse_smt2_string(
        "(declare-fun |inodes.length| (Int) Int) (declare-const |A.pn| Int)"
        "(assert (= (+ (|inodes.length| |A.pn|) 1) 0))",
        ctx=context,
    )[0].arg(0)
    assert again.get_id() == term.get_id()
    text._printed[term.get_id()] = (term, "printed before")
    assert text(again) == "printed before"


def test_term_text_reuses_the_text_of_the_same_term_of_another_pair(monkeypatch):
    def term(context):
        f = z3.Function("procs[0].fds.off", z3.IntSort(context), z3.IntSort(context))
        return f(z3.Int("B.fd", context)) == z3.Int("B.off", context)

    first, second = term(z3.Context()), term(z3.Context())
    assert patterns.TermText()(first) == str(first)
    monkeypatch.setitem(patterns.TermText._by_smtlib, first.sexpr(), "printed for another pair")
    assert patterns.TermText()(second) == "printed for another pair"
    # Terms that print differently have other SMT-LIB texts (sorts show in numerals).
    x, r = z3.Int("x"), z3.Real("x")
    samples = [x + 1, r + 1, z3.If(x > 0, x, -x), z3.Not(x == 1), z3.Distinct(x, x + 1)]
    text = patterns.TermText()
    assert [text(t) for t in samples] == [str(t) for t in samples]


def test_equalities_through_the_c_api_are_z3s_own_terms():
    """z3_c_api.equal/differ make the very terms of z3's == and != in the same order (a
    fresh numeral first): the same history in two fresh contexts, one through z3's
    operators and one through the C API, gives every term the same id (ids steer the
    solutions found after), for a term against a term, a numeral, an int and a bool."""

    def history(eq, ne) -> list[int]:
        context = z3.Context()
        x, y = z3.Ints("x y", context)
        flag = z3.Bool("flag", context)
        zero = z3.IntVal(0, context)  # a numeral: z3's operator is its own, reflected
        made = []
        for term, other in [(x, y), (x, zero), (x, 7), (flag, True), (flag, False)]:
            made += [eq(term, other), ne(term, other)]
        made += [eq(y, 123456789)]
        assert [made[2].arg(0).get_id(), made[-1].arg(1).as_long()] == [zero.get_id(), 123456789]
        return [term.get_id() for term in made] + [made[-1].arg(1).get_id()]

    by_z3 = history(lambda a, b: a == b, lambda a, b: a != b)
    assert history(z3_c_api.equal, z3_c_api.differ) == by_z3
    assert len(set(by_z3)) == len(by_z3)  # eleven literals and a numeral, each its own term


def test_raw_readers_of_nodes_agree_with_z3s_python_api():
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    a, b = z3.Ints("a b")
    flag = z3.Bool("flag")
    term = z3.If(flag, f(a), b + 1) == b
    ref = term.ctx.ref().value
    node = term.as_ast()
    assert z3_c_api.ast_id(ref, node) == term.get_id()
    assert z3_c_api.ast_kind(ref, node) == z3.Z3_APP_AST
    args = z3_c_api.app_args(ref, node)
    assert [z3_c_api.ast_id(ref, arg) for arg in args] == [c.get_id() for c in term.children()]
    assert z3_c_api.decl_kind(ref, z3_c_api.app_decl(ref, node)) == z3.Z3_OP_EQ
    assert not z3_c_api.is_bool(ref, args[0])
    condition = z3_c_api.app_arg(ref, args[0], 0)
    assert z3_c_api.is_bool(ref, condition)
    assert z3_c_api.decl_name(ref, z3_c_api.app_decl(ref, condition)) == "flag"
    assert z3.BoolRef(condition, term.ctx).eq(flag)  # z3's classes take the node as it is
    assert z3_c_api.ast_kind(ref, z3.IntVal(3).as_ast()) == z3.Z3_NUMERAL_AST
