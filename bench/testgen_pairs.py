"""CPU seconds of test generation for some pairs of an analysis, in this one process (no
workers, no progress bar), and the tests and counts it made, for `cmp` against another
build's: run it under two checkouts side by side, the same pairs, the same analysis.

Usage: PYTHONPATH=CHECKOUT/src python3 bench/testgen_pairs.py DIR OUT.json PAIR...
(PAIR: a-b as in DIR/analysis/pairs/; default caps). Prints `OUT.json: N tests, S CPU s`.
"""

import argparse
import json
import time
from pathlib import Path

from scalecheck import api


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("analysis", type=Path, help="a directory holding analysis/")
    parser.add_argument("out", type=Path, help="where the tests and counts go (JSON)")
    parser.add_argument("pairs", nargs="+", help="a-b, as the analysis names its pair files")
    args = parser.parse_args()
    started = time.process_time()
    made = {}
    for pair in args.pairs:
        a, b = pair.split("-")
        made[pair] = list(api.pair_tests(args.analysis, a, b))
    seconds = time.process_time() - started
    args.out.write_text(json.dumps(made, sort_keys=True))
    tests = sum(len(tests) for tests, _ in made.values())
    print(f"{args.out}: {tests} tests, {seconds:.1f} CPU s")


if __name__ == "__main__":
    main()
