"""Do two analyses of one model agree? For checking that a change to the analyzer (a
speed-up, a refactoring) left its results alone.

Exact agreement of the files cannot be asked for: the order of a condition's cases and
literals, a path's printed condition and the names in its SMT-LIB text follow the ids Z3
gives terms, so everything the process built before (two runs of the same code, with the
pairs spread over the workers differently, already differ). What must agree, pair by pair:
- the paths: their number and, path by path, the verdict (commutes, diverges, model
  error), whether Z3 answered unknown, and the observations test generation reads;
  with --paths also each path's constraints (its SMT-LIB text), proved equivalent by Z3;
- each verdict's condition: the same formula as OLD's, proved equivalent by Z3, or, where
  the two differ only outside the explored paths (a condition may say anything there,
  engine/conditions.py), NEW's checked exact against the explored paths (recheck).
Also printed, for information: conditions with equal text and the conditions' figures.

Usage: python3 bench/analysis_agreement.py OLD_DIR NEW_DIR [--paths] [--json]
Exit code 0 when the analyses agree, 1 otherwise.
"""

import argparse
import json
import sys
from pathlib import Path

import z3

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalecheck import api

VERDICTS = ("commutes", "diverges")
PATH_FIELDS = ("path", "commutes", "unknown", "error", "observations")


def equivalent(old_smt2: str, new_smt2: str) -> bool:
    """Whether two SMT-LIB texts assert the same formula (Z3 proves it: unsat)."""
    old = z3.And(list(z3.parse_smt2_string(old_smt2)))
    new = z3.And(list(z3.parse_smt2_string(new_smt2)))
    solver = z3.Solver()
    solver.add(old != new)
    return solver.check() == z3.unsat


def compare_pair(model_cls, old: dict, new: dict, check_paths: bool) -> dict:
    a, b = new["pair"]
    problems = []
    if len(old["paths"]) != len(new["paths"]):
        problems.append(f"{len(old['paths'])} paths, now {len(new['paths'])}")
    for old_path, new_path in zip(old["paths"], new["paths"], strict=False):
        fields = [f for f in PATH_FIELDS if old_path[f] != new_path[f]]
        other_smt2 = check_paths and old_path["smt2"] != new_path["smt2"]
        if other_smt2 and not equivalent(old_path["smt2"], new_path["smt2"]):
            fields.append("smt2")
        if fields:
            problems.append(f"path {old_path['path']}: other {', '.join(fields)}")
    same_text = equivalent_conditions = rechecked = 0
    regions = None
    for verdict in VERDICTS:
        old_condition, new_condition = old["conditions"][verdict], new["conditions"][verdict]
        if old_condition["text"] == new_condition["text"]:
            same_text += 1
        elif equivalent(old_condition["smt2"], new_condition["smt2"]):
            equivalent_conditions += 1
        else:
            if regions is None:
                regions = api.pair_regions(model_cls, a, b)
            problem = api.recheck(regions, new["conditions"], verdict)
            if problem:
                problems.append(f"condition: {problem}")
            else:
                rechecked += 1
    figures = {
        verdict: [old["conditions"][verdict]["figures"], new["conditions"][verdict]["figures"]]
        for verdict in VERDICTS
    }
    return {
        "pair": [a, b],
        "problems": problems,
        "same_text": same_text,
        "equivalent": equivalent_conditions,
        "exact_on_paths": rechecked,
        "figures_differ": any(old_f != new_f for old_f, new_f in figures.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="the reference analysis (scalecheck analyze --out)")
    parser.add_argument("new", type=Path, help="the analysis to check against it")
    parser.add_argument(
        "--paths", action="store_true", help="also prove each path's constraints equivalent"
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args()
    old_meta, new_meta = api.read_analysis_meta(args.old), api.read_analysis_meta(args.new)
    if (old_meta["model"], old_meta["ops"]) != (new_meta["model"], new_meta["ops"]):
        print("the analyses are of other models or operations")
        return 1
    model_cls = api.load_model(new_meta["model"])
    rows = []
    for a, b in api.all_pairs(new_meta["ops"]):
        old, new = api.read_pair(args.old, a, b), api.read_pair(args.new, a, b)
        rows.append(compare_pair(model_cls, old, new, args.paths))
    totals = {
        key: sum(row[key] for row in rows)
        for key in ("same_text", "equivalent", "exact_on_paths", "figures_differ")
    }
    disagree = [row for row in rows if row["problems"]]
    if args.json:
        print(json.dumps({"totals": totals, "pairs": rows, "agree": not disagree}, indent=1))
    else:
        print(
            f"pairs: {len(rows)}, {len(disagree)} disagreeing; conditions ({2 * len(rows)}): "
            f"{totals['same_text']} same text, {totals['equivalent']} proved equivalent, "
            f"{totals['exact_on_paths']} other outside the paths and exact on them; "
            f"pairs with other figures: {totals['figures_differ']}"
        )
        for row in disagree:
            for problem in row["problems"][:5]:
                print(f"  {' || '.join(row['pair'])}: {problem}")
        print("DIFFER" if disagree else "agree")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
