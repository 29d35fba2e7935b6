"""Fast checks of the tracer's host side: input validation, the plugin's output format,
the results store, symbol naming and the initramfs writer. No VM is booted here."""

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from scalecheck.errors import UserError
from scalecheck.trace import initramfs, outcome, regions, testfile
from scalecheck.trace.store import ResultsStore
from scalecheck.trace.symbols import KernelSymbols

DATA = Path(__file__).parent / "data"
CALIBRATION = Path(__file__).resolve().parents[1] / "src" / "scalecheck" / "trace" / "calibration.jsonl"
HEADER = {"format": "scalecheck-tests", "version": 1, "model": "posix"}


def write_tests(path: Path, header, *tests):
    path.write_text("\n".join(json.dumps(x) if not isinstance(x, str) else x
                              for x in (header, *tests)) + "\n")
    return path


def cli(*args):
    return subprocess.run([sys.executable, "-m", "scalecheck.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_shipped_test_files_render_for_the_driver():
    for path in (CALIBRATION, DATA / "trace_ops.jsonl"):
        _, tests = testfile.read_tests(path)
        assert tests
        for i, test in enumerate(tests):
            text = testfile.render(test, i)
            assert text.startswith(f"T {i}\n") and text.endswith("E\n")
            assert text.count("\nC ") == 2


def test_all_posix_ops_are_covered_by_the_ops_batch():
    _, tests = testfile.read_tests(DATA / "trace_ops.jsonl")
    used = {op for t in tests for op in t.pair}
    posix_ops = {op for op in testfile.OP_ARGS if not op.startswith("_")}
    assert len(posix_ops) == 18
    assert used == posix_ops


@pytest.mark.parametrize("content, message", [
    ('{"format": "scalecheck-tests", "version": 1}\n{not json', "malformed JSON"),
    ('{"format": "scalecheck-tests", "version": 2}\n', "version 2"),
    ('{"format": "something-else", "version": 1}\n', "not a scalecheck-tests file"),
    ('{"format": "scalecheck-tests", "version": 1}\n{"id": "x"}\n', "needs"),
])
def test_bad_test_files_are_user_errors(tmp_path, content, message):
    (tmp_path / "tests.jsonl").write_text(content)
    with pytest.raises(UserError, match=message):
        testfile.read_tests(tmp_path / "tests.jsonl")


def test_cli_prints_one_line_errors(tmp_path):
    (tmp_path / "tests.jsonl").write_text('{"format": "scalecheck-tests", "version": 7}\n')
    bad_version = cli("run", str(tmp_path))
    assert bad_version.returncode != 0
    assert bad_version.stderr.strip().count("\n") == 0
    assert "version 7" in bad_version.stderr
    write_tests(tmp_path / "tests.jsonl", HEADER)
    missing_kernel = cli("run", str(tmp_path), "--kernel", str(tmp_path / "no-such-vmlinuz"))
    assert missing_kernel.returncode != 0
    assert missing_kernel.stderr.strip().count("\n") == 0
    assert "does not exist" in missing_kernel.stderr
    write_tests(tmp_path / "tests.jsonl", dict(HEADER, model="counter"))
    other_model = cli("run", str(tmp_path))
    assert other_model.returncode != 0 and "no Linux mapping" in other_model.stderr
    no_tests = cli("run", str(tmp_path / "empty-dir"))
    assert no_tests.returncode != 0 and "not found" in no_tests.stderr


def test_run_help():
    result = cli("run", "--help")
    assert result.returncode == 0
    assert "--kernel-args" in result.stdout and "--limit" in result.stdout


def test_unsupported_setups_are_reported_per_test():
    base = json.loads(CALIBRATION.read_text().splitlines()[1])
    too_many = dict(base, setup=dict(base["setup"], inodes=[{"nlink": 1, "data": []}] * 40))
    bad_op = dict(base, calls=[{"op": "fork", "proc": 0, "args": {}}, base["calls"][1]])
    bad_name = dict(base, calls=[{"op": "stat", "proc": 0, "args": {"pn": "a/b"}}, base["calls"][1]])
    for raw, why in ((too_many, "inodes"), (bad_op, "unknown op"), (bad_name, "plain file name")):
        with pytest.raises(testfile.UnsupportedTest, match=why):
            testfile.render(testfile.Test("x", ["open", "open"], raw), 0)


def test_result_matching_with_wildcards():
    assert testfile.result_matches({"ret": 12}, {"ret": "*"})
    assert testfile.result_matches({"ret": 0, "fds": [3, 4]}, {"ret": 0, "fds": ["*", "*"]})
    assert not testfile.result_matches({"ret": 0}, {"errno": "ENOENT"})
    assert not testfile.result_matches({"ret": 1, "data": 65}, {"ret": 1, "data": 66})


def _region_bytes(vcpu, tag, lines):
    """A region record in the plugin's output format (a fake plugin output for the parser)."""
    out = struct.pack("<IIII QQ II", regions.REGION_MAGIC, vcpu, tag, 0, 10, 0, 0, len(lines))
    for paddr, rmask, wmask, pcs in lines:
        out += struct.pack("<QQQQI", paddr, 0xFFFF888000000000 + paddr, rmask, wmask, len(pcs))
        for pc, wrote in pcs:
            out += struct.pack("<QB", pc, wrote)
    return out


def test_region_reader_follows_a_growing_file(tmp_path):
    path = tmp_path / "trace.bin"
    a = _region_bytes(1, 0, [(0x1000, 1, 0, [(0xFFFFFFFF81000010, 0)]), (0x2000, 0, 0xF0, [(0xFFFFFFFF81000020, 1)])])
    b = _region_bytes(2, 1, [(0x1000, 0, 1, [(0xFFFFFFFF81000030, 1)]), (0x3000, 1, 0, [])])
    path.write_bytes(regions.FILE_MAGIC + a + b[:20])
    reader = regions.RegionReader(path)
    first = reader.read_new()
    assert [r.tag for r in first] == [0]
    with open(path, "ab") as f:
        f.write(b[20:])
    second = reader.read_new()
    assert [r.tag for r in second] == [1]
    conflicts = regions.conflicting_lines(first[0], second[0])
    assert [la.paddr for la, _ in conflicts] == [0x1000]
    # Line 0x1000: A reads byte 0, B writes byte 0 -> conflict in byte mode too.
    assert len(regions.conflicting_lines(first[0], second[0], "bytes")) == 1


def test_byte_granularity_ignores_false_sharing():
    a = regions.Region(1, 0, 0, 1, 0, 0, {0x40: regions.Line(0x40, 0, 0, 0x0F, [])})
    b = regions.Region(2, 1, 0, 1, 0, 0, {0x40: regions.Line(0x40, 0, 0, 0xF0, [])})
    assert len(regions.conflicting_lines(a, b, "line")) == 1
    assert regions.conflicting_lines(a, b, "bytes") == []


def test_store_resumes_and_drops_a_torn_last_line(tmp_path):
    header = {"format": "scalecheck-results", "version": 1, "target": "linux", "kernel": {"release": "x"},
              "repeats": 2, "granularity": "line"}
    store = ResultsStore(tmp_path / "results.jsonl", header)
    store.append({"id": "a/p1/t1", "status": "ok"})
    store.close()
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write('{"id": "b/p1/t1", "sta')  # crash mid-write
    again = ResultsStore(tmp_path / "results.jsonl", header)
    assert set(again.finished) == {"a/p1/t1"}
    again.append({"id": "b/p1/t1", "status": "ok"})
    again.close()
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(l) for l in lines)
    with pytest.raises(UserError, match="repeats"):
        ResultsStore(tmp_path / "results.jsonl", dict(header, repeats=3))


KALLSYMS = """0000000000000000 A __per_cpu_start
0000000000031c40 A runqueues
0000000000035000 A __per_cpu_end
ffffffff81000000 T _stext
ffffffff81031080 T __switch_to
ffffffff81200000 t alloc_fd
ffffffff8241cb60 D __per_cpu_offset
"""


def test_symbols_name_pcs_and_classify_data():
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000, "1": 0xFFFF88801F280000})
    assert syms.pc_name(0xFFFFFFFF81200010) == "alloc_fd+0x10"
    assert syms.function(0xFFFFFFFF81200010) == "alloc_fd"
    assert syms.classify(0xFFFFFFFF8241CB68) == ("static", "__per_cpu_offset+0x8")
    assert syms.classify(0xFFFF88801F280000 + 0x31C48) == ("percpu", "runqueues+0x8 [cpu1]")
    assert syms.classify(0xFFFF888005893940) == ("heap", "")
    assert syms.classify(0xFFFFEA0000001000) == ("heap", "struct page")
    assert syms.classify(0x7FFF0000) == ("user", "")


def test_conflict_signature_ignores_heap_addresses():
    c1 = {"kind": "heap", "data_symbol": "", "line": "0xffff888000001000",
          "a": {"pcs": ["alloc_fd+0x57", "alloc_fd+0x13d"], "write_pcs": ["alloc_fd+0x13d"]},
          "b": {"pcs": ["alloc_fd+0x57"], "write_pcs": []}}
    c2 = dict(c1, line="0xffff888000009000", a={"pcs": ["alloc_fd+0x13d"], "write_pcs": ["alloc_fd+0x13d"]})
    assert outcome.signature(c1) == outcome.signature(c2)
    c3 = dict(c1, kind="static", data_symbol="jiffies")
    assert outcome.signature(c3) != outcome.signature(c1)
    assert outcome.tag(3, 1, 1) == (3 << 8) | 3
    assert outcome.is_warmup(outcome.tag(3, outcome.WARMUP_REP, 0))


def test_cpio_archive_layout(tmp_path):
    driver = tmp_path / "driver"
    driver.write_bytes(b"\x7fELF-not-really")
    base = initramfs.build_base(driver, tmp_path / "base.cpio")
    boot = initramfs.build_boot_image(base, "S repeats=2\n", tmp_path / "boot.cpio")
    data = boot.read_bytes()
    assert data.startswith(b"070701")
    assert b"init\0" in data and b"batch.txt\0" in data and b"dev/console\0" in data
    base_bytes = base.read_bytes()
    assert len(base_bytes) % 4 == 0 and data.startswith(base_bytes)
    # The second archive holds the batch alone and ends with its own trailer.
    assert data[len(base_bytes):].count(b"TRAILER!!!") == 1


def test_kallsyms_block_ends_only_at_its_own_marker_line(tmp_path):
    from scalecheck.trace.vm import GuestSession
    session = GuestSession.__new__(GuestSession)  # only its output file is needed here
    session.out_path = tmp_path / "driver.out"
    session.out_path.write_text("READY 3\nK\nffffffff82a1e2a0 d event_attr_STALLED_CYCLES_BACKEND\n"
                                "ffffffff84a00000 D __init_scratch_end\nKEND\nO 0 1000\n")
    block = session.read_block("K", "KEND")
    assert block.splitlines() == ["ffffffff82a1e2a0 d event_attr_STALLED_CYCLES_BACKEND",
                                  "ffffffff84a00000 D __init_scratch_end"]
