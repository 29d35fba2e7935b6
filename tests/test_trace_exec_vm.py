"""exec on a real kernel under QEMU: each test's results match the model's in one order
(a call of the exec's own process runs before it), the region holds the exec and ends
where the new image starts (none of the new image's report, the stand-in's hand-over or
an exit in it), the post-exec state is the model's (close-on-exec fds closed, the others
kept, mappings gone: else the result carries `after_exec` and mismatches), and exec ||
exec in one process is reported as an error with its reason."""

import json
import shutil
from pathlib import Path

import pytest

from scalecheck.run.linux import vm
from scalecheck.run.run_cli import run_tests

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests" / "data" / "trace_exec.jsonl"
# Work exec does (do_execveat_common and below): some of it must be in exec's region.
EXEC_WORK = {
    "begin_new_exec",
    "do_close_on_exec",
    "commit_creds",
    "prepare_creds",
    "cap_bprm_creds_from_file",
    "unshare_files",
    "exec_mmap",
}
# What follows the region: the new image's report (fcntl, mincore, a socket write), the
# stand-in continued and its read, waiting for it, exiting.
AFTER_THE_REGION = {
    "do_fcntl",
    "do_mincore",
    "unix_stream_sendmsg",
    "unix_stream_read_generic",
    "kill_pid_info",
    "do_wait",
    "do_exit",
    "do_group_exit",
    "release_task",
}

pytestmark = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)


def _tests():
    return {t["id"]: t for t in map(json.loads, TESTS.read_text().splitlines()[1:])}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace-exec")
    shutil.copy(TESTS, out / "tests.jsonl")
    run_tests(out, repeats=2, timeout=2.0, jobs=1)
    lines = (out / "trace" / "results.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines[1:])}


def _one_process(test):
    return test["calls"][0]["proc"] == test["calls"][1]["proc"]


def test_exec_gives_the_models_result_in_one_order(records):
    tests = _tests()
    runnable = [
        t for t in tests.values() if not (t["pair"] == ["exec", "exec"] and _one_process(t))
    ]
    # Both kinds: the other call in the exec's process (run first) and in the other one.
    assert any(_one_process(t) for t in runnable) and not all(_one_process(t) for t in runnable)
    assert any(
        desc.get("cloexec")
        for t in runnable
        for p in t["setup"]["procs"]
        for desc in p["fds"].values()
    )
    for test in runnable:
        record = records[test["id"]]
        assert record["status"] == "ok", (test["id"], record["detail"])
        assert record["results"]["expected_order"] in ("ab", "ba"), test["id"]


def test_the_new_image_finds_the_models_state_after_exec(records):
    # The exec's process held close-on-exec fds (a file, a pipe's read end), kept ones and
    # two mappings: any difference would be in the result as `after_exec`.
    record = records["exec-open/after-exec"]
    assert record["status"] == "ok", record["detail"]


def test_the_region_holds_the_exec_and_ends_where_the_new_image_starts(records):
    exec_sides = set()
    for test_id in _tests():
        record = records[test_id]
        if record["status"] != "ok":
            continue
        functions = {
            side: {pc.split("+")[0] for c in record["conflicts"] for pc in c[side]["pcs"]}
            for side in "ab"
        }
        assert not (functions["a"] | functions["b"]) & AFTER_THE_REGION, (test_id, functions)
        exec_sides |= functions["a"]
    assert exec_sides & EXEC_WORK, exec_sides


def test_exec_exec_in_one_process_is_an_error_with_its_reason(records):
    record = records["exec-exec/p0/t1"]
    assert record["status"] == "error"
    assert "exec || exec in one process" in record["detail"]
