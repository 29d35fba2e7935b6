"""index.html: the summary, the heat map, the bottleneck sites and one collapsed section
per pair; a pair's tests (down to each test's conflicting cache lines and code sites) are
in ``pairs/<A>-<B>.js`` next to the page and load when the section opens (report/
pair_files.py). Inline CSS and JS only: the page works from a plain directory (file://)
and from any static web server."""

import json
from html import escape
from pathlib import Path
from urllib.parse import quote

from scalecheck.formats.analysisfile import read_pair
from scalecheck.formats.resultsfile import Run
from scalecheck.report.filters import naming_coverage
from scalecheck.report.heatmap import NOT_RUN_COLOR, label_color, share_color, triangle_cells
from scalecheck.report.stats import (
    CONFLICT_FREE,
    CONFLICTING,
    LEFT_PATH,
    MISMATCH,
    NOT_RUN,
    Counts,
    data_name,
    outcome,
    percent_text,
    status_of,
)

# Drill-down order inside a pair: what needs attention first.
OUTCOME_ORDER = {CONFLICTING: 0, MISMATCH: 1, LEFT_PATH: 2, NOT_RUN: 3, CONFLICT_FREE: 4}

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
.summary { font-size: 1.15em; font-weight: 600; }
table { border-collapse: collapse; }
td, th { padding: 2px 6px; text-align: left; vertical-align: top; }
table.grid td, table.grid th { border: 1px solid #ddd; }
table.heat td { width: 26px; height: 26px; padding: 0; text-align: center; font-size: 11px;
  border: 1px solid #fff; position: relative; }
table.heat td a { display: block; width: 100%; height: 100%; line-height: 26px;
  color: inherit; text-decoration: none; }
table.heat td.none { background: repeating-linear-gradient(45deg, #fff 0 3px, #ccc 3px 4px); }
table.heat td.notrun::after { content: "\\2022"; position: absolute; top: 0; right: 2px;
  font-size: 9px; line-height: 9px; color: #444; }
table.heat th.row { text-align: right; font-weight: normal; padding-right: 4px; }
table.heat th.col { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal;
  text-align: left; padding-top: 4px; }
.legend { font-size: 12px; color: #555; }
details.pair { margin: .4em 0; border-top: 1px solid #ddd; padding-top: .3em; }
details.pair > summary { font-weight: 600; cursor: pointer; }
.test { margin: .15em 0 .15em 1.2em; font-family: ui-monospace, monospace; font-size: 12px; }
details.test > summary { cursor: pointer; }
.body { margin: .3em 0 .8em 1.2em; }
.badge { padding: 0 5px; border-radius: 3px; font-size: 11px; }
.b-conflicting { background: #fcbba1; } .b-conflict-free { background: #c7e9c0; }
.b-not-run { background: #d9d9d9; } .b-mismatch { background: #fdd0a2; }
.b-left-the-path { background: #dadaeb; }
.b-change { background: #9ecae1; }
pre { white-space: pre-wrap; margin: .2em 0; }
:target > summary, div.test:target { background: #ffffb3; }
#tip { position: absolute; max-width: 40em; white-space: pre-wrap; background: #fff;
  border: 1px solid #888; padding: 4px 6px; font-size: 12px; z-index: 10;
  pointer-events: none; box-shadow: 2px 2px 6px rgba(0,0,0,.25); }
"""

# A pair's tests load when its section opens: a <script> tag, which browsers run from
# file:// as from a server (a fetch of a JSON file is refused on file://). Following a link
# to a test loads its pair first, then opens the sections around it. Hovering over (or
# focusing) a heat map cell shows its counts and condition in a box, #tip.
SCRIPT = """
var waiting = {};
function loadPair(details, then) {
  if (details.getAttribute("data-loaded") === "1") { if (then) then(); return; }
  (waiting[details.id] = waiting[details.id] || []).push(then);
  if (details.getAttribute("data-loading") === "1") return;
  details.setAttribute("data-loading", "1");
  var script = document.createElement("script");
  script.src = details.getAttribute("data-file");
  script.onerror = function () {
    details.removeAttribute("data-loading");
    details.querySelector(".tests").textContent =
      "Could not load " + details.getAttribute("data-file") + " (it belongs next to this page).";
  };
  document.head.appendChild(script);
}
function scalecheckPair(anchor, html) {
  var details = document.getElementById(anchor);
  details.querySelector(".tests").innerHTML = html;
  details.removeAttribute("data-loading");
  details.setAttribute("data-loaded", "1");
  var thens = waiting[anchor] || [];
  delete waiting[anchor];
  thens.forEach(function (then) { if (then) then(); });
}
function openTarget() {
  var id = decodeURIComponent(location.hash.slice(1));
  var el = id && document.getElementById(id);
  if (!el && id && id.indexOf("test-") === 0) {
    var testId = id.slice(5);
    var anchor = testPairs[testId] || testPairs[testId.split("/")[0]];
    var details = anchor && document.getElementById(anchor);
    if (details && details.getAttribute("data-loaded") !== "1") loadPair(details, openTarget);
    return;
  }
  for (var e = el; e; e = e.parentElement) { if (e.tagName === "DETAILS") e.open = true; }
  if (el) el.scrollIntoView();
}
function showTip(event) {
  var cell = event.target.closest && event.target.closest("td[data-tip]");
  var tip = document.getElementById("tip");
  if (!cell) { tip.hidden = true; return; }
  tip.textContent = cell.getAttribute("data-tip");
  var box = cell.getBoundingClientRect();
  tip.style.left = (window.scrollX + box.right + 8) + "px";
  tip.style.top = (window.scrollY + box.top) + "px";
  tip.hidden = false;
}
document.addEventListener("toggle", function (event) {
  var details = event.target;
  if (details.classList && details.classList.contains("pair") && details.open) {
    loadPair(details);
  }
}, true);
window.addEventListener("hashchange", openTarget);
window.addEventListener("DOMContentLoaded", function () {
  var heat = document.querySelector("table.heat");
  if (heat) {
    ["mouseover", "focusin"].forEach(function (kind) { heat.addEventListener(kind, showTip); });
    heat.addEventListener("mouseleave", function () {
      document.getElementById("tip").hidden = true;
    });
  }
  openTarget();
});
"""


def pair_anchor(pair) -> str:
    return f"pair-{pair[0]}-{pair[1]}"


def test_anchor(test_id: str) -> str:
    return f"test-{test_id}"


def _href(anchor: str) -> str:
    return "#" + quote(anchor, safe="")


def _pair_name(pair) -> str:
    return f"{pair[0]} &times; {pair[1]}" if pair[0] != pair[1] else f"{pair[0]} &times; itself"


def format_call(call: dict) -> str:
    args = ", ".join(f"{name}={json.dumps(value)}" for name, value in call.get("args", {}).items())
    where = f" @proc{call['proc']}" if "proc" in call else ""
    return f"{call['op']}({args}){where}"


def _badge(result: dict | None) -> str:
    kind = outcome(result)
    text = kind if kind != NOT_RUN else f"not run: {status_of(result)}"
    badge = f'<span class="badge b-{kind.replace(" ", "-")}">{escape(text)}</span>'
    if result is not None and result.get("agree") is False:
        badge += ' <span class="badge b-mismatch">repeats disagree</span>'
    return badge


def write_index(
    path,
    run: Run,
    pairs: dict[tuple[str, str], Counts],
    totals: Counts,
    not_run_by_status: dict,
    summary_line: str,
    site_jsons: list[dict],
    diff: dict | None,
    headline_filters: tuple[dict, list[dict], str],
    conformance: tuple[list[dict], list[dict]],
    tests_by_pair: dict[tuple[str, str], list[dict]],
):
    """The first page. ``conformance``: (mismatches, tests that left the path), as
    stats.mismatches; ``tests_by_pair`` (from ``tests_by_pair``) says which pairs have a
    section and where each test id's section is."""
    mismatched, left_path = conformance
    title = f"scalecheck report: model {run.model} on {run.kernel_name}"
    shares, filters, lsm = headline_filters
    parts = [
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(title)}</title><style>{STYLE}</style><script>{SCRIPT}</script>",
        "</head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p class='summary'>{escape(summary_line)}</p>",
        f"<p>{escape(naming_coverage(run))}</p>",
        _totals_table(totals, not_run_by_status),
        _filters_section(shares, filters, lsm, run.results_header.get("granularity", "line")),
        "<p class='legend'>Files next to this page: <a href='heatmap.svg'>heatmap.svg</a>, "
        "<a href='heatmap.png'>heatmap.png</a>, <a href='bottlenecks.txt'>bottlenecks.txt</a>, "
        "<a href='mismatches.txt'>mismatches.txt</a>, <a href='left-path.txt'>left-path.txt</a>, "
        "<a href='summary.json'>summary.json</a>.</p>",
        "<h2>Heat map</h2>",
        _heat_table(run.ops, pairs, commute_conditions(run.directory, list(pairs))),
    ]
    if diff is not None:
        parts.append(_diff_section(diff))
    parts.append(_sites_section(site_jsons))
    if mismatched:
        parts.append(_mismatch_section(mismatched, run.implementation))
    if left_path:
        parts.append(_left_path_section(left_path, run.implementation))
    parts.append(
        "<h2>Tests by pair</h2><p class='legend'>Click a pair to list its tests, "
        "and a test for its setup, results and conflicting cache lines.</p>"
    )
    parts.extend(_pair_stubs(pairs, tests_by_pair))
    parts.append(
        f"<div id='tip' hidden></div><script>var testPairs = {_test_pairs(tests_by_pair)};</script>"
    )
    parts.append("</body></html>\n")
    path.write_text("\n".join(parts), encoding="utf-8")


def _totals_table(totals: Counts, not_run_by_status: dict) -> str:
    why = ", ".join(f"{count} {status}" for status, count in sorted(not_run_by_status.items()))
    rows = [
        ("tests", totals.tests),
        ("conflict-free", totals.conflict_free),
        ("conflicting", totals.conflicting),
        ("not run", f"{totals.not_run} ({why})" if why else totals.not_run),
        ("mismatched the model (not counted as conflict-free or conflicting)", totals.mismatch),
        (
            "left the path: a legal choice off the test's path (not counted either)",
            totals.left_path,
        ),
        ("repeats disagreed", totals.unstable),
    ]
    body = "".join(
        f"<tr><th>{escape(name)}</th><td>{escape(str(value))}</td></tr>" for name, value in rows
    )
    return f"<table class='grid'>{body}</table>"


def _filters_section(shares: dict, filters: list[dict], lsm: str, granularity: str) -> str:
    share_rows = "".join(
        f"<tr><th>{escape(g)}{' (this run)' if g == granularity else ''}</th>"
        f"<td>{percent_text(s['share'])}</td><td>{s['conflict_free']} of {s['tests']}</td>"
        f"<td>{escape(s['meaning'])}</td></tr>"
        for g, s in shares.items()
    )
    filter_rows = "".join(
        f"<tr><th>{escape(f['filter'])}</th><td>{'on' if f['on'] else 'off'}</td>"
        f"<td>{f['tests_made_conflict_free']}</td><td>{f['conflicts_removed']}</td>"
        f"<td>{escape(f['what'])}</td></tr>"
        for f in filters
    )
    return (
        "<h2>What counts as a conflict</h2><table class='grid'><tr><th>granularity</th>"
        "<th>conflict-free</th><th>tests</th><th>counts</th></tr>"
        f"{share_rows}</table><table class='grid'><tr><th>filter</th><th>this run</th>"
        "<th>tests it made conflict-free</th><th>conflicts it removed</th><th>what</th></tr>"
        f"{filter_rows}</table><p class='legend'>"
        + (
            f"Security modules in the guest: {escape(lsm)} (<code>scalecheck run --lsm</code>). "
            if lsm
            else ""
        )
        + "Each filter can be switched off: "
        "<code>--count-unrepeated</code>, <code>--keep-tick-work</code>, "
        "<code>--granularity line</code>.</p>"
    )


def _mismatch_section(mismatched: list[dict], implementation: str) -> str:
    return _results_section(
        f"Mismatches: {len(mismatched)} tests",
        f"The {implementation}'s results fit neither order the model allows: model and "
        f"{implementation} disagree. These tests are not counted as conflict-free or conflicting.",
        mismatched,
        implementation,
    )


def _left_path_section(left: list[dict], implementation: str) -> str:
    return _results_section(
        f"Left the path: {len(left)} tests",
        f"The {implementation}'s results fit a choice the model allows (an id, an fd) that "
        "leaves the path the test was made for: legal, not a mismatch, but not a test of its "
        "path. These tests are not counted as conflict-free or conflicting.",
        left,
        implementation,
    )


def _results_section(title: str, legend: str, entries: list[dict], implementation: str) -> str:
    rows = "".join(
        f"<tr><td><a href='#{escape(test_anchor(m['id']))}'>{escape(m['id'])}</a></td>"
        f"<td>{escape(json.dumps(m['got']))}</td><td>{escape(json.dumps(m['model']))}</td></tr>"
        for m in entries
    )
    return (
        f"<h2>{escape(title)}</h2><p class='legend'>{escape(legend)}</p><table class='grid'>"
        f"<tr><th>test</th><th>{escape(implementation)} (A, B)</th>"
        f"<th>model (A then B, B then A)</th></tr>{rows}</table>"
    )


def commute_conditions(directory: Path, pairs: list[tuple[str, str]]) -> dict:
    """Each pair's commutativity condition, from the run's analysis when it is there
    (docs/format-analysis.md); an analysis without conditions gives none."""
    conditions = {}
    for a, b in pairs:
        data = read_pair(directory, a, b)
        if data and "conditions" in data:
            conditions[a, b] = data["conditions"]["commutes"]["text"]
    return conditions


def _heat_table(ops: list[str], pairs: dict[tuple[str, str], Counts], conditions: dict) -> str:
    rows = {op: [f"<th class='row'>{escape(op)}</th>"] for op in ops}
    for row, _column, pair in triangle_cells(ops):
        counts = pairs[pair]
        rows[ops[row]].append(_heat_cell(pair, counts, conditions.get(pair)))
    lines = ["<table class='heat'>"]
    lines += [f"<tr>{''.join(cells)}</tr>" for cells in rows.values()]
    lines.append(
        "<tr><th></th>"
        + "".join(f"<th class='col'>{escape(op)}</th>" for op in ops)
        + "</tr></table>"
    )
    lines.append(
        "<p class='legend'>Shade: share of the pair's tests that are conflict-free "
        "(red = none, white = all). Number: conflicting tests. Hatched: no tests. "
        "Grey: no test ran. &bull;: some tests did not run. Hover over a cell for its "
        "counts and the condition under which the pair commutes.</p>"
    )
    return "\n".join(lines)


def _heat_cell(pair, counts: Counts, condition: str | None = None) -> str:
    tip = (
        f"{pair[0]} x {pair[1]}: {counts.tests} tests, {counts.conflict_free} conflict-free, "
        f"{counts.conflicting} conflicting, {counts.not_run} not run"
    )
    if condition is not None:
        tip += "\ncommutes:" + ("\n" if "\n" in condition else " ") + condition
    if counts.tests == 0:
        return f"<td class='none' data-tip='{escape(tip)}'></td>"
    if counts.not_run == counts.tests:
        style = f"background:{NOT_RUN_COLOR}"
    else:
        share = counts.share_conflict_free
        assert share is not None  # the cell has tests
        style = f"background:{share_color(share)};color:{label_color(share)}"
    css_class = " class='notrun'" if counts.not_run else ""
    label = str(counts.conflicting) if counts.conflicting else ""
    return (
        f"<td{css_class} style='{style}' data-tip='{escape(tip)}'>"
        f"<a href='{_href(pair_anchor(pair))}'>{label}</a></td>"
    )


def _sites_table(site_jsons: list[dict]) -> str:
    rows = [
        "<table class='grid'><tr><th>#</th><th>data</th><th>tests</th><th>op pairs</th>"
        "<th>lines</th><th>kind</th><th>a-side code</th><th>b-side code</th>"
        "<th>example tests</th></tr>"
    ]
    for site in site_jsons:
        examples = " ".join(
            f"<a href='{_href(test_anchor(test_id))}'>{escape(test_id)}</a>"
            for test_id in site["example_tests"]
        )
        rows.append(
            f"<tr><td>{site['rank']}</td><td><b>{escape(site['data'])}</b></td>"
            f"<td>{site['tests']}</td><td>{site['op_pairs']}</td><td>{site['lines']}</td>"
            f"<td>{escape(site['kind'])}</td>"
            f"<td>{escape(site['sites'][0])}</td><td>{escape(site['sites'][1])}</td>"
            f"<td>{examples}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def _sites_section(site_jsons: list[dict]) -> str:
    if not site_jsons:
        return "<h2>Bottleneck sites</h2><p>No conflicting test recorded a conflict site.</p>"
    return (
        "<h2>Bottleneck sites</h2><p class='legend'>Conflicts grouped by the code on each "
        "side (functions without offsets) and the data they share (struct.field, slab cache "
        "and offset, or symbol), ranked by distinct tests. The full "
        "list is in bottlenecks.txt.</p>" + _sites_table(site_jsons)
    )


def _test_links(ids: list[str]) -> str:
    if not ids:
        return "none"
    return ", ".join(f"<a href='{_href(test_anchor(i))}'>{escape(i)}</a>" for i in ids)


def _diff_section(diff: dict) -> str:
    parts = [
        f"<h2>Compared with {escape(diff['other'])} ({escape(diff['other_kernel'])})</h2>",
        f"<p>{diff['compared_tests']} tests both runs have compared, paired by content "
        f"({diff['only_here']} only here, {diff['only_in_other']} only in the other run).</p>",
    ]
    for title, key in (
        ("New conflicts (conflict-free before, conflicting now)", "new_conflicts"),
        ("New mismatches (results the model does not allow now)", "new_mismatches"),
        ("Fixed (conflicting before, conflict-free now)", "fixed"),
        ("No longer run (ran before, not now)", "no_longer_run"),
    ):
        ids = diff[key]
        parts.append(
            f"<details{' open' if key == 'new_conflicts' else ''}><summary>"
            f"{escape(title)}: {len(ids)}</summary><p class='test'>{_test_links(ids)}"
            "</p></details>"
        )
    if diff["pair_changes"]:
        rows = "".join(
            f"<tr><td><a href='{_href(pair_anchor(c['pair']))}'>{_pair_name(c['pair'])}</a></td>"
            f"<td>{percent_text(c['share_other'])}</td><td>{percent_text(c['share'])}</td>"
            f"<td>{c['conflicting_other']}</td><td>{c['conflicting']}</td></tr>"
            for c in diff["pair_changes"]
        )
        parts.append(
            "<h3>Pairs whose share of conflict-free tests changed</h3><table "
            "class='grid'><tr><th>pair</th><th>before</th><th>now</th>"
            f"<th>conflicting before</th><th>conflicting now</th></tr>{rows}</table>"
        )
    if diff["new_sites"]:
        parts.append("<h3>New bottleneck sites</h3>" + _sites_table(diff["new_sites"]))
    return "\n".join(parts)


def changes_by_test(diff: dict | None) -> dict[str, str]:
    """Test id -> how it changed since the run compared against (only tests that changed)."""
    if diff is None:
        return {}
    changes: dict[str, str] = {}
    for key, label in (
        ("new_conflicts", "new conflict"),
        ("new_mismatches", "new mismatch"),
        ("fixed", "fixed"),
        ("no_longer_run", "no longer run"),
    ):
        changes.update((test_id, label) for test_id in diff[key])
    return changes


def tests_by_pair(run: Run) -> dict[tuple[str, str], list[dict]]:
    """Each pair's tests, in drill-down order (what needs attention first)."""
    grouped: dict = {}
    for test in run.tests:
        grouped.setdefault(run.pair_of(test), []).append(test)
    for tests in grouped.values():
        tests.sort(key=lambda t: OUTCOME_ORDER[outcome(run.results.get(t["id"]))])
    return grouped


def pair_file_name(pair) -> str:
    """Where a pair's tests are, relative to index.html."""
    return f"pairs/{quote(pair[0], safe='')}-{quote(pair[1], safe='')}.js"


def _pair_stubs(pairs: dict[tuple[str, str], Counts], grouped: dict):
    for pair, counts in pairs.items():
        if not grouped.get(pair):
            continue
        yield (
            f"<details class='pair' id='{escape(pair_anchor(pair))}' "
            f"data-file='{escape(pair_file_name(pair))}'><summary>"
            f"{_pair_name(pair)}: {counts.tests} tests, {counts.conflict_free} conflict-free "
            f"({percent_text(counts.share_conflict_free)}), {counts.conflicting} conflicting, "
            f"{counts.mismatch} mismatched, {counts.left_path} left the path, "
            f"{counts.not_run} not run</summary>"
            "<div class='tests'>Loading the tests&hellip;</div></details>"
        )


def _test_pairs(grouped: dict) -> str:
    """JSON for the page's script: test id -> the anchor of its pair's section. Ids are
    ``<A>-<B>/...`` (docs/format-tests.md), so one entry per prefix covers a pair; a test
    whose prefix also names another pair gets an entry of its own."""
    by_prefix: dict[str, set] = {}
    for pair, tests in grouped.items():
        for test in tests:
            by_prefix.setdefault(test["id"].split("/")[0], set()).add(pair)
    entries = {}
    for pair, tests in grouped.items():
        for test in tests:
            prefix = test["id"].split("/")[0]
            if len(by_prefix[prefix]) == 1:
                entries[prefix] = pair_anchor(pair)
            else:
                entries[test["id"]] = pair_anchor(pair)
    # "</" cannot end the inline script early once escaped.
    return json.dumps(entries, sort_keys=True).replace("</", "<\\/")


def pair_fragment(tests: list[dict], run: Run, changes: dict[str, str]) -> str:
    """The HTML of one pair's tests, as its section shows them once loaded."""
    return "\n".join(
        _test_entry(test, run.results.get(test["id"]), changes.get(test["id"])) for test in tests
    )


def _test_entry(test: dict, result: dict | None, change: str | None) -> str:
    anchor = escape(test_anchor(test["id"]))
    calls = " &parallel; ".join(escape(format_call(call)) for call in test["calls"])
    conflicts = result.get("conflicts", []) if result is not None else []
    count = f" &middot; {len(conflicts)} conflicting lines" if conflicts else ""
    line = f"{escape(test['id'])} &middot; {calls} &middot; {_badge(result)}{count}"
    if change:
        line += f' <span class="badge b-change">{escape(change)}</span>'
    if result is not None and outcome(result) == CONFLICT_FREE and result["status"] == "ok":
        # Most tests are plain conflict-free ones; a one-liner keeps the page small.
        return f"<div class='test' id='{anchor}'>{line}</div>"
    return (
        f"<details class='test' id='{anchor}'><summary>{line}</summary>"
        f"<div class='body'>{_test_body(test, result)}</div></details>"
    )


def _json_block(label: str, value) -> str:
    return f"<div><b>{escape(label)}</b><pre>{escape(json.dumps(value))}</pre></div>"


def _test_body(test: dict, result: dict | None) -> str:
    parts = [_json_block("setup", test.get("setup")), _json_block("expected", test.get("expect"))]
    if result is None:
        parts.append("<p>No results line: the run never reached this test.</p>")
        return "".join(parts)
    if "results" in result:
        parts.append(_json_block("results", result["results"]))
    if result.get("detail"):
        parts.append(f"<p><b>detail</b> {escape(result['detail'])}</p>")
    if result.get("conflicts"):
        parts.append(_conflicts_table(result["conflicts"]))
    elif outcome(result) == CONFLICTING:
        parts.append("<p>Marked conflicting, but no conflicting line was recorded.</p>")
    if result.get("false_sharing"):
        parts.append(
            "<p><b>false sharing not counted</b> (heap lines whose sharing depends on "
            "where objects were allocated; see docs/tracer.md)</p>"
        )
        parts.append(_conflicts_table(result["false_sharing"]))
    return "".join(parts)


def _access(access: dict) -> tuple[str, str]:
    mode = "write" if access.get("write") else "read"
    return mode, "<br>".join(escape(pc) for pc in access["pcs"]) or "?"


def _conflicts_table(conflicts: list[dict]) -> str:
    rows = [
        "<table class='grid'><tr><th>line</th><th>data</th><th>kind</th><th>sharing</th>"
        "<th>a</th><th>a-side code</th><th>b</th><th>b-side code</th></tr>"
    ]
    for conflict in conflicts:
        a_mode, a_sites = _access(conflict["a"])
        b_mode, b_sites = _access(conflict["b"])
        pairs = "<br>".join(escape(f"{a} / {b}") for a, b in conflict.get("sites", []))
        sharing = escape(conflict.get("sharing", "?")) + (f"<br>{pairs}" if pairs else "")
        rows.append(
            f"<tr><td>{escape(str(conflict.get('line', '?')))}</td>"
            f"<td>{escape(data_name(conflict))}</td><td>{escape(conflict['kind'])}</td>"
            f"<td>{sharing}</td>"
            f"<td>{a_mode}</td><td>{a_sites}</td><td>{b_mode}</td><td>{b_sites}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)
