"""`scalecheck profile`: an unmodified program run in the Linux target's guest (real QEMU,
the host's file system over 9p, the plugin's profile window), its contended kernel lines
named and judged by the POSIX model's rule; the rule's reading of a pair's cases; bad
input."""

import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from scalecheck.bench import profile_lines
from scalecheck.bench.profile_boot import boot_object_name, boot_objects
from scalecheck.bench.profile_guest import kernel_name
from scalecheck.bench.profile_heap import MAPPED, mark_harness, name_heap_lines, read_harness
from scalecheck.bench.profile_user import (
    HARNESS,
    UserPages,
    is_specific,
    parse_maps,
    user_data_name,
)
from scalecheck.bench.rule_verdicts import COMMUTATIVE, FORCED, SHIPPED, Rule, case_possible
from scalecheck.bench.sharing import SITE_RECORD, ensure_recorder, read_allocations
from scalecheck.binding import abi
from scalecheck.common.sources import cache_dir
from scalecheck.run.linux import vm
from scalecheck.run.regions import Line, Region, Site

REPO = Path(__file__).resolve().parents[1]
PROFILE = [sys.executable, "-m", "scalecheck.cli", "profile"]
OPENS = REPO / "tests" / "data" / "profile_opens.c"
HEAP = REPO / "tests" / "data" / "profile_heap.c"
MISBEHAVE = REPO / "examples" / "profile" / "misbehave.sh"
WEB_SERVER = REPO / "examples" / "profile" / "web-server.sh"
needs_guest = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)


def profile(tmp_path: Path, *command: str, duration: str = "30") -> tuple:
    out = tmp_path / "profile.json"
    run = subprocess.run(
        [*PROFILE, "--duration", duration, "--top", "60", "--json", str(out), "--", *command],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    document = json.loads(out.read_text()) if out.exists() else None
    return run, document


@pytest.fixture(scope="module")
def opens() -> Path:
    """The test program, built outside /tmp (the guest mounts its scratch there)."""
    program = cache_dir() / "test-programs" / "profile_opens"
    program.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(program), str(OPENS)], check=True)
    return program


def rows_named(document: dict, part: str) -> list[dict]:
    return [row for row in document["lines"] if part in row["name"]]


@needs_guest
def test_threads_opening_files_fight_over_their_fd_table_and_the_rule_says_o_anyfd(tmp_path, opens):
    run, document = profile(tmp_path, str(opens), "threads", "2", "1000")
    assert run.returncode == 0, run.stderr[-3000:]
    assert document["program"]["status"] == 0 and not document["program"]["timed_out"]
    tables = rows_named(document, "kernel: files_struct")
    assert sum(row["transfers"] for row in tables) > 100, tables
    table = tables[0]  # the busiest
    calls = {tuple(pair["calls"]) for pair in table["pairs"]}
    assert {("openat", "openat"), ("close", "openat")} & calls, table["pairs"]
    opening = next(
        p for p in table["pairs"] if p["calls"] in (["openat", "openat"], ["close", "openat"])
    )
    assert opening["verdict"].startswith(FORCED) and "O_ANYFD" in opening["verdict"], opening
    assert "files_struct" in run.stdout and "O_ANYFD" in run.stdout
    removable = document["removable"]
    assert 0 <= removable["avoidable_lines"] <= removable["kernel_lines"] > 0
    # user memory named by the process and what it had mapped there (the guest's page map)
    assert rows_named(document, "of profile_opens"), [r["name"] for r in document["lines"]]
    named = document["named"]
    assert 0 < named["named_transfers"] <= named["transfers"]
    parts = named["transfers"] + named["recorder_transfers"] + named["harness_transfers"]
    assert parts == document["transfers"]


@needs_guest
def test_a_heap_line_two_threads_write_is_named_by_the_block_that_held_it_longest(tmp_path):
    program = cache_dir() / "test-programs" / "profile_heap"
    program.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-O0", "-pthread", "-o", str(program), str(HEAP)], check=True)
    run, document = profile(tmp_path, str(program))
    assert run.returncode == 0, run.stderr[-3000:]
    names = [row["name"] for row in document["lines"] if row["transfers"] > 20]
    assert "user: heap: 64-byte block from shared_counters (profile_heap)" in names, names
    # The counters' hot line is named by its block; a `[heap]` row may still gather the
    # heap's first touches (a page fault's zeroing, then the program's write: one each).
    hot = [row["name"] for row in document["lines"] if row["transfers"] > 20 * row["lines"]]
    assert not [
        name for name in hot if "scratch_buffer" in name or "[heap] of profile_heap" in name
    ]


@needs_guest
def test_processes_opening_files_share_no_fd_table(tmp_path, opens):
    run, document = profile(tmp_path, str(opens), "processes", "2", "1000")
    assert run.returncode == 0, run.stderr[-3000:]
    assert any(row["call"] == "openat" for row in document["calls"])  # they did open
    hot = [row for row in rows_named(document, "files_struct") if row["transfers"] > 20]
    assert not hot, hot


@needs_guest
@pytest.mark.skipif(
    not (shutil.which("lighttpd") or Path("/usr/sbin/lighttpd").exists()) or not shutil.which("ab"),
    reason="needs lighttpd and ab (scripts/setup.d/70-profile.sh)",
)
def test_the_web_server_recipe_names_its_lines_per_request(tmp_path):
    # docs/profile.md's recipe, as written there
    run, document = profile(tmp_path, str(WEB_SERVER), "20", "2", duration="90")
    assert run.returncode == 0, run.stderr[-3000:]
    assert document["program"]["completed"] == {"count": 20, "unit": "requests"}
    assert document["transfers_per_completed"] == document["transfers"] / 20
    assert rows_named(document, "of lighttpd") and rows_named(document, "of ab")
    kernel = [row for row in document["lines"] if row["name"].startswith("kernel: ")]
    assert any(row["verdict"].startswith((COMMUTATIVE, FORCED)) for row in kernel)
    assert "transfers each" in run.stdout and "/request" in run.stdout


@needs_guest
def test_a_program_that_fills_its_scratch_forks_a_thousand_and_never_exits_is_stopped(tmp_path):
    run, document = profile(tmp_path, str(MISBEHAVE), duration="20")
    assert run.returncode == 1, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1].endswith("ran past 20 s and was killed")
    assert document["program"]["timed_out"] and document["guest_seconds"] >= 20


@needs_guest
def test_a_program_that_exits_at_once_has_its_status_kept(tmp_path):
    run, document = profile(tmp_path, "false")
    assert run.returncode == 1 and document["program"]["status"] == 1, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1].startswith("profile: ")


@pytest.mark.parametrize(
    "command, message",
    [
        (["no-such-program-here"], "no such program on this host"),
        (["HIDDEN"], "which the guest mounts its own file system on"),
        ([], "no program given"),
    ],
)
def test_a_program_that_cannot_be_run_is_one_line(tmp_path, command, message):
    hidden = tmp_path / "hidden"  # under /tmp, which the guest replaces
    hidden.write_text("#!/bin/sh\n")
    hidden.chmod(0o755)
    run, _ = profile(tmp_path, *[str(hidden) if word == "HIDDEN" else word for word in command])
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.fixture
def shipped() -> Rule:
    return Rule.load(SHIPPED)


def test_the_shipped_rule_forces_the_lowest_fd_on_one_fd_table_only(shipped):
    table = "kernel: files_struct.{file_lock,next_fd}"
    assert shipped.verdict("openat", "openat", table).startswith(f"{FORCED}: use O_ANYFD")
    assert shipped.verdict("openat", "close", table).startswith(f"{FORCED}: use O_ANYFD")
    # Two opens that met on a dentry may be in two processes: they commute.
    assert shipped.verdict("openat", "openat", "kernel: dentry.d_lockref") == COMMUTATIVE
    assert shipped.verdict("openat", "page fault", table).startswith("outside the model")


def test_a_case_needing_what_linux_lacks_or_a_failure_does_not_hold_as_called():
    assert not case_possible("A.pn in fname_to_inum and B.anyfd", False, anyfd=False)
    assert case_possible("A.pn in fname_to_inum and B.anyfd", False, anyfd=True)
    assert not case_possible("[A fails with ENOENT] A.pn not in fname_to_inum", False, False)
    assert not case_possible("A.pid == 0 and B.pid != 0 and A.pn != B.pn", True, False)
    assert case_possible("A.pid == 0 and B.pid != 0 and A.pn != B.pn", False, False)


def fake_region(vcpu: int, context: int, lines: dict) -> Region:
    """A hand-made profile region (unit test only): lines {paddr: (written, transfers)}."""
    region = Region(vcpu, context, 0, 1, 0, 0)
    for paddr, (written, moved) in lines.items():
        region.lines[paddr] = Line(
            paddr, 0xFFFF888000000000 + paddr, 1, 1 if written else 0, [], b"", moved, 0, 0
        )
    return region


def test_contexts_on_two_cpus_meet_on_a_written_line_and_are_weighed_by_their_transfers():
    syscalls = ["close", "openat"]
    regions = [
        fake_region(0, profile_lines.CONTEXT_SYSCALL + 1, {0x1000: (True, 5), 0x2000: (False, 0)}),
        fake_region(1, profile_lines.CONTEXT_SYSCALL + 0, {0x1000: (True, 3), 0x2000: (False, 0)}),
        fake_region(1, profile_lines.CONTEXT_USER, {0x3000: (True, 2)}),
    ]
    contended = profile_lines.contended_lines(regions)
    assert list(contended) == [0x1000]  # 0x2000 only read, 0x3000 on one CPU
    assert profile_lines.call_pairs(contended[0x1000], syscalls) == {("close", "openat"): 8}
    rows = profile_lines.call_rows(contended, syscalls)
    assert [(r["call"], r["transfers"]) for r in rows] == [("openat", 5), ("close", 3)]


def test_a_line_is_judged_by_its_busiest_pair_of_calls_the_model_has(shipped):
    row = {"name": "kernel: files_struct.fd_array"}
    pairs = Counter({("openat", "page fault"): 9, ("futex", "openat"): 5, ("openat", "openat"): 2})
    profile_lines.judge_pairs(row, pairs, shipped)
    assert row["judged_pair"] == ["openat", "openat"]
    assert row["verdict"].startswith(f"{FORCED}: use O_ANYFD")
    assert row["pairs"][0]["verdict"] == "outside the model (page fault)"


GLOBALS_C = """
long counters[64];
long limits[4] = {1, 2, 3, 4};
int main(void) { return (int)(counters[0] + limits[1]); }
"""


@pytest.fixture(scope="module")
def globals_program(tmp_path_factory) -> Path:
    """A real ELF with a .bss and a .data array."""
    folder = tmp_path_factory.mktemp("elf")
    (folder / "globals.c").write_text(GLOBALS_C)
    program = folder / "globals"
    subprocess.run(["cc", "-O0", "-o", str(program), str(folder / "globals.c")], check=True)
    return program


def symbol_address(program: Path, name: str) -> int:
    table = subprocess.run(["nm", str(program)], capture_output=True, text=True).stdout
    found = [line.split()[0] for line in table.splitlines() if line.endswith(f" {name}")]
    return int(found[0], 16)


def test_user_memory_is_named_by_the_mapped_file_s_symbols_else_by_its_region(globals_program):
    base = 0x555555554000
    size = globals_program.stat().st_size
    file_end = base + ((size + 0xFFF) & ~0xFFF)
    maps = parse_maps(
        "globals",
        [
            f"{base:x}-{file_end:x} rw-p 00000000 00:00 1 {globals_program}",
            f"{file_end:x}-{file_end + 0x2000:x} rw-p 00000000 00:00 0",
            "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]",
            "7ffff7000000-7ffff7100000 rw-p 00000000 00:00 0",
        ],
    )
    counters, limits = (symbol_address(globals_program, n) for n in ("counters", "limits"))
    assert user_data_name(maps, base + counters + 8) == "globals: counters"
    assert user_data_name(maps, base + limits) == "globals: limits"
    assert user_data_name(maps, 0x7FFFFFFFE000) == "[stack] of globals"
    assert user_data_name(maps, 0x7FFFF7000040) == "anonymous memory of globals"
    assert not is_specific("anonymous memory of globals") and is_specific("globals: limits")
    assert not is_specific("kernel: page (written by clear_page_rep)")
    assert not is_specific("kernel: page of [heap] of ab") and is_specific("kernel: page table")


def test_a_bss_the_kernel_merged_with_the_heap_is_named_by_its_symbols(globals_program):
    # no address randomisation: the heap starts right after the .bss, one mapping [heap]
    base = 0x555555554000
    file_end = base + ((globals_program.stat().st_size + 0xFFF) & ~0xFFF)
    heap_end = file_end + 0x21000
    maps = parse_maps(
        "globals",
        [
            f"{base:x}-{file_end:x} rw-p 00000000 00:00 1 {globals_program}",
            f"{file_end:x}-{heap_end:x} rw-p 00000000 00:00 0 [heap]",
        ],
    )
    counters = base + symbol_address(globals_program, "counters")
    assert counters >= file_end  # beyond the file's pages: in the [heap] mapping
    assert user_data_name(maps, counters + 8) == "globals: counters"
    assert user_data_name(maps, heap_end - 64) == "[heap] of globals"  # beyond the .bss


def test_a_frame_is_named_by_the_process_that_mapped_it_most_often(tmp_path, globals_program):
    limits = 0x555555554000 + symbol_address(globals_program, "limits")
    page = limits & ~0xFFF
    maps = f"555555554000-555555600000 rw-p 00000000 00:00 1 {globals_program}"
    (tmp_path / "pages.txt").write_text(
        f"P 7 globals\n{maps}\nG 2a {page:x}\nP 9 other\n{maps}\nG 2b {page:x}\n"
    )
    pages = UserPages(tmp_path / "pages.txt")
    assert pages.name(0x2A000 + limits % 0x1000) == "globals: limits"
    assert pages.name(0x2C000) is None
    # touched at another address of the one process that had the frame: it moved there
    assert pages.owner(0x2A000, page + 0x1000)[0].comm == "globals"
    # at an address none of its maps seen held: still its one owner's
    assert pages.name(0x2A000, 0x7F0000000000) == "unmapped memory of globals"
    assert pages.name_by_address(limits) == "globals: limits (by address)"  # two programs


def test_a_read_or_write_that_met_on_socket_data_is_judged_as_recvfrom_or_sendto(shipped):
    on_socket = shipped.verdict("write", "read", "kernel: tcp_sock.{sk_lock}")
    assert on_socket.startswith(COMMUTATIVE) and "write on a socket: sendto" in on_socket
    without_sockets = Rule(shipped.ops - {"sendto"}, {}, "a rule without sendto (unit test)")
    assert "write on a socket: sendto" in without_sockets.verdict("write", "read", "sk_buff.len")
    assert shipped.verdict("write", "read", "kernel: page.{flags}") == COMMUTATIVE


def test_heap_lines_are_named_by_their_blocks_and_a_process_without_records_is_not_named(
    tmp_path,
):
    heap = "555555559000-55555557a000 rw-p 00000000 00:00 0 [heap]"
    anonymous = "7ffff7000000-7ffff7100000 rw-p 00000000 00:00 0"
    (tmp_path / "pages.txt").write_text(
        f"P 7 recorded\n{heap}\n{anonymous}\nG 2a 555555559000\nG 2b 7ffff7000000\n"
        "G 2d 7ffff7010000\n"
        f"P 9 unrecorded\n{heap}\nG 2c 555555559000\n"
    )
    allocations = tmp_path / "allocations"
    allocations.mkdir()  # pid 7 wrote its blocks; pid 9 (killed, say) wrote none
    records = [(0x555555559040, 64, 0x1234, 1), (0x7FFFF7000000, 1 << 20, 0x5678 | MAPPED, 2)]
    records.append((0x7FFFF6000000, 4096, 0x9ABC, 3))  # mapped after the maps seen
    (allocations / "7").write_bytes(b"".join(SITE_RECORD.pack(*r) for r in records))
    lines = {0x2A040: 0x555555559040, 0x2B000: 0x7FFFF7000000, 0x2C040: 0x555555559040}
    lines[0x2D040] = 0x7FFFF6000040
    contended = {
        paddr: [
            (cpu, profile_lines.CONTEXT_USER, Line(paddr, vaddr, 1, 1, [], b"", 5, 0, 0))
            for cpu in (0, 1)
        ]
        for paddr, vaddr in lines.items()
    }
    pages = UserPages(tmp_path / "pages.txt")
    names = {paddr: f"user: {pages.name(paddr, vaddr)}" for paddr, vaddr in lines.items()}
    name_heap_lines(names, contended, pages, allocations)
    assert names == {
        0x2A040: "user: heap: 64-byte block from 0x1234",
        0x2B000: "user: mapping: 1048576-byte anonymous mmap from 0x5678",
        0x2C040: "user: [heap] of unrecorded (no record)",
        0x2D040: "user: heap: 4096-byte block from 0x9abc",
    }
    share = profile_lines.named_share(profile_lines.line_rows(contended, names, [], None))
    assert (share["named_transfers"], share["transfers"]) == (30, 40)


def test_anonymous_memory_only_the_dynamic_loader_s_code_touched_is_named_as_its_data(
    tmp_path,
):
    loader = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    (tmp_path / "pages.txt").write_text(
        f"P 7 grep\n7ffff7fc1000-7ffff7fc4000 rw-p 00000000 00:00 0\n"
        f"7ffff7fc9000-7ffff7ff0000 r-xp 00001000 00:13 5 {loader}\n"
        "7ffff7ff8000-7ffff7ff9000 r-xp 00000000 00:13 6 /usr/lib/libc.so.6\n"
        "G 2a 7ffff7fc1000\n"
    )
    pages = UserPages(tmp_path / "pages.txt")
    in_loader, in_libc = 0x7FFFF7FD0000, 0x7FFFF7FF8100
    code = {0x2A000: [in_loader], 0x2A040: [in_loader, in_libc], 0x2A080: [in_loader, 0]}
    contended = {
        paddr: [
            (
                cpu,
                profile_lines.CONTEXT_USER,
                Line(paddr, 0x7FFFF7FC1000 + paddr % 4096, 1, 1, [Site(pc, 1, 1) for pc in pcs]),
            )
            for cpu in (0, 1)
        ]
        for paddr, pcs in code.items()
    }
    names = {paddr: f"user: {pages.name(paddr, 0x7FFFF7FC1000 + paddr % 4096)}" for paddr in code}
    assert set(names.values()) == {"user: anonymous memory of grep"}
    allocations = tmp_path / "allocations"
    allocations.mkdir()
    name_heap_lines(names, contended, pages, allocations)
    assert names == {
        0x2A000: "user: ld-linux-x86-64.so.2's own data of grep (only its code touched it)",
        0x2A040: "user: anonymous memory of grep",  # libc's code touched it too
        0x2A080: "user: anonymous memory of grep",  # and code beyond the plugin's limit
    }
    assert is_specific(names[0x2A000])


def test_the_recorder_s_own_buffers_are_counted_apart_from_the_program_s_named_share():
    rows = [
        {
            "name": "user: mapping: 4096-byte anonymous mmap from my_buffer (alloc_sites.so)",
            "transfers": 50,
            "lines": 2,
        },
        {"name": "kernel: files_struct.fdt", "transfers": 30, "lines": 1},
        {"name": "kernel: page (written by clear_page_erms)", "transfers": 20, "lines": 1},
        {"name": "user: alloc_sites.so: page_owners_buffer", "transfers": 7, "lines": 3},
        {"name": "kernel: page of alloc_sites.so .bss", "transfers": 1, "lines": 1},
        {"name": "user: libc.so.6: main_arena", "transfers": 4, "lines": 1},
    ]
    share = profile_lines.named_share(rows)
    assert (share["named_transfers"], share["transfers"], share["lines"]) == (34, 54, 3)
    assert (share["recorder_transfers"], share["recorder_lines"]) == (58, 6)


def user_touches(lines: dict) -> dict:
    """Contended user lines (paddr -> vaddr), each written on both CPUs by user code."""
    return {
        paddr: [
            (cpu, profile_lines.CONTEXT_USER, Line(paddr, vaddr, 1, 1, [], b"", 5, 0, 0))
            for cpu in (0, 1)
        ]
        for paddr, vaddr in lines.items()
    }


def test_a_line_no_process_seen_held_is_named_by_the_one_block_recorded_at_its_address(
    tmp_path,
):
    heap = "555555559000-55555557a000 rw-p 00000000 00:00 0 [heap]"
    lib = "7ffff7000000-7ffff7100000 rw-p 00000000 00:00 0"
    # the source's heap frame 2a, given (the heap trimmed) to the sink's mmap'd block
    (tmp_path / "pages.txt").write_text(
        f"P 7 source\n{heap}\nG 2a 555555559000\nP 9 sink\n{heap}\nG 2b 555555559000\n"
        f"P 11 shell\n{lib}\nG 2c 7ffff7000000\n"
        f"P 13 copier\n{heap}\nG 2e 555555559000\nP 15 copier\n{heap}\nG 2f 555555559000\n"
    )
    allocations = tmp_path / "allocations"
    allocations.mkdir()
    blocks = {9: [(0x7FFFF35F3010, 131088, 0x1234, 1)], 7: [(0x7FFFF3000010, 4096, 0x5678, 1)]}
    blocks[11] = [(0x7FFFF3000010, 4096, 0x9ABC, 1)]  # the same address as the source's block
    # two runs of one program (pids 13 and 15, gone by the last round): one block, one site
    blocks[13] = blocks[15] = [(0x7FFFF2000000, 8 << 20, 0x4444, 1)]
    for pid, records in blocks.items():
        (allocations / str(pid)).write_bytes(b"".join(SITE_RECORD.pack(*r) for r in records))
    lines = {0x2A040: 0x7FFFF35F3040, 0x3A040: 0x7FFFF35F3080, 0x3C040: 0x7FFFF3000040}
    lines[0x3B000] = 0x7FFFF7000040  # the shell had memory there (no block): not the sink's
    lines[0x3D040] = 0x7FFFF2100040
    blocks[9].append((0x7FFFF7000000, 64, 0x4321, 2))
    (allocations / "9").write_bytes(b"".join(SITE_RECORD.pack(*r) for r in blocks[9]))
    contended = user_touches(lines)
    pages = UserPages(tmp_path / "pages.txt")
    names = {
        paddr: f"user: {pages.name(paddr, vaddr) or 'memory'}" for paddr, vaddr in lines.items()
    }
    assert names[0x2A040] == "user: unmapped memory of source"  # its one owner, before
    name_heap_lines(names, contended, pages, allocations)
    assert names == {
        0x2A040: "user: heap: 131088-byte block from 0x1234 (by address)",
        0x3A040: "user: heap: 131088-byte block from 0x1234 (by address)",  # frame never seen
        0x3C040: "user: memory",  # two processes' blocks were there
        0x3B000: "user: memory",
        0x3D040: "user: heap: 8388608-byte block from 0x4444 (by address)",  # the same one
    }


def test_a_line_two_programs_blocks_of_one_site_held_is_named_by_the_site_and_their_sizes(
    tmp_path,
):
    heap = "555555559000-555555611000 rw-p 00000000 00:00 0 [heap]"
    # a sink and a source, both calling one library's allocator for their buffers: their
    # heaps trimmed and grown, the frames handed between them between two rounds
    (tmp_path / "pages.txt").write_text(
        f"P 7 source\n{heap}\nG 2a 555555559000\nP 9 sink\n{heap}\nG 2b 555555559000\n"
    )
    allocations = tmp_path / "allocations"
    allocations.mkdir()
    blocks = {7: [(0x5555555CB010, 130980, 0x1234, 1), (0x555555600010, 64, 0x5678, 2)]}
    blocks[9] = [(0x5555555CB010, 131088, 0x1234, 1), (0x555555600010, 64, 0x9ABC, 2)]
    for pid, records in blocks.items():
        (allocations / str(pid)).write_bytes(b"".join(SITE_RECORD.pack(*r) for r in records))
    lines = {0x3A040: 0x5555555CB040, 0x3B040: 0x555555600040}  # frames never seen
    pages = UserPages(tmp_path / "pages.txt")
    names = dict.fromkeys(lines, "user: memory")
    name_heap_lines(names, user_touches(lines), pages, allocations)
    assert names == {
        0x3A040: "user: heap: 130980- to 131088-byte block from 0x1234 (by address)",
        0x3B040: "user: memory",  # two sites: which of the two blocks is not known
    }


def test_a_process_s_latest_maps_are_those_it_wrote_last_and_cut_lines_are_left_out(tmp_path):
    heap = "555555559000-55555557a000 rw-p 00000000 00:00 0 [heap]"
    (tmp_path / "pages.txt").write_text(f"P 9 sink\n{heap}\nG 2b 555555559000\n")
    (tmp_path / "9.execve.pages").write_text(f"P 9 recipe.sh\n{heap}\nG 2c 555555559000\n")
    # written twice (on the recorder's signal, then at its end), the first cut short
    (tmp_path / "9.pages").write_text(
        f"P 9 sink\n{heap}\n5555555-55\nG 2b 555555559000\nG 2d 5555P 9 sink\n{heap}\n"
        "G 2e 55555555a000\n"
    )
    pages = UserPages(tmp_path / "pages.txt", *sorted(tmp_path.glob("*.pages")))
    assert pages.latest[9].comm == "sink"  # not the shell's child before it ran the sink
    assert pages.distinct[-1].comm == "recipe.sh"  # (the same maps seen twice count once)
    assert sorted(pages.owners) == [0x2B, 0x2C, 0x2E]  # the cut lines left out
    assert pages.latest[9].mappings == parse_maps("sink", [heap]).mappings


def test_the_guest_harness_s_memory_is_counted_apart_from_the_program_s(tmp_path):
    busybox, heap = "/usr/bin/busybox", "555555559000-55555557a000 rw-p 00000000 00:00 0 [heap]"
    text = f"00400000-00500000 r-xp 00000000 00:13 7 {busybox}"
    # pid 5: the run script's shell (harness; 1: init, its own busybox); 8: the program; 9:
    # the program's own busybox
    init = text.replace("/usr/bin/busybox", "/bin/busybox")
    (tmp_path / "pages.txt").write_text(
        f"P 1 init\n{init}\nG 2f 400000\nP 5 busybox\n{text}\n{heap}\nG 2a 555555559000\n"
        f"P 8 lighttpd\n{heap}\nG 2b 555555559000\n"
        f"P 9 busybox\n{text}\nG 2e 400000\n"
    )
    pages = UserPages(tmp_path / "pages.txt")
    (tmp_path / "harness").write_text("1 5 6\n7\n")
    harness = read_harness(tmp_path / "harness")
    assert harness == {1, 5, 6, 7} and read_harness(tmp_path / "none") == set()

    def line(paddr, vaddr, pcs):
        sites = [Site(pc, 1, 1) for pc in pcs]
        return [
            (cpu, profile_lines.CONTEXT_USER, Line(paddr, vaddr, 1, 1, sites, b"", 5, 0, 0))
            for cpu in (0, 1)
        ]

    contended = {
        0x2A040: line(0x2A040, 0x555555559040, [0x401000]),  # the shell's heap
        0x2B040: line(0x2B040, 0x555555559040, [0x401000]),  # the program's heap
        0x2C040: line(0x2C040, 0x7FFF0000, [0x450000]),  # no owner seen; busybox code
        0x2D040: line(0x2D040, 0x7FFF0040, [0x450000, 0x7FFFF7FC0000]),  # and other code
        0x2A080: line(0x2A080, 0xFFFF88800002A080, [0xFFFFFFFF81000000]),  # the kernel
    }
    names = {
        0x2A040: "user: [heap] of busybox",
        0x2B040: "user: [heap] of lighttpd",
        0x2C040: "user: memory",
        0x2D040: "user: memory",
        0x2A080: "kernel: page of [heap] of busybox",
    }
    mark_harness(names, contended, pages, {1, 5})  # (pid 9, the program's, maps busybox)
    assert names[0x2C040] == "user: memory"
    mark_harness(names, contended, pages, harness)
    assert names == {
        0x2A040: f"user: [heap] of busybox{HARNESS}",
        0x2B040: "user: [heap] of lighttpd",
        0x2C040: "user: memory",  # pid 9, the program's, maps busybox's code there too
        0x2D040: "user: memory",
        0x2A080: f"kernel: page of [heap] of busybox{HARNESS}",
    }
    mark_harness(names, contended, pages, harness | {9})
    assert names[0x2C040] == f"user: memory{HARNESS}" and names[0x2D040] == "user: memory"
    share = profile_lines.named_share(profile_lines.line_rows(contended, names, [], None))
    assert (share["harness_transfers"], share["harness_lines"]) == (30, 3)
    assert (share["named_transfers"], share["transfers"]) == (0, 20)


class FakeKernelSymbols:
    """A fake for the unit test of kernel_name: one function per PC."""

    def __init__(self, functions: dict[int, str]):
        self.functions = functions

    def function(self, pc: int) -> str:
        return self.functions[pc]


@pytest.mark.parametrize(
    ("sites", "name"),
    [
        ({1: 1, 1 << 20: 0}, "kernel: page being zeroed on allocation (written by clear_page_rep)"),
        ({1: 1, 2: 1}, "kernel: page table (written by clear_page_rep, native_set_pte)"),
        (
            {3: 1},
            "kernel: mmu_gather batch (pages freed after a TLB flush) (written by "
            "__tlb_remove_page_size)",
        ),
        (  # two lives of the frame, each named: a batch, and zeroed on allocation
            {1: 1, 3: 1, 6: 0},
            "kernel: mmu_gather batch (pages freed after a TLB flush), or page being zeroed on "
            "allocation (written by __tlb_remove_page_size, clear_page_rep)",
        ),
        ({1: 1, 3: 1, 4: 0}, "kernel: page (written by __tlb_remove_page_size, clear_page_rep)"),
        (
            {1: 1, 2: 1, 3: 1},
            "kernel: page (written by __tlb_remove_page_size, clear_page_rep, ...)",
        ),
        ({1: 1, 2: 1, 4: 1}, "kernel: page (written by clear_page_rep, memcpy, ...)"),
        ({1: 1, 4: 0}, "kernel: page (written by clear_page_rep)"),  # read by other code
        (  # zeroed, then only the copy-on-write copy read it
            {1: 1, 7: 0},
            "kernel: page zeroed on allocation, then copied on a write fault (untouched part) "
            "(written by clear_page_rep)",
        ),
        ({1: 1, 4: 0, 7: 0}, "kernel: page (written by clear_page_rep)"),
        ({7: 1}, "kernel: page (written by copy_page)"),  # the copy's target: user data
        ({1: 1, 5: 0}, "kernel: page table (written by clear_page_rep)"),  # read by a walker
        ({1: 1, 4: 0, 5: 0}, "kernel: page (written by clear_page_rep)"),
        ({1: 1, 0: 0}, "kernel: page (written by clear_page_rep)"),  # beyond the PC limit
    ],
)
def test_a_bare_page_is_named_by_its_writers_only_when_they_say_what_it_held(sites, name):
    symbols = FakeKernelSymbols(
        {1: "clear_page_rep", 1 << 20: "clear_page_rep", 2: "native_set_pte"}
        | {3: "__tlb_remove_page_size", 4: "memcpy", 5: "unmap_page_range"}
        | {6: "free_pages_and_swap_cache", 7: "copy_page"}
    )
    touches = [
        (
            cpu,
            profile_lines.CONTEXT_KERNEL,
            Line(
                0x2A000,
                0xFFFF88800002A000,
                1,
                1,
                [Site(pc, 1, written) for pc, written in sites.items()],
            ),
        )
        for cpu in (0, 1)
    ]
    assert kernel_name("page", touches, symbols, None) == name
    assert is_specific(name) == (not name.startswith("kernel: page ("))


class FakeBootMemory:
    """A fake for the unit test of boot_objects: the guest's words by address."""

    def __init__(self, words: dict[int, int]):
        self.words = words

    def u64(self, address: int) -> int | None:
        return self.words.get(address)

    def u32(self, address: int) -> int | None:
        return self.words.get(address)


class FakeBootTypes:
    """A fake for the unit test of boot_objects: one struct, pglist_data, of 4096 bytes."""

    def struct(self, name: str) -> int | None:
        return 7 if name == "pglist_data" else None

    def size(self, type_id: int) -> int:
        return 4096

    def name_bytes(self, type_id: int, label: str, ranges: list) -> str:
        return f"{label} bytes {ranges}"


def test_the_page_allocator_s_nodes_and_the_hash_tables_are_named_by_their_pointers():
    symbols = SimpleNamespace(
        address_of={"node_data": 0x100, "dentry_hashtable": 0x200, "d_hash_shift": 0x208}
        | {"inode_hashtable": 0x300, "i_hash_mask": 0x308}
    )
    node, dentries, inodes = 0xFFFF888001000000, 0xFFFF888002000000, 0xFFFF888003000000
    memory = FakeBootMemory({0x100: node, 0x108: 0, 0x200: dentries, 0x208: 32 - 12})
    memory.words |= {0x300: inodes, 0x308: 1023}
    objects = boot_objects(memory, symbols, FakeBootTypes())
    assert [(o.label, o.end - o.start) for o in objects] == [
        ("pglist_data", 4096),
        ("dentry_hashtable[]", 8 << 12),
        ("inode_hashtable[]", 8 * 1024),
    ]
    types = FakeBootTypes()
    assert boot_object_name(objects, types, node + 64, 0xFF) == "pglist_data bytes [(64, 72)]"
    assert boot_object_name(objects, types, dentries + (8 << 12) - 64, 1) == "dentry_hashtable[]"
    assert boot_object_name(objects, types, dentries + (8 << 12), 1) is None  # past its end
    assert boot_object_name(objects, types, node - 64, 1) is None


HANDLES_TERM_C = r"""
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void stop(int s) { (void)s; _exit(0); }
int main(void)
{
	signal(SIGTERM, stop); /* its own, as make's: the recorder's is replaced */
	volatile char *kept = malloc(4242);
	kept[0] = 1;
	puts("ready");
	fflush(stdout);
	char byte;
	return read(0, &byte, 1) < 0; /* a call the recorder's signal must not fail */
}
"""


def test_the_recorder_writes_its_records_on_its_signal_and_the_process_goes_on(tmp_path):
    source, program = tmp_path / "handles_term.c", tmp_path / "handles_term"
    source.write_text(HANDLES_TERM_C)
    subprocess.run(["cc", "-O0", "-o", str(program), str(source)], check=True)
    allocations = tmp_path / "allocations"
    allocations.mkdir()
    env = {"LD_PRELOAD": str(ensure_recorder()), "SCALECHECK_ALLOC_SITES": f"{allocations}/"}
    process = subprocess.Popen(
        [str(program)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline() == "ready\n"
        process.send_signal(abi.value("RECORDS_SIGNAL"))
        records = allocations / str(process.pid)
        for _ in range(100):
            if (allocations / f"{process.pid}.pages").exists():
                break
            time.sleep(0.05)
        assert 4242 in [size for _, size, _, _ in read_allocations(records)]
        time.sleep(0.2)
        assert process.poll() is None  # it goes on, its read restarted
    finally:
        process.kill()
        process.wait()
