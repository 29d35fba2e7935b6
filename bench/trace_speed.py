"""Tracer speed: guest time per test with and without the plugin, and tests per second.

Boots the same batch in one VM configuration, without the conflict-tracing plugin and with
it, in turn, for `--rounds` rounds (a round: one boot of each), and reports the guest's own
run time per test (boot excluded) for both, their ratio (the plugin's slowdown) per round and
the median of the rounds with their range (one pair of boots moved 0.86-1.46x on this host
within hours: a single pair cannot judge a bar of 1.1x), QEMU's CPU seconds per boot (less
sensitive than times to other work on the host) and the end-to-end rate of a `scalecheck
run`. With
`--other-plugin SO` (another build, e.g. an earlier one copied aside) the batch is also booted
with that plugin, right after this build's, for a side-by-side comparison.

Usage: python3 bench/trace_speed.py [--tests FILE] [--copies N] [--sample N] [--rounds N]
           [--other-plugin SO] [--json]
"""

import argparse
import statistics
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
    parser.add_argument("--rounds", type=int, default=3, help="boots of each, in turn")
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
        boots = api.guest_times(tests, plugins * args.rounds, args.repeats, tmp / "boots")
        rounds = [boots[k : k + len(plugins)] for k in range(0, len(boots), len(plugins))]
        run_dir = tmp / "run"
        run_dir.mkdir()
        api.write_tests(run_dir / "tests.jsonl", {"model": "posix"}, tests)
        summary = api.run_tests(run_dir, repeats=args.repeats, jobs=1)
    result = {
        "tests": len(tests),
        "repeats": args.repeats,
        "rounds": args.rounds,
        "guest_ms_per_test_without_plugin": round(statistics.median(r[0][0] for r in rounds), 2),
        "qemu_cpu_seconds_without_plugin": round(statistics.median(r[0][1] for r in rounds), 1),
        **_plugin_figures(rounds, 1, ""),
        "run_tests_per_second_including_boot": summary["tests_per_second"],
        "run_seconds": summary["seconds"],
        "repeat_agreement": summary["repeat_agreement"],
    }
    if args.other_plugin:
        result.update(_plugin_figures(rounds, 2, "other_"))
    print_result(result, args.json)


def _plugin_figures(rounds: list, which: int, prefix: str) -> dict:
    """Boot ``which`` of each round against the round's boot without a plugin: the
    medians over the rounds, and each round's ratio."""
    ms = statistics.median(r[which][0] for r in rounds)
    cpu = statistics.median(r[which][1] for r in rounds)
    slowdowns = [round(r[which][0] / r[0][0], 2) for r in rounds]
    cpu_ratios = [round(r[which][1] / r[0][1], 2) for r in rounds]
    return {
        f"guest_ms_per_test_with_{prefix}plugin": round(ms, 2),
        f"{prefix}plugin_slowdown": round(statistics.median(slowdowns), 2),
        f"{prefix}plugin_slowdown_per_round": slowdowns,
        f"qemu_cpu_seconds_with_{prefix}plugin": round(cpu, 1),
        f"{prefix}plugin_qemu_cpu_ratio_per_round": cpu_ratios,
    }


if __name__ == "__main__":
    main()
