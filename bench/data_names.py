"""How precisely a traced run names its conflicting data (docs/tracer.md, "Data names").

Reads DIR/trace/results.jsonl (one run, or two to compare) and prints, over the conflicting
lines of traced tests: the share named more precisely than plain heap (a struct field, a
slab cache and offset, a symbol, or the kind of page), the breakdown by form of name, the
most frequent names, and the host time naming took (DIR/trace/summary.json). With a second
run of the same tests, how often the same conflict (same kind and code-site pairs) got the
same name in both runs.

Several DIRs (the same tests traced on several kernels) give one table, a row per run:
the shares named beyond heap and by struct.field, side by side.

Usage: python3 bench/data_names.py DIR [DIR ...] [--compare OTHER_DIR] [--top N] [--json]
"""

import argparse
import collections
import json
import re
import sys
from pathlib import Path

from scalecheck import api

# `struct.field`, `struct.outer.{a,b}`, `owner.field[]`, `slab[cache].field`.
FIELD_NAME = re.compile(r"^[A-Za-z_]\w*(\[[^\]]*\])?\.")
PAGE_NAMES = ("page cache", "anon page", "page", "page table", "user memory", "vmalloc")


def form_of(name: str) -> str:
    if not name:
        return "unnamed"
    if FIELD_NAME.match(name):
        return "struct.field"
    if name in PAGE_NAMES:
        return name
    return "cache or symbol+offset"


def records(directory: Path) -> dict:
    lines = (directory / "trace" / "results.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines[1:])}


def conflicting_lines(run: dict) -> list[dict]:
    return [c for r in run.values() if r["status"] in ("ok", "mismatch") for c in r["conflicts"]]


def names_by_conflict(record: dict) -> dict:
    """A test's data names, keyed by what identifies a conflict across runs."""
    return {
        (c["kind"], tuple(map(tuple, c["sites"]))): c.get("data", "") for c in record["conflicts"]
    }


def agreement(run: dict, other: dict) -> dict:
    same = differ = 0
    for test_id in run.keys() & other.keys():
        here, there = names_by_conflict(run[test_id]), names_by_conflict(other[test_id])
        for key in here.keys() & there.keys():
            if here[key] == there[key]:
                same += 1
            else:
                differ += 1
    return {"compared": same + differ, "same_name": same}


def kernel_of(directory: Path) -> str:
    """The traced kernel's release, from the results header."""
    header = json.loads((directory / "trace" / "results.jsonl").read_text().splitlines()[0])
    return header.get("kernel", {}).get("release", "") or header.get("target", "")


def measure(directory: Path, top: int) -> dict:
    run = records(directory)
    lines = conflicting_lines(run)
    forms = collections.Counter(form_of(c.get("data", "")) for c in lines)
    summary_path = directory / "trace" / "summary.json"
    naming = json.loads(summary_path.read_text()).get("naming") if summary_path.exists() else None
    return {
        "dir": str(directory),
        "kernel": kernel_of(directory),
        "tests": len(run),
        "conflicting_lines": len(lines),
        "named_beyond_heap": len(lines) - forms["unnamed"],
        "struct_field": forms["struct.field"],
        "forms": dict(forms.most_common()),
        "top_names": collections.Counter(c.get("data", "") for c in lines).most_common(top),
        "naming": naming,
    }


def share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def print_one(result: dict) -> None:
    lines = result["conflicting_lines"]
    print(
        f"{lines} conflicting lines; named beyond `heap`: "
        f"{share(result['named_beyond_heap'], lines)}"
    )
    for form, count in result["forms"].items():
        print(f"  {form}: {count} ({share(count, lines)})")
    print("most frequent names:")
    for name, count in result["top_names"]:
        print(f"  {count:5d}  {name or '(none)'}")
    naming = result["naming"]
    if naming:
        print(f"naming: {naming['lines']} lines, {naming['seconds']} s of host time")


def print_side_by_side(results: list[dict], top: int) -> None:
    """One row per run (a kernel each): the shares, then each run's most frequent names."""
    print(f"{'kernel':<28} {'tests':>6} {'lines':>6} {'beyond heap':>12} {'struct.field':>13}")
    for r in results:
        lines = r["conflicting_lines"]
        print(
            f"{r['kernel']:<28} {r['tests']:>6} {lines:>6} "
            f"{share(r['named_beyond_heap'], lines):>12} {share(r['struct_field'], lines):>13}"
        )
    for r in results:
        print(f"most frequent names on {r['kernel']}:")
        for name, count in r["top_names"][:top]:
            print(f"  {count:5d}  {name or '(none)'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "dirs", type=Path, nargs="+", help="traced runs (several: one row each, e.g. per kernel)"
    )
    parser.add_argument("--compare", type=Path, help="a second run of the same tests")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.compare and len(args.dirs) > 1:
        parser.error("--compare takes one DIR")
    results = [measure(d, args.top) for d in args.dirs]
    if args.compare:
        results[0]["agreement"] = agreement(records(args.dirs[0]), records(args.compare))
    return api.run_printing(lambda: print_results(results, args))


def print_results(results: list[dict], args) -> None:
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=1))
        return
    if len(results) > 1:
        print_side_by_side(results, args.top)
        return
    print_one(results[0])
    if args.compare:
        agreed = results[0]["agreement"]
        compared = agreed["compared"] or 1
        print(
            f"same conflict in both runs: {agreed['compared']}; same name: "
            f"{agreed['same_name']} ({agreed['same_name'] / compared:.1%})"
        )


if __name__ == "__main__":
    sys.exit(main())
