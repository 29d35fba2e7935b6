"""The operations Linux runs beyond the paper's 18 (datagram sockets, fork, posix_spawn,
fstatx), on a real kernel under QEMU: each test's results match the model's in one
order, the children of fork and posix_spawn are reaped outside the traced regions, and
the datagram queue is named where two calls meet on it."""

import json
import shutil
from pathlib import Path

import pytest

from scalecheck.run.linux import vm
from scalecheck.run.run_cli import run_tests

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests" / "data" / "trace_variants.jsonl"
# What a child does after fork returns: exiting and being waited for. Seen in a region,
# it would be the harness's work counted as the call's.
CHILD_EXIT = {"do_exit", "do_group_exit", "exit_mm", "exit_files", "release_task", "do_wait"}

pytestmark = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace-variants")
    shutil.copy(TESTS, out / "tests.jsonl")
    run_tests(out, repeats=2, timeout=2.0, jobs=1)
    lines = (out / "trace" / "results.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines[1:])}


def _tests():
    return [json.loads(line) for line in TESTS.read_text().splitlines()[1:]]


def test_every_new_operation_gives_the_models_result(records):
    tests = _tests()
    assert {op for t in tests for op in t["pair"]} >= {
        "sendto",
        "recvfrom",
        "fork",
        "posix_spawn",
        "fstatx",
    }
    for test in tests:
        record = records[test["id"]]
        assert record["status"] == "ok", (test["id"], record["detail"])
        assert record["results"]["expected_order"] in ("ab", "ba"), test["id"]


def test_children_are_reaped_outside_the_traced_regions(records):
    spawning = [t["id"] for t in _tests() if {"fork", "posix_spawn"} & set(t["pair"])]
    assert len(spawning) >= 4
    for test_id in spawning:
        functions = {
            pc.split("+")[0]
            for conflict in records[test_id]["conflicts"]
            for side in ("a", "b")
            for pc in conflict[side]["pcs"]
        }
        assert not functions & CHILD_EXIT, (test_id, functions & CHILD_EXIT)


def test_a_send_and_a_receive_on_one_socket_meet_on_its_queue(records):
    (test,) = [
        t
        for t in _tests()
        if t["pair"] == ["sendto", "recvfrom"]
        and t["calls"][0]["args"]["sock"] == t["calls"][1]["args"]["sock"]
    ]
    # The queue's head (its lock, its links) is written by both: named by the code that
    # queues and dequeues, since naming the data from guest memory can fall short.
    conflicts = records[test["id"]]["conflicts"]
    sites = {side: {pc.split("+")[0] for c in conflicts for pc in c[side]["pcs"]} for side in "ab"}
    assert "skb_queue_tail" in sites["a"], sites
    assert "__skb_try_recv_from_queue" in sites["b"], sites
