"""Two kernels end to end: Debian 12's installed 6.1 and its 6.12, fetched by the set-up
into the cache (scripts/setup.d/25-kernels.sh, never /boot), each traced on two cases
(tests/data/kernel_cases.jsonl) whose structs both kernels have:

- two threads' open: conflicts on files_struct.file_lock and the fdtable, named on both
  (6.12 marks slab pages differently from 6.1: page.page_type, not a page flag; the names
  come from each kernel's own BTF);
- faults on two file mappings of one process (a write, and a write to a read-only mapping,
  SIGSEGV): on 6.1 both take mm_struct.mmap_lock; 6.12 handles them under per-VMA locks
  (Linux 6.4) and is conflict-free.
"""

import json
import shutil
from pathlib import Path

import pytest

from scalecheck.run.linux import kernels, vm
from scalecheck.run.run_cli import run_tests

CASES = Path(__file__).parent / "data" / "kernel_cases.jsonl"
OPEN, FAULTS = (
    "open-open/threads/different-files",
    "memwrite-memwrite/one-process/two-file-mappings",
)

pytestmark = pytest.mark.skipif(
    not shutil.which(vm.QEMU)
    or not list(Path("/boot").glob("vmlinuz-6.1.*"))
    or not any(k["series"] == "6.12" for k in kernels.fetched()),
    reason="needs qemu-system-x86, linux-image-amd64 (6.1) and a fetched 6.12 "
    "(scripts/setup.d/20-tracer.sh, 25-kernels.sh)",
)


@pytest.fixture(scope="module", params=["6.1", "6.12"])
def traced(request, tmp_path_factory) -> tuple[str, dict]:
    series = request.param
    out = tmp_path_factory.mktemp(f"kernel-{series}")
    shutil.copy(CASES, out / "tests.jsonl")
    kernel = None if series == "6.1" else series  # 6.1: the installed kernel, in /boot
    summary = run_tests(out, kernel=kernel, repeats=2, jobs=1, quiet=True)
    assert summary["kernel"]["release"].startswith(series + "."), summary["kernel"]
    assert summary["naming"]["support"]["missing"] == ""
    lines = (out / "trace" / "results.jsonl").read_text().splitlines()
    return series, {r["id"]: r for r in map(json.loads, lines[1:])}


def test_fd_table_conflict_named_on_each_kernel(traced):
    _, records = traced
    record = records[OPEN]
    assert record["status"] == "ok" and not record["conflict_free"], record
    names = [c["data"] for c in record["conflicts"]]
    assert any(n.startswith("files_struct.") and "file_lock" in n for n in names), names
    assert any(n.startswith("fdtable.") for n in names), names
    assert all(names), names  # every conflicting line named, none left as bare heap


def test_faults_on_two_mappings_share_mmap_lock_only_before_per_vma_locks(traced):
    series, records = traced
    record = records[FAULTS]
    assert record["status"] == "ok", record
    names = [c["data"] for c in record["conflicts"]]
    if series == "6.1":
        assert "mm_struct.mmap_lock" in names, names
    else:
        assert record["conflict_free"], names
