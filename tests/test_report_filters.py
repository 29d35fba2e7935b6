"""The report's filters in the open: conflict-free shares at every granularity side by
side, what each noise filter removed, and the security-module choice, from a small
hand-made run whose numbers are counted by hand below."""

import json
from pathlib import Path

from scalecheck.report import make_report

HEAP_FALSE = {"kind": "heap", "sharing": "false", "data_symbol": "", "sites": [["x", "y"]]}
STATIC_FALSE = {"kind": "static", "sharing": "false", "data_symbol": "s", "sites": [["x", "y"]]}
TRUE = {"kind": "heap", "sharing": "true", "data_symbol": "", "sites": [["alloc_fd", "alloc_fd"]]}


def _conflict(template: dict) -> dict:
    return dict(template, line="0xffff888000000000", a={"write": True, "pcs": []}, b={"pcs": []})


def _record(test_id, conflicts, false_sharing, views, filtered, status="ok"):
    return {
        "id": test_id,
        "pair": ["open", "open"],
        "status": status,
        "detail": "",
        "conflict_free": not conflicts,
        "agree": True,
        "conflicts": [_conflict(c) for c in conflicts],
        "false_sharing": [_conflict(c) for c in false_sharing],
        "views": views,
        "filtered": filtered,
    }


def _write_run(directory: Path, header_extra: dict, records: list[dict]):
    (directory / "trace").mkdir(parents=True)
    tests = [
        {
            "id": r["id"],
            "pair": ["open", "open"],
            "path": 1,
            "model": "posix",
            "setup": {},
            "calls": [{"op": "open", "args": {}}, {"op": "open", "args": {}}],
            "expect": {"ab": [{}, {}], "ba": [{}, {}]},
        }
        for r in records
    ]
    header = {"format": "scalecheck-tests", "version": 1, "model": "posix"}
    (directory / "tests.jsonl").write_text(
        "\n".join(json.dumps(line) for line in [header, *tests]) + "\n"
    )
    results_header = {
        "format": "scalecheck-results",
        "version": 1,
        "target": "linux",
        "kernel": {"release": "fake"},
        "granularity": "stable",
        **header_extra,
    }
    (directory / "trace" / "results.jsonl").write_text(
        "\n".join(json.dumps(line) for line in [results_header, *records]) + "\n"
    )


def test_shares_at_every_granularity_and_what_each_filter_removed(tmp_path):
    views_free = {"bytes": True, "stable": True, "line": True}
    records = [
        # Conflict-free everywhere, but the repeat filter removed two elements.
        _record("t1", [], [], views_free, {"unrepeated": 2, "tick_work": 0}),
        # Heap false sharing only: conflict-free unless every shared line counts.
        _record(
            "t2",
            [],
            [HEAP_FALSE],
            {"bytes": True, "stable": True, "line": False},
            {"unrepeated": 0, "tick_work": 1},
        ),
        # Static false sharing: counted under stable, not under bytes.
        _record(
            "t3",
            [STATIC_FALSE],
            [],
            {"bytes": True, "stable": False, "line": False},
            {"unrepeated": 0, "tick_work": 0},
        ),
        _record(
            "t4",
            [TRUE],
            [],
            {"bytes": False, "stable": False, "line": False},
            {"unrepeated": 1, "tick_work": 0},
        ),
        # A mismatch is no part of the share.
        _record("t5", [], [], views_free, {"unrepeated": 0, "tick_work": 0}, status="mismatch"),
    ]
    _write_run(
        tmp_path,
        {"filters": {"repeat": True, "tick_work": False}, "lsm": "default"},
        records,
    )
    summary = make_report(tmp_path)
    shares = summary["granularity_shares"]
    assert {g: (s["conflict_free"], s["tests"]) for g, s in shares.items()} == {
        "bytes": (3, 4),
        "stable": (2, 4),
        "line": (1, 4),
    }
    filters = {f["filter"]: f for f in summary["filters"]}
    # t4 stays conflicting: the repeat filter made only t1 conflict-free.
    assert filters["repeat"] == dict(
        filters["repeat"], on=True, tests_made_conflict_free=1, conflicts_removed=3
    )
    assert filters["tick work"]["on"] is False
    assert filters["heap false sharing"]["tests_made_conflict_free"] == 1
    assert summary["security_modules"] == "default"
    text = (tmp_path / "report" / "bottlenecks.txt").read_text()
    assert "bytes 75.0%, stable 50.0%, line 25.0%" in text
    assert "security modules: default" in text
    page = (tmp_path / "report" / "index.html").read_text()
    assert "What counts as a conflict" in page and "--keep-tick-work" in page


def test_records_without_views_give_no_share_rather_than_a_wrong_one(tmp_path):
    record = _record("t1", [], [], {}, {})
    del record["views"], record["filtered"]
    _write_run(tmp_path, {}, [record])
    summary = make_report(tmp_path)
    assert all(s["share"] is None for s in summary["granularity_shares"].values())
    # Runs that predate the switches applied both filters.
    assert all(f["on"] for f in summary["filters"])


def test_title_says_how_much_was_named_and_what_the_kernel_did_not_allow(tmp_path):
    views = {"bytes": False, "stable": False, "line": False}
    counts = {"unrepeated": 0, "tick_work": 0}
    records = [
        _record("t1", [dict(TRUE, data="files_struct.file_lock"), TRUE], [], views, counts),
        _record("t2", [dict(STATIC_FALSE, data="jiffies")], [], views, counts),
    ]
    missing = "no BTF (CONFIG_DEBUG_INFO_BTF): heap data unnamed, symbols without fields"
    _write_run(tmp_path / "a", {"naming": {"btf": False, "missing": missing}}, records)
    summary = make_report(tmp_path / "a")
    assert summary["naming"] == f"data named: 2 of 3 conflicting lines ({missing})"
    assert summary["naming"] in (tmp_path / "a" / "report" / "bottlenecks.txt").read_text()
    assert (
        "data named: 2 of 3 conflicting lines"
        in (tmp_path / "a" / "report" / "index.html").read_text()
    )
    # Results from before the header said it: the count alone.
    _write_run(tmp_path / "b", {}, records)
    assert make_report(tmp_path / "b")["naming"] == "data named: 2 of 3 conflicting lines"
