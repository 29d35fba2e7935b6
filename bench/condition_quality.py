#!/usr/bin/env python3
"""Quality and cost of the pairs' conditions, Servois-style: per pair, the disjuncts and
atoms of the raw path conditions and of the printed condition (when it commutes, when it
diverges), the time simplification adds, and an independent Z3 check of every printed
condition against the explored paths (recheck in engine/conditions.py).

usage: python3 bench/condition_quality.py [--model posix] [--ops a,b,...] [--jobs 2]
Exploration is not timed; simplification is timed per pair in CPU seconds (what it adds
to `scalecheck analyze` on one core) and in wall seconds. Prints the load average, since
other work on the machine stretches wall time. Exits 1 if any check fails or any pair is
left unsimplified.
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalecheck import api

VERDICTS = ("commutes", "diverges")


def measure(job) -> dict:
    model_spec, a, b = job
    regions = api.pair_regions(api.load_model(model_spec), a, b)
    conditions = api.pair_conditions(regions, symmetric=a == b)
    problems = [api.recheck(regions, conditions, verdict) for verdict in VERDICTS]
    return {"pair": (a, b), "paths": len(regions), "conditions": conditions, "problems": problems}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="posix")
    parser.add_argument("--ops", help="comma-separated operations (default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args()
    ops = api.select_ops(api.load_model(args.model), args.ops)
    print(f"load average before: {os.getloadavg()}")
    started = time.monotonic()
    work = [(args.model, a, b) for a, b in api.all_pairs(ops)]
    rows = sorted(
        api.map_unordered(measure, work, args.jobs),
        key=lambda row: work.index((args.model, *row["pair"])),
    )
    wall = time.monotonic() - started

    print(
        f"{'pair':22} {'paths':>5}  {'commutes: raw -> printed':>30}  "
        f"{'diverges: raw -> printed':>30}  {'cpu s':>6} {'wall s':>6}  check"
    )
    totals = {verdict: [0, 0, 0, 0] for verdict in VERDICTS}
    cpu = seconds = 0.0
    unsimplified, failed = [], []
    for row in rows:
        conditions, name = row["conditions"], " || ".join(row["pair"])
        cells = []
        for verdict in VERDICTS:
            f = conditions[verdict]["figures"]
            figures = (f["raw_disjuncts"], f["raw_atoms"], f["disjuncts"], f["atoms"])
            totals[verdict] = [t + x for t, x in zip(totals[verdict], figures, strict=True)]
            cells.append(
                f"{figures[0]:4} cases {figures[1]:5} atoms -> {figures[2]:3} {figures[3]:4}"
            )
            if not conditions[verdict]["simplified"]:
                unsimplified.append(f"{name} ({verdict}: {conditions[verdict]['why']})")
        problems = [p for p in row["problems"] if p]
        if problems:
            failed.append(f"{name}: {'; '.join(problems)}")
        cpu += conditions["cpu_seconds"]
        seconds += conditions["seconds"]
        print(
            f"{name:22} {row['paths']:5}  {cells[0]:>30}  {cells[1]:>30}  "
            f"{conditions['cpu_seconds']:6.2f} {conditions['seconds']:6.2f}  "
            f"{'ok' if not problems else 'FAILED'}"
        )
    print()
    for verdict in VERDICTS:
        raw_cases, raw_atoms, cases, atoms = totals[verdict]
        print(
            f"{verdict}: {raw_cases} path conditions with {raw_atoms} atoms -> {cases} cases "
            f"with {atoms} atoms ({100 * atoms / max(raw_atoms, 1):.1f}% of the atoms)"
        )
    print(
        f"{len(rows)} pairs; simplification: {cpu:.1f} CPU s, {seconds:.1f} s summed wall "
        f"time over {args.jobs} jobs; whole run (exploring and checking too) {wall:.0f} s"
    )
    print(f"left unsimplified: {', '.join(unsimplified) if unsimplified else 'none'}")
    print(
        f"printed vs raw (Z3, every pair, both verdicts): "
        f"{'all equivalent' if not failed else 'FAILED: ' + ', '.join(failed)}"
    )
    print(f"load average after: {os.getloadavg()}")
    return 1 if failed or unsimplified else 0


if __name__ == "__main__":
    sys.exit(main())
