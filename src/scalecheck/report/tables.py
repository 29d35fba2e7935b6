"""Plain-text tables for bottlenecks.txt, mismatches.txt and diff.txt (readable in a
terminal or a CI log)."""

import json

from scalecheck.report.stats import Site

SITE_HEADERS = ["rank", "data", "tests", "op pairs", "lines", "kind", "a-side code", "b-side code"]


def format_table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(value) for value in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines) + "\n"


def site_rows(site_jsons: list[dict]) -> list[list]:
    return [
        [
            s["rank"],
            s["data"],
            s["tests"],
            s["op_pairs"],
            s["lines"],
            s["kind"],
            *s["sites"],
        ]
        for s in site_jsons
    ]


def format_bottlenecks(sites: list[Site], title: str) -> str:
    if not sites:
        return f"{title}\n\nNo conflicting test recorded a conflict site.\n"
    ranked = [site.as_json(rank) for rank, site in enumerate(sites, start=1)]
    headline = "\n".join(f"{s['rank']:>3}. {s['label']}: {s['tests']} tests" for s in ranked[:10])
    return (
        f"{title}\n\nTop sites:\n{headline}\n\nAll sites, ranked by distinct tests:\n"
        + format_table(SITE_HEADERS, site_rows(ranked))
    )


def format_mismatches(mismatched: list[dict], implementation: str) -> str:
    """mismatches.txt; ``implementation``: "kernel" or "library" (Run.implementation)."""
    if not mismatched:
        return "Every traced test's results fit an order the model allows.\n"
    return _format_results(
        f"{len(mismatched)} tests whose {implementation} results fit neither order the model "
        f"allows (model and {implementation} disagree; not counted as conflict-free or "
        "conflicting):",
        mismatched,
        implementation,
    )


def format_left_path(left: list[dict], implementation: str) -> str:
    """left-path.txt: tests whose results are a legal choice off the test's path."""
    if not left:
        return "No traced test's results left the path its test was made for.\n"
    return _format_results(
        f"{len(left)} tests whose {implementation} results fit a choice the model allows that "
        "leaves the path the test was made for (legal; not a mismatch; not counted as "
        "conflict-free or conflicting):",
        left,
        implementation,
    )


def _format_results(headline: str, entries: list[dict], implementation: str) -> str:
    lines = [headline]
    width = max(len(implementation), len("model"))
    for entry in entries:
        model = entry["model"] or {}
        lines += [
            f"{entry['id']} ({entry['pair'][0]} x {entry['pair'][1]})",
            f"  {implementation + ':':<{width + 1}} A={json.dumps(entry['got']['a'])} "
            f"B={json.dumps(entry['got']['b'])}",
            f"  {'model:':<{width + 1}} A then B {json.dumps(model.get('ab'))}, "
            f"B then A {json.dumps(model.get('ba'))}",
        ]
    return "\n".join(lines) + "\n"
