"""The report's outputs from the hand-written fake runs in tests/data/report_fake_run_{a,b}.

Run a (kernel "6.1.0-fake-a"), 10 tests over open, stat, close:
  open-open/p1/t1   conflicting: heap line, alloc_fd(+fd_install) on both sides; get_cred/put_cred
  open-open/p1/t2   conflict-free
  open-open/p2/t1   conflicting: the same alloc_fd line, sides swapped
  open-stat/p1/t1   conflict-free
  open-stat/p1/t2   timeout
  open-stat/p2/t1   no results line (missing)
  stat-stat/p1/t1   conflicting: d_lockref line (lockref_get_not_dead, dput)
  stat-stat/p1/t2   conflict-free
  stat-close/p1/t1  a result mismatch (counted on its own, though its trace was conflict-free)
  close-open/p1/t1  conflicting on static init_fs+0x8; repeats disagreed; pair given as close, open
  (close x close has no tests)
Run b is run a with open-open/p1/t1 fixed, open-open/p1/t2 newly conflicting on a new static
site (root_ns_label+0x40), and stat-stat/p1/t2 crashed.
"""

import json
import re
import shutil
import xml.etree.ElementTree as ElementTree
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from scalecheck.cli import main
from scalecheck.report import make_report
from scalecheck.report.pair_files import read_pair_file

DATA = Path(__file__).parent / "data"


@pytest.fixture
def runs(tmp_path):
    """Copies of both fake runs, so the report never writes into tests/data."""
    copies = {}
    for name in ("a", "b"):
        copies[name] = tmp_path / f"run_{name}"
        shutil.copytree(DATA / f"report_fake_run_{name}", copies[name])
    return copies


@pytest.fixture(scope="module")
def report_a(tmp_path_factory):
    """Run a's report, made once for the tests that only read it: (run dir, summary)."""
    directory = tmp_path_factory.mktemp("report_a") / "run_a"
    shutil.copytree(DATA / "report_fake_run_a", directory)
    return directory, make_report(directory)


def pair_counts(summary, first, second):
    (entry,) = [p for p in summary["pairs"] if p["pair"] == [first, second]]
    return entry


def test_totals_count_not_run_tests_separately_and_never_as_conflict_free(report_a):
    _, summary = report_a
    totals = summary["totals"]
    assert (totals["tests"], totals["conflict_free"], totals["conflicting"], totals["not_run"]) == (
        10,
        3,
        4,
        2,
    )
    assert totals["not_run_by_status"] == {"missing": 1, "timeout": 1}
    assert (totals["mismatch"], totals["unstable"]) == (1, 1)
    assert totals["share_conflict_free"] == pytest.approx(0.3)
    assert summary["summary"].startswith(
        "3 of 10 tests conflict-free (30.0%); 4 conflicting, 1 mismatched the model, 2 not run"
    )
    assert summary["kernel"] == "6.1.0-fake-a"


def test_pairs_form_the_triangle_of_the_model_operations(report_a):
    _, summary = report_a
    assert summary["ops"] == ["open", "stat", "close"]
    assert [p["pair"] for p in summary["pairs"]] == [
        ["open", "open"],
        ["open", "stat"],
        ["open", "close"],
        ["stat", "stat"],
        ["stat", "close"],
        ["close", "close"],
    ]
    # close-open/p1/t1 lands on the unordered pair open x close.
    assert pair_counts(summary, "open", "close")["conflicting"] == 1
    empty = pair_counts(summary, "close", "close")
    assert empty["tests"] == 0 and empty["share_conflict_free"] is None
    open_stat = pair_counts(summary, "open", "stat")
    assert (open_stat["conflict_free"], open_stat["not_run"]) == (1, 2)
    assert open_stat["share_conflict_free"] == pytest.approx(1 / 3)
    assert sum(p["tests"] for p in summary["pairs"]) == summary["totals"]["tests"]


def test_bottleneck_sites_group_by_functions_without_offsets_with_sides_sorted(report_a):
    directory, summary = report_a
    top = summary["top_sites"][0]
    assert top["sites"] == ["alloc_fd", "alloc_fd, fd_install"]
    assert top["tests"] == 2
    assert top["example_tests"] == ["open-open/p1/t1", "open-open/p2/t1"]
    assert top["lines"] == 1 and top["op_pairs"] == 1
    labels = [site["label"] for site in summary["top_sites"]]
    assert "heap data in get_cred / put_cred" in labels  # "+0x8/0x40" stripped
    assert "init_fs+0x8 in filp_close / path_init" in labels
    assert summary["bottleneck_sites"] == len(summary["top_sites"]) == 4
    text = (directory / "report" / "bottlenecks.txt").read_text()
    assert "1. heap data in alloc_fd / alloc_fd, fd_install: 2 tests" in text


def test_summary_json_on_disk_is_what_make_report_returns(report_a):
    directory, summary = report_a
    on_disk = json.loads((directory / "report" / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert on_disk["format"] == "scalecheck-report" and on_disk["version"] == 1
    assert "diff" not in on_disk


def svg_texts(path: Path) -> list[str]:
    root = ElementTree.parse(path).getroot()
    return [
        "".join(element.itertext()).strip()
        for element in root.iter()
        if element.tag.endswith("}text")
    ]


def test_heatmap_png_and_svg_label_each_cell_with_its_conflicting_count(report_a):
    directory, summary = report_a
    report = directory / "report"
    assert (report / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    texts = svg_texts(report / "heatmap.svg")
    cell_labels = sorted(int(text) for text in texts if text.isdigit())
    expected = sorted(p["conflicting"] for p in summary["pairs"] if p["conflicting"])
    assert cell_labels == expected
    assert {"open", "stat", "close"} <= set(texts)
    # close x close has no tests: its cell is hatched.
    assert "<pattern" in (report / "heatmap.svg").read_text()


class PageIndex(HTMLParser):
    """Collects element ids, in-page links and anything that would load another file."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.external = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if attrs.get("href", "").startswith("#"):
            self.links.append(unquote(attrs["href"][1:]))
        if "src" in attrs or tag == "link":
            self.external.append((tag, attrs))


def parse_page(path: Path) -> tuple[PageIndex, str]:
    """index.html with every pair's tests loaded (the pair files next to it), as the page
    is in a browser once every pair's section was opened."""
    text = "\n".join(
        [path.read_text()]
        + [read_pair_file(pair) for pair in sorted((path.parent / "pairs").glob("*.js"))]
    )
    page = PageIndex()
    page.feed(text)
    return page, text


def test_first_page_holds_no_tests_and_each_pair_file_one_pairs_tests(report_a):
    directory, summary = report_a
    report = directory / "report"
    first = PageIndex()
    first.feed((report / "index.html").read_text())
    assert not {i for i in first.ids if i.startswith("test-")}
    sections = {i for i in first.ids if i.startswith("pair-")}
    files = {p.name for p in (report / "pairs").glob("*.js")}
    assert files == {f"{a}-{b}.js" for a, b in (p["pair"] for p in summary["pairs"] if p["tests"])}
    assert sections == {f"pair-{name[: -len('.js')]}" for name in files}
    test_pairs = json.loads(
        re.search(r"var testPairs = (.*?);</script>", (report / "index.html").read_text()).group(1)
    )
    for name in files:
        pair_page = PageIndex()
        pair_page.feed(read_pair_file(report / "pairs" / name))
        tests = {i[len("test-") :] for i in pair_page.ids if i.startswith("test-")}
        assert tests
        for test_id in tests:  # the page's script finds each test's section by this map
            anchor = test_pairs.get(test_id) or test_pairs[test_id.split("/")[0]]
            assert anchor == f"pair-{name[: -len('.js')]}"


def test_html_drills_from_heat_cells_to_tests_and_their_conflicts(report_a):
    directory, _ = report_a
    page, text = parse_page(directory / "report" / "index.html")
    assert not page.external
    assert set(page.links) <= page.ids, set(page.links) - page.ids
    pair_links = {link for link in page.links if link.startswith("pair-")}
    assert pair_links == {
        "pair-open-open",
        "pair-open-stat",
        "pair-open-close",
        "pair-stat-stat",
        "pair-stat-close",
    }
    for line in (DATA / "report_fake_run_a" / "tests.jsonl").read_text().splitlines()[1:]:
        assert f"test-{json.loads(line)['id']}" in page.ids
    for site in ("alloc_fd+0x4a", "fd_install+0x1f", "init_fs+0x8", "path_init+0x91"):
        assert site in text
    assert "not run: timeout" in text and "not run: missing" in text
    assert "3 of 10 tests conflict-free (30.0%)" in text
    call = 'open(pn="f0", creat=true, excl=false, trunc=false, anyfd=false) @proc0'
    assert call in unescape(text)


def test_cli_prints_summary_line_and_where_the_report_is(runs, capsys):
    assert main(["report", str(runs["a"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("3 of 10 tests conflict-free (30.0%)")
    assert out[-1] == f"report: {runs['a'] / 'report' / 'index.html'}"


def test_cli_json_prints_summary_json(runs, capsys):
    assert main(["report", str(runs["a"]), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((runs["a"] / "report" / "summary.json").read_text())


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["report", "--help"])
    assert stop.value.code == 0
    assert "--fail-on-new" in capsys.readouterr().out


def test_diff_finds_new_conflicts_fixes_lost_tests_and_new_sites(runs):
    diff = make_report(runs["b"], runs["a"])["diff"]
    assert diff["new_conflicts"] == ["open-open/p1/t2"]
    assert diff["fixed"] == ["open-open/p1/t1"]
    assert diff["no_longer_run"] == ["stat-stat/p1/t2"]
    assert diff["compared_tests"] == 10
    assert [site["data_symbol"] for site in diff["new_sites"]] == ["root_ns_label+0x40"]
    assert [site["sites"] for site in diff["gone_sites"]] == [["get_cred", "put_cred"]]
    # open x open: one fixed and one new conflict leave its share unchanged.
    (change,) = diff["pair_changes"]
    assert change["pair"] == ["stat", "stat"]
    assert (change["share_other"], change["share"]) == (0.5, 0.0)
    text = (runs["b"] / "report" / "diff.txt").read_text()
    assert "open-open/p1/t2" in text and "root_ns_label+0x40" in text
    page, html = parse_page(runs["b"] / "report" / "index.html")
    assert "test-open-open/p1/t2" in page.links and set(page.links) <= page.ids
    new_test_line = re.search(r"id='test-open-open/p1/t2'>.*", html).group(0)
    assert '"badge b-change">new conflict<' in new_test_line


def test_fail_on_new_exit_code_for_ci(runs, tmp_path, capsys):
    assert main(["report", str(runs["b"]), "--diff", str(runs["a"]), "--fail-on-new"]) == 1
    assert "1 new conflicts" in capsys.readouterr().out
    same = tmp_path / "same_as_a"
    shutil.copytree(runs["a"], same)
    assert main(["report", str(runs["a"]), "--diff", str(same), "--fail-on-new"]) == 0
    # Without --fail-on-new, new conflicts are reported but do not fail.
    assert main(["report", str(runs["b"]), "--diff", str(runs["a"])]) == 0


def test_a_diff_that_only_adds_mismatches_fails_the_gate(runs, tmp_path, capsys):
    mismatched = tmp_path / "mismatched"
    shutil.copytree(runs["a"], mismatched)
    results = mismatched / "trace" / "results.jsonl"
    lines = results.read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    conforming = next(r for r in records if r["status"] == "ok" and r["conflict_free"])
    conforming.update(status="mismatch", detail="repeat 0: got A=... B=..., expected ...")
    results.write_text("\n".join([lines[0], *map(json.dumps, records)]) + "\n")
    diff = make_report(mismatched, runs["a"])["diff"]
    assert diff["new_mismatches"] == [conforming["id"]]
    assert diff["new_conflicts"] == diff["no_longer_run"] == []
    capsys.readouterr()
    assert main(["report", str(mismatched), "--diff", str(runs["a"]), "--fail-on-new"]) == 1
    assert "1 new mismatches" in capsys.readouterr().out
    assert conforming["id"] in (mismatched / "report" / "diff.txt").read_text()


def test_report_without_diff_removes_a_stale_diff_txt(runs):
    make_report(runs["b"], runs["a"])
    assert (runs["b"] / "report" / "diff.txt").exists()
    make_report(runs["b"])
    assert not (runs["b"] / "report" / "diff.txt").exists()


def _renumbered_copy(source: Path, target: Path, drop: str, extra: dict):
    """Run ``source`` as if from another test file of the same model: the tests in reverse
    order under the ids of the original order (so every id names another test), one test
    dropped and one new test (with a conflict-free result) added."""
    lines = (source / "tests.jsonl").read_text().splitlines()
    header, tests = lines[0], [json.loads(line) for line in lines[1:]]
    ids = [test["id"] for test in tests]
    kept = [test for test in reversed(tests) if test["id"] != drop] + [extra]
    renamed = {test["id"]: new_id for test, new_id in zip(kept, ids, strict=True)}
    results_lines = (source / "trace" / "results.jsonl").read_text().splitlines()
    results = [json.loads(line) for line in results_lines[1:]]
    results = [dict(r, id=renamed[r["id"]]) for r in results if r["id"] in renamed]
    results.append(dict(results[0], id=renamed[extra["id"]], conflict_free=True, conflicts=[]))
    (target / "trace").mkdir(parents=True)
    (target / "tests.jsonl").write_text(
        "\n".join([header] + [json.dumps(dict(t, id=renamed[t["id"]])) for t in kept]) + "\n"
    )
    (target / "trace" / "results.jsonl").write_text(
        "\n".join([results_lines[0]] + [json.dumps(r) for r in results]) + "\n"
    )


def test_diff_of_two_test_files_pairs_tests_by_content_not_id(runs, tmp_path):
    tests = [json.loads(line) for line in (runs["a"] / "tests.jsonl").read_text().splitlines()]
    extra = dict(tests[1], id="open-open/p9/t1", pair=["stat", "stat"])
    extra["calls"] = [dict(c, op="stat", args={"pn": "f9"}) for c in extra["calls"]]
    other = tmp_path / "run_other_tests"
    _renumbered_copy(runs["a"], other, "stat-stat/p1/t2", extra)
    diff = make_report(other, runs["a"])["diff"]
    # The same tests, the same verdicts: nothing changed, though every id moved.
    assert (diff["compared_tests"], diff["only_here"], diff["only_in_other"]) == (9, 1, 1)
    assert diff["new_conflicts"] == diff["fixed"] == diff["no_longer_run"] == []
    assert diff["pair_changes"] == [] and diff["new_sites"] == diff["gone_sites"] == []
    text = (other / "report" / "diff.txt").read_text()
    assert "compared the 9 tests both runs have (paired by content, not id)" in text


def test_mismatches_are_listed_with_both_results_and_never_counted(report_a):
    directory, summary = report_a
    (listed,) = summary["mismatches"]
    assert listed["id"] == "stat-close/p1/t1" and listed["got"]["b"] == {"errno": "EBADF"}
    assert set(listed["model"]) == {"ab", "ba"}
    stat_close = pair_counts(summary, "stat", "close")
    assert (stat_close["mismatch"], stat_close["conflict_free"], stat_close["conflicting"]) == (
        1,
        0,
        0,
    )
    text = (directory / "report" / "mismatches.txt").read_text()
    assert text.startswith("1 tests whose kernel results fit neither order")
    assert 'kernel: A={"ret": 0, "ino": 12, "nlink": 1, "size": 0} B={"errno": "EBADF"}' in text
    html = (directory / "report" / "index.html").read_text()
    assert "<h2>Mismatches: 1 tests</h2>" in html and "EBADF" in html


def test_bottleneck_rows_lead_with_the_data_name_and_group_by_it(tmp_path):
    """Results whose conflicts carry the tracer's data name: sites group by (data name,
    code), and the label, bottlenecks.txt and the HTML lead with the name."""
    directory = tmp_path / "run_a"
    shutil.copytree(DATA / "report_fake_run_a", directory)
    results = directory / "trace" / "results.jsonl"
    lines = results.read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    names = {
        "open-open/p1/t1": ["files_struct.file_lock", "cred.usage"],
        "open-open/p2/t1": ["files_struct.next_fd"],
    }
    for record in records:
        for conflict, name in zip(
            record.get("conflicts", []), names.get(record["id"], []), strict=False
        ):
            conflict["data"] = name
    results.write_text("\n".join([lines[0], *map(json.dumps, records)]) + "\n")
    summary = make_report(directory)
    labels = [site["label"] for site in summary["top_sites"]]
    # The same alloc_fd code on two different fields: two sites now, not one of 2 tests.
    assert "files_struct.file_lock in alloc_fd / alloc_fd, fd_install" in labels
    assert "files_struct.next_fd in alloc_fd / alloc_fd, fd_install" in labels
    assert "cred.usage in get_cred / put_cred" in labels
    # Results without a name keep the symbol or kind.
    assert "init_fs+0x8 in filp_close / path_init" in labels
    assert {site["data"] for site in summary["top_sites"]} >= {"cred.usage", "init_fs+0x8"}
    table = (directory / "report" / "bottlenecks.txt").read_text()
    header = next(line for line in table.splitlines() if line.startswith("rank"))
    assert header.split()[:2] == ["rank", "data"]
    assert re.search(r"^\d+\s+cred\.usage\s+1\s", table, re.MULTILINE)
    html = (directory / "report" / "index.html").read_text()
    assert "<th>#</th><th>data</th>" in html and "<b>files_struct.file_lock</b>" in html
