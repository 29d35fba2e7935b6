"""How precisely a traced run names its conflicting data (docs/tracer.md, "Data names").

Reads DIR/trace/results.jsonl (one run, or two to compare) and prints, over the conflicting
lines of traced tests: the share named more precisely than plain heap (a struct field, a
slab cache and offset, a symbol, or the kind of page), the breakdown by form of name, the
most frequent names, and the host time naming took (DIR/trace/summary.json). With a second
run of the same tests, how often the same conflict (same kind and code-site pairs) got the
same name in both runs.

Usage: python3 bench/data_names.py DIR [--compare OTHER_DIR] [--top N] [--json]
"""

import argparse
import collections
import json
import re
from pathlib import Path

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--compare", type=Path, help="a second run of the same tests")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    run = records(args.dir)
    lines = conflicting_lines(run)
    forms = collections.Counter(form_of(c.get("data", "")) for c in lines)
    summary_path = args.dir / "trace" / "summary.json"
    naming = json.loads(summary_path.read_text()).get("naming") if summary_path.exists() else None
    result = {
        "conflicting_lines": len(lines),
        "named_beyond_heap": len(lines) - forms["unnamed"],
        "forms": dict(forms.most_common()),
        "top_names": collections.Counter(c.get("data", "") for c in lines).most_common(args.top),
        "naming": naming,
    }
    if args.compare:
        result["agreement"] = agreement(run, records(args.compare))
    if args.json:
        print(json.dumps(result, indent=1))
        return
    share = result["named_beyond_heap"] / len(lines) if lines else 0
    print(f"{len(lines)} conflicting lines; named beyond `heap`: {share:.1%}")
    for form, count in forms.most_common():
        print(f"  {form}: {count} ({count / len(lines):.1%})")
    print("most frequent names:")
    for name, count in result["top_names"]:
        print(f"  {count:5d}  {name or '(none)'}")
    if naming:
        print(f"naming: {naming['lines']} lines, {naming['seconds']} s of host time")
    if args.compare:
        agreed = result["agreement"]
        compared = agreed["compared"] or 1
        print(
            f"same conflict in both runs: {agreed['compared']}; same name: "
            f"{agreed['same_name']} ({agreed['same_name'] / compared:.1%})"
        )


if __name__ == "__main__":
    main()
