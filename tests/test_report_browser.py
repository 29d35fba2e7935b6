"""The report in a real browser (Debian's headless Chromium, scripts/setup.d/65-browser.sh):
the first page opens, hovering over a heat map cell shows the pair's counts and condition,
and drilling down into a pair loads its tests and shows a conflict's data name, from a plain
directory (file://) and from a web server alike. A screenshot of the page is kept in the
test's directory (pytest's tmp_path) for people to look at."""

import functools
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from scalecheck.analyze.analyze import analyze_model
from scalecheck.report import make_report
from scalecheck.report.browser import Browser, find_chromium

DATA = Path(__file__).parent / "data"
DATA_NAME = "files_struct.file_lock"  # given to a conflict of open-open/p1/t1 below
TIMEOUT = 120  # seconds per browser step: generous for a loaded 2-core machine


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    """The report of fake run a, whose first conflict carries a data name, with a real
    analysis of stat and close (so the stat x close cell has a condition)."""
    if find_chromium() is None:
        pytest.fail("chromium is not installed: run scripts/setup.d/65-browser.sh")
    directory = tmp_path_factory.mktemp("browser") / "run_a"
    shutil.copytree(DATA / "report_fake_run_a", directory)
    results = directory / "trace" / "results.jsonl"
    lines = results.read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    for record in records:
        if record["id"] == "open-open/p1/t1":
            record["conflicts"][0]["data"] = DATA_NAME
    results.write_text("\n".join([lines[0], *map(json.dumps, records)]) + "\n")
    analyze_model("posix", ["stat", "close"], directory, jobs=1, quiet=True)
    make_report(directory)
    return directory / "report"


@pytest.fixture(scope="module")
def server(report_dir):
    """`python -m http.server`'s handler serving the report directory."""
    handler = functools.partial(_QuietHandler, directory=str(report_dir))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.mark.parametrize("served", ["file", "http"])
def test_report_opens_hovers_and_drills_down_in_chromium(report_dir, server, served, tmp_path):
    base = report_dir.as_uri() + "/" if served == "file" else server
    with Browser(timeout=TIMEOUT) as browser:
        browser.open(base + "index.html")
        assert browser.evaluate("document.querySelectorAll('table.heat td[data-tip]').length")
        assert browser.evaluate("document.querySelectorAll('[id^=\"test-\"]').length") == 0

        # Hover: the box shows the pair's counts and the analysis' condition.
        cell = "table.heat td[data-tip^='stat x close']"
        browser.hover(cell)
        tip = browser.wait_for(
            "!document.getElementById('tip').hidden && document.getElementById('tip').innerText",
            "the heat map's hover box",
        )
        condition = json.loads(
            (report_dir.parent / "analysis" / "pairs" / "stat-close.json").read_text()
        )["conditions"]["commutes"]["text"]
        summary = json.loads((report_dir / "summary.json").read_text())
        (counts,) = [p for p in summary["pairs"] if p["pair"] == ["stat", "close"]]
        assert tip == (
            f"stat x close: {counts['tests']} tests, {counts['conflict_free']} conflict-free, "
            f"{counts['conflicting']} conflicting, {counts['not_run']} not run\n"
            f"commutes: {condition}"
        )
        browser.screenshot(tmp_path / f"hover-{served}.png")

        # Drill-down: the open x open cell leads to its section, which loads its tests.
        browser.click("table.heat a[href='#pair-open-open']")
        browser.wait_for(
            "document.getElementById('pair-open-open').getAttribute('data-loaded') === '1'",
            "open x open's tests",
        )
        assert browser.evaluate("document.getElementById('pair-open-open').open")
        browser.click("[id='test-open-open/p1/t1'] > summary")
        table = browser.wait_for(
            "(function () { var t = document.querySelector(\"[id='test-open-open/p1/t1'] table\");"
            " return t && t.offsetParent !== null && t.innerText; })()",
            "the conflicts of open-open/p1/t1",
        )
        assert DATA_NAME in table and "alloc_fd+0x4a" in table

        # A link to a test of a pair not loaded yet loads that pair and opens the test.
        browser.evaluate("location.hash = '#test-stat-close/p1/t1'")
        browser.wait_for(
            "(function () { var t = document.getElementById('test-stat-close/p1/t1');"
            " return t && t.offsetParent !== null; })()",
            "stat-close/p1/t1 opened from a link",
        )
        shot = tmp_path / f"report-{served}.png"
        browser.screenshot(shot)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        print(f"screenshot: {shot}")
