"""Tracer speed: guest time per test with and without the plugin, and tests per second.

Boots the same batch twice in one VM configuration, once with the conflict-tracing plugin
and once without, and reports the guest's own run time per test (boot excluded) for both,
their ratio (the plugin's slowdown), QEMU's CPU seconds per boot (less sensitive than times
to other work on the host) and the end-to-end rate of a `scalecheck run`. With
`--other-plugin SO` (another build, e.g. an earlier one copied aside) the batch is also booted
with that plugin, right after this build's, for a side-by-side comparison.

Usage: python3 bench/trace_speed.py [--tests FILE] [--copies N] [--sample N]
           [--other-plugin SO] [--json]
"""

import argparse
import sys
import tempfile
from pathlib import Path

from benchlib import print_result
from scalecheck import api

CALIBRATION = Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration.jsonl"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tests", type=Path, default=CALIBRATION, help="a tests.jsonl to take tests from"
    )
    parser.add_argument(
        "--copies", type=int, default=25, help="times each test is repeated in the batch"
    )
    parser.add_argument("--sample", type=int, help="take N tests evenly spread over the file")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--other-plugin", type=Path, help="another build of the plugin (.so) to compare with"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.other_plugin and not args.other_plugin.is_file():
        print(f"--other-plugin: no such file: {args.other_plugin}", file=sys.stderr)
        sys.exit(2)
    _, tests = api.read_tests(args.tests)
    if args.sample and args.sample < len(tests):
        tests = tests[:: len(tests) // args.sample][: args.sample]
    tests = [dict(t, id=f"{t['id']}/copy{k}") for k in range(args.copies) for t in tests]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        plugins = [None, api.this_plugin(), *([args.other_plugin] if args.other_plugin else [])]
        (without, cpu_without), (with_plugin, cpu_with), *others = api.guest_times(
            tests, plugins, args.repeats, tmp / "boots"
        )
        other = others[0] if others else None
        run_dir = tmp / "run"
        run_dir.mkdir()
        api.write_tests(run_dir / "tests.jsonl", {"model": "posix"}, tests)
        summary = api.run_tests(run_dir, repeats=args.repeats, jobs=1)
    result = {
        "tests": len(tests),
        "repeats": args.repeats,
        "guest_ms_per_test_without_plugin": round(without, 2),
        "guest_ms_per_test_with_plugin": round(with_plugin, 2),
        "plugin_slowdown": round(with_plugin / without, 2),
        "qemu_cpu_seconds_without_plugin": round(cpu_without, 1),
        "qemu_cpu_seconds_with_plugin": round(cpu_with, 1),
        "run_tests_per_second_including_boot": summary["tests_per_second"],
        "run_seconds": summary["seconds"],
        "repeat_agreement": summary["repeat_agreement"],
    }
    if other:
        result["guest_ms_per_test_with_other_plugin"] = round(other[0], 2)
        result["other_plugin_slowdown"] = round(other[0] / without, 2)
        result["qemu_cpu_seconds_with_other_plugin"] = round(other[1], 1)
    print_result(result, args.json)


if __name__ == "__main__":
    main()
