"""A second kernel end to end: Debian 12's 6.12, fetched by the set-up into the cache
(scripts/setup.d/25-kernels.sh, never /boot), boots under the tracer and names the
conflicts of a calibration case whose structs both kernels have: two threads' open ->
files_struct.file_lock and the fdtable. On 6.12 slab pages are marked differently from
6.1 (page.page_type, not a page flag); the names come from the kernel's own BTF."""

import json
import shutil
from pathlib import Path

import pytest

from scalecheck import kernels
from scalecheck.run import run_tests
from scalecheck.trace.linux import vm

REPO = Path(__file__).resolve().parents[1]
CALIBRATION = REPO / "tests" / "data" / "calibration.jsonl"
CASE = "open-open/threads/different-files"

pytestmark = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not any(k["series"] == "6.12" for k in kernels.fetched()),
    reason="needs qemu-system-x86 and a fetched 6.12 (scripts/setup.d/25-kernels.sh)",
)


def test_second_kernel_names_the_fd_table_conflict(tmp_path):
    lines = CALIBRATION.read_text().splitlines()
    case = next(line for line in lines[1:] if json.loads(line)["id"] == CASE)
    (tmp_path / "tests.jsonl").write_text(lines[0] + "\n" + case + "\n")
    summary = run_tests(tmp_path, kernel="6.12", repeats=2, jobs=1, quiet=True)
    assert summary["kernel"]["release"].startswith("6.12.")
    results = (tmp_path / "trace" / "results.jsonl").read_text().splitlines()
    (record,) = [json.loads(line) for line in results[1:]]
    assert record["status"] == "ok" and not record["conflict_free"], record
    names = [c["data"] for c in record["conflicts"]]
    assert any(n.startswith("files_struct.") and "file_lock" in n for n in names), names
    assert any(n.startswith("fdtable.") for n in names), names
    # Every conflicting line of this case is named, none left as bare heap.
    assert all(names), names
