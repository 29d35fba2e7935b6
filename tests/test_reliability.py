"""A hostile but fair user: two commands on one directory, damaged results, bad arguments,
unwritable directories. Each gets one line and exit 2, or is repaired; nothing is lost,
doubled or silent, and no traceback is printed. Runs on the user-space target (a small C
library under qemu-x86_64: seconds, not a VM)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_COUNTER = ROOT / "examples" / "refcount" / "shared.toml"

needs_qemu_user = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None, reason="qemu-user not installed (scripts/setup.sh)"
)


def command(*args) -> list[str]:
    return [sys.executable, "-m", "scalecheck.cli", *map(str, args)]


def cli(*args, timeout=600):
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=timeout)


def one_line_error(done, code=2) -> str:
    """The one line a command refused with; no traceback."""
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("scalecheck: error: "), (
        done.stderr
    )
    return done.stderr


@pytest.fixture(scope="module")
def counter_tests(tmp_path_factory):
    out = tmp_path_factory.mktemp("counter")
    for stage in (["analyze", "--model", "counter", "--out", out, "--jobs", "1"], ["testgen", out]):
        done = cli(*stage)
        assert done.returncode == 0, done.stderr
    return out


def copy_run(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("trace", "report"))
    return target


def records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "trace" / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


def count_tests(run_dir: Path) -> int:
    return len((run_dir / "tests.jsonl").read_text().splitlines()) - 1


# ------------------------------------------------------------------ one run per directory


@needs_qemu_user
def test_two_runs_started_together_one_refused_records_intact(counter_tests, tmp_path):
    run_dir = copy_run(counter_tests, tmp_path / "run")
    # 40 repeats per test: the first run lasts seconds, long enough to meet the second.
    args = ["run", "--target", f"lib:{SHARED_COUNTER}", run_dir, "--repeats", "40", "-j", "1"]
    first = subprocess.Popen(command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    second = subprocess.Popen(command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ended = [(p.wait(timeout=600), p.stderr.read().decode()) for p in (first, second)]
    codes = sorted(code for code, _ in ended)
    assert codes == [0, 2], ended
    refused = next(err for code, err in ended if code == 2)
    assert refused.count("\n") == 1 and "Traceback" not in refused, refused
    assert f"{run_dir} is in use by pid " in refused and "scalecheck run" in refused
    ids = [record["id"] for record in records(run_dir)]
    assert len(ids) == len(set(ids)) == count_tests(run_dir)
    assert all(record["status"] == "ok" for record in records(run_dir))


def test_a_held_directory_is_refused_naming_its_holder(counter_tests, tmp_path):
    run_dir = copy_run(counter_tests, tmp_path / "run")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from scalecheck.common import rundir_lock\n"
            f"with rundir_lock.locked(Path({str(run_dir)!r})):\n"
            "    print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        for stage in (
            ["testgen", run_dir],
            ["analyze", "--model", "counter", "--out", run_dir],
            ["run", "--target", f"lib:{SHARED_COUNTER}", run_dir],
            # On a cluster too: the submitting process, which owns DIR, takes the lock.
            ["run", "--target", f"lib:{SHARED_COUNTER}", run_dir, "--cluster", "local:1"],
            ["report", run_dir],
        ):
            line = one_line_error(cli(*stage))
            assert f"in use by pid {holder.pid} on " in line and " since 20" in line, line
    finally:
        holder.communicate("")
    # Released when its holder ends: the next command goes ahead.
    assert cli("testgen", run_dir).returncode == 0


def test_the_lock_of_a_dead_process_is_taken_over(counter_tests, tmp_path):
    run_dir = copy_run(counter_tests, tmp_path / "run")
    ended = subprocess.Popen(["true"])
    ended.wait()
    dead_pid = ended.pid
    (run_dir / ".scalecheck.lock").write_text(
        json.dumps({"pid": dead_pid, "host": os.uname().nodename, "command": "scalecheck run x"})
    )
    done = cli("testgen", run_dir)
    assert done.returncode == 0, done.stderr
    assert f"locked by pid {dead_pid}" in done.stderr and "taking it over" in done.stderr
    assert (run_dir / ".scalecheck.lock").read_text() == ""  # released at the end


# ------------------------------------------------------------------ repairable results


@needs_qemu_user
def test_run_repairs_a_torn_middle_line_and_a_record_without_id(counter_tests, tmp_path):
    run_dir = copy_run(counter_tests, tmp_path / "run")
    args = ["run", "--target", f"lib:{SHARED_COUNTER}", run_dir, "--json"]
    assert cli(*args).returncode == 0
    results = run_dir / "trace" / "results.jsonl"
    lines = results.read_text().splitlines()
    torn, without_id = json.loads(lines[3])["id"], json.loads(lines[5])["id"]
    lines[3] = lines[3][:50]  # torn by a crash, then appended after
    lines[5] = json.dumps({k: v for k, v in json.loads(lines[5]).items() if k != "id"})
    results.write_text("\n".join(lines) + "\n")
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert "2 damaged lines (4, 6)" in done.stderr and "Traceback" not in done.stderr
    assert json.loads(done.stdout)["finished"] == 2  # the two tests traced again
    ids = [record["id"] for record in records(run_dir)]
    assert len(ids) == len(set(ids)) == count_tests(run_dir) and {torn, without_id} <= set(ids)
    kept = (run_dir / "trace" / "damaged.jsonl").read_text().splitlines()
    assert kept == [lines[3], lines[5]]
    # The report reads the repaired store without a note.
    report = cli("report", run_dir)
    assert report.returncode == 0 and report.stderr == "", report.stderr


# ------------------------------------------------------------------ bad arguments


@pytest.mark.parametrize(
    "args, says",
    [
        (["run", "DIR", "--batch", "0"], "--batch: must be at least 1, got 0"),
        (["run", "DIR", "--limit", "-1"], "--limit: must be 0 or more, got -1"),
        (["run", "DIR", "-j", "0"], "--jobs/-j: must be at least 1, got 0"),
        (["run", "DIR", "--timeout", "0"], "--timeout: must be above 0 seconds, got 0"),
        (["run", "DIR", "--repeats", "0"], "--repeats: must be at least 1, got 0"),
        (["run", "DIR", "--ops", ","], "--ops: ',' names no operation"),
        (["analyze", "--model", "counter", "--out", "DIR", "--solver-timeout", "-1"], "got -1"),
        (["analyze", "--model", "counter", "--out", "DIR", "--model-timeout", "0"], "above 0"),
        (["analyze", "--model", "counter", "--out", "DIR", "--jobs", "0"], "at least 1"),
        (["analyze", "--model", "counter", "--out", "DIR", "--ops", " , "], "names no operation"),
        (["testgen", "DIR", "--cap", "0"], "--cap: must be at least 1, got 0"),
        (["testgen", "DIR", "--jobs", "x"], "--jobs/-j: 'x' is not an integer"),
        (["pipeline", "--out", "DIR", "--limit", "-1"], "--limit: must be 0 or more"),
        (["pipeline", "--out", "DIR", "--ops", ","], "names no operation"),
        (["bench", "run", "x", "--out", "DIR", "--runs", "0"], "--runs: must be at least 1"),
    ],
)
def test_bad_arguments_are_refused_when_parsed(args, says, tmp_path):
    done = cli(*[str(tmp_path / "d") if arg == "DIR" else arg for arg in args])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert says in done.stderr.splitlines()[-1], done.stderr
    assert not (tmp_path / "d").exists()  # refused before anything was done


def test_a_call_that_is_not_an_object_is_one_line(counter_tests, tmp_path):
    run_dir = copy_run(counter_tests, tmp_path / "run")
    tests = run_dir / "tests.jsonl"
    lines = tests.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "calls": [1, 2]})
    tests.write_text("\n".join(lines) + "\n")
    line = one_line_error(cli("run", "--target", f"lib:{SHARED_COUNTER}", run_dir))
    assert "tests.jsonl:3: every call must be an object" in line


# ------------------------------------------------------------------ unwritable directories


def _read_only_mount_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


def read_only(directory: Path, *args):
    """A command run where ``directory`` is mounted read-only (a mount namespace of its
    own: the tests run as root, whom file modes do not stop)."""
    if os.geteuid() != 0 and not _read_only_mount_works():
        directory.chmod(0o555)
        return cli(*args)
    script = f'mount --bind -o ro "{directory}" "{directory}" && exec "$@"'
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", *command(*args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.skipif(not _read_only_mount_works(), reason="no mount namespaces here")
@needs_qemu_user
def test_read_only_directories_are_one_line(counter_tests, tmp_path):
    run_dir = copy_run(counter_tests, tmp_path / "run")
    assert cli("run", "--target", f"lib:{SHARED_COUNTER}", run_dir).returncode == 0
    for args in (["run", "--target", f"lib:{SHARED_COUNTER}", run_dir], ["report", run_dir]):
        line = one_line_error(read_only(run_dir, *args))
        assert f"cannot write output directory {run_dir}" in line and "read-only" in line


def test_trace_being_a_file_is_one_line(counter_tests, tmp_path):
    run_dir = copy_run(counter_tests, tmp_path / "run")
    (run_dir / "trace").write_text("a file where the trace directory goes")
    line = one_line_error(cli("run", "--target", f"lib:{SHARED_COUNTER}", run_dir))
    assert "trace is a file where a directory is needed" in line


def test_a_kernel_directory_is_named_as_such(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    header = {"format": "scalecheck-tests", "version": 1, "model": "posix"}
    (run_dir / "tests.jsonl").write_text(json.dumps(header) + "\n")
    line = one_line_error(cli("run", run_dir, "--kernel", tmp_path))
    assert f"kernel image {tmp_path} is a directory" in line


def test_a_compiler_warning_made_fatal_is_shown(tmp_path):
    """A library that fails -Werror: the warning itself, not only cc1's closing line."""
    library = tmp_path / "lib"
    shutil.copytree(SHARED_COUNTER.parent, library)
    source = library / "shared.c"
    source.write_text(source.read_text() + "\nstatic int unused_helper(void) { return 1; }\n")
    manifest = library / "shared.toml"  # its cflags have -Wall -Werror
    out = tmp_path / "run"
    done = cli("analyze", "--model", "counter", "--out", out, "--jobs", "1")
    assert done.returncode == 0 and cli("testgen", out).returncode == 0
    done = cli("run", "--target", f"lib:{manifest}", out)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    first = done.stderr.splitlines()[0]
    assert "unused_helper" in first and "-Werror=unused-function" in first, done.stderr


# ------------------------------------------------------------------ deterministic tests


def test_testgen_gives_the_same_bytes_whatever_the_jobs(tmp_path):
    out = tmp_path / "posix"
    done = cli("analyze", "--model", "posix", "--ops", "rename,unlink,close", "--out", out)
    assert done.returncode == 0, done.stderr
    made = []
    for jobs in ("2", "1", "2"):
        done = cli("testgen", out, "--jobs", jobs)
        assert done.returncode == 0, done.stderr
        made.append((out / "tests.jsonl").read_bytes())
    assert made[0] == made[1] == made[2] and made[0].count(b"\n") > 100


@needs_qemu_user
def test_pipeline_rerun_on_a_finished_run_keeps_every_record(tmp_path):
    out = tmp_path / "run"
    args = ["pipeline", "--target", f"lib:{SHARED_COUNTER}", "--out", out, "--jobs", "1"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    tests_before = (out / "tests.jsonl").stat().st_mtime_ns
    before = records(out)
    again = cli(*args)
    assert again.returncode == 0, again.stderr
    assert "is current" in again.stderr + again.stdout
    assert (out / "tests.jsonl").stat().st_mtime_ns == tests_before  # not regenerated
    assert records(out) == before and len(before) == count_tests(out)
    assert not list((out / "trace").glob("results.*.jsonl"))  # nothing set aside


# ------------------------------------------------------------------ model errors


def write_model(directory: Path, name: str, operations: str, init: str = "self.x = Int().any()"):
    path = directory / f"{name}.py"
    path.write_text(
        "from scalecheck.model import Int, Model, ok, operation\n\n\n"
        f"class {name.title()}(Model):\n"
        f"    def __init__(self):\n        {init}\n\n"
        "    @operation()\n    def inc(self):\n        self.x = self.x + 1\n        return ok()\n"
        + operations
    )
    return path


def analyze_within(model, out, limit: str):
    """`scalecheck analyze --json` of ``model`` with a model time limit, one process."""
    options = ["--model-timeout", limit, "--jobs", "1", "--json"]
    return cli("analyze", "--model", model, "--out", out, *options, timeout=120)


def test_a_looping_operation_is_a_model_error_within_the_limit(tmp_path):
    model = write_model(
        tmp_path,
        "loop",
        "\n    @operation()\n    def spin(self):\n        while True:\n            pass\n",
    )
    done = analyze_within(model, tmp_path / "out", limit="0.5")
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["totals"]["error_paths"] == 2  # spin || spin, spin || inc
    assert all("longer than 0.5 s" in error["error"] for error in summary["model_errors"])
    assert done.stderr.count("model error: ") == 2 and "spin" in done.stderr


def test_the_model_limit_counts_cpu_not_the_clock(tmp_path):
    """Model code that waits (as on a loaded machine, where it waits for a core) uses no
    CPU: 1.2 s of waiting per path against a 0.5 s limit is no model error."""
    model = write_model(
        tmp_path,
        "nap",
        "\n    @operation()\n    def nap(self):\n        __import__('time').sleep(0.3)\n"
        "        return ok()\n",
    )
    done = analyze_within(model, tmp_path / "out", limit="0.5")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["error_paths"] == 0


def test_an_unsupported_argument_type_is_refused_at_load(tmp_path):
    model = write_model(
        tmp_path,
        "floaty",
        "\n    @operation(v=float)\n    def set(self, v):\n        return ok()\n",
    )
    line = one_line_error(cli("analyze", "--model", model, "--out", tmp_path / "out"))
    assert "operation set, argument v: type float is not supported" in line


def test_an_operation_returning_a_non_result_is_refused_at_load(tmp_path):
    model = write_model(
        tmp_path, "five", "\n    @operation()\n    def get(self):\n        return 5\n"
    )
    line = one_line_error(cli("analyze", "--model", model, "--out", tmp_path / "out"))
    assert "operation get returned 5, not a result" in line


def test_an_init_that_raises_shows_its_reason(tmp_path):
    model = write_model(tmp_path, "init", "", init='raise ValueError("no state today")')
    done = cli("analyze", "--model", model, "--out", tmp_path / "out")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "model error: inc || inc path 0: ValueError: no state today" in done.stderr


def test_a_lock_taken_a_moment_ago_is_refused_with_its_holders_name(tmp_path):
    from scalecheck.common import rundir_lock
    from scalecheck.common.errors import UserError

    # A holder between its flock and writing its name (as a command just started).
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, json, os, sys, time\n"
            f"fd = os.open({str(tmp_path / rundir_lock.LOCK_NAME)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "time.sleep(0.3)\n"
            "os.pwrite(fd, json.dumps({'pid': os.getpid(), 'host': 'h', 'command': "
            "'scalecheck run X', 'since': 'then'}).encode(), 0)\n"
            "time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UserError) as refused, rundir_lock.locked(tmp_path):
            pass
        assert f"in use by pid {holder.pid}" in str(refused.value)
    finally:
        holder.kill()
        holder.wait()
