"""Do two test files hold the same tests? For checking that a change to analysis or test
generation (a speed-up, a refactoring) left the generated tests alone.

Tests are compared by content (setup, calls, expected results; not ids), per pair: the
same number of tests and the same multiset of contents. Where contents differ, the tests'
isomorphism classes are compared too: a test's class is its content with every integer
renamed by order of first appearance (the equality pattern among its values), so a
generator that picked other concrete representatives of the same classes shows up as
"same classes, other values" rather than as different tests.

Usage: python3 bench/testgen_agreement.py OLD/tests.jsonl NEW/tests.jsonl [--json]
Exit code 0 when both files hold the same classes with the same counts, 1 otherwise.
"""

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalecheck.testfile import LABEL_FIELDS, content_hash, read_tests


def isomorphism_class(test: dict) -> str:
    """The test's content with integers renamed 0, 1, 2... by first appearance."""
    names: dict[int, int] = {}

    def rename(value):
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, dict):
                return {key: rename(item) for key, item in sorted(value.items())}
            if isinstance(value, list):
                return [rename(item) for item in value]
            return value
        return f"#{names.setdefault(value, len(names))}"

    content = {key: value for key, value in test.items() if key not in LABEL_FIELDS}
    return json.dumps(rename(content), sort_keys=True)


def by_pair(tests: list[dict]) -> dict:
    pairs = defaultdict(list)
    for test in tests:
        pairs[tuple(test["pair"])].append(test)
    return pairs


def compare(old_tests: list[dict], new_tests: list[dict]) -> dict:
    old, new = by_pair(old_tests), by_pair(new_tests)
    rows = []
    for pair in sorted(set(old) | set(new)):
        a, b = old.get(pair, []), new.get(pair, [])
        same_content = Counter(map(content_hash, a)) == Counter(map(content_hash, b))
        same_classes = Counter(map(isomorphism_class, a)) == Counter(map(isomorphism_class, b))
        rows.append(
            {
                "pair": list(pair),
                "old": len(a),
                "new": len(b),
                "same_content": same_content,
                "same_classes": same_classes,
            }
        )
    return {
        "old_tests": len(old_tests),
        "new_tests": len(new_tests),
        "pairs": len(rows),
        "pairs_same_content": sum(row["same_content"] for row in rows),
        "pairs_same_classes": sum(row["same_classes"] for row in rows),
        "differing_pairs": [row for row in rows if not row["same_classes"]],
        "other_values_pairs": [
            row["pair"] for row in rows if row["same_classes"] and not row["same_content"]
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="the reference tests.jsonl")
    parser.add_argument("new", type=Path, help="the tests.jsonl to check against it")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args()
    result = compare(read_tests(args.old)[1], read_tests(args.new)[1])
    agree = not result["differing_pairs"] and result["old_tests"] == result["new_tests"]
    if args.json:
        print(json.dumps({**result, "agree": agree}, indent=1))
    else:
        print(
            f"tests: {result['old_tests']} old, {result['new_tests']} new; pairs: "
            f"{result['pairs']}, same content {result['pairs_same_content']}, "
            f"same classes {result['pairs_same_classes']}"
        )
        for row in result["differing_pairs"]:
            print(f"  differs: {' || '.join(row['pair'])}: {row['old']} old, {row['new']} new")
        if result["other_values_pairs"]:
            pairs = ", ".join(" || ".join(pair) for pair in result["other_values_pairs"])
            print(f"  same classes, other values: {pairs}")
        print("agree" if agree else "DIFFER")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
