"""Fast checks of the tracer's host side: input validation, the plugin's output format,
the results store, symbol naming and the initramfs writer. No VM is booted here."""

import json
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from scalecheck.binding import linux_posix
from scalecheck.common.errors import UserError
from scalecheck.run import counting, outcome, regions, testcase, wire
from scalecheck.run.linux import guest_render, initramfs, vm
from scalecheck.run.linux.kernel_symbols import KernelSymbols
from scalecheck.run.store import ResultsStore

DATA = Path(__file__).parent / "data"
CALIBRATION = Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration.jsonl"
HEADER = {"format": "scalecheck-tests", "version": 1, "model": "posix"}


def write_tests(path: Path, header, *tests):
    path.write_text(
        "\n".join(json.dumps(x) if not isinstance(x, str) else x for x in (header, *tests)) + "\n"
    )
    return path


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_the_tests_vm_takes_its_vcpus_in_turn_and_a_program_s_machine_runs_them_at_once():
    """A test uses one vCPU at a time (vm.tcg_accel); profile's and sharing's programs run
    their threads together, and sharing's quantum turns block a vCPU's own host thread."""
    assert vm.tcg_accel(None) == "tcg,thread=single"
    assert vm.tcg_accel(vm.Machine(4, [])) == "tcg,thread=multi"


def test_scalecheck_qemu_picks_the_vms_qemu_and_a_wrong_one_is_a_user_error(tmp_path, monkeypatch):
    """SCALECHECK_QEMU names another QEMU than PATH's (a version beside the system's)."""
    other = tmp_path / "qemu-other"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    monkeypatch.setenv(vm.QEMU_ENV, str(other))
    assert vm.qemu_binary() == str(other)
    other.chmod(0o644)
    with pytest.raises(UserError, match=r"SCALECHECK_QEMU=.* is not an executable file"):
        vm.qemu_binary()
    monkeypatch.delenv(vm.QEMU_ENV)
    assert vm.qemu_binary() == shutil.which(vm.QEMU)


def test_shipped_test_files_render_for_the_driver():
    for path in (CALIBRATION, DATA / "trace_ops.jsonl"):
        _, tests = testcase.read_tests(path)
        assert tests
        for i, test in enumerate(tests):
            text = guest_render.render(test, i)
            assert text.startswith(f"T {i}\n") and text.endswith("E\n")
            assert text.count("\nC ") == 2


def test_all_posix_ops_are_covered_by_the_ops_batches():
    """The paper's 18 in trace_ops.jsonl, the others in trace_variants.jsonl and
    trace_exec.jsonl: Linux runs every operation of the model."""
    used = set()
    for name in ("trace_ops.jsonl", "trace_variants.jsonl", "trace_exec.jsonl"):
        _, tests = testcase.read_tests(DATA / name)
        used |= {op for t in tests for op in t.pair}
    posix_ops = {op for op in guest_render.OP_ARGS if not op.startswith("_")}
    assert len(posix_ops) == 24
    assert used == posix_ops


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"format": "scalecheck-tests", "version": 1}\n{not json', "malformed JSON"),
        ('{"format": "scalecheck-tests", "version": 2}\n', "version 2"),
        ('{"format": "something-else", "version": 1}\n', "not a scalecheck-tests file"),
        ('{"format": "scalecheck-tests", "version": 1}\n{"id": "x"}\n', "needs"),
    ],
)
def test_bad_test_files_are_user_errors(tmp_path, content, message):
    (tmp_path / "tests.jsonl").write_text(content)
    with pytest.raises(UserError, match=message):
        testcase.read_tests(tmp_path / "tests.jsonl")


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
    bad_op = dict(base, calls=[{"op": "frobnicate", "proc": 0, "args": {}}, base["calls"][1]])
    exec_exec = dict(base, calls=[{"op": "exec", "proc": 1, "args": {}}] * 2)
    bad_name = dict(
        base, calls=[{"op": "stat", "proc": 0, "args": {"pn": "a/b"}}, base["calls"][1]]
    )
    full_socket = dict(base, setup=dict(base["setup"], sockets=[{"data": [65, 66, 67]}]))
    for raw, why in (
        (too_many, "inodes"),
        (bad_op, "unknown op"),
        (exec_exec, "exec || exec in one process"),
        (bad_name, "plain file name"),
        (full_socket, "more than it can"),
    ):
        with pytest.raises(testcase.UnsupportedTest, match=why) as raised:
            guest_render.render(testcase.Test("x", ["open", "open"], raw), 0)
        # Only what Linux's driver cannot run by its nature is "unsupported", not an error.
        assert isinstance(raised.value, testcase.NotRunnable) == (raw is exec_exec)


def test_tests_a_target_cannot_run_are_counted_apart_and_leave_the_exit_code():
    from scalecheck.run import loop, outcome

    test = testcase.Test("exec-exec/p0/t1", ["exec", "exec"], {})
    records = [
        outcome.unbuilt_record(test, testcase.NotRunnable("exec || exec in one process")),
        dict(outcome.base_record(test, "ok"), conflict_free=True),
    ]
    summary = loop.summarize(records, records)
    assert summary["unsupported"] == 1 and summary["error"] == 0
    assert loop.exit_code(summary) == 0
    assert "1 not runnable on this target" in loop.conformance_line(summary)
    error = outcome.unbuilt_record(test, testcase.UnsupportedTest("unknown op"))
    assert loop.exit_code(loop.summarize([error], [error])) == loop.EXIT_NOT_CONFORMING


def test_a_run_takes_each_pairs_tests_spread_over_it():
    from scalecheck.run import loop

    pairs = [["open", "open"]] * 60 + [["fstat", "read"]] * 30 + [["link", "stat"]] * 10
    selected = [testcase.Test(f"t{i}", pair, {}) for i, pair in enumerate(pairs)]
    order = loop.pending_tests([*selected, testcase.Test("done", pairs[0], {})], {"done"})
    assert sorted(order, key=lambda item: item[0]) == list(enumerate(selected))  # once each
    # Every tenth of the run holds each pair in its share of the file (6, 3 and 1 of 10),
    # and a pair's tests keep their order.
    for start in range(0, 100, 10):
        tenth = [tuple(t.pair) for _, t in order[start : start + 10]]
        assert [tenth.count(tuple(p)) for p in (pairs[0], pairs[60], pairs[90])] == [6, 3, 1]
    opens = [i for i, t in order if t.pair == pairs[0]]
    assert opens == sorted(opens)


def test_close_on_exec_fds_are_rendered_for_the_driver():
    _, tests = testcase.read_tests(DATA / "trace_exec.jsonl")
    (test,) = [t for t in tests if t.id == "exec-open/after-exec"]
    lines = guest_render.render(test, 0).splitlines()
    assert "D 1 10 file 0 0 cloexec" in lines and "D 1 12 pipe 0 r cloexec" in lines
    assert "D 1 11 file 1 0" in lines and "D 1 13 pipe 0 w" in lines
    assert "C 0 1 exec" in lines


def test_the_binding_writes_close_on_exec_fds():
    fd = {"present": True, "ispipe": False, "pipe": 0, "writer": False, "inum": 1, "off": 0}
    snapshot = {"procs[0].fds": {0: dict(fd, cloexec=True), 1: dict(fd, cloexec=False)}}
    setup, _, _ = linux_posix.describe_test(
        ["exec", "close"],
        snapshot,
        [{"pid": 0}, {"fd": 1, "pid": 0}],
        {"AB": [{"ret": 0}, {"ret": 0}], "BA": [{"ret": 0}, {"ret": 0}]},
        lambda kind, raw: raw,
    )
    assert setup["procs"][0]["fds"] == {
        "10": {"file": 0, "off": 0, "cloexec": True},
        "11": {"file": 0, "off": 0},
    }


def test_result_matching_with_wildcards():
    assert testcase.result_matches({"ret": 12}, {"ret": "*"})
    assert testcase.result_matches({"ret": 0, "fds": [3, 4]}, {"ret": 0, "fds": ["*", "*"]})
    assert not testcase.result_matches({"ret": 0}, {"errno": "ENOENT"})
    assert not testcase.result_matches({"ret": 1, "data": 65}, {"ret": 1, "data": 66})
    # exec's result names a post-exec state that is not the model's: never a match.
    assert not testcase.result_matches({"ret": 0, "after_exec": "open fds 0x4ff"}, {"ret": 0})


def test_results_are_checked_against_every_outcome_the_choices_allow():
    # alloc || lookup(2) of an absent id: on the path alloc takes 0 or 1, and lookup
    # finds nothing; alloc taking 2 leaves the path (lookup's result is then another
    # path's business).
    raw = {
        "expect": {
            "ab": [{"ret": "*"}, {"errno": "ENOENT"}],
            "ba": [{"ret": "*"}, {"errno": "ENOENT"}],
        },
        "outcomes": [
            {"ab": [{"ret": v}, {"errno": "ENOENT"}], "ba": [{"ret": v}, {"errno": "ENOENT"}]}
            for v in (0, 1)
        ],
        "left_path": [{"ab": [{"ret": 2}, "*"], "ba": [{"ret": 2}, "*"]}],
        "choices": [{"ab": [{"ret": v}, "*"], "ba": [{"ret": v}, "*"]} for v in (0, 1, 2)],
    }
    test = testcase.Test("alloc-lookup/p2/t1", ["alloc", "lookup"], raw)
    check = testcase.check_results
    assert check(test, {"ret": 1}, {"errno": "ENOENT"}) == ("ab", testcase.ON_PATH)
    assert check(test, {"ret": 2}, {"ret": 7}) == ("ab", testcase.LEFT_PATH)
    assert check(test, {"ret": 0}, {"ret": 7}) == (None, testcase.MISMATCH)
    # An id beyond the ids the model holds (an fd above its fds): `expect` decides.
    assert check(test, {"ret": 9}, {"errno": "ENOENT"}) == ("ab", testcase.ON_PATH)
    assert check(test, {"ret": 9}, {"ret": 7}) == (None, testcase.MISMATCH)
    # Without outcomes, the expectation alone.
    plain = testcase.Test("t", ["alloc", "lookup"], {"expect": raw["expect"]})
    assert check(plain, {"ret": 3}, {"errno": "ENOENT"}) == ("ab", testcase.ON_PATH)


def _region_bytes(vcpu, tag, lines, transfers=None, invalidations=None):
    """A region record in the plugin's output format (a fake plugin output for the parser);
    transfers, invalidations: each line's counts, as the plugin writes them with
    transfers=on (invalidations 0 when not given)."""
    flags = regions.FLAG_TRANSFERS if transfers else 0
    out = struct.pack("<IIII QQ II", regions.REGION_MAGIC, vcpu, tag, flags, 10, 0, 0, len(lines))
    for i, (paddr, sites) in enumerate(lines):
        rmask = wmask = 0
        for _, r, w in sites:
            rmask, wmask = rmask | r, wmask | w
        out += struct.pack("<QQQQI", paddr, 0xFFFF888000000000 + paddr, rmask, wmask, len(sites))
        if transfers:
            out += struct.pack("<II", transfers[i], invalidations[i] if invalidations else 0)
        for site in sites:
            out += struct.pack("<QQQ", *site)
    return out


def test_region_reader_follows_a_growing_file(tmp_path):
    path = tmp_path / "trace.bin"
    a = _region_bytes(
        1, 0, [(0x1000, [(0xFFFFFFFF81000010, 1, 0)]), (0x2000, [(0xFFFFFFFF81000020, 0, 0xF0)])]
    )
    b = _region_bytes(
        2, 1, [(0x1000, [(0xFFFFFFFF81000030, 0, 1)]), (0x3000, [(0xFFFFFFFF81000040, 1, 0)])]
    )
    path.write_bytes(regions.FILE_MAGIC + a + b[:20])
    reader = regions.RegionReader(path)
    first = reader.read_new()
    assert [r.tag for r in first] == [0]
    with open(path, "ab") as f:
        f.write(b[20:])
    second = reader.read_new()
    assert [r.tag for r in second] == [1]
    shared = regions.shared_lines(first[0], second[0])
    assert [la.paddr for la, _ in shared] == [0x1000]
    assert shared[0][1].sites == [regions.Site(0xFFFFFFFF81000030, 0, 1)]


def test_region_reader_reads_each_lines_transfers_when_counted(tmp_path):
    path = tmp_path / "trace.bin"
    lines = [(0x1000, [(0x401000, 1, 0)]), (0x2000, [(0x401010, 0, 0xF0), (0x401020, 1, 0)])]
    counted = _region_bytes(0, 0, lines, transfers=[7, 0], invalidations=[0, 5])
    # cut inside the second line's invalidation count: not handed out until it is whole
    cut = counted.index(struct.pack("<QQ", 0x2000, 0xFFFF888000000000 + 0x2000)) + 36 + 6
    path.write_bytes(regions.FILE_MAGIC + counted[:cut])
    reader = regions.RegionReader(path)
    assert reader.read_new() == []
    with open(path, "ab") as f:
        f.write(counted[cut:] + _region_bytes(1, 1, lines))
    first, second = reader.read_new()
    assert [line.transfers for line in first.lines.values()] == [7, 0]
    assert [line.invalidations for line in first.lines.values()] == [0, 5]
    assert first.lines[0x2000].sites == [
        regions.Site(0x401010, 0, 0xF0),
        regions.Site(0x401020, 1, 0),
    ]
    assert [line.transfers for line in second.lines.values()] == [None, None]
    assert [line.invalidations for line in second.lines.values()] == [None, None]


def test_region_reader_rejects_another_format(tmp_path):
    path = tmp_path / "trace.bin"
    for older in (b"SCTRACE1", b"SCTRACE2"):
        path.write_bytes(older + b"\0" * 64)
        with pytest.raises(regions.TraceFormatError, match="not a scalecheck trace"):
            regions.RegionReader(path).read_new()


def _line(vaddr, *sites):
    """A traced line from (pc, read_mask, write_mask) sites, its sites still encoded as the
    parser leaves them."""
    read = write = 0
    for _, r, w in sites:
        read, write = read | r, write | w
    return regions.Line(
        vaddr - 0xFFFF888000000000 if vaddr >= 0xFFFF888000000000 else vaddr & 0xFFFFFFF,
        vaddr,
        read,
        write,
        site_bytes=b"".join(struct.pack("<QQQ", *s) for s in sites),
    )


def _regions(lines_a, lines_b):
    a = regions.Region(1, 0, 0, 1, 0, 0, {line.paddr: line for line in lines_a})
    b = regions.Region(2, 1, 0, 1, 0, 0, {line.paddr: line for line in lines_b})
    return a, b


ALLOC_FD, FD_INSTALL, SWITCH = 0xFFFFFFFF81200010, 0xFFFFFFFF81200040, 0xFFFFFFFF81031090
HEAP, STATIC = 0xFFFF888005893940, 0xFFFFFFFF8241CB40


def test_sharing_is_told_apart_by_the_bytes_each_site_touched():
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    # Heap line: A's alloc_fd writes bytes 0-3, B's alloc_fd reads them -> true sharing.
    # Static line: A writes byte 0, B writes byte 8 -> false sharing on a fixed address.
    a, b = _regions(
        [_line(HEAP, (ALLOC_FD, 0, 0xF)), _line(STATIC, (FD_INSTALL, 0, 0x1))],
        [_line(HEAP, (ALLOC_FD, 0x3, 0), (SWITCH, 0xF000, 0)), _line(STATIC, (SWITCH, 0, 0x100))],
    )
    shared = {c["kind"]: c for c in outcome._shared(a, b, syms)}
    assert shared["heap"]["sharing"] == "true"
    # Only the sites touching the same bytes make the pair: __switch_to read other bytes.
    assert shared["heap"]["sites"] == [["alloc_fd", "alloc_fd"]]
    assert shared["static"]["sharing"] == "false"
    assert shared["static"]["sites"] == [["fd_install", "__switch_to"]]
    assert counting.counts(shared["static"], "stable") and not counting.counts(
        shared["static"], "bytes"
    )
    heap_false = dict(shared["heap"], sharing="false")
    assert not counting.counts(heap_false, "stable") and counting.counts(heap_false, "line")


def test_conflict_signature_ignores_heap_addresses_and_line_boundaries():
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    # One run: the two fields both calls write share a line. Another run: the object
    # sits elsewhere and the fields fall into two lines. Same signature.
    a1, b1 = _regions(
        [_line(HEAP, (ALLOC_FD, 0, 0xF), (FD_INSTALL, 0, 0xF0))],
        [_line(HEAP, (ALLOC_FD, 0, 0xF), (FD_INSTALL, 0, 0xF0))],
    )
    a2, b2 = _regions(
        [
            _line(HEAP + 0x1000, (ALLOC_FD, 0, 0xF000000000000000)),
            _line(HEAP + 0x1040, (FD_INSTALL, 0, 0xF)),
        ],
        [
            _line(HEAP + 0x1000, (ALLOC_FD, 0, 0xF000000000000000)),
            _line(HEAP + 0x1040, (FD_INSTALL, 0, 0xF)),
        ],
    )
    one = outcome.conflict_set(outcome._shared(a1, b1, syms))
    two = outcome.conflict_set(outcome._shared(a2, b2, syms))
    assert (
        one
        == two
        == {
            ("heap", "", "true", "alloc_fd", "alloc_fd"),
            ("heap", "", "true", "fd_install", "fd_install"),
        }
    )
    assert outcome.tag(3, 1, 1) == (3 << 8) | 3
    assert outcome.is_warmup(outcome.tag(3, outcome.WARMUP_REP, 0))


def test_a_conflict_counts_only_if_every_repeat_shows_it():
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    steady = _regions([_line(HEAP, (ALLOC_FD, 0, 0xF))], [_line(HEAP, (ALLOC_FD, 0xF, 0))])
    noisy = _regions(
        [_line(HEAP, (ALLOC_FD, 0, 0xF)), _line(STATIC, (SWITCH, 0, 1))],
        [_line(HEAP, (ALLOC_FD, 0xF, 0)), _line(STATIC, (SWITCH, 1, 0))],
    )
    kept, signatures = outcome._repeated(
        [outcome._shared(*noisy, syms), outcome._shared(*steady, syms)]
    )
    assert [c["kind"] for c in kept] == ["heap"]
    assert signatures[0] != signatures[1]


def test_cpu_time_accounting_is_dropped_as_tick_work():
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    ACCOUNTING = 0xFFFFFFFF81300020
    # A's accounting reads the bytes B's fd_install writes: gone. A's alloc_fd wrote bytes
    # B's alloc_fd reads on another line: stays, with the line's masks from alloc_fd alone.
    a, b = _regions(
        [
            _line(HEAP, (ACCOUNTING, 0xF, 0)),
            _line(STATIC, (ACCOUNTING, 0xF0, 0), (ALLOC_FD, 0, 0x1)),
        ],
        [_line(HEAP, (FD_INSTALL, 0, 0xF)), _line(STATIC, (ALLOC_FD, 0x1, 0))],
    )
    (kept_a, gone_a), (kept_b, gone_b) = (
        outcome.without_tick_work(a, syms),
        outcome.without_tick_work(b, syms),
    )
    assert (gone_a, gone_b) == (2, 0)
    assert list(kept_a.lines) == [_line(STATIC).paddr]
    assert kept_a.lines[_line(STATIC).paddr].read_mask == 0
    shared = outcome._shared(kept_a, kept_b, syms)
    assert [(c["kind"], c["sites"]) for c in shared] == [("static", [["alloc_fd", "alloc_fd"]])]
    # Without the filter, the accounting read would have made a heap conflict.
    assert any(c["kind"] == "heap" for c in outcome._shared(a, b, syms))


def test_regions_read_from_a_trace_are_filtered_as_regions_built_line_by_line(tmp_path):
    """A region read from a trace finds its tick-work lines and its lock writes over the
    raw records at once; the result is the line-by-line one."""
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    ACCOUNTING = 0xFFFFFFFF81300020
    assert syms.code_spans(outcome.TICK_WORK) == ((0xFFFFFFFF81300000, 0xFFFFFFFF81400000),)
    lines = [
        (0x1000, [(ACCOUNTING, 0xF, 0)]),  # the tick's work alone: goes
        (0x2040, [(ACCOUNTING, 0xF0, 0), (ALLOC_FD, 0, 0xF << 40)]),  # loses one site
        (0x3000, [(ALLOC_FD, ACCOUNTING, 0)]),  # a mask that looks like its PC: kept whole
        (0x4000, [(FD_INSTALL, 0, 0x1)]),
    ]
    path = tmp_path / "trace.bin"
    path.write_bytes(regions.FILE_MAGIC + _region_bytes(1, 0, lines))
    (read,) = regions.RegionReader(path).read_new()
    built = regions.Region(
        1, 0, 0, 10, 0, 0, {p: _line(0xFFFF888000000000 + p, *s) for p, s in lines}
    )

    def lines_of(region):
        return {
            p: (ln.vaddr, ln.read_mask, ln.write_mask, ln.sites) for p, ln in region.lines.items()
        }

    (kept_read, gone_read), (kept_built, gone_built) = (
        outcome.without_tick_work(read, syms),
        outcome.without_tick_work(built, syms),
    )
    assert gone_read == gone_built == 2
    assert list(kept_read.lines) == [0x2040, 0x3000, 0x4000]
    assert lines_of(kept_read) == lines_of(kept_built)
    locked = [(0x2040, 0xFFFF888000002040)]
    assert read.written_at(outcome.PTL_BYTES) == built.written_at(outcome.PTL_BYTES) == locked


def test_tick_work_is_found_across_the_blocks_of_a_read(tmp_path, monkeypatch):
    """A read's values are looked at block by block, once for all its regions: a site at
    any place, in any region, on either side of a block's edge is found."""
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    ACCOUNTING = 0xFFFFFFFF81300020
    monkeypatch.setattr(regions.TraceChunk, "_BLOCK", 64)  # many blocks, edges everywhere
    trace, built = regions.FILE_MAGIC, []
    for tag in range(6):
        # Region ``tag`` has the accounting site on its line ``tag``: alone on even lines.
        lines = [
            (0x1000 * (i + 1), [(FD_INSTALL, 0, 1)] * (i % 2) + [(ACCOUNTING, 0xF, 0)] * (i == tag))
            for i in range(6)
        ]
        lines = [(p, s or [(FD_INSTALL, 0, 1)]) for p, s in lines]
        trace += _region_bytes(1, tag, lines)
        built.append(regions.Region(1, tag, 0, 10, 0, 0, {p: _line(p, *s) for p, s in lines}))
    path = tmp_path / "trace.bin"
    path.write_bytes(trace)
    for read, made in zip(regions.RegionReader(path).read_new(), built, strict=True):
        (kept_read, gone_read), (kept_made, gone_made) = (
            outcome.without_tick_work(read, syms),
            outcome.without_tick_work(made, syms),
        )
        assert gone_read == gone_made == 1
        assert list(kept_read.lines) == list(kept_made.lines)
        assert kept_read.line_count == 6 - (read.tag % 2 == 0)


def test_site_pairs_merged_by_function_are_those_of_every_site_pair():
    """Sites are merged by function before they are paired: the pairs, their sharing and
    their bytes are those the site-by-site definition gives."""
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    pcs = [ALLOC_FD, ALLOC_FD + 8, FD_INSTALL, SWITCH]
    rng = random.Random(7)

    def by_site(sites_a, sites_b):
        true_pairs, false_pairs = {}, {}
        for pa, ra, wa in sites_a:
            for pb, rb, wb in sites_b:
                fa, fb = syms.function(pa), syms.function(pb)
                overlap = wa & (rb | wb) | wb & (ra | wa)
                if overlap:
                    true_pairs[fa, fb] = true_pairs.get((fa, fb), 0) | overlap
                elif wa or wb:
                    false_pairs[fa, fb] = false_pairs.get((fa, fb), 0) | wa | wb
        return (
            ("true", sorted(true_pairs.items()))
            if true_pairs
            else (
                "false",
                sorted(false_pairs.items()),
            )
        )

    def sites():
        masks = [0, 1, 2, 3, 0x10, 0xF0]
        return [
            (rng.choice(pcs), rng.choice(masks), rng.choice(masks))
            for _ in range(rng.randint(1, 5))
        ]

    sharings = set()
    for _ in range(400):
        a, b = sites(), sites()
        merged = outcome._site_pairs(a, b, syms)
        assert merged == by_site(a, b)
        sharings.add(merged[0])
    assert sharings == {"true", "false"}


def test_a_region_read_from_a_trace_builds_its_lines_once(tmp_path, monkeypatch):
    """Callers look lines up in ``region.lines`` inside loops over its lines: each look-up
    building every line again made a large region's pass quadratic."""
    lines = [(0x1000 + 0x40 * i, [(FD_INSTALL, 0, 0x1)]) for i in range(50)]
    path = tmp_path / "trace.bin"
    path.write_bytes(regions.FILE_MAGIC + _region_bytes(1, 0, lines))
    (region,) = regions.RegionReader(path).read_new()
    looked_at = []
    line = regions.Region.line
    monkeypatch.setattr(regions.Region, "line", lambda r, p: looked_at.append(p) or line(r, p))
    for paddr in region.lines:
        assert region.lines[paddr].paddr == paddr
    assert len(looked_at) == 50


def test_a_region_without_lines_at_the_trace_s_end_is_filtered(tmp_path):
    """Its lines' span is empty and ends where the trace does: nothing to scan there."""
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    path = tmp_path / "trace.bin"
    lines = [(0x4000, [(FD_INSTALL, 0, 0x1)])]
    path.write_bytes(regions.FILE_MAGIC + _region_bytes(1, 0, lines) + _region_bytes(2, 0, []))
    first, empty = regions.RegionReader(path).read_new()
    kept, gone = outcome.without_tick_work(empty, syms)
    assert (kept.line_count, gone) == (0, 0)
    assert empty.written_at(outcome.PTL_BYTES) == []
    assert list(outcome.without_tick_work(first, syms)[0].lines) == [0x4000]


def test_page_table_pages_are_told_by_their_split_lock():
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    SPIN_LOCK, VMEMMAP = 0xFFFFFFFF81400010, 0xFFFFEA0000000000
    pte_page, slab_page = 0x5893, 0x5894
    pte_line, slab_line = (
        0xFFFF888000000000 + (pte_page << 12) + 0x40,
        0xFFFF888000000000 + (slab_page << 12),
    )
    # A took the lock in the struct page of frame 0x5893 (bytes 40-43) and wrote an entry
    # of it; B wrote the same entry. Frame 0x5894's struct page had bytes 40-43 written
    # too, but by non-lock code (a slab's counters): its lines stay heap.
    a, b = _regions(
        [
            _line(VMEMMAP + pte_page * 64, (SPIN_LOCK, 0, 0xF << 40)),
            _line(VMEMMAP + slab_page * 64, (ALLOC_FD, 0, 0xFF << 40)),
            _line(pte_line, (ALLOC_FD, 0, 0xFF)),
            _line(slab_line, (ALLOC_FD, 0, 0xF)),
        ],
        [_line(pte_line, (FD_INSTALL, 0, 0xFF)), _line(slab_line, (FD_INSTALL, 0, 0xF0))],
    )
    assert outcome.page_table_frames((a, b), syms) == {pte_page}
    kinds = {c["line"]: c["kind"] for c in outcome._shared(a, b, syms)}
    assert kinds == {hex(pte_line): "pagetable", hex(slab_line): "heap"}
    # Entries of one page-table page are laid out by the addresses they map: false
    # sharing there counts, as on static data.
    assert counting.counts({"kind": "pagetable", "sharing": "false"}, "stable")


def test_store_resumes_and_drops_a_torn_last_line(tmp_path):
    header = {
        "format": "scalecheck-results",
        "version": 1,
        "target": "linux",
        "kernel": {"release": "x"},
        "repeats": 2,
        "granularity": "line",
    }
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
    assert len(lines) == 3 and all(json.loads(line) for line in lines)
    with pytest.raises(UserError, match="repeats"):
        ResultsStore(tmp_path / "results.jsonl", dict(header, repeats=3))
    with pytest.raises(UserError, match="tracer"):
        ResultsStore(tmp_path / "results.jsonl", dict(header, tracer="0123abcd"))
    # The pipeline keeps an incompatible store under another name and starts afresh.
    said = []
    fresh = ResultsStore(tmp_path / "results.jsonl", dict(header, repeats=3), True, said.append)
    fresh.close()
    assert fresh.finished == {} and "repeats" in said[0]
    kept = list(tmp_path.glob("results.*.jsonl"))
    assert len(kept) == 1 and len(kept[0].read_text().splitlines()) == 3


def test_results_of_a_changed_test_are_refused_or_set_aside(tmp_path):
    """Test ids are positional: after a new testgen an id may name another test. A rerun
    refuses (run) or sets aside (pipeline) the results whose test changed."""
    header = {"format": "scalecheck-results", "version": 1, "target": "linux", "repeats": 2}
    first = {"a/p1/t1": "1111", "a/p1/t2": "2222", "b/p1/t1": "3333"}
    store = ResultsStore(
        tmp_path / "results.jsonl", dict(header, tests_sha256="old"), test_hashes=first
    )
    for test_id in first:
        store.append({"id": test_id, "status": "ok"})
    store.close()
    # Regenerated: a/p1/t2 now names another test, b/p1/t1 is gone.
    second = {"a/p1/t1": "1111", "a/p1/t2": "9999"}
    new_header = dict(header, tests_sha256="new")
    with pytest.raises(UserError, match=r"2 results .* changed or are gone .*a/p1/t2") as err:
        ResultsStore(tmp_path / "results.jsonl", new_header, test_hashes=second)
    assert "\n" not in str(err.value)
    said = []
    again = ResultsStore(
        tmp_path / "results.jsonl", new_header, True, said.append, test_hashes=second
    )
    assert set(again.finished) == {"a/p1/t1"} and "kept as" in said[0]
    again.append({"id": "a/p1/t2", "status": "ok"})
    again.close()
    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert lines[0]["tests_sha256"] == "new"
    assert [(r["id"], r["test_hash"]) for r in lines[1:]] == [
        ("a/p1/t1", "1111"),
        ("a/p1/t2", "9999"),
    ]
    (stale,) = tmp_path.glob("results.*.stale.jsonl")
    assert [json.loads(line)["id"] for line in stale.read_text().splitlines()[1:]] == [
        "a/p1/t2",
        "b/p1/t1",
    ]
    # Unchanged tests: the store resumes as before.
    resumed = ResultsStore(tmp_path / "results.jsonl", new_header, test_hashes=second)
    assert set(resumed.finished) == {"a/p1/t1", "a/p1/t2"}
    resumed.close()


KALLSYMS = """0000000000000000 A __per_cpu_start
0000000000031c40 A runqueues
0000000000035000 A __per_cpu_end
ffffffff81000000 T _stext
ffffffff81031080 T __switch_to
ffffffff81200000 t alloc_fd
ffffffff81200040 T fd_install
ffffffff81300000 T acct_account_cputime
ffffffff81400000 T _raw_spin_lock
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


def test_cpio_archive_layout(tmp_path):
    driver = tmp_path / "driver"
    driver.write_bytes(b"\x7fELF-not-really")
    for program in initramfs.PROGRAMS:
        (tmp_path / program).write_bytes(b"\x7fELF-a-program-the-calls-run")
    base = initramfs.build_base(driver, tmp_path / "base.cpio")
    boot = initramfs.build_boot_image(base, "S repeats=2\n", tmp_path / "boot.cpio")
    data = boot.read_bytes()
    assert data.startswith(b"070701")
    assert b"init\0" in data and b"batch.txt\0" in data and b"dev/console\0" in data
    assert b"bin/exit0\0" in data and b"bin/exec_image\0" in data
    base_bytes = base.read_bytes()
    assert len(base_bytes) % 4 == 0 and data.startswith(base_bytes)
    # The second archive holds the batch alone and ends with its own trailer.
    assert data[len(base_bytes) :].count(b"TRAILER!!!") == 1


def test_kallsyms_block_ends_only_at_its_own_marker_line():
    from scalecheck.run import wire

    block = wire.kallsyms(
        "READY 3\nK\nffffffff82a1e2a0 d event_attr_STALLED_CYCLES_BACKEND\n"
        "ffffffff84a00000 D __init_scratch_end\nKEND\nO 0 1000\n"
    )
    assert block.splitlines() == [
        "ffffffff82a1e2a0 d event_attr_STALLED_CYCLES_BACKEND",
        "ffffffff84a00000 D __init_scratch_end",
    ]


VMLINUX_SOURCE = """int start_kernel(int x)
{
    int y = x * 3;
    return y + 1;
}
int main(void) { return start_kernel(2); }
"""


def _tiny_vmlinux(tmp_path, debug=True):
    """A small ELF with a start_kernel, standing in for a debug vmlinux (gcc -g)."""
    src = tmp_path / "kernel.c"
    src.write_text(VMLINUX_SOURCE)
    out = tmp_path / ("vmlinux" if debug else "vmlinux-stripped")
    subprocess.run(
        ["gcc", "-O0", "-no-pie", *(["-g"] if debug else []), "-o", str(out), str(src)], check=True
    )
    nm = subprocess.run(["nm", str(out)], check=True, capture_output=True, text=True).stdout
    address = next(
        int(line.split()[0], 16) for line in nm.splitlines() if line.endswith(" start_kernel")
    )
    return out, address


@pytest.mark.skipif(
    not shutil.which("gcc") or not shutil.which("addr2line"), reason="needs gcc, binutils"
)
def test_vmlinux_gives_file_and_line_and_must_match_the_kernel(tmp_path):
    vmlinux, address = _tiny_vmlinux(tmp_path)
    kallsyms = f"{address:016x} T start_kernel\n"
    syms = KernelSymbols(kallsyms, {}, vmlinux)
    name = syms.pc_name(address + 8)
    assert name.startswith("start_kernel+0x8 (") and "kernel.c:" in name, name
    assert syms.function(address + 8) == "start_kernel"
    with pytest.raises(UserError, match="not the traced kernel"):
        KernelSymbols(f"{address + 0x1000:016x} T start_kernel\n", {}, vmlinux)
    stripped, address = _tiny_vmlinux(tmp_path, debug=False)
    with pytest.raises(UserError, match="no line information"):
        KernelSymbols(f"{address:016x} T start_kernel\n", {}, stripped)
    (tmp_path / "text").write_text("not an ELF")
    with pytest.raises(UserError, match="not a readable ELF"):
        KernelSymbols(kallsyms, {}, tmp_path / "text")


def _finished(repeat_regions, filters=counting.ALL_FILTERS_ON, granularity="stable", namer=None):
    """finish() on a one-test run whose repeats traced ``repeat_regions`` [(A, B), ...]."""
    syms = KernelSymbols(KALLSYMS, {"0": 0xFFFF88801F200000})
    raw = {"expect": {"ab": [{"ret": 0}, {"ret": 0}]}}
    progress = outcome.TestProgress(testcase.Test("t", ["stat", "stat"], raw), 0)
    regions_by_tag = {}
    for rep, (a, b) in enumerate(repeat_regions):
        progress.add(wire.Report("RESULTS", 0, rep, '{"ret":0} {"ret":0}'))
        regions_by_tag[outcome.tag(0, rep, 0)] = a
        regions_by_tag[outcome.tag(0, rep, 1)] = b
    return outcome.finish(
        progress, regions_by_tag, syms, len(repeat_regions), granularity, filters, namer
    )


class FakeNamer:
    """A fake DataNamer for the unit test of what repeats: names a heap line by the
    offset of its object in its page (the two objects land on other pages each repeat)."""

    def __init__(self, names: dict):
        self.names = names

    def name_lines(self, lines):
        return [self.names.get(vaddr & 0xFFF, "") for _, vaddr, _, _ in lines]

    def stable_names(self, lines):
        return self.name_lines(lines)


def test_two_objects_written_by_the_same_functions_are_two_conflicts():
    LOCKS = {0x940: "struct files_struct.file_lock", 0x980: "struct shmem_sb_info.stat_lock"}
    namer = FakeNamer(LOCKS | {0x9C0: "struct inode.i_lock"})

    def repeat(page, with_inode):
        offsets = [*LOCKS, *([0x9C0] if with_inode else [])]
        lines = [HEAP - 0x940 + page + offset for offset in offsets]
        return _regions(
            [_line(line, (ALLOC_FD, 0, 0xF)) for line in lines],
            [_line(line, (ALLOC_FD, 0, 0xF)) for line in lines],
        )

    # The inode's lock is written in the first repeat only: not repeated, not counted.
    record = _finished([repeat(0, True), repeat(0x3000, False)], namer=namer)
    assert sorted(c["data"] for c in record["conflicts"]) == sorted(LOCKS.values())
    assert all(c["sites"] == [["alloc_fd", "alloc_fd"]] for c in record["conflicts"])
    assert sorted(d for c in record["conflicts"] for d in c["site_data"]) == sorted(LOCKS.values())
    assert record["filtered"]["unrepeated"] == 1
    assert record["noise"]["transient"] == ["heap:struct inode.i_lock alloc_fd / alloc_fd"]


def test_each_filter_counts_what_it_removed_and_can_be_switched_off():
    ACCOUNTING = 0xFFFFFFFF81300020
    steady = _regions([_line(HEAP, (ALLOC_FD, 0, 0x1))], [_line(HEAP, (ALLOC_FD, 0x2, 0))])
    # Repeat 0 alone shows a true conflict on the static line (does not repeat), and in
    # both repeats the tick's accounting in A reads what B's fd_install writes.
    with_switch = _regions(
        [_line(STATIC, (SWITCH, 0, 1)), _line(HEAP + 64, (ACCOUNTING, 0xF, 0))],
        [_line(STATIC, (SWITCH, 1, 0)), _line(HEAP + 64, (FD_INSTALL, 0, 0xF))],
    )
    tick_only = _regions(
        [_line(HEAP + 64, (ACCOUNTING, 0xF, 0))], [_line(HEAP + 64, (FD_INSTALL, 0, 0xF))]
    )
    runs = [with_switch, tick_only]
    filtered = _finished(runs)
    assert filtered["conflict_free"] is True
    assert filtered["filtered"] == {"unrepeated": 1, "tick_work": 1}
    assert filtered["views"] == {"stable": True, "line": True, "bytes": True}
    unrepeated = _finished(runs, counting.Filters(count_unrepeated=True))
    assert not unrepeated["conflict_free"]
    assert [c["kind"] for c in unrepeated["conflicts"]] == ["static"]
    assert unrepeated["filtered"]["unrepeated"] == 0
    tick = _finished(runs, counting.Filters(keep_tick_work=True))
    assert not tick["conflict_free"]
    assert tick["conflicts"][0]["sites"] == [["acct_account_cputime", "fd_install"]]
    # Heap false sharing: listed, counted only at line granularity; the views say so.
    false_heap = _finished([steady, steady])
    assert false_heap["conflict_free"] and false_heap["false_sharing"]
    assert false_heap["views"] == {"stable": True, "line": False, "bytes": True}


def test_the_tracing_bar_writes_to_stderr_not_stdout(capfd):
    """A command's --json stdout must hold only the JSON: the bar goes to stderr."""
    from scalecheck.run.loop import tracing_progress

    with tracing_progress(quiet=False, total=2) as count:
        count({"status": "ok"})
        count({"status": "mismatch"})
    out, err = capfd.readouterr()
    assert out == ""
    assert "tracing" in err and "mismatch=1" in err
