"""The user-space target's figures: per example and implementation, the conflict-free share
on its full generated test file, and the speed (tests per second) on copies of one file.

Usage: python3 bench/usertarget.py [--out DIR] [--copies N] [--jobs J] [--json]
Example (docs/usertarget.md): python3 bench/usertarget.py --copies 40 --jobs 2
"""

import argparse
import json
import shutil
from pathlib import Path

from scalecheck import api

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
IMPLEMENTATIONS = {
    "refcount": ("shared", "sharded"),
    "kvstore": ("locked", "striped"),
}


def generated(manifest: Path, out: Path) -> Path:
    """A directory with the full generated test file of the manifest's model."""
    model = api.library_model(manifest)
    if not (out / "tests.jsonl").exists():
        api.analyze(model, None, out, quiet=True)
        api.generate_tests(out, quiet=True)
    return out


def shares(out: Path, jobs: int) -> list:
    rows = []
    for example, implementations in IMPLEMENTATIONS.items():
        for name in implementations:
            manifest = EXAMPLES / example / f"{name}.toml"
            run_dir = out / f"{example}-{name}"
            tests = generated(manifest, out / f"{example}-tests")
            run_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(tests / "tests.jsonl", run_dir / "tests.jsonl")
            shutil.rmtree(run_dir / "trace", ignore_errors=True)
            summary = api.run_tests(run_dir, target=f"lib:{manifest}", jobs=jobs, quiet=True)
            traced = summary["conflict_free"] + summary["conflicting"]
            rows.append(
                {
                    "example": example,
                    "implementation": name,
                    "tests": summary["tests"],
                    "conflict_free": summary["conflict_free"],
                    "share": round(summary["conflict_free"] / traced, 4) if traced else None,
                    "not_ok": summary["tests"] - summary["ok"],
                }
            )
    return rows


def speed(out: Path, copies: int, jobs: int) -> dict:
    """Tests per second on `copies` copies of the kvstore file (new ids, same tests)."""
    source = out / "kvstore-tests" / "tests.jsonl"
    header, tests = api.read_tests(source)
    run_dir = out / "speed"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    many = [dict(t, id=f"{t['id']}#{k}") for k in range(copies) for t in tests]
    api.write_tests(run_dir / "tests.jsonl", header, many)
    summary = api.run_tests(
        run_dir, target=f"lib:{EXAMPLES / 'kvstore' / 'striped.toml'}", jobs=jobs, quiet=True
    )
    return {
        "tests": summary["finished"],
        "seconds": summary["seconds"],
        "tests_per_second": summary["tests_per_second"],
        "jobs": jobs,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/bench-usertarget"))
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {
        "shares": shares(args.out, args.jobs),
        "speed": speed(args.out, args.copies, args.jobs),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for row in result["shares"]:
        print(
            f"{row['example']:9} {row['implementation']:8} "
            f"{row['conflict_free']:3}/{row['tests']:<3} conflict-free ({row['share']:.1%}), "
            f"{row['not_ok']} not ok"
        )
    s = result["speed"]
    print(
        f"speed: {s['tests']} tests in {s['seconds']} s = {s['tests_per_second']} tests/s, "
        f"-j {s['jobs']}"
    )


if __name__ == "__main__":
    main()
