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
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from scalecheck.run import testcase
from scalecheck.run.linux import facts, guest_render, vm
from scalecheck.run.linux.guest_build import ensure_built
from scalecheck.run.run_cli import run_tests

CALIBRATION = Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration.jsonl"


def guest_ms_per_test(tests, built, kernel, entries, plugin, repeats, workdir) -> tuple:
    """(guest ms per test, QEMU's CPU seconds) of one boot with ``plugin`` (None: none)."""
    text = f"S repeats={repeats} timeout_ms=5000 fs=tmpfs warmup=0\n" + "".join(
        guest_render.render(t, i) for i, t in enumerate(tests)
    )
    session = vm.GuestSession(
        workdir,
        kernel,
        "",
        built["base_image"],
        text,
        plugin,
        entries if plugin else None,
    )
    try:
        # After DONE the guest waits for the host to stop it (docs/tracer.md).
        while not session.exited() and not _done(session.out_path):
            time.sleep(0.2)
        cpu_seconds = _cpu_seconds(session.proc.pid)
    finally:
        session.stop()
    lines = session.out_path.read_text(errors="replace").splitlines()
    done = [line for line in lines if line.startswith("DONE")]
    if not done:
        sys.exit(f"guest did not finish: {session.exit_description()}")
    return int(done[0].split()[1]) / len(tests), cpu_seconds


def _cpu_seconds(pid: int) -> float:
    """User and system time of a running process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _done(out_path) -> bool:
    return out_path.exists() and b"\nDONE " in out_path.read_bytes()


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
    _, tests = testcase.read_tests(args.tests)
    if args.sample and args.sample < len(tests):
        tests = tests[:: len(tests) // args.sample][: args.sample]
    tests = [
        testcase.Test(f"{t.id}/copy{k}", t.pair, t.raw) for k in range(args.copies) for t in tests
    ]
    kernel = vm.default_kernel()
    built = ensure_built()
    facts_dir = facts.kernel_facts(kernel, "", built)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        entries = facts_dir / "entries.txt"
        without, cpu_without = guest_ms_per_test(
            tests, built, kernel, entries, None, args.repeats, tmp / "plain"
        )
        with_plugin, cpu_with = guest_ms_per_test(
            tests, built, kernel, entries, built["plugin"], args.repeats, tmp / "traced"
        )
        other = (
            guest_ms_per_test(
                tests, built, kernel, entries, args.other_plugin, args.repeats, tmp / "other"
            )
            if args.other_plugin
            else None
        )
        run_dir = tmp / "run"
        run_dir.mkdir()
        with open(run_dir / "tests.jsonl", "w") as f:
            f.write(
                json.dumps({"format": "scalecheck-tests", "version": 1, "model": "posix"}) + "\n"
            )
            for t in tests:
                f.write(json.dumps(dict(t.raw, id=t.id)) + "\n")
        summary = run_tests(run_dir, repeats=args.repeats, jobs=1)
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
    print(
        json.dumps(result, indent=1)
        if args.json
        else "\n".join(f"{k}: {v}" for k, v in result.items())
    )


if __name__ == "__main__":
    main()
