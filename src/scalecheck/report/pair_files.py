"""``report/pairs/<A>-<B>.js``: one pair's tests, loaded by index.html when the pair's
section opens. Each file is one call, ``scalecheckPair(anchor, html)``: a script runs from
a plain directory (file://) as from a web server, where reading a JSON file would not."""

import json
from pathlib import Path

from scalecheck.formats.resultsfile import Run
from scalecheck.report.html_page import pair_anchor, pair_file_name, pair_fragment

LOADER = "scalecheckPair"


def write_pair_files(report_dir: Path, run: Run, grouped: dict, changes: dict[str, str]):
    """Writes every pair's file; files of an earlier report for pairs that have no tests
    now are removed, so the directory holds only what index.html links to."""
    wanted = {report_dir / pair_file_name(pair) for pair, tests in grouped.items() if tests}
    (report_dir / "pairs").mkdir(exist_ok=True)
    for stale in (report_dir / "pairs").glob("*.js"):
        if stale not in wanted:
            stale.unlink()
    for pair, tests in grouped.items():
        if not tests:
            continue
        html = pair_fragment(tests, run, changes)
        text = f"{LOADER}({json.dumps(pair_anchor(pair))}, {json.dumps(html)});\n"
        (report_dir / pair_file_name(pair)).write_text(text, encoding="utf-8")


def read_pair_file(path: Path) -> str:
    """The HTML a pair file carries (for tests and tools that read the report)."""
    text = path.read_text(encoding="utf-8")
    prefix = f"{LOADER}("
    if not text.startswith(prefix) or not text.rstrip().endswith(");"):
        raise ValueError(f"{path}: not a report pair file")
    _anchor, html = json.loads("[" + text.strip()[len(prefix) : -2] + "]")
    return html
