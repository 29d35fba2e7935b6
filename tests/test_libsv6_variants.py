"""libsv6 on a sample of the generated tests of the POSIX model's sockets, fork,
posix_spawn and fstatx (traced under qemu-x86_64, as in CI): every result as the model
says in some order, and every test conflict-free, among them one test of each pair that
posix_spawn's copy under the fd partition's lock made conflict (docs/libsv6.md)."""

import json
import shutil
from pathlib import Path

import pytest

from scalecheck.run.run_cli import run_tests

SAMPLE = Path(__file__).resolve().parent / "data" / "libsv6-variants-sample.jsonl"

pytestmark = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None, reason="qemu-user not installed (scripts/setup.sh)"
)


def test_libsv6_runs_the_new_operations_conflict_free(tmp_path):
    shutil.copy(SAMPLE, tmp_path / "tests.jsonl")
    summary = run_tests(tmp_path, target="libsv6", quiet=True, jobs=1)
    lines = (tmp_path / "trace" / "results.jsonl").read_text().splitlines()
    records = {r["id"]: r for r in map(json.loads, lines[1:])}
    tests = [json.loads(line) for line in SAMPLE.read_text().splitlines()[1:]]
    assert len(records) == len(tests) >= 40
    assert {op for t in tests for op in t["pair"]} >= {
        "sendto",
        "recvfrom",
        "fork",
        "posix_spawn",
        "fstatx",
    }
    assert {r["status"] for r in records.values()} == {"ok"}
    assert summary["mismatch"] == summary["error"] == summary["crash"] == 0
    conflicting = {test_id for test_id, r in records.items() if not r["conflict_free"]}
    assert conflicting == set()


def test_two_sends_into_one_unordered_socket_share_no_line(tmp_path):
    """sendto || sendto on one empty unordered socket (the generated test p5/t1 with B's
    socket made A's, by hand): each send takes a place in its own core's partition of
    the capacity, so no line is shared at any granularity (summing every partition's
    length to check the capacity conflicted on `struct usock.queues[1].length`)."""
    shutil.copy(SAMPLE.parent / "libsv6-same-socket.jsonl", tmp_path / "tests.jsonl")
    summary = run_tests(tmp_path, target="libsv6", quiet=True, jobs=1)
    lines = (tmp_path / "trace" / "results.jsonl").read_text().splitlines()
    [record] = [json.loads(line) for line in lines[1:]]
    assert record["status"] == "ok" and summary["mismatch"] == 0
    assert record["conflicts"] == record["false_sharing"] == []
    assert record["views"] == {"stable": True, "line": True, "bytes": True}
