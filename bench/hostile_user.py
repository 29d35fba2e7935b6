"""A hostile but fair user, replayed: every trial of the reliability review (two commands
on one directory, testgen over one analysis with other --jobs, pipeline rerun on a finished
run, damaged results, bad models, bad arguments, unwritable directories, misleading
diffs), each with its exit code and the line it printed; then the tracebacks seen, records
lost or doubled, and hangs (a command that outlives its time limit).

Runs are on the user-space target (examples/refcount, a C library under qemu-x86_64):
the lock, the results store, the argument checks and the error handler are the same code
for the Linux target, which only boots a VM where this runs a program.

Usage: python3 bench/hostile_user.py [--out DIR] [--json]
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "examples" / "refcount" / "shared.toml"
LIB = f"lib:{SHARED}"
# A command that runs longer than this is counted as a hang.
HANG_SECONDS = 300

MODELS = {
    "loop": "    @operation()\n    def spin(self):\n        while True:\n            pass\n",
    "floaty": "    @operation(v=float)\n    def set(self, v):\n        return ok()\n",
    "five": "    @operation()\n    def get(self):\n        return 5\n",
    "init": "",
}


class Trials:
    def __init__(self, work: Path):
        self.work = work
        self.rows: list[dict] = []
        self.tracebacks = 0
        self.hangs = 0

    def command(self, *args) -> list[str]:
        return [sys.executable, "-m", "scalecheck.cli", *map(str, args)]

    def run(self, *args, stdin=None) -> subprocess.CompletedProcess:
        try:
            done = subprocess.run(
                self.command(*args), capture_output=True, text=True, timeout=HANG_SECONDS
            )
        except subprocess.TimeoutExpired:
            self.hangs += 1
            return subprocess.CompletedProcess(args, -1, "", "HANG")
        self.tracebacks += done.stderr.count("Traceback")
        return done

    def record(self, trial: str, code, line: str, **figures) -> None:
        self.rows.append({"trial": trial, "exit": code, "line": line.strip(), **figures})
        print(f"{trial:<44} {code!s:>5}  {line.strip()}", flush=True)

    def said(self, done: subprocess.CompletedProcess) -> str:
        """The line that matters: an error or note, a model error, else the last."""
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        for marker in ("scalecheck: error:", "scalecheck: note:", "model error:", "error:"):
            found = [line for line in lines if marker in line]
            if found:
                return found[0]
        return lines[-1] if lines else (done.stdout.strip().splitlines() or [""])[-1]

    def tests_dir(self, name: str) -> Path:
        """A copy of the counter model's analysed tests, without results."""
        base = self.work / "counter"
        if not (base / "tests.jsonl").exists():
            self.run("analyze", "--model", "counter", "--out", base, "--jobs", "1")
            self.run("testgen", base)
        target = self.work / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(base, target, ignore=shutil.ignore_patterns("trace", "report"))
        return target

    def records(self, run_dir: Path) -> tuple[int, int, int]:
        """(records, distinct ids, tests) of a run directory."""
        lines = (run_dir / "trace" / "results.jsonl").read_text().splitlines()[1:]
        ids = [json.loads(line).get("id") for line in lines]
        tests = len((run_dir / "tests.jsonl").read_text().splitlines()) - 1
        return len(ids), len(set(ids)), tests

    # ---------------------------------------------------------------- the trials

    def two_runs(self, apart: float) -> None:
        run_dir = self.tests_dir(f"two-runs-{apart}")
        args = self.command("run", "--target", LIB, run_dir, "--repeats", "40", "-j", "1")
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(apart)
        second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ended = [(p.wait(timeout=HANG_SECONDS), p.stderr.read()) for p in (first, second)]
        self.tracebacks += sum(err.count("Traceback") for _, err in ended)
        records, distinct, tests = self.records(run_dir)
        refused = next((err for code, err in ended if code == 2), "")
        self.record(
            f"two runs on one DIR, {apart:g} s apart",
            "/".join(str(code) for code, _ in ended),
            (refused.strip().splitlines() or ["(none refused)"])[0]
            + f" [{records} records, {distinct} tests, of {tests}]",
            records=records,
            distinct=distinct,
            tests=tests,
        )

    def testgen_jobs(self) -> None:
        out = self.work / "posix"
        self.run("analyze", "--model", "posix", "--ops", "rename,unlink,close", "--out", out)
        files = []
        for jobs in ("2", "2", "1"):
            done = self.run("testgen", out, "--jobs", jobs)
            files.append((out / "tests.jsonl").read_bytes())
        same = files[0] == files[1] == files[2]
        lines = files[0].count(b"\n")
        self.record(
            "testgen --jobs 2, 2, 1 over one analysis",
            done.returncode,
            f"{'byte-identical' if same else 'DIFFERENT'} tests.jsonl ({lines} lines)",
            identical=same,
        )

    def pipeline_rerun(self) -> None:
        out = self.work / "pipeline"
        args = ["pipeline", "--target", LIB, "--out", out, "--jobs", "1"]
        self.run(*args)
        before, _, tests = self.records(out)
        done = self.run(*args)
        after, distinct, _ = self.records(out)
        aside = len(list((out / "trace").glob("results.*.jsonl")))
        self.record(
            "pipeline rerun on a finished run",
            done.returncode,
            f"{after} of {before} records kept, {aside} files set aside, {tests} tests",
            records=after,
            distinct=distinct,
            tests=tests,
            set_aside=aside,
        )

    def damaged_results(self) -> None:
        run_dir = self.tests_dir("damaged")
        self.run("run", "--target", LIB, run_dir)
        results = run_dir / "trace" / "results.jsonl"
        lines = results.read_text().splitlines()
        lines[3] = lines[3][:50]
        lines[5] = json.dumps({k: v for k, v in json.loads(lines[5]).items() if k != "id"})
        results.write_text("\n".join(lines) + "\n" + lines[6][:30])  # and a torn last line
        done = self.run("report", run_dir)
        self.record("report, results with damaged lines", done.returncode, self.said(done))
        done = self.run("run", "--target", LIB, run_dir)
        records, distinct, tests = self.records(run_dir)
        self.record(
            "run, results with damaged lines",
            done.returncode,
            self.said(done) + f" [{records} records, {distinct} tests, of {tests}]",
        )

    def bad_models(self) -> None:
        for name, operations in MODELS.items():
            init = (
                'raise ValueError("no state today")' if name == "init" else "self.x = Int().any()"
            )
            path = self.work / f"{name}.py"
            path.write_text(
                "from scalecheck.model import Int, Model, ok, operation\n\n\n"
                f"class {name.title()}(Model):\n    def __init__(self):\n        {init}\n\n"
                "    @operation()\n    def inc(self):\n        self.x = self.x + 1\n"
                "        return ok()\n\n" + operations
            )
            started = time.monotonic()
            done = self.run("analyze", "--model", path, "--out", self.work / f"out-{name}")
            self.record(
                f"analyze, model {name}",
                done.returncode,
                self.said(done) + f" [{time.monotonic() - started:.1f} s]",
            )

    def bad_arguments(self) -> None:
        run_dir = self.tests_dir("arguments")
        for args in (
            ["run", run_dir, "--batch", "0"],
            ["run", run_dir, "--limit", "-1"],
            ["run", run_dir, "-j", "0"],
            ["run", run_dir, "--timeout", "0"],
            ["analyze", "--model", "counter", "--out", run_dir, "--solver-timeout", "-1"],
            ["analyze", "--model", "counter", "--out", run_dir, "--ops", ","],
        ):
            done = self.run(*args)
            shown = " ".join(str(a) for a in args).replace(str(run_dir), "DIR")
            self.record(shown, done.returncode, self.said(done))

    def bad_files(self) -> None:
        run_dir = self.tests_dir("calls")
        tests = run_dir / "tests.jsonl"
        lines = tests.read_text().splitlines()
        lines[2] = json.dumps({**json.loads(lines[2]), "calls": [1, 2]})
        tests.write_text("\n".join(lines) + "\n")
        done = self.run("run", "--target", LIB, run_dir)
        self.record('run, tests.jsonl with "calls": [1, 2]', done.returncode, self.said(done))

        run_dir = self.tests_dir("trace-file")
        (run_dir / "trace").write_text("a file")
        done = self.run("run", "--target", LIB, run_dir)
        self.record("run, DIR/trace is a file", done.returncode, self.said(done))

        run_dir = self.tests_dir("read-only")
        self.run("run", "--target", LIB, run_dir)
        for args in (["run", "--target", LIB, run_dir], ["report", run_dir]):
            script = f'mount --bind -o ro "{run_dir}" "{run_dir}" && exec "$@"'
            done = subprocess.run(
                ["unshare", "-m", "sh", "-c", script, "sh", *self.command(*args)],
                capture_output=True,
                text=True,
                timeout=HANG_SECONDS,
            )
            self.tracebacks += done.stderr.count("Traceback")
            self.record(f"{args[0]}, DIR read-only", done.returncode, self.said(done))

        posix = self.work / "posix-kernel"
        posix.mkdir(exist_ok=True)
        header = {"format": "scalecheck-tests", "version": 1, "model": "posix"}
        (posix / "tests.jsonl").write_text(json.dumps(header) + "\n")
        done = self.run("run", posix, "--kernel", "/boot")
        self.record("run --kernel /boot", done.returncode, self.said(done))

        library = self.work / "werror"
        shutil.rmtree(library, ignore_errors=True)
        shutil.copytree(SHARED.parent, library)
        source = library / "shared.c"
        source.write_text(source.read_text() + "\nstatic int unused_helper(void) { return 1; }\n")
        done = self.run("run", "--target", f"lib:{library / 'shared.toml'}", self.tests_dir("w"))
        self.record("run, a library failing -Werror", done.returncode, self.said(done))

    def diff_granularity(self) -> None:
        line_run, stable_run = self.tests_dir("diff-line"), self.tests_dir("diff-stable")
        self.run("run", "--target", LIB, line_run, "--granularity", "line")
        self.run("run", "--target", LIB, stable_run)
        done = self.run("report", stable_run, "--diff", line_run, "--fail-on-new")
        self.record("report --diff, line against stable", done.returncode, self.said(done))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON at the end")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="hostile-"))
    work.mkdir(parents=True, exist_ok=True)
    trials = Trials(work)
    print(f"{'trial':<44} {'exit':>5}  line printed")
    for trial in (
        lambda: trials.two_runs(0),
        lambda: trials.two_runs(1.5),
        trials.testgen_jobs,
        trials.pipeline_rerun,
        trials.damaged_results,
        trials.bad_models,
        trials.bad_arguments,
        trials.bad_files,
        trials.diff_granularity,
    ):
        trial()
    lost_or_doubled = sum(
        abs(row["records"] - row["tests"]) + row["records"] - row["distinct"]
        for row in trials.rows
        if "records" in row
    )
    print(
        f"\n{len(trials.rows)} trials: {trials.tracebacks} tracebacks, "
        f"{lost_or_doubled} records lost or doubled, {trials.hangs} hangs"
    )
    if args.json:
        print(json.dumps(trials.rows, indent=1))
    return 1 if trials.tracebacks or trials.hangs or lost_or_doubled else 0


if __name__ == "__main__":
    sys.exit(main())
