"""Tracer speed: guest time per test with and without the plugin, and tests per second.

Boots the same batch twice in one VM configuration, once with the conflict-tracing plugin
and once without, and reports the guest's own run time per test (boot excluded) for both,
their ratio (the plugin's slowdown) and the end-to-end rate of a `scalecheck run`.

Usage: python3 bench/trace_speed.py [--tests FILE] [--copies N] [--sample N] [--json]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from scalecheck.run import run_tests
from scalecheck.trace import testcase
from scalecheck.trace.linux import facts, guest_render, vm
from scalecheck.trace.linux.guest_build import ensure_built

CALIBRATION = Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration.jsonl"


def guest_ms_per_test(tests, built, kernel, entries, plugin, repeats, workdir):
    text = f"S repeats={repeats} timeout_ms=5000 fs=tmpfs warmup=0\n" + "".join(
        guest_render.render(t, i) for i, t in enumerate(tests)
    )
    session = vm.GuestSession(
        workdir,
        kernel,
        "",
        built["base_image"],
        text,
        built["plugin"] if plugin else None,
        entries if plugin else None,
    )
    try:
        # After DONE the guest waits for the host to stop it (docs/tracer.md).
        while not session.exited() and not _done(session.out_path):
            time.sleep(0.2)
    finally:
        session.stop()
    lines = session.out_path.read_text(errors="replace").splitlines()
    done = [line for line in lines if line.startswith("DONE")]
    if not done:
        sys.exit(f"guest did not finish: {session.exit_description()}")
    return int(done[0].split()[1]) / len(tests)


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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
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
        without = guest_ms_per_test(
            tests, built, kernel, facts_dir / "entries.txt", False, args.repeats, tmp / "plain"
        )
        with_plugin = guest_ms_per_test(
            tests, built, kernel, facts_dir / "entries.txt", True, args.repeats, tmp / "traced"
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
        "run_tests_per_second_including_boot": summary["tests_per_second"],
        "run_seconds": summary["seconds"],
        "repeat_agreement": summary["repeat_agreement"],
    }
    print(
        json.dumps(result, indent=1)
        if args.json
        else "\n".join(f"{k}: {v}" for k, v in result.items())
    )


if __name__ == "__main__":
    main()
