"""Bad input to `scalecheck report`: one clear line on stderr and exit code 2."""

import json
import shutil
from pathlib import Path

import pytest

from scalecheck.cli import main
from scalecheck.common.errors import UserError
from scalecheck.formats.resultsfile import load_run
from scalecheck.formats.testfile import content_hash, read_tests

FAKE_RUN = Path(__file__).parent / "data" / "report_fake_run_a"


@pytest.fixture
def run_dir(tmp_path):
    target = tmp_path / "run"
    shutil.copytree(FAKE_RUN, target)
    return target


def rewrite_line(path: Path, number: int, change):
    """Replaces line ``number`` (1-based) of a JSON-lines file by ``change(line_text)``."""
    lines = path.read_text().splitlines()
    lines[number - 1] = change(lines[number - 1])
    path.write_text("\n".join(lines) + "\n")


def with_field(**fields):
    return lambda text: json.dumps({**json.loads(text), **fields})


def report_error(run_dir, capsys) -> str:
    code = main(["report", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert err.startswith("scalecheck: error: ")
    return err


def test_fake_run_loads_with_ops_in_order_of_first_appearance(run_dir):
    run = load_run(run_dir)
    assert run.model == "posix"
    # close first appears in the 9th test (stat-close), after open and stat.
    assert run.ops == ["open", "stat", "close"]
    assert len(run.tests) == 10
    assert len(run.results) == 9  # open-stat/p2/t1 has no results line
    assert run.kernel_name == "6.1.0-fake-a"


def test_missing_directory(tmp_path, capsys):
    err = report_error(tmp_path / "nowhere", capsys)
    assert "no such directory" in err


def test_missing_results_names_the_command_to_run(run_dir, capsys):
    (run_dir / "trace" / "results.jsonl").unlink()
    err = report_error(run_dir, capsys)
    assert "results.jsonl" in err and "scalecheck run" in err


def test_missing_tests(run_dir, capsys):
    (run_dir / "tests.jsonl").unlink()
    assert "scalecheck testgen" in report_error(run_dir, capsys)


def test_results_of_another_format_version_names_both_versions(run_dir, capsys):
    rewrite_line(run_dir / "trace" / "results.jsonl", 1, with_field(version=2))
    err = report_error(run_dir, capsys)
    assert "version 2" in err and "version 1" in err


def test_tests_of_another_format_version(run_dir, capsys):
    rewrite_line(run_dir / "tests.jsonl", 1, with_field(version=7))
    err = report_error(run_dir, capsys)
    assert "version 7" in err and "tests.jsonl:1" in err


def test_file_of_another_kind(run_dir, capsys):
    shutil.copy(run_dir / "tests.jsonl", run_dir / "trace" / "results.jsonl")
    assert "not a scalecheck-results file" in report_error(run_dir, capsys)


def test_damaged_lines_are_skipped_and_named(run_dir, capsys):
    """A torn line in the middle and a record without id: the report skips both, says
    which lines in one note, and counts their tests as not run."""
    results = run_dir / "trace" / "results.jsonl"
    whole = load_run(run_dir)
    torn_id = json.loads(results.read_text().splitlines()[3])["id"]
    rewrite_line(results, 4, lambda text: text[:40])
    rewrite_line(results, 2, lambda text: json.dumps({"status": "ok"}))
    capsys.readouterr()
    assert main(["report", str(run_dir), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "2 damaged lines (2, 4) skipped" in err, err
    summary = json.loads(out)
    assert summary["damaged_result_lines"] == [2, 4]
    run = load_run(run_dir)
    assert torn_id not in run.results and len(run.results) == len(whole.results) - 2


def test_unknown_status(run_dir, capsys):
    rewrite_line(run_dir / "trace" / "results.jsonl", 2, with_field(status="great"))
    assert "unknown status 'great'" in report_error(run_dir, capsys)


def test_conflict_without_code_sites(run_dir, capsys):
    def drop_pcs(text):
        result = json.loads(text)
        del result["conflicts"][0]["b"]["pcs"]
        return json.dumps(result)

    rewrite_line(run_dir / "trace" / "results.jsonl", 2, drop_pcs)
    assert "'pcs'" in report_error(run_dir, capsys)


def test_result_for_a_test_that_does_not_exist(run_dir, capsys):
    rewrite_line(run_dir / "trace" / "results.jsonl", 2, with_field(id="open-open/p9/t9"))
    assert "open-open/p9/t9" in report_error(run_dir, capsys)


def test_tests_file_with_only_a_header(run_dir, capsys):
    tests = run_dir / "tests.jsonl"
    tests.write_text(tests.read_text().splitlines()[0] + "\n")
    assert "no tests" in report_error(run_dir, capsys)


def test_duplicate_test_id(run_dir):
    rewrite_line(run_dir / "tests.jsonl", 3, with_field(id="open-open/p1/t1"))
    with pytest.raises(UserError, match="appears twice"):
        load_run(run_dir)


def test_later_result_line_supersedes_an_earlier_one(run_dir):
    results = run_dir / "trace" / "results.jsonl"
    first = json.loads(results.read_text().splitlines()[1])
    assert first["conflict_free"] is False
    with results.open("a") as out:
        out.write(json.dumps({**first, "conflict_free": True, "conflicts": []}) + "\n")
    assert load_run(run_dir).results[first["id"]]["conflict_free"] is True


def test_fail_on_new_without_diff_is_refused(run_dir, capsys):
    assert main(["report", str(run_dir), "--fail-on-new"]) == 2
    assert "--fail-on-new needs --diff" in capsys.readouterr().err


def test_diff_across_models_is_refused(run_dir, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    rewrite_line(other / "tests.jsonl", 1, with_field(model="counter"))
    assert main(["report", str(run_dir), "--diff", str(other)]) == 2
    assert "model counter" in capsys.readouterr().err


def test_a_result_for_another_version_of_its_test_is_refused(run_dir, capsys):
    _, tests = read_tests(run_dir / "tests.jsonl")
    results = run_dir / "trace" / "results.jsonl"
    rewrite_line(results, 2, with_field(test_hash=content_hash(tests[0])))
    assert load_run(run_dir).results["open-open/p1/t1"]["test_hash"]
    rewrite_line(results, 2, with_field(test_hash=content_hash(tests[1])))
    err = report_error(run_dir, capsys)
    assert "results.jsonl:2: the result of 'open-open/p1/t1' is for another test" in err


def _with_header(run_dir: Path, **fields) -> Path:
    results = run_dir / "trace" / "results.jsonl"
    rewrite_line(results, 1, with_field(**fields))
    return run_dir


def test_diff_across_granularities_is_refused_naming_them(run_dir, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    _with_header(run_dir, granularity="stable")
    _with_header(other, granularity="line", repeats=3)
    assert main(["report", str(run_dir), "--diff", str(other), "--fail-on-new"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert 'granularity "line" there, "stable" here; repeats 3 there, 2 here' in err


def test_diff_across_targets_says_so(run_dir, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    _with_header(run_dir, target="lib:sharded")
    _with_header(other, target="lib:shared")
    assert main(["report", str(run_dir), "--diff", str(other)]) == 0
    assert '(target "lib:shared" there, "lib:sharded" here)' in capsys.readouterr().out
