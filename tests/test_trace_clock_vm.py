"""The guest driver's clock on a real Linux kernel under QEMU (TCG): each call finds the
coarse clock the kernel stamps files with past every earlier timestamp (docs/tracer.md,
Noise handling, timestamps). Two writes to one file, each updating its times only when
they are not current: the second writer does so only if its clock moved past the first
writer's stamp, which the driver makes happen by setting the clock, not waiting a tick."""

import json
import shutil
from pathlib import Path

import pytest

from scalecheck.run.linux import vm
from scalecheck.run.run_cli import run_tests

pytestmark = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)

HEADER = {"format": "scalecheck-tests", "version": 1, "model": "posix"}


def _pwrite_pwrite(name: str, procs: list[int]) -> dict:
    """pwrite || pwrite on two units of one file, through an fd of each call's process."""
    fds = [{"10": {"file": 0, "off": 0}} if p in procs else {} for p in (0, 1)]
    return {
        "id": f"pwrite-pwrite/{name}",
        "pair": ["pwrite", "pwrite"],
        "path": 0,
        "model": "posix",
        "setup": {
            "files": {"f0": 0},
            "inodes": [{"nlink": 1, "data": [65, 66]}],
            "pipes": [],
            "procs": [{"fds": fds[0], "maps": {}}, {"fds": fds[1], "maps": {}}],
        },
        "calls": [
            {"op": "pwrite", "proc": procs[0], "args": {"fd": 10, "off": 0, "byte": 68}},
            {"op": "pwrite", "proc": procs[1], "args": {"fd": 10, "off": 1, "byte": 69}},
        ],
        "expect": {"ab": [{"ret": 1}, {"ret": 1}], "ba": [{"ret": 1}, {"ret": 1}]},
    }


TESTS = [_pwrite_pwrite("processes", [0, 1]), _pwrite_pwrite("threads", [0, 0])]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace-clock")
    with open(out / "tests.jsonl", "w") as f:
        for obj in [HEADER, *TESTS]:
            f.write(json.dumps(obj) + "\n")
    run_tests(out, repeats=2, jobs=1)
    lines = (out / "trace" / "results.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines[1:])}


def _functions(record, side: str) -> set[str]:
    return {pc.split("+")[0] for c in record["conflicts"] for pc in c[side]["pcs"]}


@pytest.mark.parametrize("test_id", [t["id"] for t in TESTS])
def test_the_second_write_updates_the_times_the_first_set(records, test_id):
    record = records[test_id]
    assert record["status"] == "ok", record["detail"]
    # Both writes stamp the inode (generic_update_time) in every repeat: the conflict is
    # counted only if each repeat showed it. A second writer still in the first one's
    # tick would find the times current and only read them.
    assert "generic_update_time" in _functions(record, "a"), record["conflicts"]
    assert "generic_update_time" in _functions(record, "b"), record["conflicts"]
