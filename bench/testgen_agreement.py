"""Do two test files hold the same tests? For checking that a change to analysis or test
generation (a speed-up, a refactoring) left the generated tests alone.

Exact agreement of the files cannot be asked for: which representative Z3 returns for an
isomorphism class, and which classes fill a capped path, depend on the ids Z3 gives terms,
so on everything the process built before (two runs of the same code, with the pairs
spread over the workers differently, already differ). What must agree:
- the number of tests of every path (pair, path number);
- on every path with fewer tests than the cap, the classes: test generation stopped there
  because no class was left, so the tests cover all of the path's classes, whatever the
  representatives (when testgen.json counts no unknown paths, which also end early).
A change to the search itself (which solutions fill a capped path, or a value-capped
class) changes the counts of capped paths; then what must hold is coverage:
- every value pattern (a test's `values`) a path's tests took before, it takes now
  (`paths_losing_value_patterns`), on the pairs with no capped path and no class with
  patterns left over (testgen.json): elsewhere a search may fill the cap with other
  classes or patterns, so those paths are listed apart (`capped_paths_other_patterns`);
- each pair's counts in the testgen.json beside each file (paths capped, unknown,
  failed, unrealizable; classes with value patterns left over; the open equalities
  found, varied both ways, infeasible one way, not varied) are the same
  (`pairs_with_other_counts`: pair, count, old, new).
Also printed, for information: tests equal in content, and paths whose tests have equal
"shapes" (content with every value renamed by first appearance: a coarse stand-in for the
class, which an incidental equality of unrelated values can split).

Usage: python3 bench/testgen_agreement.py OLD/tests.jsonl NEW/tests.jsonl [--json]
[--coverage]. Exit code 0 when every path has as many tests in both files (with
--coverage: when no path lost a value pattern and every pair's counts agree), 1 otherwise.
"""

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalecheck import api


def shape(test: dict) -> str:
    """The test's content with every scalar except booleans renamed by first appearance."""
    names: dict = {}

    def rename(value):
        if isinstance(value, dict):
            return {rename(key): rename(item) for key, item in value.items()}
        if isinstance(value, list):
            return [rename(item) for item in value]
        if isinstance(value, bool) or value is None:
            return value
        return f"#{names.setdefault(value, len(names))}"

    content = {key: value for key, value in test.items() if key not in api.LABEL_FIELDS}
    content.pop("pair", None)
    return json.dumps(rename(content), sort_keys=True)


def by_path(tests: list[dict]) -> dict:
    paths = defaultdict(list)
    for test in tests:
        paths[tuple(test["pair"]), test["path"]].append(test)
    return paths


def value_patterns(tests: list[dict]) -> dict:
    """Per path, the value patterns its tests cover (a test made for an open equality's
    side, `covers`, aside)."""
    patterns = defaultdict(set)
    for key, path_tests in by_path(tests).items():
        patterns[key] = {
            tuple(test["values"])
            for test in path_tests
            if "values" in test and "covers" not in test
        }
    return patterns


def lost_value_patterns(old_tests: list[dict], new_tests: list[dict]) -> list:
    """[pair, path, how many of the old file's value patterns of the path the new one
    lacks] for each path that lacks some."""
    old, new = value_patterns(old_tests), value_patterns(new_tests)
    return [
        [*key[0], key[1], len(old[key] - new.get(key, set()))]
        for key in sorted(old, key=str)
        if old[key] - new.get(key, set())
    ]


def capped_pairs(summary: dict) -> set:
    """The pairs of a testgen.json summary with a capped path or a class with value
    patterns left over."""
    return {
        tuple(row["pair"])
        for row in summary["pairs"]
        if row["capped_paths"] or row["value_capped_classes"]
    }


# testgen.json's counts per pair whose agreement shows the same coverage (all but tests).
PAIR_COUNTS = tuple(name for name in api.TESTGEN_COUNTS if name != "tests")


def pair_count_differences(old_summary: dict, new_summary: dict) -> list:
    """[pair, count, old, new] for each count (PAIR_COUNTS and the open equalities')
    that differs between two testgen.json summaries."""
    new_rows = {tuple(row["pair"]): row for row in new_summary["pairs"]}
    differ = []
    for old_row in old_summary["pairs"]:
        new_row = new_rows.get(tuple(old_row["pair"]), {"open_equalities": {}})
        for name in PAIR_COUNTS:
            if old_row[name] != new_row.get(name):
                differ.append(["-".join(old_row["pair"]), name, old_row[name], new_row.get(name)])
        for name, count in old_row["open_equalities"].items():
            if count != new_row["open_equalities"].get(name):
                new_count = new_row["open_equalities"].get(name)
                differ.append(
                    ["-".join(old_row["pair"]), f"open_equalities.{name}", count, new_count]
                )
    return differ


def compare(old_tests: list[dict], new_tests: list[dict], cap: int) -> dict:
    old, new = by_path(old_tests), by_path(new_tests)
    keys = sorted(set(old) | set(new), key=str)
    counts_differ = [key for key in keys if len(old.get(key, [])) != len(new.get(key, []))]
    complete = [key for key in keys if key not in counts_differ and len(old[key]) < cap]
    capped = [key for key in keys if key not in counts_differ and len(old[key]) >= cap]

    def same_shapes(key):
        return Counter(map(shape, old[key])) == Counter(map(shape, new[key]))

    same_content = sum(
        (
            Counter(map(api.content_hash, old.get(k, [])))
            & Counter(map(api.content_hash, new.get(k, [])))
        ).total()
        for k in keys
    )
    return {
        "old_tests": len(old_tests),
        "new_tests": len(new_tests),
        "paths": len(keys),
        "paths_with_other_counts": [[*key[0], key[1]] for key in counts_differ],
        "complete_paths": len(complete),
        "complete_paths_same_shapes": sum(map(same_shapes, complete)),
        "capped_paths": len(capped),
        "capped_paths_same_shapes": sum(map(same_shapes, capped)),
        "tests_same_content": same_content,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="the reference tests.jsonl")
    parser.add_argument("new", type=Path, help="the tests.jsonl to check against it")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument(
        "--coverage",
        action="store_true",
        help="agree on coverage (value patterns, testgen.json's counts per pair), not counts",
    )
    args = parser.parse_args()
    old_header, old_tests = api.read_tests(args.old)
    new_header, new_tests = api.read_tests(args.new)
    if old_header.get("cap") != new_header.get("cap"):
        print(
            f"the files were made with other caps: {old_header.get('cap')}, {new_header.get('cap')}"
        )
        return 1
    result = compare(old_tests, new_tests, old_header["cap"])
    result["paths_losing_value_patterns"] = lost_value_patterns(old_tests, new_tests)
    summaries = [path.parent / "testgen.json" for path in (args.old, args.new)]
    if all(summary.exists() for summary in summaries):
        old_summary, new_summary = (json.loads(path.read_text()) for path in summaries)
        result["pairs_with_other_counts"] = pair_count_differences(old_summary, new_summary)
        capped = capped_pairs(old_summary)
        lost = result.pop("paths_losing_value_patterns")
        result["paths_losing_value_patterns"] = [p for p in lost if tuple(p[:2]) not in capped]
        result["capped_paths_other_patterns"] = [p for p in lost if tuple(p[:2]) in capped]
    elif args.coverage:
        print(f"--coverage needs the testgen.json beside each file: {summaries[0]}, {summaries[1]}")
        return 1
    if args.coverage:
        agree = not (result["paths_losing_value_patterns"] or result["pairs_with_other_counts"])
    else:
        agree = not result["paths_with_other_counts"]
    if args.json:
        print(json.dumps({**result, "agree": agree}, indent=1))
    else:
        r = result
        print(
            f"tests: {r['old_tests']} old, {r['new_tests']} new, {r['tests_same_content']} "
            f"equal in content; paths: {r['paths']}, "
            f"{len(r['paths_with_other_counts'])} with another number of tests"
        )
        print(
            f"complete paths (fewer tests than the cap, so the same classes): "
            f"{r['complete_paths']}, same shapes {r['complete_paths_same_shapes']}; "
            f"capped paths: {r['capped_paths']}, same shapes {r['capped_paths_same_shapes']}"
        )
        for pair_path in r["paths_with_other_counts"][:20]:
            print(f"  other count: {pair_path}")
        lost = r["paths_losing_value_patterns"]
        print(f"paths lacking a value pattern the old file covers: {len(lost)}")
        for pair_path in lost[:20]:
            print(f"  lacks value patterns: {pair_path}")
        if "capped_paths_other_patterns" in r:
            others = len(r["capped_paths_other_patterns"])
            print(f"  and on pairs with capped paths or classes (expected): {others}")
        if "pairs_with_other_counts" in r:
            print(f"pair counts (testgen.json) that differ: {len(r['pairs_with_other_counts'])}")
            for difference in r["pairs_with_other_counts"][:20]:
                print(f"  {difference}")
        print("agree" if agree else "DIFFER")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
